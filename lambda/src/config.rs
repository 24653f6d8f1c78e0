//! The function's configuration: one JSON document in `SLURM_CW_LAMBDA_CONFIG` (the Terraform
//! module writes it). Unknown keys and bad rules are errors that name them.

use serde::Deserialize;
use slurm_cw_catalog::alarms::{Rule, RuleError, check_rule};
use slurm_cw_sink::validate::NamespaceError;

pub const ENV: &str = "SLURM_CW_LAMBDA_CONFIG";

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// The cluster's namespace: the `namespace` key, or `Slurm/<cluster_name>` (the shipper's
    /// default too).
    #[serde(skip)]
    pub namespace: String,
    #[serde(default, rename = "namespace")]
    namespace_key: Option<String>,
    pub cluster_name: String,
    /// Every alarm the function manages is named with this prefix (default
    /// `slurm-cw-<cluster_name>/`); alarms with it and this cluster's marker that no rule names
    /// are deleted.
    #[serde(default)]
    pub alarm_prefix: Option<String>,
    /// The log group the nodes write job records to (default `/slurm-cw/<cluster_name>/jobs`);
    /// findings are read from it and the function's cursor is kept in its `_lambda` stream.
    #[serde(default)]
    pub job_log_group: Option<String>,
    /// The log group AWS PCS delivers its scaling logs (`PCS_SCALING_LOGS`) to: launch failures
    /// are read from it and sent beside the backlog events. None: no PCS stage.
    #[serde(default)]
    pub pcs_scaling_log_group: Option<String>,
    /// This cluster's AWS PCS id (`pcs_…`), required with `pcs_scaling_log_group`: records of
    /// another cluster delivered to the same group are skipped, not sent as this one's.
    #[serde(default)]
    pub pcs_cluster_id: Option<String>,
    /// Alarm actions and notices go here.
    #[serde(default)]
    pub sns_topic_arn: Option<String>,
    /// The bus autoscaling events go to.
    #[serde(default = "default_bus")]
    pub event_bus: String,
    #[serde(default)]
    pub rules: Vec<Rule>,
    #[serde(default)]
    pub thresholds: Thresholds,
    /// Monthly budgets in US dollars by Slurm account: an event and a notice when an account's
    /// `JobCost` this month passes 80 % and 100 % of it.
    #[serde(default)]
    pub budgets: std::collections::BTreeMap<String, f64>,
    /// Accepted so that older configurations still load, and ignored: findings are read from
    /// the job records every run, and no run reads per-job series any more.
    #[serde(default)]
    pub rollup_minutes: Option<u32>,
    /// Minutes between runs (the Terraform module's `every_minutes`, which sets the schedule
    /// too): each run derives every minute since the last, so the figures are those of a run a
    /// minute, for fewer billed reads.
    #[serde(default = "default_every")]
    pub every_minutes: u32,
    /// The nodes' `flush_interval`, in minutes (the Terraform module's `shipper_flush_minutes`):
    /// a minute is derived once every node has flushed it, this many minutes and two more
    /// after it.
    #[serde(default = "default_flush")]
    pub shipper_flush_minutes: u32,
}

/// The shipper's default `flush_interval` (2 minutes), in minutes.
pub const DEFAULT_SHIPPER_FLUSH_MINUTES: u32 = 2;

fn default_flush() -> u32 {
    DEFAULT_SHIPPER_FLUSH_MINUTES
}

/// The Terraform module's default `every_minutes` (terraform/variables.tf).
pub const DEFAULT_EVERY_MINUTES: u32 = 5;

fn default_every() -> u32 {
    DEFAULT_EVERY_MINUTES
}

/// Only `backlog_change_nodes` is the Lambda's own: the nodes decide job findings now
/// (`node.findings`), so the other thresholds are accepted (the Terraform module passes them)
/// and ignored.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Thresholds {
    /// A job's GPUs are idle below this mean utilisation (percent)...
    pub idle_gpu_percent: f64,
    /// ...for this many minutes.
    pub idle_gpu_minutes: u32,
    pub low_cpu_efficiency_percent: f64,
    pub low_cpu_minutes: u32,
    /// A job uses less than this percentage of the memory it requested (peak over limit).
    pub memory_over_requested_percent: f64,
    /// An autoscaling event goes out when BacklogNodes moves by at least this much.
    pub backlog_change_nodes: f64,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            idle_gpu_percent: 5.0,
            idle_gpu_minutes: 30,
            low_cpu_efficiency_percent: 20.0,
            low_cpu_minutes: 60,
            memory_over_requested_percent: 25.0,
            backlog_change_nodes: 1.0,
        }
    }
}

