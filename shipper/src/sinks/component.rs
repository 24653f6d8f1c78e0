//! What a destination is to the rest of the daemon: one [`Component`] value in its folder's
//! `mod.rs`, listed once in [`super::REGISTRY`] with the section of the settings it is given.
//! The app, `--check`, the pipeline and the self-metrics ask it, never its name.

use super::MetricSink;
use super::cloudwatch::config::CloudWatchConfig;
use super::logs::config::LogsConfig;
use crate::check::Row;
use crate::config::docs::Key;
use crate::transforms::shape::Shape;
use std::path::Path;
use std::time::Duration;

/// Where a destination's undelivered flushes wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Spool {
    /// Nowhere: a pull endpoint has nothing to send again.
    None,
    /// In `spool.dir` itself (CloudWatch's, as before there were other destinations).
    Root,
    /// In a directory of the destination's name in `spool.dir`.
    Own,
}

/// Where job records go when this destination is named.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Records {
    /// Not with this destination.
    None,
    /// Standard output, beside the datums.
    Stdout,
    /// CloudWatch Logs, spooled in `spool.dir/logs` (preferred when several say so).
    Logs,
}

/// Why a destination could not be built: the process exits 1 with it (2 for a setting to mend).
#[derive(Debug, thiserror::Error)]
#[error("{sink}: {why}")]
pub struct BuildError {
    pub sink: &'static str,
    pub why: String,
    /// A setting to mend (exit 2), not a failure of the moment.
    pub bad_config: bool,
}

impl BuildError {
    pub fn new(sink: &'static str, why: impl std::fmt::Display) -> Self {
        BuildError { sink, why: why.to_string(), bad_config: false }
    }

    /// A destination that cannot be built as configured.
    pub fn config(sink: &'static str, why: impl std::fmt::Display) -> Self {
        BuildError { bad_config: true, ..BuildError::new(sink, why) }
    }
}

/// What every destination is built from besides its own section: where this host is, and the
/// keys destinations share. Made once by the app (and by `--check`, with what it can resolve).
pub struct Context<'a> {
    /// The `ClusterName` dimension (empty in `--check` where it cannot be resolved).
    pub cluster: &'a str,
    pub namespace: &'a str,
    /// The `NodeName` dimension, and the default log stream.
    pub node: &'a str,
    /// Region, endpoint, retries and time limits of the AWS clients (`cloudwatch.*`), which
    /// every destination that calls AWS shares.
    pub aws: &'a CloudWatchConfig,
    /// CloudWatch Logs' keys (`logs.*`: its endpoint), which destinations writing there share.
    pub logs: &'a LogsConfig,
    pub flush_interval: Duration,
    /// The slurm.conf this host reads.
    pub slurm_conf: Option<&'a Path>,
    /// Where job records go with the destinations named.
    pub records: Records,
}

/// One destination: its name in `sink` and `--sink`, its section of the settings, how it is
/// built, what it takes. It is given its own section, never the whole.
#[async_trait::async_trait]
pub trait Component: Sync {
    /// Its section of the settings (`()` where it has none).
    type Section: Sync;
    /// Its name in the configuration, on the command line and in the `Sink` dimension.
    fn name(&self) -> &'static str;
    /// Which series it takes: `per_series` (the settings' trim of what is billed per series)
    /// where it bills per series or stands in for a destination that does, else the open shape.
    fn shape(&self, _per_series: Shape) -> Shape {
        Shape::Open
    }
    fn spool(&self) -> Spool {
        Spool::None
    }
    fn records(&self) -> Records {
        Records::None
    }
    /// Whether it needs AWS credentials (`--check`'s aws rows).
    fn uses_aws(&self) -> bool {
        false
    }
    /// Whether its self-metrics are the plain series (no `Sink` dimension): CloudWatch's and
    /// standard output's, as before there were other destinations.
    fn plain_self_metrics(&self) -> bool {
        false
    }
    /// Its section's lines of the configuration table (docs/configuration.md).
    fn keys(&self) -> &'static [Key] {
        &[]
    }
    async fn build(&self, section: &Self::Section, cx: &Context<'_>) -> Result<MetricSink, BuildError>;
    /// Its own `--check` rows, when it is named.
    async fn check(&self, _section: &Self::Section, _cx: &Context<'_>) -> Vec<Row> {
        Vec::new()
    }
}
