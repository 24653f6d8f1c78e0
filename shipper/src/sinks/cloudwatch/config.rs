//! `[cloudwatch]`: the PutMetricData client's settings (region, endpoint, resolution, retries).

use crate::config::docs::Shown::{Unset, Value};
use crate::config::docs::{Key, key};
use crate::config::{ConfigError, duration, opt_string};
use crate::sinks::config::DeliveryConfig;
use serde::Deserialize;
use std::time::Duration;

/// This section's lines of the configuration table (docs/configuration.md) ([`crate::settings::docs`]).
#[rustfmt::skip]
pub const KEYS: &[Key] = &[
    key("cloudwatch.region", Unset("AWS_REGION, profile, or instance metadata"), "AWS region"),
    key("cloudwatch.endpoint", Unset("the SDK's"), "endpoint URL (`AWS_ENDPOINT_URL_CLOUDWATCH` and `AWS_ENDPOINT_URL` work too)"),
    key("cloudwatch.storage_resolution", Value("60"), "`60` or `1` (high resolution)"),
    key("cloudwatch.max_retries", Value("6"), "retries of one request after throttling, 5xx or network errors"),
    key("cloudwatch.retry_base_delay", Value("\"500ms\""), "backoff ceiling of the first retry; doubles per retry, full jitter"),
    key("cloudwatch.retry_max_delay", Value("\"20s\""), "largest backoff ceiling"),
    key("cloudwatch.attempt_timeout", Value("\"10s\""), "limit of one HTTP attempt"),
];

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
        let err = |key: &str, why: &str| Err(ConfigError::invalid(format!("cloudwatch.{key}"), why));
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
