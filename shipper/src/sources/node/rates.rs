//! Rates from consecutive readings of a job: counter differences that never go back.

use super::cgroup::CgroupStats;
use super::kv::Io;
use super::procs::Proc;
use super::{Previous, Reading};
use std::collections::HashMap;

/// now - before, when both exist and the counter did not go back.
pub(super) fn delta(now: Option<u64>, before: Option<u64>) -> Option<u64> {
    now?.checked_sub(before?)
}

pub(super) fn io_delta(now: &Io, before: &Io) -> Option<Io> {
    Some(Io {
        read_bytes: now.read_bytes.checked_sub(before.read_bytes)?,
        write_bytes: now.write_bytes.checked_sub(before.write_bytes)?,
        read_ops: now.read_ops.checked_sub(before.read_ops)?,
        write_ops: now.write_ops.checked_sub(before.write_ops)?,
    })
}

/// I/O of the job's processes since the last cycle, from /proc/<pid>/io of the processes seen
/// both times (a process's counters go when it exits, so sums of totals would fall).
pub(super) fn proc_io_delta(procs: &[Proc], prev: &HashMap<(u32, u64), (u64, Option<Io>)>) -> Option<Io> {
    let mut sum = Io::default();
    let mut any = false;
    for p in procs {
        if let (Some(now), Some((_, Some(before)))) = (&p.io, prev.get(&p.key))
            && let Some(d) = io_delta(now, before)
        {
            sum.add(&d);
            any = true;
        }
    }
    any.then_some(sum)
}

/// Busy percentage of each CPU in the job's cpuset (v1 cpuacct.usage_percpu).
pub(super) fn per_core(cg: &CgroupStats, prev: &Previous, ns: f64) -> Option<Vec<f64>> {
    let (now, before, cpus) = (cg.percpu_ns.as_ref()?, prev.percpu_ns.as_ref()?, cg.cpus.as_ref()?);
    let v: Vec<f64> = cpus
        .iter()
        .filter_map(|&c| Some((now.get(c)?.checked_sub(*before.get(c)?)? as f64 / ns * 100.0).min(100.0)))
        .collect();
    (!v.is_empty()).then_some(v)
}

/// Cores used per executable since the last cycle, the `n` busiest.
pub(super) fn top_executables(
    procs: &[Proc],
    prev: &HashMap<(u32, u64), (u64, Option<Io>)>,
    ticks_in_interval: f64,
    n: usize,
) -> Vec<(String, f64)> {
    let mut by: HashMap<&str, u64> = HashMap::new();
    for p in procs {
        if let Some((before, _)) = prev.get(&p.key) {
            *by.entry(p.comm.as_str()).or_default() += p.cpu_ticks.saturating_sub(*before);
        }
    }
    let mut v: Vec<(String, f64)> =
        by.into_iter().map(|(exe, t)| (exe.to_owned(), t as f64 / ticks_in_interval)).collect();
    v.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    v.truncate(n);
    v
}

/// The name a job's executables beyond its first named ones are shipped under together.
pub const OTHER_EXECUTABLES: &str = "(others)";

/// Keeps by name the executables among the first `cap` names this job has shipped (`named`,
/// which grows to `cap`), and sums the rest under [`OTHER_EXECUTABLES`]: a process that renames
/// itself every cycle (prctl, or a fresh exec) would otherwise make a new `Executable` series
/// each time, each a custom metric billed where per-job metrics are on, and grow its records.
pub(super) fn fold_names(
    by_exe: Vec<(String, f64)>,
    named: &mut Vec<String>,
    cap: usize,
) -> Vec<(String, f64)> {
    let mut out = Vec::with_capacity(by_exe.len());
    let mut others: Option<f64> = None;
    for (exe, cores) in by_exe {
        if named.contains(&exe) {
            out.push((exe, cores));
        } else if named.len() < cap {
            named.push(exe.clone());
            out.push((exe, cores));
        } else {
            *others.get_or_insert(0.0) += cores;
        }
    }
    if let Some(cores) = others {
        match out.iter_mut().find(|(e, _)| e == OTHER_EXECUTABLES) {
            Some((_, c)) => *c += cores,
            None => out.push((OTHER_EXECUTABLES.to_owned(), cores)),
        }
    }
    out
}

/// CPU a job may use and still be still: slurmstepd's own wake-ups count in a v2 job's
/// `cpu.stat` (it sits in the step's `slurm` part, which Slurm does not freeze); and in any case
/// [`STILL_NS`], so that collections close together (the TaskEpilog's) see a blip as still.
const STILL_CORES: f64 = 0.05;
const STILL_NS: f64 = 10e6;

