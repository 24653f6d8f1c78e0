//! Findings decided on the node, from its own samples of a job: GPUs idle for a while, CPUs
//! barely used for a while, memory far below what was requested, GPUs whose memory the job
//! barely needs. Each is written once per job and kind (a `job_finding` record); while one of
//! the first three holds, the job is also counted in the matching population metric
//! (IdleGpuJobs, LowCpuEfficiencyJobs, MemoryOverRequestedJobs).

use serde::Deserialize;
use slurm_cw_catalog::records::findings::{
    GPU_MEMORY_UNDERUSED, IDLE_GPU, LOW_CPU_EFFICIENCY, MEMORY_OVER_REQUESTED,
};
use std::time::{Duration, SystemTime};

/// `[node.findings]`: when a job is worth telling its owner or the admins about.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Thresholds {
    /// A job's GPUs are idle under this mean utilisation (percent)...
    pub idle_gpu_percent: f64,
    /// ...for this many minutes.
    pub idle_gpu_minutes: u32,
    /// A job's CPU efficiency (used over allocated cores, percent) under this...
    pub low_cpu_efficiency_percent: f64,
    /// ...for this many minutes; also how long a job runs before its memory is judged.
    pub low_cpu_minutes: u32,
    /// Peak memory under this share of the job's limit (percent).
    pub memory_over_requested_percent: f64,
    /// Peak GPU memory under this share of the memory of the GPUs the job holds (percent)...
    pub gpu_memory_underused_percent: f64,
    /// ...once it has held them this many minutes.
    pub gpu_memory_minutes: u32,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            idle_gpu_percent: 5.0,
            idle_gpu_minutes: 30,
            low_cpu_efficiency_percent: 20.0,
            low_cpu_minutes: 60,
            memory_over_requested_percent: 25.0,
            gpu_memory_underused_percent: 10.0,
            gpu_memory_minutes: 60,
        }
    }
}

impl Thresholds {
    pub fn check(&self) -> Result<(), crate::config::ConfigError> {
        use crate::config::ConfigError;
        for (key, v) in [
            ("idle_gpu_percent", self.idle_gpu_percent),
            ("low_cpu_efficiency_percent", self.low_cpu_efficiency_percent),
            ("memory_over_requested_percent", self.memory_over_requested_percent),
            ("gpu_memory_underused_percent", self.gpu_memory_underused_percent),
        ] {
            if !(0.0..=100.0).contains(&v) {
                return Err(ConfigError::invalid(format!("node.findings.{key}"), "must be 0 to 100"));
            }
        }
        if self.idle_gpu_minutes == 0 || self.low_cpu_minutes == 0 || self.gpu_memory_minutes == 0 {
            return Err(ConfigError::invalid("node.findings", "minutes must be at least 1"));
        }
        Ok(())
    }
}

/// One kind of finding: a condition that must hold without a break for a while.
#[derive(Debug, Default)]
struct Streak {
    since: Option<SystemTime>,
    reported: bool,
}

impl Streak {
    /// Feeds one observation; true while the condition has held for `long`.
    fn observe(&mut self, holds: Option<bool>, at: SystemTime, long: Duration) -> bool {
        match holds {
            Some(true) => {
                let since = *self.since.get_or_insert(at);
                at.duration_since(since).unwrap_or_default() >= long
            }
            // No reading (no rate yet, no GPU figure this time): neither breaks nor extends.
            None => self.since.is_some_and(|s| at.duration_since(s).unwrap_or_default() >= long),
            Some(false) => {
                self.since = None;
                false
            }
        }
    }
}

/// What one collection showed of a job, for its findings.
#[derive(Debug, Default, Clone, Copy)]
pub struct Observation {
    /// Its GPUs idle (see `GpuFigures::under`); None without GPUs or their utilisation.
    pub gpu_idle: Option<bool>,
    pub cpu_efficiency: Option<f64>,
    /// Slurm holds it suspended: idle cores and GPUs are not its doing, and a streak of them
    /// starts again once it runs.
    pub suspended: bool,
    /// Peak memory and limit, bytes.
    pub memory: Option<(f64, f64)>,
    /// Peak memory of its GPUs and the memory they have, bytes.
    pub gpu_memory: Option<(f64, f64)>,
    /// How long the job has been seen.
    pub age: Duration,
}

/// A finding newly true, with what was measured.
#[derive(Debug, Clone, PartialEq)]
pub struct New {
    pub kind: &'static str,
    pub detail: String,
}

/// Which findings hold now (for the population counts).
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub struct Holding {
    pub idle_gpu: bool,
    pub low_cpu: bool,
    pub memory_over_requested: bool,
}

