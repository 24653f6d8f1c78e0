//! What a destination is to the rest of the daemon: one [`Component`] value in its folder's
//! `mod.rs`, listed once in [`super::REGISTRY`]. The app, `--check`, the pipeline and the
//! self-metrics ask it, never its name.

use super::{Context, MetricSink};
use crate::check::Row;
use crate::config::Config;
use crate::transforms::shape::Shape;

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

/// Why a destination could not be built: the process exits 1 with it.
#[derive(Debug, thiserror::Error)]
#[error("{sink}: {why}")]
pub struct BuildError {
    pub sink: &'static str,
    pub why: String,
}

impl BuildError {
    pub fn new(sink: &'static str, why: impl std::fmt::Display) -> Self {
        BuildError { sink, why: why.to_string() }
    }
}

/// One destination: its name in `sink` and `--sink`, how it is built, what it takes.
#[async_trait::async_trait]
pub trait Component: Sync {
    /// Its name in the configuration, on the command line and in the `Sink` dimension.
    fn name(&self) -> &'static str;
    /// Which series it takes (the open shape unless it bills per series).
    fn shape(&self, _config: &Config) -> Shape {
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
    fn keys(&self) -> &'static [crate::config::docs::Key] {
        &[]
    }
    async fn build(&self, ctx: &Context<'_>) -> Result<MetricSink, BuildError>;
    /// Its own `--check` rows, when it is named.
    async fn check(&self, _config: &Config) -> Vec<Row> {
        Vec::new()
    }
}
