//! `[head]` (what the head collector ships) and `[slurm]` (where the Slurm commands are and how
//! long each may take, for both roles).

use crate::config::{ConfigError, Toggle, duration};
use serde::Deserialize;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SlurmConfig {
    /// slurm.conf; searched in $SLURM_CONF, /opt/slurm/etc, /etc/slurm, /etc/slurm-llnl when not set.
    pub conf: Option<PathBuf>,
    /// Directory of sinfo, squeue and sdiag; $PATH then /opt/slurm/bin when not set.
    pub bin_dir: Option<PathBuf>,
    /// Limit for each Slurm command.
    #[serde(deserialize_with = "duration")]
    pub command_timeout: Duration,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HeadConfig {
    /// Publish node, capacity and job figures per partition as well as for the cluster: `auto`
    /// where the cluster has more than one partition (one partition's copies repeat the
    /// cluster's figures, each a billed metric), `on` always, `off` never.
    #[serde(deserialize_with = "crate::config::de::toggle")]
    pub per_partition: Toggle,
    /// Pending reasons shipped by name per partition; the rest are summed as Other.
    pub top_pending_reasons: usize,
    /// RPC message types shipped by name (by count); the rest are left out.
    pub top_rpc_types: usize,
    /// Where slurmctld's figures no view reads go: the head's `scheduler_sample` record, or
    /// metrics.
    pub scheduler_detail: SchedulerDetail,
    /// Where node figures come from: slurmctld's OpenMetrics endpoint or sinfo.
    pub source: HeadSource,
    /// The endpoint's base URL (`http://host:port`); from slurm.conf when not set.
    pub metrics_url: Option<String>,
    /// A file holding a JWT for the endpoint (Slurm 26.05 `MetricsAuthUsers`).
    pub metrics_token_file: Option<PathBuf>,
    /// A `MetricsAuthUsers` user whose short-lived token `scontrol token username=` makes.
    pub metrics_token_user: Option<String>,
}

/// `head.scheduler_detail`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SchedulerDetail {
    /// One `scheduler_sample` record a flush, where job records go somewhere (else metrics).
    Records,
    /// Custom metrics, as the figures the views read.
    Metrics,
}

/// `head.source`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HeadSource {
    /// The endpoint where this Slurm (25.11+) has it on and it answers, else the commands.
    Auto,
    /// The endpoint; the commands only while it fails.
    Openmetrics,
    /// sinfo, squeue and sdiag only.
    Commands,
}

impl HeadSource {
    pub fn as_str(self) -> &'static str {
        match self {
            HeadSource::Auto => "auto",
            HeadSource::Openmetrics => "openmetrics",
            HeadSource::Commands => "commands",
        }
    }
}

impl Default for SlurmConfig {
    fn default() -> Self {
        SlurmConfig { conf: None, bin_dir: None, command_timeout: Duration::from_secs(20) }
    }
}

impl HeadConfig {
    /// Whether the collectors read each partition's figures: unless `off` (with `auto` the
    /// head's transforms drop one partition's copies, after deriving its backlog from them).
    pub fn reads_partitions(&self) -> bool {
        self.per_partition != Toggle::Off
    }

    /// Whether the scheduler figures no view reads go as a `scheduler_sample` record.
    pub fn scheduler_records(&self) -> bool {
        self.scheduler_detail == SchedulerDetail::Records
    }
}

impl Default for HeadConfig {
    fn default() -> Self {
        HeadConfig {
            per_partition: Toggle::Auto,
            top_pending_reasons: 10,
            top_rpc_types: 5,
            scheduler_detail: SchedulerDetail::Records,
            source: HeadSource::Auto,
            metrics_url: None,
            metrics_token_file: None,
            metrics_token_user: None,
        }
    }
}

impl HeadConfig {
    /// The `[head]` keys' values.
    pub fn check(&self) -> Result<(), ConfigError> {
        if let Some(u) = &self.metrics_token_user {
            let plain = !u.is_empty()
                && u.len() <= 64
                && u.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
            if !plain || u == "root" {
                return Err(ConfigError::invalid(
                    "head.metrics_token_user",
                    format!(
                        "{u:?} must be a plain user name, not root (its token goes to the endpoint in clear text)"
                    ),
                ));
            }
        }
        Ok(())
    }
}

impl HeadConfig {
    /// What slurm.conf's `entries` rule out: its SlurmUser (root when unset) as
    /// `head.metrics_token_user`. That user's token is good for every Slurm RPC, and it goes in
    /// clear text to whatever answers on the endpoint's port.
    pub fn check_with_slurm_conf(&self, entries: &[(String, String)]) -> Result<(), ConfigError> {
        let Some(user) = &self.metrics_token_user else { return Ok(()) };
        let slurm_user = crate::slurm_conf::value(entries, "SlurmUser").unwrap_or_else(|| "root".into());
        if *user == slurm_user {
            return Err(ConfigError::invalid(
                "head.metrics_token_user",
                format!(
                    "{user:?} is slurm.conf's SlurmUser, whose token is good for \
                 every Slurm RPC and would go to the endpoint in clear text; name a user of \
                 MetricsAuthUsers with no other rights"
                ),
            ));
        }
        Ok(())
    }
}

impl SlurmConfig {
    /// The `[slurm]` keys' values.
    pub fn check(&self) -> Result<(), ConfigError> {
        if self.command_timeout < Duration::from_millis(100) {
            return Err(ConfigError::invalid("slurm.command_timeout", "must be at least 100ms"));
        }
        Ok(())
    }

    /// The Slurm commands these keys say how to run.
    pub fn commands(&self) -> super::command::SlurmCommands {
        super::command::SlurmCommands::new(self.bin_dir.clone(), self.command_timeout)
    }
}

#[cfg(test)]
mod tests {
    use super::HeadConfig;

    #[test]
    fn slurm_conf_s_slurm_user_is_never_the_token_user() {
        let conf = |text: &str| -> Vec<(String, String)> {
            text.lines().filter_map(|l| l.split_once('=')).map(|(k, v)| (k.into(), v.into())).collect()
        };
        let head = |user: &str| HeadConfig { metrics_token_user: Some(user.into()), ..HeadConfig::default() };
        let slurm = conf("ClusterName=c\nSlurmUser=slurm");
        let e = head("slurm").check_with_slurm_conf(&slurm).unwrap_err();
        assert!(
            e.to_string().starts_with("head.metrics_token_user: \"slurm\" is slurm.conf's SlurmUser"),
            "{}",
            e.to_string()
        );
        assert!(
            head("SLURM").check_with_slurm_conf(&conf("slurmuser=SLURM")).is_err(),
            "the key in any case"
        );
        assert!(head("slurm-metrics").check_with_slurm_conf(&slurm).is_ok());
        assert!(HeadConfig::default().check_with_slurm_conf(&slurm).is_ok());
    }
}
