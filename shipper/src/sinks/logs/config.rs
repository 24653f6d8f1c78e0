//! `[logs]`: where job records go (CloudWatch Logs).

use crate::config::{ConfigError, opt_string};
use serde::Deserialize;

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
        check_group("logs.group", self.group.as_deref())?;
        check_stream("logs.stream", self.stream.as_deref())
    }
}

/// A log group name as CloudWatch Logs takes it, where one is set.
pub fn check_group(key: &str, group: Option<&str>) -> Result<(), ConfigError> {
    match group {
        Some(g)
            if g.is_empty()
                || g.len() > 512
                || !g.chars().all(|c| c.is_ascii_alphanumeric() || "_-/.#".contains(c)) =>
        {
            Err(ConfigError::invalid(key, "must be 1 to 512 characters of letters, digits and _ - / . #"))
        }
        _ => Ok(()),
    }
}

/// A log stream name as CloudWatch Logs takes it, where one is set.
pub fn check_stream(key: &str, stream: Option<&str>) -> Result<(), ConfigError> {
    match stream {
        Some(s) if s.is_empty() || s.len() > 512 || s.contains(':') || s.contains('*') => {
            Err(ConfigError::invalid(key, "must be 1 to 512 characters without ':' or '*'"))
        }
        _ => Ok(()),
    }
}
