//! `[emf]`: where the embedded-metric-format events go (a log group of their own).

use crate::config::docs::Shown::Unset;
use crate::config::docs::{Key, key};
use crate::config::{ConfigError, opt_string};
use serde::Deserialize;

/// This section's lines of the configuration table (docs/configuration.md) ([`crate::settings::docs`]).
#[rustfmt::skip]
pub const KEYS: &[Key] = &[
    key("emf.log_group", Unset("`/slurm-cw/<cluster>/metrics`"), "the log group of the `emf` destination's events (the Terraform module creates it, kept a day: CloudWatch takes the metrics out as the events arrive); region, endpoint (`logs.endpoint`), retries and resolution are `cloudwatch.*`'s"),
    key("emf.log_stream", Unset("the node name"), "this node's stream in it"),
];

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EmfConfig {
    /// The log group; `/slurm-cw/<cluster>/metrics` when not set.
    #[serde(deserialize_with = "opt_string")]
    pub log_group: Option<String>,
    /// This node's stream; the node name when not set.
    #[serde(deserialize_with = "opt_string")]
    pub log_stream: Option<String>,
}

impl EmfConfig {
    pub fn group_for(&self, cluster: &str) -> String {
        self.log_group.clone().unwrap_or_else(|| format!("/slurm-cw/{cluster}/metrics"))
    }

    /// The `[emf]` keys' values: CloudWatch Logs' rules for names.
    pub fn check(&self) -> Result<(), ConfigError> {
        use crate::sinks::logs::config::{check_group, check_stream};
        check_group("emf.log_group", self.log_group.as_deref())?;
        check_stream("emf.log_stream", self.log_stream.as_deref())
    }
}
