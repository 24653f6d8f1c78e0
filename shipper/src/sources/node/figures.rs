//! The figures of one job's reading: levels as read, rates against the previous reading (a
//! job seen once has none), and from the processes where the cgroup lacks them, each set once
//! in the reading ([`JobFigures::set`]).

use super::rates::{delta, io_delta, per_core, proc_io_delta, top_executables};
use super::{Previous, Reading, from_procs, procs};
use crate::sample::JobFigures;
use slurm_cw_catalog::Metric;
use slurm_cw_catalog::metrics::*;

/// The figures of reading `r`, `prev` the job's previous one; `top` executables at most.
pub(super) fn of(r: &Reading, prev: Option<&Previous>, ticks_per_second: f64, top: usize) -> JobFigures {
    let no_procs: &[procs::Proc] = &[];
    let procs = r.procs.as_ref().map_or(no_procs, |p| &p.list);
    let cg = &r.cg;
    let mut f = JobFigures { suspended: cg.frozen, ..JobFigures::default() };
    let levels: [(&'static Metric, Option<u64>); 12] = [
        (&MEMORY_USAGE, cg.memory_usage),
        (&MEMORY_MAX, cg.memory_max),
        (&MEMORY_LIMIT, cg.memory_limit),
        (&MEMORY_CACHE, cg.memory_cache),
        (&MEMORY_RSS, cg.memory_rss),
        (&MEMORY_RSS_HUGE, cg.memory_rss_huge),
        (&MEMORY_MAPPED_FILE, cg.memory_mapped_file),
        (&MEMORY_ACTIVE_FILE, cg.memory_active_file),
        (&MEMORY_INACTIVE_FILE, cg.memory_inactive_file),
        (&MEMORY_UNEVICTABLE, cg.memory_unevictable),
        (&MEMORY_SWAP, cg.memory_swap),
        (&OOM_KILLS, cg.oom_kills),
    ];
    for (m, v) in levels {
        if let Some(v) = v {
            f.set(m, v as f64);
        }
    }
    let listed = r.procs.as_ref().map(|p| p.list.as_slice());
    if let Some(rss) = from_procs::memory(cg, listed) {
        f.set(&MEMORY_USAGE, rss);
        f.set(&MEMORY_RSS, rss);
    }
    if let Some(secs) = from_procs::cpu_seconds(cg, listed, ticks_per_second) {
        f.set(&CPU_TIME, secs);
    }
    let allocated = cg.cpus.as_ref().map(|c| c.len()).filter(|n| *n > 0);
    if let Some(n) = allocated {
        f.set(&CPUS_ALLOCATED, n as f64);
    }
    if let Some(ns) = cg.cpu_ns {
        f.set(&CPU_TIME, ns as f64 / 1e9);
    }
    if let Some(p) = &r.procs {
        f.set(&PROCESS_COUNT, p.count as f64);
        if !p.list.is_empty() {
            f.set(&OPEN_FILES, p.list.iter().filter_map(|p| p.open_files).sum::<u64>() as f64);
        }
    }
    if let Some(prev) = prev {
        let secs = r.at.duration_since(prev.at).as_secs_f64();
        if secs > 0.0 {
            let ns = secs * 1e9;
            if let Some(d) = delta(cg.cpu_ns, prev.cpu_ns) {
                let cores = d as f64 / ns;
                f.set(&CPU_USAGE, cores);
                if let Some(n) = allocated {
                    f.set(&CPU_UTILIZATION, cores / n as f64 * 100.0);
                }
            }
            if let Some(d) = delta(cg.throttled_ns, prev.throttled_ns) {
                f.set(&CPU_THROTTLED_TIME, d as f64 / ns);
            }
            f.per_core = per_core(cg, prev, ns);
        }
        // Process figures are rates over the time since the processes were last read.
        let proc_secs = r.at.duration_since(prev.procs_at).as_secs_f64();
        let ticks = proc_secs * ticks_per_second;
        if let Some(cores) = from_procs::cores(cg, listed, &prev.procs, ticks) {
            f.set(&CPU_USAGE, cores);
            if let Some(n) = allocated {
                f.set(&CPU_UTILIZATION, cores / n as f64 * 100.0);
            }
        }
        let io = match (cg.io, prev.io) {
            (Some(now), Some(before)) => io_delta(&now, &before).map(|io| (io, secs)),
            _ if r.procs.is_some() => proc_io_delta(procs, &prev.procs).map(|io| (io, proc_secs)),
            _ => None,
        };
        if let Some((io, secs)) = io.filter(|(_, secs)| *secs > 0.0) {
            f.set(&READ_BYTES, io.read_bytes as f64 / secs);
            f.set(&WRITE_BYTES, io.write_bytes as f64 / secs);
            f.set(&READ_OPS, io.read_ops as f64 / secs);
            f.set(&WRITE_OPS, io.write_ops as f64 / secs);
        }
        if r.procs.is_some() && proc_secs > 0.0 {
            f.by_exe = top_executables(procs, &prev.procs, proc_secs * ticks_per_second, top);
        }
    }
    if let Some(p) = &r.procs {
        let mut threads = procs::ThreadCounts::default();
        for p in &p.list {
            for (t, n) in threads.iter_mut().zip(p.threads) {
                *t += n;
            }
        }
        // Running and sleeping always (continuous series); the rest only when present.
        f.threads = procs::THREAD_STATES
            .iter()
            .zip(threads)
            .enumerate()
            .filter(|(i, (_, n))| *n > 0 || *i < 2)
            .map(|(_, (state, n))| (*state, n as f64))
            .collect();
    }
    f
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sources::node::Processes;
    use crate::sources::node::cgroup::CgroupStats;
    use std::collections::HashMap;
    use std::time::{Duration, Instant};

    fn previous(at: Instant, cg: &CgroupStats) -> Previous {
        Previous {
            at,
            still_for: 0,
            frozen: false,
            cpu_ns: cg.cpu_ns,
            percpu_ns: None,
            throttled_ns: cg.throttled_ns,
            io: cg.io,
            procs_at: at,
            cycles_since_procs: 0,
            procs: HashMap::new(),
            threads: procs::KnownThreads::new(),
        }
    }

    /// The typed fields are what the list gives last: the same as reading the list.
    #[test]
    fn the_typed_fields_are_the_last_figure_of_their_metric_in_the_list() {
        let at = Instant::now();
        let full = CgroupStats {
            memory_usage: Some(300),
            memory_max: Some(400),
            memory_limit: Some(1000),
            memory_rss: Some(200),
            oom_kills: Some(1),
            cpu_ns: Some(5_000_000_000),
            cpus: Some(vec![0, 1]),
            io: Some(Default::default()),
            ..CgroupStats::default()
        };
        // No memory or CPU in the cgroup, a memory.stat rss: the processes stand in.
        let bare = CgroupStats { memory_rss: Some(7), cpus: Some(vec![0]), ..CgroupStats::default() };
        let solver = |ticks: u64| procs::Proc {
            key: (42, 1),
            comm: "solver".into(),
            cpu_ticks: ticks,
            rss_bytes: 4096,
            threads: [1, 2, 0, 0, 0, 0, 0],
            tids: Vec::new(),
            open_files: Some(3),
            io: Some(Default::default()),
        };
        for cg in [full, bare] {
            let mut before = previous(at, &CgroupStats { cpu_ns: Some(1_000_000_000), ..cg.clone() });
            before.procs.insert((42, 1), (100, Some(Default::default())));
            let r = Reading {
                cg: cg.clone(),
                procs: Some(Processes { list: vec![solver(300)], count: 1, pids: vec![42] }),
                at: at + Duration::from_secs(2),
                still: Some(false),
            };
            let f = of(&r, Some(&before), 100.0, 3);
            let typed = JobFigures {
                per_core: f.per_core.clone(),
                threads: f.threads.clone(),
                by_exe: f.by_exe.clone(),
                ..JobFigures::from_figures(f.figures().collect())
            };
            assert_eq!(f, typed, "{cg:?}");
            assert!(f.cpu_usage.is_some() && f.memory_usage.is_some() && f.read_bytes.is_some(), "{f:?}");
        }
    }
}
