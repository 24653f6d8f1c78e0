//! Which samples become series for a destination, and with which dimensions. Collectors state
//! facts with every dimension they know (a job sample names its node); each destination's shape
//! ([`crate::sinks::SinkKind::shape`]) decides what it takes:
//!
//! - [`Shape::CloudWatch`], where every series is a custom metric billed by the hour: per-job
//!   metrics only when `node.job_metrics` asks for them (the job records carry them anyway),
//!   per-node detail only when asked, host figures across the cluster by default;
//! - [`Shape::Open`], for destinations billed by the byte or not at all (OTLP, Prometheus):
//!   every series as the collectors state it, a job's labelled with its partition too.

use crate::sample::{Dims, JobReading, Sample};
use serde::Deserialize;
use slurm_cw_catalog::dims::{CLUSTER_NAME, GPU, GPU_UUID, JOB_ID, NODE_NAME, PARTITION};

/// `node.job_metrics`: where per-job figures go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum JobMetrics {
    /// Job records in CloudWatch Logs only (billed by the byte).
    Logs,
    /// Per-job custom metrics only (billed per metric and hour: see docs/cost.md).
    Metrics,
    Both,
}

impl JobMetrics {
    pub fn records(self) -> bool {
        self != JobMetrics::Metrics
    }

    pub fn metrics(self) -> bool {
        self != JobMetrics::Logs
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Shape {
    CloudWatch {
        job_metrics: JobMetrics,
        /// `node.per_node_dimensions`: per-job metrics per node as well.
        per_node_job_dimensions: bool,
        /// `self_metrics_per_node`: host figures per node as well as across the cluster.
        per_node_self_metrics: bool,
    },
    Open,
}

fn without_node(d: &Dims) -> Dims {
    let mut out = Dims::new();
    for (n, v) in d.iter().filter(|(n, _)| *n != NODE_NAME) {
        out.set(n, v);
    }
    out
}

impl Shape {
    /// The samples that go on to this destination's aggregator; `jobs`: the jobs the samples
    /// came from.
    pub fn apply(&self, samples: Vec<Sample>, jobs: &[JobReading], out: &mut Vec<Sample>) {
        match *self {
            Shape::CloudWatch { job_metrics, per_node_job_dimensions, per_node_self_metrics } => {
                cloudwatch(samples, job_metrics, per_node_job_dimensions, per_node_self_metrics, out)
            }
            Shape::Open => open(samples, jobs, out),
        }
    }
}

/// Every sample; a job's with its partition.
fn open(samples: Vec<Sample>, jobs: &[JobReading], out: &mut Vec<Sample>) {
    for mut s in samples {
        if let Some(id) = s.dims.get(JOB_ID)
            && let Some(job) = jobs.iter().map(|j| &j.info).find(|j| j.id == id)
        {
            s.dims.set(PARTITION, job.partition.as_str());
        }
        out.push(s);
    }
}

fn cloudwatch(
    samples: Vec<Sample>,
    job_metrics: JobMetrics,
    per_node_job_dimensions: bool,
    per_node_self_metrics: bool,
    out: &mut Vec<Sample>,
) {
    for s in samples {
        let has_node = s.dims.get(NODE_NAME).is_some();
        if s.dims.get(JOB_ID).is_some() {
            if !job_metrics.metrics() {
                continue;
            }
            let per_gpu = s.dims.get(GPU).is_some() || s.dims.get(GPU_UUID).is_some();
            if has_node && !per_gpu {
                if per_node_job_dimensions {
                    out.push(Sample { dims: without_node(&s.dims), ..s.clone() });
                    out.push(s);
                } else {
                    out.push(Sample { dims: without_node(&s.dims), ..s });
                }
            } else {
                out.push(s);
            }
            continue;
        }
        if !has_node {
            out.push(s);
            continue;
        }
        let stripped = without_node(&s.dims);
        let names = stripped.names().chain([CLUSTER_NAME]);
        if !s.metric.accepts_dimensions(names) {
            out.push(s);
        } else if per_node_self_metrics {
            out.push(Sample { dims: stripped, ..s.clone() });
            out.push(s);
        } else {
            out.push(Sample { dims: stripped, ..s });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use slurm_cw_catalog::dims::{ACCOUNT, COLLECTOR, USER};
    use slurm_cw_catalog::metrics::{COLLECTOR_ERRORS, GPU_UTILIZATION, MEMORY_RSS, SHIPPER_MEMORY_RSS};
    use std::time::SystemTime;

    fn s(m: &'static slurm_cw_catalog::Metric, d: Dims) -> Sample {
        Sample::new(m, d, 1.0, SystemTime::UNIX_EPOCH)
    }

    fn job() -> Dims {
        Dims::new().with(JOB_ID, "1").with(USER, "u").with(ACCOUNT, "a").with(NODE_NAME, "n1")
    }

    fn shaped(shape: Shape, samples: Vec<Sample>) -> Vec<Vec<&'static str>> {
        let mut out = Vec::new();
        shape.apply(samples, &[], &mut out);
        out.iter().map(|s| s.dims.names().collect()).collect()
    }

    #[test]
    fn by_default_no_job_metric_and_host_figures_across_the_cluster() {
        let shape = Shape::CloudWatch {
            job_metrics: JobMetrics::Logs,
            per_node_job_dimensions: false,
            per_node_self_metrics: false,
        };
        let got = shaped(
            shape,
            vec![
                s(&MEMORY_RSS, job()),
                s(&SHIPPER_MEMORY_RSS, Dims::new().with(NODE_NAME, "n1")),
                s(&COLLECTOR_ERRORS, Dims::new().with(NODE_NAME, "n1").with(COLLECTOR, "cgroup")),
            ],
        );
        assert_eq!(got, vec![vec![], vec!["Collector"]]);
    }

    #[test]
    fn options_bring_back_per_job_and_per_node_series() {
        let shape = Shape::CloudWatch {
            job_metrics: JobMetrics::Both,
            per_node_job_dimensions: true,
            per_node_self_metrics: true,
        };
        let per_gpu = job().with(GPU, "0");
        let got = shaped(
            shape,
            vec![
                s(&MEMORY_RSS, job()),
                s(&GPU_UTILIZATION, per_gpu),
                s(&SHIPPER_MEMORY_RSS, Dims::new().with(NODE_NAME, "n1")),
            ],
        );
        assert_eq!(
            got,
            vec![
                vec!["Account", "JobId", "User"],
                vec!["Account", "JobId", "NodeName", "User"],
                vec!["Account", "Gpu", "JobId", "NodeName", "User"],
                vec![],
                vec!["NodeName"],
            ]
        );
    }
}
