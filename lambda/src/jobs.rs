//! Job rollups from the node shippers' per-job series: jobs whose GPUs sit idle, jobs that use
//! little of their CPUs, jobs that asked for far more memory than they use, and the GPU-hours
//! held idle. A job becomes a finding (for a notice) when its condition first holds, so each
//! job is reported once per episode, from what CloudWatch holds alone.

use crate::config::Thresholds;
use crate::cw::{Cw, Dims, Points, Series, at_epoch, datum};
use anyhow::Result;
use serde::Serialize;
use slurm_cw_catalog::dims::{ACCOUNT, JOB_ID, USER};
use slurm_cw_catalog::metrics::*;
use slurm_cw_sink::datum::Datum;

/// Share of a window's minutes that must have data before a job is judged on it.
pub const COVERAGE: f64 = 0.8;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    IdleGpu,
    LowCpuEfficiency,
    MemoryOverRequested,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Finding {
    pub kind: Kind,
    pub job: String,
    pub user: String,
    pub account: String,
    /// What was measured, in words.
    pub detail: String,
}

/// Values of `p` in the minutes [from, to], if at least [`COVERAGE`] of them have one.
fn window(p: &Points, from: i64, to: i64) -> Option<Vec<f64>> {
    let minutes = ((to - from) / 60 + 1) as f64;
    let v: Vec<f64> = p.range(from..=to).map(|(_, v)| *v).collect();
    (v.len() as f64 >= minutes * COVERAGE && !v.is_empty()).then_some(v)
}

/// True when every value of the `minutes` minutes ending at `at` is under `threshold`.
pub fn below_for(p: &Points, at: i64, minutes: u32, threshold: f64) -> bool {
    window(p, at - (minutes as i64 - 1) * 60, at).is_some_and(|v| v.iter().all(|x| *x < threshold))
}

/// (peak usage, limit) over the window, if covered.
fn memory_share(max: &Points, limit: &Points, at: i64, minutes: u32) -> Option<f64> {
    let from = at - (minutes as i64 - 1) * 60;
    let peak = window(max, from, at)?.into_iter().fold(0.0, f64::max);
    let lim = window(limit, from, at)?.into_iter().fold(0.0, f64::max);
    (lim > 0.0).then(|| peak / lim * 100.0)
}

/// GPU-hours held idle in the `rollup` minutes ending at `at`: each minute, all of a job's GPUs
/// when its mean utilisation is under the threshold, else those that run none of its processes.
pub fn gpu_hours_idle(
    util: &Points,
    count: &Points,
    idle: &Points,
    at: i64,
    rollup: u32,
    threshold: f64,
) -> f64 {
    let mut gpu_minutes = 0.0;
    for m in (0..rollup as i64).map(|k| at - k * 60) {
        let Some(u) = util.get(&m) else { continue };
        gpu_minutes += if *u < threshold {
            count.get(&m).copied().unwrap_or(0.0)
        } else {
            idle.get(&m).copied().unwrap_or(0.0)
        };
    }
    gpu_minutes / 60.0
}

fn owner(d: &Dims) -> (String, String, String) {
    let get = |k: &str| d.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone()).unwrap_or_default();
    (get(JOB_ID), get(USER), get(ACCOUNT))
}

