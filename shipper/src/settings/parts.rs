//! What each part of the daemon is given out of the settings: the pipeline its options, the
//! loop its schedule, the destinations their shared context (each its own section through the
//! registry, [`crate::sinks::REGISTRY`]), the collectors theirs through their table
//! ([`crate::sources::table`]).

use super::{SelfMetrics, Settings};
use crate::daemon::Schedule;
use crate::pipeline::Options;
use crate::role::Role;
use crate::sinks::{Context, records_for};
use crate::transforms::shape::Shape;
use std::path::Path;

impl Settings {
    /// The series a destination billed per series takes: per-job series only where
    /// `node.job_metrics` asks, per-node detail only where asked.
    pub fn per_series_shape(&self) -> Shape {
        Shape::CloudWatch {
            job_metrics: self.node.job_metrics,
            per_node_job_dimensions: self.node.per_node_dimensions,
            per_node_self_metrics: self.self_metrics_per_node,
            all_self_metrics: self.self_metrics == SelfMetrics::All,
        }
    }

    /// Whether `role` writes records to the job log group: a node its job records
    /// (`node.job_metrics`), the head always its `scheduler_sample` records (the dashboard's
    /// *Scheduler* row reads them).
    pub fn writes_records(&self, role: Role) -> bool {
        (role.runs_node() && self.node.job_metrics.records()) || role.runs_head()
    }

    /// The pipeline's options.
    pub fn pipeline(&self) -> Options {
        Options {
            flush_interval: self.flush_interval,
            findings: self.node.findings.clone(),
            per_partition: self.head.per_partition,
            scheduler_records: self.head.scheduler_records(),
            population_per_user: self.node.population_per_user,
            node_per_partition: self.node.per_partition,
            node_per_account: self.node.per_account,
            exclude_metrics: self.exclude_metrics.clone(),
            per_series: self.per_series_shape(),
        }
    }

    /// The daemon loop's schedule for `role` (the hook is served where the node role runs).
    pub fn schedule(&self, role: Role) -> Schedule {
        Schedule {
            collect_interval: self.collect_interval,
            flush_interval: self.flush_interval,
            flush_jitter: self.delivery.flush_jitter,
            replay_rate: self.spool.replay_rate,
            hook_socket: role.runs_node().then(|| self.node.hook_socket.clone()),
        }
    }

    /// What every destination is built from besides its own section.
    pub fn sink_context<'a>(
        &'a self,
        cluster: &'a str,
        namespace: &'a str,
        node: &'a str,
        slurm_conf: Option<&'a Path>,
    ) -> Context<'a> {
        Context {
            cluster,
            namespace,
            node,
            aws: &self.cloudwatch,
            logs: &self.logs,
            flush_interval: self.flush_interval,
            slurm_conf,
            records: records_for(&self.sink),
        }
    }
}

impl Default for Options {
    /// The default settings' (tests, benches).
    fn default() -> Self {
        Settings::default().pipeline()
    }
}
