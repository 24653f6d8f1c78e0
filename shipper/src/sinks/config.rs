//! The destinations' sections: `[delivery]` (how flushes leave the node, whatever the
//! destination), `[spool]` (the disk copy of every flush), `[cloudwatch]` (the PutMetricData
//! client) and `[logs]` (where job records go).

use crate::config::{ConfigError, duration, opt_string};
use serde::Deserialize;
use std::path::PathBuf;
use std::time::Duration;

/// `[delivery]`: how flushes leave the node, for every destination.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DeliveryConfig {
    /// Start flushing at a random offset within the flush interval, so a fleet of nodes
    /// does not call the API in the same second.
    pub flush_jitter: bool,
    /// Undelivered items kept in memory per destination when the spool cannot take them (disk
    /// full, no spool).
    pub max_backlog: usize,
}

impl Default for DeliveryConfig {
    fn default() -> Self {
        DeliveryConfig { flush_jitter: true, max_backlog: 50_000 }
    }
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SpoolConfig {
    /// Write every flush to disk before sending it, and keep it there until CloudWatch took it.
    pub enabled: bool,
    pub dir: PathBuf,
    /// The spool's size limit; beyond it the oldest flushes are dropped (and counted).
    pub max_bytes: u64,
    /// Requests per second when sending a backlog, so a fleet catching up after an outage does
    /// not throttle itself.
    pub replay_rate: f64,
}

impl Default for SpoolConfig {
    fn default() -> Self {
        SpoolConfig {
            enabled: true,
            dir: PathBuf::from("/var/lib/slurm-cw-shipper/spool"),
            max_bytes: 256 << 20,
            replay_rate: 2.0,
        }
    }
}

impl SpoolConfig {
    /// The `[spool]` keys' values.
    pub fn check(&self) -> Result<(), ConfigError> {
        if !(self.replay_rate > 0.0 && self.replay_rate <= 100.0) {
            return Err(ConfigError(
                "spool.replay_rate: must be above 0 and at most 100 requests per second".into(),
            ));
        }
        if self.max_bytes < 1 << 20 {
            return Err(ConfigError("spool.max_bytes: must be at least 1 MiB".into()));
        }
        Ok(())
    }
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CloudWatchConfig {
    /// AWS region; from AWS_REGION, the AWS profile or the instance metadata when not set.
    #[serde(deserialize_with = "opt_string")]
    pub region: Option<String>,
    /// Endpoint URL (a VPC endpoint, say); AWS_ENDPOINT_URL_CLOUDWATCH and AWS_ENDPOINT_URL also
    /// work, as in every AWS SDK.
    #[serde(deserialize_with = "opt_string")]
    pub endpoint: Option<String>,
    /// 60 (standard) or 1 (high resolution).
    pub storage_resolution: i32,
    /// Retries of one request after throttling, 5xx or network errors.
    pub max_retries: u32,
    /// First backoff ceiling; doubles per retry up to `retry_max_delay`, full jitter.
    #[serde(deserialize_with = "duration")]
    pub retry_base_delay: Duration,
    #[serde(deserialize_with = "duration")]
    pub retry_max_delay: Duration,
    /// Limit of one HTTP attempt.
    #[serde(deserialize_with = "duration")]
    pub attempt_timeout: Duration,
    /// Old place of `delivery.flush_jitter` (still read, with a warning).
    pub flush_jitter: Option<bool>,
    /// Old place of `delivery.max_backlog` (still read, with a warning).
    pub max_backlog: Option<usize>,
}

impl Default for CloudWatchConfig {
    fn default() -> Self {
        CloudWatchConfig {
            region: None,
            endpoint: None,
            storage_resolution: 60,
            max_retries: 6,
            retry_base_delay: Duration::from_millis(500),
            retry_max_delay: Duration::from_secs(20),
            attempt_timeout: Duration::from_secs(10),
            flush_jitter: None,
            max_backlog: None,
        }
    }
}

impl CloudWatchConfig {
    /// The `[cloudwatch]` keys' values.
    pub fn check(&self) -> Result<(), ConfigError> {
        let err = |key: &str, why: &str| Err(ConfigError(format!("cloudwatch.{key}: {why}")));
        if ![1, 60].contains(&self.storage_resolution) {
            return err("storage_resolution", "must be 1 or 60");
        }
        if self.retry_base_delay.is_zero() || self.retry_max_delay < self.retry_base_delay {
            return err(
                "retry_max_delay",
                "retry_base_delay must be > 0 and retry_max_delay >= retry_base_delay",
            );
        }
        if self.attempt_timeout < Duration::from_millis(100) {
            return err("attempt_timeout", "must be at least 100ms");
        }
        Ok(())
    }

    /// Moves the keys that used to live here (they are not CloudWatch's) to `[delivery]`; a note
    /// for each one found. A key set in `[delivery]` too wins there.
    pub fn move_delivery_keys(&mut self, delivery: &mut DeliveryConfig) -> Vec<String> {
        let mut notes = Vec::new();
        let default = DeliveryConfig::default();
        if let Some(v) = self.flush_jitter.take() {
            if delivery.flush_jitter == default.flush_jitter {
                delivery.flush_jitter = v;
            }
            notes.push("cloudwatch.flush_jitter is now delivery.flush_jitter".to_owned());
        }
        if let Some(v) = self.max_backlog.take() {
            if delivery.max_backlog == default.max_backlog {
                delivery.max_backlog = v;
            }
            notes.push("cloudwatch.max_backlog is now delivery.max_backlog".to_owned());
        }
        notes
    }
}

/// `[logs]`: where job records go (CloudWatch Logs). Region, retries and timeouts are those of
/// `[cloudwatch]`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LogsConfig {
    /// The log group; `/slurm-cw/<cluster>/jobs` when not set (the Terraform module creates it).
    #[serde(deserialize_with = "opt_string")]
    pub group: Option<String>,
    /// This node's log stream; the node name when not set.
    #[serde(deserialize_with = "opt_string")]
    pub stream: Option<String>,
    /// Endpoint URL; AWS_ENDPOINT_URL_CLOUDWATCH_LOGS and AWS_ENDPOINT_URL also work.
    #[serde(deserialize_with = "opt_string")]
    pub endpoint: Option<String>,
    /// `report` shows a non-root caller other users' jobs too (see report::access).
    pub report_all_users: bool,
}

impl LogsConfig {
    pub fn group_for(&self, cluster: &str) -> String {
        self.group.clone().unwrap_or_else(|| format!("/slurm-cw/{cluster}/jobs"))
    }
}

impl LogsConfig {
    /// The `[logs]` keys' values.
    pub fn check(&self) -> Result<(), ConfigError> {
        if let Some(g) = &self.group
            && (g.is_empty()
                || g.len() > 512
                || !g.chars().all(|c| c.is_ascii_alphanumeric() || "_-/.#".contains(c)))
        {
            return Err(ConfigError(
                "logs.group: must be 1 to 512 characters of letters, digits and _ - / . #".into(),
            ));
        }
        if let Some(s) = &self.stream
            && (s.is_empty() || s.len() > 512 || s.contains(':') || s.contains('*'))
        {
            return Err(ConfigError("logs.stream: must be 1 to 512 characters without ':' or '*'".into()));
        }
        Ok(())
    }
}
