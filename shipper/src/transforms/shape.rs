//! Which series a destination takes, and with which dimensions. Collectors state facts with
//! every dimension they know (a host figure names its node) and put each job's figures in its
//! typed reading; each destination's shape ([`crate::sinks::Component::shape`]) decides what
//! it takes:
//!
//! - [`Shape::CloudWatch`], where every series is a custom metric billed by the hour: per-job
//!   metrics only when `node.job_metrics` asks for them (the job records carry them anyway),
//!   per-node detail only when asked, host figures across the cluster by default, the
//!   shipper's own figures no view reads only when `self_metrics = "all"`;
//! - [`Shape::Open`], for destinations billed by the byte or not at all (see each one's `shape`):
//!   every series as the collectors state it, a job's labelled with its node and partition.
//!
//! [`Shape::apply`] shapes the samples (host, cluster and shipper figures);
//! [`super::job_series`] makes the jobs' series out of their readings in the same shape.

use crate::sample::Sample;
use serde::Deserialize;
use slurm_cw_catalog::dims::{CLUSTER_NAME, NODE_NAME};

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
        /// `self_metrics = "all"`: the shipper's own figures no view reads too
        /// ([`slurm_cw_catalog::views::self_detail`]).
        all_self_metrics: bool,
    },
    Open,
}

impl Shape {
    /// The samples that go on to this destination's aggregator (the jobs' series: see
    /// [`super::job_series`]).
    pub fn apply(&self, samples: Vec<Sample>, out: &mut Vec<Sample>) {
        match *self {
            Shape::CloudWatch { per_node_self_metrics, all_self_metrics, .. } => {
                let read = |s: &Sample| all_self_metrics || !slurm_cw_catalog::views::self_detail(s.metric);
                cloudwatch(samples.into_iter().filter(read), per_node_self_metrics, out)
            }
            Shape::Open => out.extend(samples),
        }
    }
}

/// Host figures across the cluster, and per node too when asked; a figure whose metric has no
/// dimension set without the node keeps it.
fn cloudwatch(samples: impl Iterator<Item = Sample>, per_node_self_metrics: bool, out: &mut Vec<Sample>) {
    for s in samples {
        if s.dims.get(NODE_NAME).is_none() {
            out.push(s);
            continue;
        }
        let stripped = s.dims.without(NODE_NAME);
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
    use crate::sample::Dims;
    use slurm_cw_catalog::dims::COLLECTOR;
    use slurm_cw_catalog::metrics::{COLLECTOR_ERRORS, SHIPPER_MEMORY_RSS};
    use std::time::SystemTime;

    fn s(m: &'static slurm_cw_catalog::Metric, d: Dims) -> Sample {
        Sample::new(m, d, 1.0, SystemTime::UNIX_EPOCH)
    }

    fn shaped(shape: Shape, samples: Vec<Sample>) -> Vec<Vec<&'static str>> {
        let mut out = Vec::new();
        shape.apply(samples, &mut out);
        out.iter().map(|s| s.dims.names().collect()).collect()
    }

    #[test]
    fn by_default_host_figures_across_the_cluster() {
        let shape = Shape::CloudWatch {
            job_metrics: JobMetrics::Logs,
            per_node_job_dimensions: false,
            per_node_self_metrics: false,
            all_self_metrics: false,
        };
        let got = shaped(
            shape,
            vec![
                s(&SHIPPER_MEMORY_RSS, Dims::new().with(NODE_NAME, "n1")),
                s(&COLLECTOR_ERRORS, Dims::new().with(NODE_NAME, "n1").with(COLLECTOR, "cgroup")),
            ],
        );
        assert_eq!(got, vec![vec![], vec!["Collector"]]);
        let sent = s(&slurm_cw_catalog::metrics::SHIPPER_BYTES_SENT, Dims::new().with(NODE_NAME, "n1"));
        assert!(shaped(shape, vec![sent]).is_empty(), "no view reads it (self_metrics = \"read\")");
    }

    #[test]
    fn an_option_brings_back_per_node_series() {
        let shape = Shape::CloudWatch {
            job_metrics: JobMetrics::Both,
            per_node_job_dimensions: true,
            per_node_self_metrics: true,
            all_self_metrics: true,
        };
        let got = shaped(shape, vec![s(&SHIPPER_MEMORY_RSS, Dims::new().with(NODE_NAME, "n1"))]);
        assert_eq!(got, vec![vec![], vec!["NodeName"]]);
        let open = shaped(Shape::Open, vec![s(&SHIPPER_MEMORY_RSS, Dims::new().with(NODE_NAME, "n1"))]);
        assert_eq!(open, vec![vec!["NodeName"]]);
    }
}