/// Rollup datums at minute `at` and the jobs that became findings since the last rollup
/// (`rollup` minutes earlier).
pub async fn rollup(cw: &mut Cw, at: i64, rollup: u32, t: &Thresholds) -> Result<(Vec<Datum>, Vec<Finding>)> {
    let job_dims = [JOB_ID, USER, ACCOUNT];
    let earlier = at - rollup as i64 * 60;
    let mut findings = Vec::new();
    let mut out = Vec::new();

    // GPUs.
    let gpu_jobs = cw.list_with(&GPU_UTILIZATION, &job_dims).await?;
    let mut series = Vec::new();
    for d in &gpu_jobs {
        for m in [&GPU_UTILIZATION, &GPU_COUNT, &GPU_IDLE_COUNT] {
            series.push(Series { metric: m, dims: d.clone(), stat: "Maximum" });
        }
    }
    let span = (t.idle_gpu_minutes + rollup) as i64 * 60;
    let points = cw.fetch(&series, at_epoch(at - span), at_epoch(at + 60), 60).await?;
    let (mut idle_jobs, mut hours) = (0.0, 0.0);
    for (d, p) in gpu_jobs.iter().zip(points.chunks(3)) {
        let (util, count, idle) = (&p[0], &p[1], &p[2]);
        hours += gpu_hours_idle(util, count, idle, at, rollup, t.idle_gpu_percent);
        if below_for(util, at, t.idle_gpu_minutes, t.idle_gpu_percent) {
            idle_jobs += 1.0;
            if !below_for(util, earlier, t.idle_gpu_minutes, t.idle_gpu_percent) {
                let (job, user, account) = owner(d);
                let gpus = count.get(&at).copied().unwrap_or(0.0);
                let detail = format!(
                    "{gpus} GPU(s) under {}% utilisation for {} minutes",
                    t.idle_gpu_percent, t.idle_gpu_minutes
                );
                findings.push(Finding { kind: Kind::IdleGpu, job, user, account, detail });
            }
        }
    }
    out.push(datum(&cw.cluster, &IDLE_GPU_JOBS, &[], at, idle_jobs));
    out.push(datum(&cw.cluster, &GPU_HOURS_IDLE, &[], at, hours));

    // CPUs and memory, over the CPU window.
    let cpu_jobs = cw.list_with(&CPU_UTILIZATION, &job_dims).await?;
    let mem_jobs = cw.list_with(&MEMORY_LIMIT, &job_dims).await?;
    let mut series: Vec<Series> = cpu_jobs
        .iter()
        .map(|d| Series { metric: &CPU_UTILIZATION, dims: d.clone(), stat: "Maximum" })
        .collect();
    for d in &mem_jobs {
        series.push(Series { metric: &MEMORY_MAX, dims: d.clone(), stat: "Maximum" });
        series.push(Series { metric: &MEMORY_LIMIT, dims: d.clone(), stat: "Maximum" });
    }
    let span = (t.low_cpu_minutes + rollup) as i64 * 60;
    let points = cw.fetch(&series, at_epoch(at - span), at_epoch(at + 60), 60).await?;
    let (cpu_points, mem_points) = points.split_at(cpu_jobs.len());
    let mut low = 0.0;
    for (d, p) in cpu_jobs.iter().zip(cpu_points) {
        if below_for(p, at, t.low_cpu_minutes, t.low_cpu_efficiency_percent) {
            low += 1.0;
            if !below_for(p, earlier, t.low_cpu_minutes, t.low_cpu_efficiency_percent) {
                let (job, user, account) = owner(d);
                let detail = format!(
                    "CPU utilisation under {}% of the allocated cores for {} minutes",
                    t.low_cpu_efficiency_percent, t.low_cpu_minutes
                );
                findings.push(Finding { kind: Kind::LowCpuEfficiency, job, user, account, detail });
            }
        }
    }
    let mut over = 0.0;
    for (d, p) in mem_jobs.iter().zip(mem_points.chunks(2)) {
        let share = |when| memory_share(&p[0], &p[1], when, t.low_cpu_minutes);
        let Some(now) = share(at).filter(|s| *s < t.memory_over_requested_percent) else { continue };
        over += 1.0;
        if !share(earlier).is_some_and(|s| s < t.memory_over_requested_percent) {
            let (job, user, account) = owner(d);
            let detail = format!(
                "peak memory {now:.1}% of the requested memory over {} minutes (under {}%)",
                t.low_cpu_minutes, t.memory_over_requested_percent
            );
            findings.push(Finding { kind: Kind::MemoryOverRequested, job, user, account, detail });
        }
    }
    out.push(datum(&cw.cluster, &LOW_CPU_EFFICIENCY_JOBS, &[], at, low));
    out.push(datum(&cw.cluster, &MEMORY_OVER_REQUESTED_JOBS, &[], at, over));
    Ok((out, findings))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn minutes(from: i64, values: &[f64]) -> Points {
        values.iter().enumerate().map(|(i, v)| ((from + i as i64) * 60, *v)).collect()
    }

    #[test]
    fn below_for_needs_the_whole_window_covered_and_under() {
        let p = minutes(0, &[50.0, 1.0, 1.0, 1.0, 1.0]);
        assert!(below_for(&p, 4 * 60, 4, 5.0), "minutes 1-4 idle");
        assert!(!below_for(&p, 4 * 60, 5, 5.0), "minute 0 was busy");
        assert!(!below_for(&p, 10 * 60, 4, 5.0), "no data for the window");
        // 4 of 5 minutes present is enough coverage.
        let mut gap = minutes(0, &[1.0, 1.0, 1.0, 1.0, 1.0]);
        gap.remove(&120);
        assert!(below_for(&gap, 4 * 60, 5, 5.0));
        gap.remove(&180);
        assert!(!below_for(&gap, 4 * 60, 5, 5.0), "3 of 5 is too thin");
    }

    #[test]
    fn gpu_hours_count_idle_jobs_whole_and_busy_jobs_by_idle_gpus() {
        let util = minutes(0, &[1.0, 1.0, 80.0, 80.0]);
        let count = minutes(0, &[4.0, 4.0, 4.0, 4.0]);
        let idle = minutes(0, &[0.0, 0.0, 1.0, 1.0]);
        // Minutes 0-1: 4 idle GPUs each; minutes 2-3: 1 each: 10 GPU-minutes.
        let h = gpu_hours_idle(&util, &count, &idle, 3 * 60, 4, 5.0);
        assert!((h - 10.0 / 60.0).abs() < 1e-12, "{h}");
    }

    #[test]
    fn memory_share_uses_the_peak_over_the_limit() {
        let max = minutes(0, &[1.0, 2.0, 3.0]);
        let limit = minutes(0, &[12.0, 12.0, 12.0]);
        assert_eq!(memory_share(&max, &limit, 120, 3), Some(25.0));
        assert_eq!(memory_share(&max, &Points::new(), 120, 3), None);
    }
}