/// One job's findings.
#[derive(Debug, Default)]
pub struct JobFindings {
    idle_gpu: Streak,
    low_cpu: Streak,
    memory: Streak,
    gpu_memory: Streak,
}

impl JobFindings {
    pub fn observe(
        &mut self,
        o: &Observation,
        at: SystemTime,
        t: &Thresholds,
        out: &mut Vec<New>,
    ) -> Holding {
        let minutes = |m: u32| Duration::from_secs(u64::from(m) * 60);
        let running = |v: Option<bool>| if o.suspended { Some(false) } else { v };
        let idle = running(o.gpu_idle);
        let low = running(o.cpu_efficiency.map(|e| e < t.low_cpu_efficiency_percent));
        let share = o.memory.and_then(|(p, l)| Some(p / crate::sample::limited(l)? * 100.0));
        // Memory is judged once the job has run long enough to reach its working set.
        let over = share.map(|s| s < t.memory_over_requested_percent && o.age >= minutes(t.low_cpu_minutes));
        let gpu_share = o.gpu_memory.filter(|(_, total)| *total > 0.0).map(|(p, total)| p / total * 100.0);
        // Judged once the job has run long enough to load what it works on.
        let gpu_under =
            gpu_share.map(|s| s < t.gpu_memory_underused_percent && o.age >= minutes(t.gpu_memory_minutes));
        let gpu_memory = self.gpu_memory.observe(gpu_under, at, Duration::ZERO);
        let holding = Holding {
            idle_gpu: self.idle_gpu.observe(idle, at, minutes(t.idle_gpu_minutes)),
            low_cpu: self.low_cpu.observe(low, at, minutes(t.low_cpu_minutes)),
            memory_over_requested: self.memory.observe(over, at, Duration::ZERO),
        };
        let mut report = |streak: &mut Streak, holds: bool, kind: &'static str, detail: String| {
            if holds && !streak.reported {
                streak.reported = true;
                out.push(New { kind, detail });
            }
        };
        report(
            &mut self.idle_gpu,
            holding.idle_gpu,
            IDLE_GPU,
            format!("GPUs under {}% utilisation for {} minutes", t.idle_gpu_percent, t.idle_gpu_minutes),
        );
        report(
            &mut self.low_cpu,
            holding.low_cpu,
            LOW_CPU_EFFICIENCY,
            format!(
                "CPU efficiency under {}% of the allocated cores for {} minutes",
                t.low_cpu_efficiency_percent, t.low_cpu_minutes
            ),
        );
        report(
            &mut self.gpu_memory,
            gpu_memory,
            GPU_MEMORY_UNDERUSED,
            format!(
                "peak GPU memory {} of its GPUs' {} ({:.1}%) after {} minutes (under {}%): a smaller GPU, a MIG \
                 instance or a shard would do",
                crate::report::model::bytes(o.gpu_memory.map_or(0.0, |g| g.0)),
                crate::report::model::bytes(o.gpu_memory.map_or(0.0, |g| g.1)),
                gpu_share.unwrap_or(0.0),
                o.age.as_secs() / 60,
                t.gpu_memory_underused_percent
            ),
        );
        report(
            &mut self.memory,
            holding.memory_over_requested,
            MEMORY_OVER_REQUESTED,
            format!(
                "peak memory {:.1}% of the memory limit after {} minutes (under {}%)",
                share.unwrap_or(0.0),
                o.age.as_secs() / 60,
                t.memory_over_requested_percent
            ),
        );
        holding
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(min: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000 + min * 60)
    }

    #[test]
    fn idle_gpus_are_reported_once_after_the_window() {
        let t = Thresholds { idle_gpu_minutes: 10, ..Thresholds::default() };
        let mut f = JobFindings::default();
        let mut out = Vec::new();
        let obs = |u: f64| Observation { gpu_idle: Some(u < t.idle_gpu_percent), ..Observation::default() };
        for m in 0..10 {
            assert!(!f.observe(&obs(1.0), at(m), &t, &mut out).idle_gpu, "minute {m}");
        }
        assert!(f.observe(&obs(1.0), at(10), &t, &mut out).idle_gpu);
        assert!(f.observe(&obs(1.0), at(11), &t, &mut out).idle_gpu);
        assert_eq!(out.len(), 1, "once per job");
        assert_eq!(out[0].kind, IDLE_GPU);
        // Busy again: no longer holding, and no second finding later.
        assert!(!f.observe(&obs(90.0), at(12), &t, &mut out).idle_gpu);
        for m in 13..30 {
            f.observe(&obs(1.0), at(m), &t, &mut out);
        }
        assert_eq!(out.len(), 1);
    }

    #[test]
    fn a_busy_minute_restarts_the_window_and_gaps_do_not() {
        let t = Thresholds { low_cpu_minutes: 5, ..Thresholds::default() };
        let mut f = JobFindings::default();
        let mut out = Vec::new();
        let cpu = |e: Option<f64>| Observation { cpu_efficiency: e, ..Observation::default() };
        f.observe(&cpu(Some(5.0)), at(0), &t, &mut out);
        f.observe(&cpu(Some(50.0)), at(3), &t, &mut out);
        f.observe(&cpu(Some(5.0)), at(4), &t, &mut out);
        f.observe(&cpu(None), at(6), &t, &mut out);
        assert!(out.is_empty());
        f.observe(&cpu(Some(5.0)), at(9), &t, &mut out);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].kind, LOW_CPU_EFFICIENCY);
    }

    #[test]
    fn a_suspension_is_not_idleness_and_the_window_starts_again_after_it() {
        let t = Thresholds { low_cpu_minutes: 5, idle_gpu_minutes: 5, ..Thresholds::default() };
        let mut f = JobFindings::default();
        let mut out = Vec::new();
        let idle = |suspended: bool| Observation {
            cpu_efficiency: Some(0.0),
            gpu_idle: Some(true),
            suspended,
            ..Observation::default()
        };
        f.observe(&idle(false), at(0), &t, &mut out);
        for m in 1..30 {
            f.observe(&idle(true), at(m), &t, &mut out);
        }
        assert!(
            out.is_empty(),
            "suspended half an hour: {:?}",
            out.iter().map(|n| n.kind).collect::<Vec<_>>()
        );
        f.observe(&idle(false), at(30), &t, &mut out);
        assert!(out.is_empty(), "idle again, the window counts from the resume");
        f.observe(&idle(false), at(35), &t, &mut out);
        assert_eq!(out.len(), 2);
    }

    #[test]
    fn memory_is_judged_after_the_window_and_only_under_a_real_limit() {
        let t = Thresholds { low_cpu_minutes: 10, ..Thresholds::default() };
        let mut out = Vec::new();
        let mem = |peak: f64, limit: f64, age: u64| Observation {
            memory: Some((peak, limit)),
            age: Duration::from_secs(age * 60),
            ..Observation::default()
        };
        let mut f = JobFindings::default();
        assert!(!f.observe(&mem(1e9, 64e9, 5), at(5), &t, &mut out).memory_over_requested, "too early");
        assert!(f.observe(&mem(1e9, 64e9, 10), at(10), &t, &mut out).memory_over_requested);
        assert_eq!(out.len(), 1);
        assert!(out[0].detail.starts_with("peak memory 1.6%"), "{}", out[0].detail);
        let mut g = JobFindings::default();
        assert!(
            !g.observe(&mem(1e9, 2f64.powi(63), 20), at(20), &t, &mut out).memory_over_requested,
            "no limit"
        );
        assert!(!g.observe(&mem(40e9, 64e9, 20), at(21), &t, &mut out).memory_over_requested, "uses 62%");
    }

    #[test]
    fn a_gpu_held_for_hours_whose_memory_the_job_barely_needs_is_told_once() {
        let t = Thresholds::default();
        let gib = 1024.0 * 1024.0 * 1024.0;
        let obs = |peak: f64, age: u64| Observation {
            gpu_memory: Some((peak, 141.0 * gib)),
            age: Duration::from_secs(age * 60),
            ..Observation::default()
        };
        let mut f = JobFindings::default();
        let mut out = Vec::new();
        f.observe(&obs(2.0 * gib, 30), at(30), &t, &mut out);
        assert!(out.is_empty(), "too early: a job loads its data first");
        f.observe(&obs(2.0 * gib, 60), at(60), &t, &mut out);
        f.observe(&obs(2.0 * gib, 120), at(120), &t, &mut out);
        assert_eq!(out.len(), 1, "once: {out:?}");
        assert_eq!(out[0].kind, GPU_MEMORY_UNDERUSED);
        assert!(
            out[0]
                .detail
                .starts_with("peak GPU memory 2.0 GiB of its GPUs' 141.0 GiB (1.4%) after 60 minutes"),
            "{}",
            out[0].detail
        );
        let mut busy = JobFindings::default();
        let mut none = Vec::new();
        busy.observe(&obs(70.0 * gib, 120), at(120), &t, &mut none);
        assert!(none.is_empty(), "half the memory is used: {none:?}");
        let t = Thresholds { gpu_memory_underused_percent: 0.0, ..Thresholds::default() };
        JobFindings::default().observe(&obs(0.0, 600), at(600), &t, &mut none);
        assert!(none.is_empty(), "0 turns it off");
    }
}
