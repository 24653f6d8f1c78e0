//! Figures across the jobs a collection read, never per job: per cluster, partition and account
//! (and per user as an option), each figure in the scopes its catalog entry declares (the key
//! figures per account, the detail per partition). Distributions (one value per job, shipped as
//! Values/Counts so CloudWatch gives percentiles) and totals (summed over jobs, one value per
//! node and flush). GPU figures only where jobs hold GPUs: a CPU-only cluster pays for none.
//! This is what dashboards and alarms read now that per-job detail lives in the job records.

use super::findings::Holding;
use crate::sample::{Batch, Dims, JobReading};
use slurm_cw_catalog::Metric;
use slurm_cw_catalog::dims::{ACCOUNT, PARTITION, USER};
use slurm_cw_catalog::metrics::*;
use std::collections::BTreeMap;

/// The scopes a job counts in.
fn scopes(j: &JobReading, per_user: bool) -> Vec<Dims> {
    let mut s = vec![
        Dims::new(),
        Dims::new().with(PARTITION, j.info.partition.as_str()),
        Dims::new().with(ACCOUNT, j.info.account.as_str()),
    ];
    if per_user {
        s.push(Dims::new().with(USER, j.info.user.as_str()));
    }
    s
}

/// Whether `metric` is published with the dimensions of `scope` (the catalog decides how far
/// each figure is broken down).
fn declared(metric: &Metric, scope: &Dims) -> bool {
    metric
        .dimension_sets
        .iter()
        .any(|set| set.len() == scope.len() && set.iter().all(|n| scope.get(n).is_some()))
}

/// Totals that only GPU jobs make.
fn gpu_only(metric: &Metric) -> bool {
    std::ptr::eq(metric, &JOB_GPUS_IDLE) || std::ptr::eq(metric, &IDLE_GPU_JOBS)
}

/// Totals summed over jobs, in this order.
const TOTALS: [&Metric; 7] = [
    &JOB_ALLOCATIONS,
    &JOB_CORES_USED,
    &JOB_CORES_ALLOCATED,
    &JOB_GPUS_IDLE,
    &IDLE_GPU_JOBS,
    &LOW_CPU_EFFICIENCY_JOBS,
    &MEMORY_OVER_REQUESTED_JOBS,
];

