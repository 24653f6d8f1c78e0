//! Memory and CPU from a job's processes, where Slurm keeps no memory or cpuacct cgroup for its
//! jobs: AWS ParallelCluster writes `ConstrainRAMSpace` only with memory-based scheduling and
//! `JobAcctGatherType=jobacct_gather/cgroup` only with accounting, so on its cgroup v1 images a
//! job often has neither. The figures are those of the processes alive at the reading (what
//! exited is gone from /proc): resident memory summed (`MemoryUsage`, `MemoryRss`; shared pages
//! count once per process, an upper bound), CPU time summed (`CpuTime`), and the cores busy
//! between two readings from the processes seen in both (`CpuUsage`).

use super::cgroup::CgroupStats;
use super::procs::Proc;
use std::collections::HashMap;

/// Whether the cgroup lacks what the processes can stand in for: then they are read every cycle.
pub(super) fn needed(cg: &CgroupStats) -> bool {
    cg.memory_usage.is_none() || cg.cpu_ns.is_none()
}

/// Resident bytes of the processes, when the cgroup has no memory figure.
pub(super) fn memory(cg: &CgroupStats, procs: Option<&[Proc]>) -> Option<f64> {
    let procs = procs.filter(|p| cg.memory_usage.is_none() && !p.is_empty())?;
    Some(procs.iter().map(|p| p.rss_bytes).sum::<u64>() as f64)
}

/// CPU seconds of the processes alive now, when the cgroup has no CPU figure.
pub(super) fn cpu_seconds(cg: &CgroupStats, procs: Option<&[Proc]>, ticks_per_second: f64) -> Option<f64> {
    let procs = procs.filter(|p| cg.cpu_ns.is_none() && !p.is_empty())?;
    Some(procs.iter().map(|p| p.cpu_ticks).sum::<u64>() as f64 / ticks_per_second)
}

/// Cores busy since the processes were last read, from those seen both times, when the cgroup
/// has no CPU figure.
pub(super) fn cores(
    cg: &CgroupStats,
    procs: Option<&[Proc]>,
    prev: &HashMap<(u32, u64), (u64, Option<super::kv::Io>)>,
    ticks_in_interval: f64,
) -> Option<f64> {
    let procs = procs.filter(|p| cg.cpu_ns.is_none() && !p.is_empty() && ticks_in_interval > 0.0)?;
    let mut ticks = 0u64;
    let mut seen = false;
    for p in procs {
        if let Some((before, _)) = prev.get(&p.key) {
            ticks += p.cpu_ticks.saturating_sub(*before);
            seen = true;
        }
    }
    seen.then(|| ticks as f64 / ticks_in_interval)
}
