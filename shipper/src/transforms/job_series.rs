//! A job's series: its typed reading ([`JobReading`]: what the node and GPU collectors read of
//! it on one node) as the samples one destination takes, made here and nowhere else. The
//! destination's [`Shape`] names the dimensions:
//!
//! - [`Shape::CloudWatch`]: none at all when `node.job_metrics` keeps per-job figures to the
//!   job records; else each figure under JobId, User and Account (summed over a job's nodes), and
//!   under its NodeName too when `node.per_node_dimensions` asks; the GPU figures of a job under
//!   JobId, User and Account, and each of its GPUs (`gpu.per_gpu_dimensions`) under its NodeName
//!   and Gpu (or GpuUuid) as well;
//! - [`Shape::Open`]: the same series, each under the job's Partition and NodeName too.

use super::shape::Shape;
use crate::sample::{Dims, GpuLabel, JobReading, Observed, Sample};
use slurm_cw_catalog::Metric;
use slurm_cw_catalog::dims::{
    ACCOUNT, EXECUTABLE, GPU, GPU_UUID, JOB_ID, NODE_NAME, PARTITION, THREAD_STATE, USER,
};
use slurm_cw_catalog::metrics::{CPU_CORE_UTILIZATION, PROCESS_CPU_USAGE, THREAD_COUNT};
use std::time::SystemTime;