/// Collections after a job's CPU time stops that look whether Slurm froze it: Slurm stops the
/// processes (SIGSTOP) a second or two before the cgroup reads FROZEN.
pub(super) const LOOKS_AFTER_STOP: u32 = 3;

/// Whether the job's CPU time stood still since `before` (under [`STILL_CORES`] or
/// [`STILL_NS`]), its counter reading `cpu_ns` at `at`; a job whose CPU time cannot be read
/// counts as still.
pub(super) fn still(before: &Previous, cpu_ns: Option<u64>, at: std::time::Instant) -> bool {
    match (before.cpu_ns, cpu_ns) {
        (Some(b), Some(n)) => {
            let secs = at.saturating_duration_since(before.at).as_secs_f64();
            (n.saturating_sub(b) as f64) <= (STILL_CORES * secs * 1e9).max(STILL_NS)
        }
        _ => true,
    }
}

/// What to keep of this reading for the next; process figures carry over from `before` on
/// cycles that did not read them.
pub(super) fn remember(r: Reading, before: Option<Previous>) -> Previous {
    // As the look was decided. First seen, it was looked at once: a job idle all along is not
    // looked at again (one stopped and not yet frozen in that second or two is missed).
    let still_for = match (r.still, &before) {
        (Some(true), Some(b)) => b.still_for.saturating_add(1),
        (None, _) => LOOKS_AFTER_STOP,
        _ => 0,
    };
    let (procs_at, cycles_since_procs, procs, threads) = match (r.procs, before) {
        (Some(p), _) => {
            let (mut procs, mut threads) = (HashMap::new(), HashMap::new());
            for p in p.list {
                procs.insert(p.key, (p.cpu_ticks, p.io));
                if !p.tids.is_empty() {
                    threads.insert(p.key, p.tids);
                }
            }
            (r.at, 0, procs, threads)
        }
        (None, Some(b)) => (b.procs_at, b.cycles_since_procs + 1, b.procs, b.threads),
        (None, None) => (r.at, 0, HashMap::new(), HashMap::new()),
    };
    Previous {
        at: r.at,
        still_for,
        frozen: r.cg.frozen,
        cpu_ns: r.cg.cpu_ns,
        percpu_ns: r.cg.percpu_ns,
        throttled_ns: r.cg.throttled_ns,
        io: r.cg.io,
        procs_at,
        cycles_since_procs,
        procs,
        threads,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_using_under_a_twentieth_of_a_core_is_still() {
        let at = std::time::Instant::now();
        let before = Previous {
            at,
            still_for: 0,
            frozen: false,
            cpu_ns: Some(5_000_000_000),
            percpu_ns: None,
            throttled_ns: None,
            io: None,
            procs_at: at,
            cycles_since_procs: 0,
            procs: HashMap::new(),
            threads: HashMap::new(),
        };
        let later = at + std::time::Duration::from_secs(30);
        // slurmstepd's wake-ups in a suspended v2 job: 2 ms in 30 s (10 ms a second in the VM).
        assert!(still(&before, Some(5_002_000_000), later));
        assert!(still(&before, Some(5_300_000_000), later), "1% of a core");
        assert!(!still(&before, Some(6_600_000_000), later), "1.6 s in 30 s: it ran");
        assert!(still(&before, Some(1_000), later), "a counter that went back (a new cgroup)");
        let soon = at + std::time::Duration::from_millis(100);
        assert!(still(&before, Some(5_005_000_000), soon), "5 ms in 0.1 s: a blip");
        assert!(!still(&before, Some(5_050_000_000), soon), "50 ms in 0.1 s: it ran");
        assert!(still(&before, None, later), "unreadable: still");
    }

    #[test]
    fn executables_past_a_jobs_first_names_are_summed_as_others() {
        let mut named = Vec::new();
        let v = |xs: &[(&str, f64)]| xs.iter().map(|(e, c)| ((*e).to_owned(), *c)).collect::<Vec<_>>();
        assert_eq!(fold_names(v(&[("a", 2.0), ("b", 1.0)]), &mut named, 3), v(&[("a", 2.0), ("b", 1.0)]));
        // A third name fits; a fourth and fifth do not; "a" is known and stays.
        let got = fold_names(v(&[("c", 3.0), ("d", 1.5), ("a", 1.0), ("e", 0.5)]), &mut named, 3);
        assert_eq!(got, v(&[("c", 3.0), ("a", 1.0), (OTHER_EXECUTABLES, 2.0)]));
        assert_eq!(named, ["a", "b", "c"]);
        // A process that names itself "(others)" adds to the same series.
        let got = fold_names(v(&[(OTHER_EXECUTABLES, 1.0), ("f", 1.0)]), &mut named, 3);
        assert_eq!(got, v(&[(OTHER_EXECUTABLES, 2.0)]));
    }
}