/// Pushes the population figures of one full collection into `out`: each job's reading and
/// what it holds of the findings (`held`, in the same order).
pub fn push(jobs: &[JobReading], held: &[Holding], per_user: bool, idle_gpu_percent: f64, out: &mut Batch) {
    // Per scope: the totals, and whether a job there holds GPUs.
    let mut totals: BTreeMap<Dims, ([f64; TOTALS.len()], bool)> = BTreeMap::new();
    // Cluster-wide totals always, zero included, so alarms see a continuous series.
    totals.insert(Dims::new(), ([0.0; TOTALS.len()], false));
    let mut dists: BTreeMap<(&'static str, Dims), (&'static Metric, Vec<f64>)> = BTreeMap::new();
    for (j, holding) in jobs.iter().zip(held) {
        let row = [
            1.0,
            j.job.cpu_usage.unwrap_or(0.0),
            j.job.cpus_allocated.unwrap_or(0.0),
            j.gpus_idle(idle_gpu_percent),
            f64::from(u8::from(holding.idle_gpu)),
            f64::from(u8::from(holding.low_cpu)),
            f64::from(u8::from(holding.memory_over_requested)),
        ];
        let values = [
            (&JOB_CPU_EFFICIENCY, j.job.cpu_utilization),
            (&JOB_MEMORY_USED, j.memory_used()),
            (&JOB_MEMORY_PEAK_SHARE, j.memory_peak_share()),
            (&JOB_GPU_UTILIZATION, j.gpu_utilization()),
        ];
        let holds_gpus = j.gpu_count().is_some_and(|n| n > 0.0);
        for scope in scopes(j, per_user) {
            let (t, gpus) = totals.entry(scope.clone()).or_insert(([0.0; TOTALS.len()], false));
            *gpus |= holds_gpus;
            for (acc, v) in t.iter_mut().zip(row) {
                *acc += v;
            }
            for (m, v) in values {
                if let Some(v) = v
                    && declared(m, &scope)
                {
                    dists.entry((m.name, scope.clone())).or_insert((m, Vec::new())).1.push(v);
                }
            }
        }
    }
    for (scope, (row, gpus)) in totals {
        for (m, v) in TOTALS.iter().zip(row) {
            if declared(m, &scope) && (gpus || !gpu_only(m)) {
                out.push(m, scope.clone(), v);
            }
        }
    }
    for ((_, scope), (m, values)) in dists {
        out.push_distribution(m, scope, values);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sample::{GpuFigures, JobFigures, JobInfo};
    use std::time::SystemTime;

    fn job(
        id: &str,
        account: &str,
        figures: Vec<(&'static Metric, f64)>,
        gpus: Option<GpuFigures>,
    ) -> JobReading {
        let info = JobInfo {
            id: id.into(),
            names: Default::default(),
            node: "n1".into(),
            user: "u".into(),
            account: account.into(),
            partition: "gpu".into(),
        };
        JobReading { info, job: JobFigures::from_figures(figures), gpus, held: Default::default() }
    }

    #[test]
    fn totals_and_distributions_per_scope() {
        let jobs = [
            job(
                "1",
                "a",
                vec![
                    (&CPU_USAGE, 1.5),
                    (&CPUS_ALLOCATED, 2.0),
                    (&CPU_UTILIZATION, 75.0),
                    (&MEMORY_USAGE, 3e8),
                ],
                None,
            ),
            job(
                "2",
                "b",
                vec![(&CPU_USAGE, 0.1), (&CPUS_ALLOCATED, 4.0), (&CPU_UTILIZATION, 2.5)],
                Some(GpuFigures::new(2.0, 0.0, vec![(&GPU_UTILIZATION, 1.0)])),
            ),
        ];
        let held = [Holding::default(), Holding { idle_gpu: true, ..Holding::default() }];
        let mut b = Batch::new(SystemTime::UNIX_EPOCH);
        push(&jobs, &held, false, 5.0, &mut b);
        let cluster: &[(&str, &str)] = &[];
        assert_eq!(b.value(&JOB_ALLOCATIONS, cluster), Some(2.0));
        assert_eq!(b.value(&JOB_CORES_USED, cluster), Some(1.6));
        assert_eq!(b.value(&JOB_CORES_ALLOCATED, cluster), Some(6.0));
        assert_eq!(
            b.value(&JOB_GPUS_IDLE, cluster),
            Some(2.0),
            "a GPU job under the threshold idles all its GPUs"
        );
        assert_eq!(b.value(&IDLE_GPU_JOBS, cluster), Some(1.0));
        assert_eq!(b.value(&IDLE_GPU_JOBS, &[("Account", "b")]), Some(1.0));
        assert_eq!(b.value(&IDLE_GPU_JOBS, &[("Account", "a")]), None, "account a holds no GPUs");
        assert_eq!(b.value(&JOB_ALLOCATIONS, &[("Partition", "gpu")]), Some(2.0));
        assert_eq!(b.value(&JOB_ALLOCATIONS, &[("Account", "a")]), Some(1.0));
        assert_eq!(b.value(&JOB_CORES_USED, &[("Partition", "gpu")]), Some(1.6));
        assert_eq!(b.value(&JOB_CORES_USED, &[("Account", "a")]), None, "detail per partition only");
        assert_eq!(b.of(&JOB_MEMORY_PEAK_SHARE).count(), 0, "no limits known");
        assert_eq!(b.of(&JOB_CPU_EFFICIENCY).filter(|s| s.dims.get("Account").is_some()).count(), 2);
        let eff: Vec<_> = b.of(&JOB_CPU_EFFICIENCY).filter(|s| s.dims.is_empty()).collect();
        assert_eq!(eff[0].value, crate::sample::Observed::Distribution(vec![75.0, 2.5]));
        assert!(b.samples.iter().all(|s| s.dims.get("JobId").is_none()), "never per job");
        assert!(b.samples.iter().all(|s| s.dims.get("User").is_none()), "per user only when asked");
    }

    #[test]
    fn no_jobs_still_reports_zero_for_the_cluster() {
        let mut b = Batch::new(SystemTime::UNIX_EPOCH);
        push(&[], &[], false, 5.0, &mut b);
        assert_eq!(b.value(&JOB_ALLOCATIONS, &[]), Some(0.0));
        assert_eq!(b.samples.len(), TOTALS.iter().filter(|m| !gpu_only(m)).count(), "no GPU figures");
    }
}