/// The series of `jobs`, read at `time`, as `shape` takes them, into `out`; only the metrics
/// `keep` lets through (`exclude_metrics`).
pub fn push(
    shape: Shape,
    jobs: &[JobReading],
    time: SystemTime,
    keep: impl Fn(&'static Metric) -> bool,
    out: &mut Vec<Sample>,
) {
    let (open, per_node) = match shape {
        Shape::CloudWatch { job_metrics, per_node_job_dimensions, .. } => {
            if !job_metrics.metrics() {
                return;
            }
            (false, per_node_job_dimensions)
        }
        Shape::Open => (true, true),
    };
    for r in jobs {
        let i = &r.info;
        let mut job = Dims::new().with(JOB_ID, i.id.as_str()).with(USER, i.user.as_str());
        job.set(ACCOUNT, i.account.as_str());
        if open {
            job.set(PARTITION, i.partition.as_str());
        }
        let on_node = job.clone().with(NODE_NAME, i.node.as_str());
        // The sets a figure of the node collector goes under: CloudWatch's across nodes first.
        let sets: &[&Dims] = match (open, per_node) {
            (true, _) => &[&on_node],
            (false, true) => &[&job, &on_node],
            (false, false) => &[&job],
        };
        let mut put =
            |m: &'static Metric, dims: &[&Dims], extra: Option<(&'static str, &str)>, v: Observed| {
                if !keep(m) {
                    return;
                }
                for d in dims {
                    let mut dims = (*d).clone();
                    if let Some((name, value)) = extra {
                        dims.set(name, value);
                    }
                    out.push(Sample { metric: m, dims, value: v.clone(), time });
                }
            };
        let f = &r.job;
        for (m, v) in f.figures() {
            put(m, sets, None, Observed::Scalar(v));
        }
        if let Some(d) = &f.per_core {
            put(&CPU_CORE_UTILIZATION, sets, None, Observed::Distribution(d.clone()));
        }
        for (state, n) in &f.threads {
            put(&THREAD_COUNT, sets, Some((THREAD_STATE, *state)), Observed::Scalar(*n));
        }
        for (exe, cores) in &f.by_exe {
            put(&PROCESS_CPU_USAGE, sets, Some((EXECUTABLE, exe.as_str())), Observed::Scalar(*cores));
        }
        let Some(g) = &r.gpus else { continue };
        // A job's GPUs on each node are its own series in Open (two slurmd of one host would
        // otherwise give one series twice); CloudWatch's, summed over nodes, never per node.
        let gpu_sets: &[&Dims] = if open { &[&on_node] } else { &[&job] };
        for (m, v) in g.series() {
            put(m, gpu_sets, None, Observed::Scalar(v));
        }
        for one in g.each.iter().filter(|_| g.each_series) {
            let gpu = match &one.label {
                GpuLabel::Index(l) => (GPU, l.as_str()),
                GpuLabel::Uuid(u) => (GPU_UUID, u.as_str()),
            };
            for (m, v) in &one.figures {
                put(m, &[&on_node], Some(gpu), Observed::Scalar(*v));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sample::{GpuFigures, JobFigures, JobInfo, OneGpu};
    use crate::transforms::shape::JobMetrics;
    use slurm_cw_catalog::metrics::{GPU_COUNT, GPU_UTILIZATION, MEMORY_RSS};

    fn reading(node: &str, gpus: Option<GpuFigures>) -> JobReading {
        let info = JobInfo {
            id: "1".into(),
            names: Default::default(),
            node: node.into(),
            user: "u".into(),
            account: "a".into(),
            partition: "p".into(),
        };
        let job = JobFigures {
            per_core: Some(vec![50.0, 100.0]),
            threads: vec![("running", 2.0)],
            ..JobFigures::from_figures(vec![(&MEMORY_RSS, 1.0)])
        };
        JobReading { info, job, gpus, held: Default::default() }
    }

    /// (metric, dimension names) of each series.
    fn series(
        shape: Shape,
        jobs: &[JobReading],
        keep: impl Fn(&'static Metric) -> bool,
    ) -> Vec<(&str, Vec<&str>)> {
        let mut out = Vec::new();
        push(shape, jobs, SystemTime::UNIX_EPOCH, keep, &mut out);
        out.iter().map(|s| (s.metric.name, s.dims.names().collect())).collect()
    }

    fn cloudwatch(job_metrics: JobMetrics, per_node: bool) -> Shape {
        Shape::CloudWatch {
            job_metrics,
            per_node_job_dimensions: per_node,
            per_node_self_metrics: true,
            all_self_metrics: true,
        }
    }

    fn gpus() -> GpuFigures {
        let mut g = GpuFigures::new(1.0, 0.0, vec![(&GPU_UTILIZATION, 80.0)]);
        let figures = vec![(&GPU_UTILIZATION, 80.0)];
        g.each = vec![OneGpu { label: GpuLabel::Index("0".into()), figures, joules: None }];
        g.each_series = true;
        g
    }

    #[test]
    fn each_gpus_series_only_where_per_gpu_dimensions_asks() {
        let mut g = gpus();
        g.each_series = false;
        let jobs = [reading("n1", Some(g))];
        let got = series(cloudwatch(JobMetrics::Metrics, false), &jobs, |_| true);
        assert!(got.iter().all(|(_, d)| !d.contains(&"Gpu")), "{got:?}");
    }

    #[test]
    fn by_default_cloudwatch_gets_no_job_series() {
        let jobs = [reading("n1", Some(gpus()))];
        assert!(series(cloudwatch(JobMetrics::Logs, true), &jobs, |_| true).is_empty());
    }

    #[test]
    fn cloudwatch_gets_each_figure_across_nodes_and_per_node_when_asked() {
        let jobs = [reading("n1", Some(gpus()))];
        let job = vec!["Account", "JobId", "User"];
        let on_node = vec!["Account", "JobId", "NodeName", "User"];
        let with = |extra: &'static str, mut d: Vec<&'static str>| {
            d.push(extra);
            d.sort();
            d
        };
        let per_gpu = ("GpuUtilization", with("Gpu", on_node.clone()));
        assert_eq!(
            series(cloudwatch(JobMetrics::Metrics, false), &jobs, |_| true),
            vec![
                ("MemoryRss", job.clone()),
                ("CpuCoreUtilization", job.clone()),
                ("ThreadCount", with("ThreadState", job.clone())),
                ("GpuCount", job.clone()),
                ("GpuIdleCount", job.clone()),
                ("GpuUtilization", job.clone()),
                per_gpu.clone(),
            ]
        );
        let both = series(cloudwatch(JobMetrics::Both, true), &jobs, |_| true);
        assert_eq!(both[..2], [("MemoryRss", job.clone()), ("MemoryRss", on_node.clone())]);
        assert_eq!(both.iter().filter(|(m, _)| *m == "GpuCount").count(), 1, "a job's GPUs: never per node");
        assert_eq!(both.last(), Some(&per_gpu));
    }

    #[test]
    fn open_names_the_node_and_partition_and_excluded_metrics_stay_out() {
        let jobs = [reading("n1", Some(gpus())), reading("n2", None)];
        let got = series(Shape::Open, &jobs, |m| !std::ptr::eq(m, &GPU_COUNT));
        let all = vec!["Account", "JobId", "NodeName", "Partition", "User"];
        assert_eq!(got[0], ("MemoryRss", all.clone()));
        assert!(got.iter().all(|(m, _)| *m != "GpuCount"), "{got:?}");
        let gpu_job: Vec<_> = got.iter().filter(|(m, _)| *m == "GpuIdleCount").collect();
        assert_eq!(gpu_job, [&("GpuIdleCount", all.clone())], "a job's GPUs on each node");
        assert_eq!(got.iter().filter(|(m, d)| *m == "MemoryRss" && d == &all).count(), 2, "one per node");
    }

    #[test]
    fn values_and_distributions_are_the_readings() {
        let mut out = Vec::new();
        let t = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(60);
        push(Shape::Open, &[reading("n1", None)], t, |_| true, &mut out);
        assert_eq!(out[0].scalar(), Some(1.0));
        assert_eq!(out[1].value, Observed::Distribution(vec![50.0, 100.0]));
        assert_eq!(out[2].dims.get(THREAD_STATE), Some("running"));
        assert!(out.iter().all(|s| s.time == t));
    }
}
