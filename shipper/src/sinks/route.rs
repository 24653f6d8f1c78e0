//! One destination's pieces, built from the configuration: the sink (CloudWatch, CloudWatch
//! Logs or standard output), its spool directory, its intake and its delivery.

use crate::config::{Config, SinkKind};
use crate::sinks::cloudwatch::{CloudWatchSink, Settings, retry::Backoff};
use crate::sinks::delivery::{Delivery, Destination, Intake, SharedSpool, StatsHandle};
use crate::sinks::logs::LogsSink;
use crate::sinks::spool::Spool;
use crate::sinks::stdout::StdoutSink;
use crate::sinks::validate::DropReason;
use crate::sinks::{MetricSink, RecordSink};
use slurm_cw_formats::spool::Item;
use slurm_cw_sink::aws::NoCaCertificates;
use std::path::Path;
use std::sync::{Arc, Mutex};

/// One destination's intake, spool and delivery, and the counts of what they did.
pub struct Route<D: Destination> {
    pub intake: Intake<D::Item>,
    pub delivery: Delivery<D>,
    pub stats: StatsHandle,
    pub spool: Option<SharedSpool<D::Item>>,
}

impl<D: Destination> Route<D> {
    /// `dir`: this destination's spool directory (used when the sink is CloudWatch's and the
    /// spool is enabled).
    pub fn open(config: &Config, label: &str, dir: std::path::PathBuf, sink: D) -> Self {
        let stats = StatsHandle::default();
        let spool = if config.sink == SinkKind::Cloudwatch && config.spool.enabled {
            open_spool(&dir, config.spool.max_bytes, &stats)
        } else {
            None
        };
        let intake = Intake::new(label, spool.clone(), stats.clone());
        let delivery = Delivery::new(sink, spool.clone(), config.delivery.max_backlog, stats.clone());
        Route { intake, delivery, stats, spool }
    }
}

/// A disk spool. When it cannot be opened the shipper runs on without it (one error line;
/// undelivered data then waits in memory).
pub fn open_spool<T: Item>(dir: &Path, max_bytes: u64, stats: &StatsHandle) -> Option<SharedSpool<T>> {
    match Spool::open(dir, max_bytes) {
        Ok((spool, dropped)) => {
            if dropped.corrupt_files > 0 {
                tracing::warn!(
                    dir = %dir.display(),
                    files = dropped.corrupt_files,
                    items = dropped.corrupt_datums,
                    "removed torn spool files of an earlier crash"
                );
            }
            stats.count_drop(DropReason::SpoolCorrupt, dropped.corrupt_datums);
            if !spool.is_empty() {
                tracing::info!(
                    dir = %dir.display(),
                    files = spool.files(),
                    bytes = spool.bytes(),
                    "spooled data from an earlier run will be sent first"
                );
            }
            Some(Arc::new(Mutex::new(spool)))
        }
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
            tracing::warn!(error = %e, "the spool is another process's: this one keeps undelivered data in memory");
            None
        }
        Err(e) => {
            tracing::error!(dir = %dir.display(), error = %e, "cannot use the spool; undelivered data will wait in memory");
            None
        }
    }
}

/// The metric sink; `namespace` is [`Config::namespace_for`]'s. Fails when there is no CA
/// certificate to reach AWS with.
pub async fn build_sink(config: &Config, namespace: &str) -> Result<MetricSink, NoCaCertificates> {
    Ok(match config.sink {
        SinkKind::Stdout => MetricSink::Stdout(StdoutSink::new(namespace)),
        SinkKind::Cloudwatch => {
            MetricSink::CloudWatch(CloudWatchSink::new(cloudwatch_settings(config, namespace)).await?)
        }
    })
}

pub async fn build_record_sink(
    config: &Config,
    group: &str,
    node: &str,
) -> Result<RecordSink, NoCaCertificates> {
    Ok(match config.sink {
        SinkKind::Stdout => RecordSink::Stdout(StdoutSink::new(group)),
        SinkKind::Cloudwatch => RecordSink::Logs(LogsSink::new(logs_settings(config, group, node)).await?),
    })
}

pub fn logs_settings(config: &Config, group: &str, node: &str) -> crate::sinks::logs::Settings {
    let cw = &config.cloudwatch;
    crate::sinks::logs::Settings {
        group: group.to_owned(),
        stream: config.logs.stream.clone().unwrap_or_else(|| node.to_owned()),
        region: cw.region.clone(),
        endpoint: config.logs.endpoint.clone(),
        backoff: backoff(cw),
        attempt_timeout: cw.attempt_timeout,
    }
}

pub fn cloudwatch_settings(config: &Config, namespace: &str) -> Settings {
    let cw = &config.cloudwatch;
    Settings {
        namespace: namespace.to_owned(),
        region: cw.region.clone(),
        endpoint: cw.endpoint.clone(),
        backoff: backoff(cw),
        attempt_timeout: cw.attempt_timeout,
        storage_resolution: cw.storage_resolution,
    }
}

fn backoff(cw: &crate::config::CloudWatchConfig) -> Backoff {
    Backoff { base: cw.retry_base_delay, cap: cw.retry_max_delay, max_retries: cw.max_retries }
}
