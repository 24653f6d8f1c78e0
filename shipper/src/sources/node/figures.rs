//! The figures of one job's reading: levels as read, rates against the previous reading (a
//! job seen once has none), and from the processes where the cgroup lacks them.

use super::rates::{delta, io_delta, per_core, proc_io_delta, top_executables};
use super::{Previous, Reading, from_procs, procs};
use slurm_cw_catalog::Metric;
use slurm_cw_catalog::metrics::*;

/// What one reading of a job ships.
pub(super) struct Figures {
    pub values: Vec<(&'static Metric, f64)>,
    /// Busy percentage of each CPU of the job (v1), for `CpuCoreUtilization`.
    pub per_core: Option<Vec<f64>>,
    /// Cores used by each of the busiest executables.
    pub by_exe: Vec<(String, f64)>,
    /// The processes' threads in each state (none on cycles that read no processes).
    pub threads: Option<procs::ThreadCounts>,
}

/// The figures of reading `r`, `prev` the job's previous one; `top` executables at most.
pub(super) fn of(r: &Reading, prev: Option<&Previous>, ticks_per_second: f64, top: usize) -> Figures {
    let no_procs: &[procs::Proc] = &[];
    let procs = r.procs.as_ref().map_or(no_procs, |p| &p.list);
    let cg = &r.cg;
    let mut values: Vec<(&'static Metric, f64)> = Vec::new();
    let levels = [
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
    values.extend(levels.into_iter().filter_map(|(m, v)| Some((m, v? as f64))));
    let listed = r.procs.as_ref().map(|p| p.list.as_slice());
    if let Some(rss) = from_procs::memory(cg, listed) {
        values.extend([(&MEMORY_USAGE, rss), (&MEMORY_RSS, rss)]);
    }
    if let Some(secs) = from_procs::cpu_seconds(cg, listed, ticks_per_second) {
        values.push((&CPU_TIME, secs));
    }
    let allocated = cg.cpus.as_ref().map(|c| c.len()).filter(|n| *n > 0);
    if let Some(n) = allocated {
        values.push((&CPUS_ALLOCATED, n as f64));
    }
    if let Some(ns) = cg.cpu_ns {
        values.push((&CPU_TIME, ns as f64 / 1e9));
    }
    if let Some(p) = &r.procs {
        values.push((&PROCESS_COUNT, p.count as f64));
        if !p.list.is_empty() {
            values.push((&OPEN_FILES, p.list.iter().filter_map(|p| p.open_files).sum::<u64>() as f64));
        }
    }
    let mut distribution = None;
    let mut by_exe: Vec<(String, f64)> = Vec::new();
    if let Some(prev) = prev {
        let secs = r.at.duration_since(prev.at).as_secs_f64();
        if secs > 0.0 {
            let ns = secs * 1e9;
            if let Some(d) = delta(cg.cpu_ns, prev.cpu_ns) {
                let cores = d as f64 / ns;
                values.push((&CPU_USAGE, cores));
                if let Some(n) = allocated {
                    values.push((&CPU_UTILIZATION, cores / n as f64 * 100.0));
                }
            }
            if let Some(d) = delta(cg.throttled_ns, prev.throttled_ns) {
                values.push((&CPU_THROTTLED_TIME, d as f64 / ns));
            }
            distribution = per_core(cg, prev, ns);
        }
        // Process figures are rates over the time since the processes were last read.
        let proc_secs = r.at.duration_since(prev.procs_at).as_secs_f64();
        let ticks = proc_secs * ticks_per_second;
        if let Some(cores) = from_procs::cores(cg, listed, &prev.procs, ticks) {
            values.push((&CPU_USAGE, cores));
            if let Some(n) = allocated {
                values.push((&CPU_UTILIZATION, cores / n as f64 * 100.0));
            }
        }
        let io = match (cg.io, prev.io) {
            (Some(now), Some(before)) => io_delta(&now, &before).map(|io| (io, secs)),
            _ if r.procs.is_some() => proc_io_delta(procs, &prev.procs).map(|io| (io, proc_secs)),
            _ => None,
        };
        if let Some((io, secs)) = io.filter(|(_, secs)| *secs > 0.0) {
            values.push((&READ_BYTES, io.read_bytes as f64 / secs));
            values.push((&WRITE_BYTES, io.write_bytes as f64 / secs));
            values.push((&READ_OPS, io.read_ops as f64 / secs));
            values.push((&WRITE_OPS, io.write_ops as f64 / secs));
        }
        if r.procs.is_some() && proc_secs > 0.0 {
            by_exe = top_executables(procs, &prev.procs, proc_secs * ticks_per_second, top);
        }
    }
    let threads = r.procs.as_ref().map(|p| {
        let mut threads = procs::ThreadCounts::default();
        for p in &p.list {
            for (t, n) in threads.iter_mut().zip(p.threads) {
                *t += n;
            }
        }
        threads
    });
    Figures { values, per_core: distribution, by_exe, threads }
}
