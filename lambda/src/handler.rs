//! One invocation: derived rates, cluster utilisation and backlog, job rollups (every
//! `rollup_minutes`), notices, alarm upkeep. Everything it needs comes from CloudWatch, so the
//! function keeps no state between invocations.

use crate::alarms::{self, SyncReport, Target};
use crate::cluster;
use crate::config::Config;
use crate::cw::Cw;
use crate::jobs::{self, Finding};
use crate::notify;
use crate::rates;
use anyhow::Result;
use serde::Serialize;
use slurm_cw_sink::cloudwatch::retry::Backoff;
use slurm_cw_sink::cloudwatch::{CloudWatchSink, Settings};
use slurm_cw_sink::validate::Validator;
use std::time::{Duration, SystemTime};

/// Minutes between a minute and the invocation that derives it: shippers flush every minute at a
/// random offset, so a minute's data is complete two minutes later; one more for ingestion.
pub const DELAY_MINUTES: i64 = 3;

/// The AWS clients the function uses.
pub struct Clients {
    pub cloudwatch: aws_sdk_cloudwatch::Client,
    pub sns: aws_sdk_sns::Client,
    pub eventbridge: aws_sdk_eventbridge::Client,
}

impl Clients {
    pub async fn from_env() -> Clients {
        let sdk = aws_config::defaults(aws_config::BehaviorVersion::latest()).load().await;
        Clients {
            cloudwatch: aws_sdk_cloudwatch::Client::new(&sdk),
            sns: aws_sdk_sns::Client::new(&sdk),
            eventbridge: aws_sdk_eventbridge::Client::new(&sdk),
        }
    }
}

/// What an invocation did (the function's response, and a log line).
#[derive(Debug, Default, Serialize)]
pub struct Summary {
    /// The minute derived, RFC 3339.
    pub minute: String,
    pub datums_published: usize,
    pub datums_dropped: usize,
    pub rollup: bool,
    pub findings: Vec<Finding>,
    pub backlog_events: usize,
    pub alarms: SyncReport,
    pub get_metric_data_calls: u32,
    pub metrics_read: u32,
}

/// The minute (epoch seconds) an invocation at `now` derives.
pub fn minute_for(now: SystemTime) -> i64 {
    let secs = crate::cw::epoch(now);
    secs - secs.rem_euclid(60) - DELAY_MINUTES * 60
}

pub async fn handle(cfg: &Config, clients: &Clients, now: SystemTime) -> Result<Summary> {
    let at = minute_for(now);
    let mut cw = Cw::new(clients.cloudwatch.clone(), cfg.namespace.clone(), cfg.cluster_name.clone());
    let mut summary = Summary {
        minute: slurm_cw_sink::datum::format_timestamp(crate::cw::at_epoch(at)),
        ..Summary::default()
    };

    let mut datums = rates::rates(&mut cw, at).await?;
    let (mut derived, backlogs) = cluster::cluster(&mut cw, at).await?;
    datums.append(&mut derived);
    let rollup_now = (at / 60) % i64::from(cfg.rollup_minutes) == 0;
    if rollup_now {
        let (mut rolled, findings) = jobs::rollup(&mut cw, at, cfg.rollup_minutes, &cfg.thresholds).await?;
        datums.append(&mut rolled);
        summary.findings = findings;
        summary.rollup = true;
    }

    // Published with the shipper's validation and retries.
    let mut validator = Validator::new();
    summary.datums_dropped = validator.retain_valid(&mut datums, SystemTime::now()).len();
    let sink_settings = Settings {
        namespace: cfg.namespace.clone(),
        region: None,
        endpoint: None,
        backoff: Backoff { base: Duration::from_millis(200), cap: Duration::from_secs(5), max_retries: 4 },
        attempt_timeout: Duration::from_secs(10),
        storage_resolution: 60,
    };
    // The sink retries on its own (counted, with jitter); the SDK's retries are off for it.
    let no_retries = clients
        .cloudwatch
        .config()
        .to_builder()
        .retry_config(aws_sdk_cloudwatch::config::retry::RetryConfig::disabled())
        .build();
    let mut sink =
        CloudWatchSink::from_client(aws_sdk_cloudwatch::Client::from_conf(no_retries), sink_settings);
    let outcome = sink.put(datums).await;
    summary.datums_published = outcome.sent;
    summary.datums_dropped += outcome.rejected.len();
    if !outcome.undelivered.is_empty() {
        anyhow::bail!(
            "{} derived datums not delivered: {}",
            outcome.undelivered.len(),
            outcome.last_error.unwrap_or_default()
        );
    }

    let changed: Vec<&cluster::Backlog> =
        backlogs.iter().filter(|b| cluster::changed(b, cfg.thresholds.backlog_change_nodes)).collect();
    if !changed.is_empty() {
        notify::backlog_events(&clients.eventbridge, &cfg.event_bus, &cfg.cluster_name, &changed).await?;
        summary.backlog_events = changed.len();
    }
    if let (Some(topic), false) = (&cfg.sns_topic_arn, summary.findings.is_empty()) {
        let (subject, body) = notify::notice(&cfg.cluster_name, &summary.findings);
        notify::publish(&clients.sns, topic, &subject, &body).await?;
    }

    let prefix = cfg.alarm_prefix();
    let target = Target {
        namespace: &cfg.namespace,
        cluster: &cfg.cluster_name,
        prefix: &prefix,
        topic: cfg.sns_topic_arn.as_deref(),
    };
    summary.alarms = alarms::sync(&clients.cloudwatch, &cfg.rules, &target).await?;
    summary.get_metric_data_calls = cw.calls;
    summary.metrics_read = cw.queries;
    Ok(summary)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_minute_derived_lags_the_invocation() {
        let now = crate::cw::at_epoch(1_800_000_000 + 45);
        assert_eq!(minute_for(now), (1_800_000_000 - 180));
        assert_eq!(minute_for(now) % 60, 0);
    }
}