fn default_bus() -> String {
    "default".into()
}

/// Why the configuration cannot be used, naming the variable and the key.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{ENV} is not set")]
    NotSet,
    #[error("{ENV} is not valid Unicode")]
    NotUnicode,
    /// Not JSON, a value of the wrong type or an unknown key: serde_json names the key, the
    /// line and the column.
    #[error("{ENV}: {0}")]
    Json(#[from] serde_json::Error),
    /// A key whose value cannot work: the key (`budgets.<account>` for a budget) and why.
    #[error("{ENV}: {key}: {why}")]
    Key { key: String, why: String },
    /// The namespace (the `namespace` key, or the default one `cluster_name` makes).
    #[error("{ENV}: {key}: {source}")]
    Namespace { key: &'static str, source: NamespaceError },
    #[error("{ENV}: {0}")]
    Rule(#[from] RuleError),
    #[error("{ENV}: rule {0} appears twice")]
    DuplicateRule(String),
}

fn bad(key: impl Into<String>, why: impl Into<String>) -> ConfigError {
    ConfigError::Key { key: key.into(), why: why.into() }
}

impl Config {
    pub fn from_json(text: &str) -> Result<Config, ConfigError> {
        let mut c: Config = serde_json::from_str(text)?;
        if c.cluster_name.trim().is_empty() {
            return Err(bad("cluster_name", "empty"));
        }
        // '/' ends the alarm prefix (`slurm-cw-<cluster>/`), so that no cluster's prefix is the
        // start of another's; a line break would forge the ownership marker.
        if c.cluster_name.contains('/') || c.cluster_name.chars().any(char::is_control) {
            return Err(bad("cluster_name", "must not contain '/' or control characters"));
        }
        if let Some(g) = &c.job_log_group {
            check_log_group("job_log_group", g)?;
        }
        if let Some(g) = &c.pcs_scaling_log_group {
            check_log_group("pcs_scaling_log_group", g)?;
            match c.pcs_cluster_id.as_deref().map(str::trim) {
                None | Some("") => {
                    return Err(bad(
                        "pcs_cluster_id",
                        "required with pcs_scaling_log_group (the PCS cluster's id, pcs_…)",
                    ));
                }
                Some(id) if id.chars().any(|ch| ch.is_control() || ch.is_whitespace()) => {
                    return Err(bad("pcs_cluster_id", format!("{id:?} is not a PCS cluster id")));
                }
                Some(_) => {}
            }
        }
        c.namespace = match &c.namespace_key {
            Some(ns) => ns.clone(),
            None => slurm_cw_catalog::default_namespace(&c.cluster_name),
        };
        slurm_cw_sink::validate::check_namespace(&c.namespace).map_err(|source| {
            let key =
                if c.namespace_key.is_some() { "namespace" } else { "cluster_name (the default namespace)" };
            ConfigError::Namespace { key, source }
        })?;
        if !(1..=60).contains(&c.every_minutes) {
            return Err(bad("every_minutes", format!("{} is not 1 to 60", c.every_minutes)));
        }
        if !(1..=60).contains(&c.shipper_flush_minutes) {
            let why =
                format!("{} is not 1 to 60 (the nodes' flush_interval, in minutes)", c.shipper_flush_minutes);
            return Err(bad("shipper_flush_minutes", why));
        }
        let t = &c.thresholds;
        for (key, minutes) in
            [("idle_gpu_minutes", t.idle_gpu_minutes), ("low_cpu_minutes", t.low_cpu_minutes)]
        {
            if !(1..=1440).contains(&minutes) {
                return Err(bad(format!("thresholds.{key}"), format!("{minutes} is not 1 to 1440")));
            }
        }
        for (account, usd) in &c.budgets {
            if !(usd.is_finite() && *usd > 0.0) {
                let why = format!("{usd} is not a budget: a number of dollars above 0");
                return Err(bad(format!("budgets.{account}"), why));
            }
        }
        let mut names = std::collections::HashSet::new();
        for r in &c.rules {
            check_rule(r)?;
            if !names.insert(&r.name) {
                return Err(ConfigError::DuplicateRule(r.name.clone()));
            }
        }
        Ok(c)
    }

    pub fn from_env() -> Result<Config, ConfigError> {
        let text = std::env::var(ENV).map_err(|e| match e {
            std::env::VarError::NotPresent => ConfigError::NotSet,
            std::env::VarError::NotUnicode(_) => ConfigError::NotUnicode,
        })?;
        Self::from_json(&text)
    }

    pub fn alarm_prefix(&self) -> String {
        self.alarm_prefix.clone().unwrap_or_else(|| format!("slurm-cw-{}/", self.cluster_name))
    }

    pub fn job_log_group(&self) -> String {
        self.job_log_group.clone().unwrap_or_else(|| format!("/slurm-cw/{}/jobs", self.cluster_name))
    }
}

/// CloudWatch Logs' rule for group names: 1 to 512 of `[A-Za-z0-9_./#-]`.
fn check_log_group(key: &str, name: &str) -> Result<(), ConfigError> {
    let ok = |c: char| c.is_ascii_alphanumeric() || "_-./#".contains(c);
    if name.is_empty() || name.len() > 512 || !name.chars().all(ok) {
        return Err(bad(key, format!("{name:?} is not a log group name (1-512 of A-Z a-z 0-9 _ - . / #)")));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minimal_and_full() {
        let c = Config::from_json(r#"{"cluster_name": "prod"}"#).unwrap();
        assert_eq!((c.namespace.as_str(), c.event_bus.as_str()), ("Slurm/prod", "default"));
        assert_eq!(c.alarm_prefix(), "slurm-cw-prod/");
        assert_eq!(c.job_log_group(), "/slurm-cw/prod/jobs");
        assert_eq!(c.thresholds.idle_gpu_minutes, 30);
        let rules = slurm_cw_catalog::alarms::default_rules_json();
        let c = Config::from_json(&format!(
            r#"{{"cluster_name": "p", "namespace": "X", "rules": {rules}, "thresholds": {{"idle_gpu_minutes": 10}}}}"#
        ))
        .unwrap();
        assert_eq!(c.rules.len(), slurm_cw_catalog::alarms::default_rules().len());
        assert_eq!(c.namespace, "X", "an explicit namespace wins");
        assert_eq!((c.thresholds.idle_gpu_minutes, c.thresholds.low_cpu_minutes), (10, 60));
        let c = Config::from_json(
            r#"{"cluster_name": "p", "alarm_prefix": "slurm-cw-p-", "job_log_group": "/x/y", "rollup_minutes": 5}"#,
        )
        .unwrap();
        assert_eq!((c.alarm_prefix().as_str(), c.job_log_group().as_str()), ("slurm-cw-p-", "/x/y"));
        assert_eq!(c.pcs_scaling_log_group, None, "no PCS stage unless asked");
        let c =
            Config::from_json(r#"{"cluster_name": "p", "pcs_scaling_log_group": "/aws/vendedlogs/pcs/x", "pcs_cluster_id": "pcs_x"}"#)
                .unwrap();
        assert_eq!(c.pcs_scaling_log_group.as_deref(), Some("/aws/vendedlogs/pcs/x"));
        assert_eq!(c.pcs_cluster_id.as_deref(), Some("pcs_x"));
    }

    #[test]
    fn every_minutes_is_the_modules_default_and_bounded() {
        let c = Config::from_json(r#"{"cluster_name": "p"}"#).unwrap();
        assert_eq!(c.every_minutes, DEFAULT_EVERY_MINUTES);
        // The module sets both the schedule and this key from its variable; their defaults agree.
        let tf = include_str!("../../terraform/variables.tf");
        let block = tf.split("variable \"every_minutes\"").nth(1).unwrap_or_default();
        let default = block.lines().find(|l| l.trim_start().starts_with("default")).unwrap_or_default();
        assert_eq!(
            default.split('=').nth(1).map(str::trim),
            Some(DEFAULT_EVERY_MINUTES.to_string().as_str())
        );
        assert_eq!(
            Config::from_json(r#"{"cluster_name": "p", "every_minutes": 1}"#).unwrap().every_minutes,
            1
        );
        for bad in ["0", "61"] {
            let e = Config::from_json(&format!(r#"{{"cluster_name": "p", "every_minutes": {bad}}}"#))
                .unwrap_err();
            assert!(e.to_string().contains("every_minutes"), "{e}");
        }
    }

    #[test]
    fn the_nodes_flush_interval_is_the_shippers_default_and_bounded() {
        let c = Config::from_json(r#"{"cluster_name": "p"}"#).unwrap();
        assert_eq!(c.shipper_flush_minutes, DEFAULT_SHIPPER_FLUSH_MINUTES);
        let tf = include_str!("../../terraform/variables.tf");
        let block = tf.split("variable \"shipper_flush_minutes\"").nth(1).unwrap_or_default();
        let default = block.lines().find(|l| l.trim_start().starts_with("default")).unwrap_or_default();
        assert_eq!(default.split('=').nth(1).map(str::trim), Some("2"));
        let c = Config::from_json(r#"{"cluster_name": "p", "shipper_flush_minutes": 5}"#).unwrap();
        assert_eq!(c.shipper_flush_minutes, 5);
        for bad in ["0", "61"] {
            let e = Config::from_json(&format!(r#"{{"cluster_name": "p", "shipper_flush_minutes": {bad}}}"#))
                .unwrap_err();
            assert!(e.to_string().contains("shipper_flush_minutes"), "{e}");
        }
    }

    #[test]
    fn budgets_are_dollars_above_zero() {
        let c = Config::from_json(r#"{"cluster_name": "p", "budgets": {"physics": 1000.5}}"#).unwrap();
        assert_eq!(c.budgets.get("physics"), Some(&1000.5));
        for bad in ["0", "-5", "\"lots\""] {
            let e = Config::from_json(&format!(r#"{{"cluster_name": "p", "budgets": {{"chem": {bad}}}}}"#))
                .unwrap_err()
                .to_string();
            assert!(e.contains("budgets.chem") || e.contains("expected f64 at line 1"), "{bad}: {e}");
        }
    }

    #[test]
    fn errors_name_what_is_wrong() {
        let e = Config::from_json(r#"{"cluster_name": "p", "colour": 1}"#).unwrap_err().to_string();
        assert!(e.contains("colour"), "{e}");
        let e = Config::from_json(r#"{"cluster_name": "p", "namespace": "AWS/X"}"#).unwrap_err().to_string();
        assert!(e.contains("namespace"), "{e}");
        let e = Config::from_json(
            r#"{"cluster_name": "p", "rules": [{"name": "a", "watch": {"metric": "Nope"}, "comparison": ">", "threshold": 1}]}"#,
        )
        .unwrap_err().to_string();
        assert!(e.contains("Nope"), "{e}");
        let e = Config::from_json(r#"{"cluster_name": ""}"#).unwrap_err().to_string();
        assert!(e.contains("cluster_name"), "{e}");
        for bad in ["hpc/prod", "/", "hpc\\n"] {
            let e = Config::from_json(&format!(r#"{{"cluster_name": "{bad}"}}"#)).unwrap_err().to_string();
            assert!(e.contains("cluster_name"), "{bad}: {e}");
        }
        let e = Config::from_json(r#"{"cluster_name": "p", "namespace": ":X"}"#).unwrap_err().to_string();
        assert!(e.contains("namespace"), "{e}");
        // A cluster name that makes no valid namespace, unless one is given.
        let long = "c".repeat(250);
        for bad in [long.as_str(), "hpc*", "prod@eu"] {
            let e = Config::from_json(&format!(r#"{{"cluster_name": "{bad}"}}"#)).unwrap_err().to_string();
            assert!(e.contains("cluster_name (the default namespace)"), "{bad}: {e}");
            let c =
                Config::from_json(&format!(r#"{{"cluster_name": "{bad}", "namespace": "Hpc"}}"#)).unwrap();
            assert_eq!(c.namespace, "Hpc");
        }
        let e =
            Config::from_json(r#"{"cluster_name": "p", "job_log_group": "a b"}"#).unwrap_err().to_string();
        assert!(e.contains("job_log_group"), "{e}");
        let e = Config::from_json(r#"{"cluster_name": "p", "pcs_scaling_log_group": ""}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("pcs_scaling_log_group"), "{e}");
        let e =
            Config::from_json(r#"{"cluster_name": "p", "thresholds": {"low_cpu_minutes": 0}}"#).unwrap_err();
        assert!(matches!(&e, ConfigError::Key { key, .. } if key == "thresholds.low_cpu_minutes"), "{e}");
        // Without the cluster's id, another cluster's records could pass as this one's.
        for id in ["", r#", "pcs_cluster_id": """#, r#", "pcs_cluster_id": "pcs x""#] {
            let e = Config::from_json(&format!(
                r#"{{"cluster_name": "p", "pcs_scaling_log_group": "/aws/vendedlogs/pcs/x"{id}}}"#
            ))
            .unwrap_err()
            .to_string();
            assert!(e.contains("pcs_cluster_id"), "{id}: {e}");
        }
    }
}
