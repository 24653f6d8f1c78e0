//! The settings the daemon runs with: a TOML file whose defaults work on a ParallelCluster node,
//! with environment variables overriding keys, assembled from each component's own section.
//! Only the app, `--check` and the two registries (collectors, destinations) name the whole;
//! each component is given its section.
//!
//! `SLURM_CW_<KEY>` overrides a top-level key and `SLURM_CW_<SECTION>__<KEY>` (two underscores) a
//! key in a section: `SLURM_CW_FLUSH_INTERVAL=30s`, `SLURM_CW_CLOUDWATCH__MAX_RETRIES=3`.
//! Unknown keys and bad values are errors that name the key (and the file line or the variable).

pub mod docs;
mod host;
mod namespace;
mod parts;

pub use crate::config::{ConfigError, Role, Toggle};
use crate::config::{duration, opt_string, role_setting, string};
pub use crate::cost::config::CostConfig;
pub use crate::sinks::cloudwatch::config::CloudWatchConfig;
pub use crate::sinks::config::{DeliveryConfig, SpoolConfig};
pub use crate::sinks::emf::config::EmfConfig;
pub use crate::sinks::logs::config::LogsConfig;
pub use crate::sinks::otlp::config::OtlpConfig;
pub use crate::sinks::prometheus::config::PrometheusConfig;
pub use crate::sinks::{SinkKind, Sinks};
pub use crate::sources::gpu::config::GpuConfig;
pub use crate::sources::head::config::{HeadConfig, SlurmConfig};
pub use crate::sources::node::config::{CgroupVersion, NodeConfig};
pub use crate::transforms::findings::Thresholds;
pub use crate::transforms::shape::JobMetrics;
use serde::Deserialize;
use std::path::Path;
use std::time::Duration;

/// Where the daemon looks for its configuration when `--config` is not given.
pub const DEFAULT_PATH: &str = "/etc/slurm-cw-shipper/config.toml";
/// Prefix of the environment variables that override configuration keys.
pub const ENV_PREFIX: &str = "SLURM_CW_";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Settings {
    /// The `ClusterName` dimension; from slurm.conf's ClusterName when not set.
    #[serde(deserialize_with = "opt_string")]
    pub cluster_name: Option<String>,
    /// CloudWatch namespace of every metric; `Slurm/<cluster name>` when not set
    /// ([`Settings::namespace_for`]).
    #[serde(deserialize_with = "opt_string")]
    pub namespace: Option<String>,
    /// The `NodeName` dimension of this host's own figures; the short host name when not set.
    #[serde(deserialize_with = "opt_string")]
    pub node_name: Option<String>,
    /// auto (None: detected) | node | head | all (`--role` overrides it).
    #[serde(deserialize_with = "role_setting")]
    pub role: Option<Role>,
    /// How often collectors sample.
    #[serde(deserialize_with = "duration")]
    pub collect_interval: Duration,
    /// How often aggregated samples are sent (about one PutMetricData request per flush).
    #[serde(deserialize_with = "duration")]
    pub flush_interval: Duration,
    /// Where figures go: cloudwatch, otlp, prometheus, stdout, or a list (`--sink` overrides it).
    pub sink: Sinks,
    /// Metrics never shipped (by catalog name), to trim cost.
    pub exclude_metrics: Vec<String>,
    /// Host figures (the shipper's own, jobs and GPUs per node) per node as well as across the
    /// cluster: one more metric per host for each.
    pub self_metrics_per_node: bool,
    /// The shipper's own figures sent to destinations billed per series: those a view reads,
    /// or all.
    pub self_metrics: SelfMetrics,
    pub cloudwatch: CloudWatchConfig,
    pub delivery: DeliveryConfig,
    pub logs: LogsConfig,
    pub otlp: OtlpConfig,
    pub prometheus: PrometheusConfig,
    pub emf: EmfConfig,
    pub slurm: SlurmConfig,
    pub head: HeadConfig,
    pub node: NodeConfig,
    pub gpu: GpuConfig,
    pub cost: CostConfig,
    pub spool: SpoolConfig,
    pub log: LogConfig,
    /// Keys still accepted under an old name, one note each, for the log once it is set up.
    #[serde(skip)]
    pub deprecated: Vec<String>,
}

/// `self_metrics`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SelfMetrics {
    /// What a view reads (the catalog's `views::self_detail` says which are not).
    Read,
    All,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LogConfig {
    /// A tracing filter: error, warn, info, debug, or per module (`RUST_LOG` syntax).
    #[serde(deserialize_with = "string")]
    pub level: String,
    /// text | json
    pub format: LogFormat,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            cluster_name: None,
            namespace: None,
            node_name: None,
            role: None,
            collect_interval: Duration::from_secs(30),
            flush_interval: Duration::from_secs(120),
            sink: Sinks::default(),
            exclude_metrics: Vec::new(),
            self_metrics_per_node: false,
            self_metrics: SelfMetrics::Read,
            cloudwatch: CloudWatchConfig::default(),
            delivery: DeliveryConfig::default(),
            logs: LogsConfig::default(),
            otlp: OtlpConfig::default(),
            prometheus: PrometheusConfig::default(),
            emf: EmfConfig::default(),
            slurm: SlurmConfig::default(),
            head: HeadConfig::default(),
            node: NodeConfig::default(),
            gpu: GpuConfig::default(),
            cost: CostConfig::default(),
            spool: SpoolConfig::default(),
            log: LogConfig::default(),
            deprecated: Vec::new(),
        }
    }
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig { level: "warn".to_owned(), format: LogFormat::Text }
    }
}

impl Settings {
    /// Reads the file (if any), applies the `SLURM_CW_*` variables from `env`, and checks the
    /// values. `path = None` reads [`DEFAULT_PATH`] when it exists and uses the defaults when not.
    pub fn load(
        path: Option<&Path>,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Settings, ConfigError> {
        let (text, origin) = match path {
            Some(p) => (
                std::fs::read_to_string(p)
                    .map_err(|source| ConfigError::Read { origin: p.display().to_string(), source })?,
                p.display().to_string(),
            ),
            None if Path::new(DEFAULT_PATH).exists() => (
                std::fs::read_to_string(DEFAULT_PATH)
                    .map_err(|source| ConfigError::Read { origin: DEFAULT_PATH.to_owned(), source })?,
                DEFAULT_PATH.to_owned(),
            ),
            None => (String::new(), "defaults".to_owned()),
        };
        Self::from_toml(&text, &origin, env)
    }

    /// Parses configuration text; `origin` names it in errors.
    pub fn from_toml(
        text: &str,
        origin: &str,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Settings, ConfigError> {
        // The file alone first, so that its errors carry its line numbers.
        let _: Settings = toml::from_str(text)
            .map_err(|e| ConfigError::Parse { origin: origin.to_owned(), why: e.to_string() })?;
        let mut table: toml::Table = toml::from_str(text)
            .map_err(|e| ConfigError::Parse { origin: origin.to_owned(), why: e.to_string() })?;
        let mut overridden = Vec::new();
        for (var, raw) in env {
            let Some(key) = var.strip_prefix(ENV_PREFIX) else {
                continue;
            };
            let key = key.to_ascii_lowercase();
            let (section, field) = match key.split_once("__") {
                Some((s, f)) => (Some(s.to_owned()), f.to_owned()),
                None => (None, key.clone()),
            };
            let value = env_value(&raw);
            let target = match &section {
                None => &mut table,
                Some(s) => {
                    match table.entry(s.clone()).or_insert_with(|| toml::Value::Table(toml::Table::new())) {
                        toml::Value::Table(t) => t,
                        _ => return Err(ConfigError::invalid(var, format!("`{s}` is not a section"))),
                    }
                }
            };
            target.insert(field, value);
            overridden.push(var);
        }
        let config: Settings = toml::Value::Table(table).try_into().map_err(|e| ConfigError::Parse {
            origin: format!("{origin} with environment overrides {}", overridden.join(", ")),
            why: e.to_string(),
        })?;
        let mut config = config;
        config.deprecated = config.cloudwatch.move_delivery_keys(&mut config.delivery);
        config.check()?;
        Ok(config)
    }

    /// Value checks that types alone cannot express; each error names its key. Each section
    /// checks its own keys, beside the code it configures.
    pub fn check(&self) -> Result<(), ConfigError> {
        use crate::sinks::validate::MAX_DIMENSION_VALUE;
        let err = |key: &str, why: String| Err(ConfigError::invalid(key, why));
        if let Some(c) = &self.cluster_name
            && (c.trim().is_empty() || c.len() > MAX_DIMENSION_VALUE || c.chars().any(char::is_control))
        {
            // It ships as the ClusterName dimension.
            return err("cluster_name", format!("must be 1 to {MAX_DIMENSION_VALUE} printable characters"));
        }
        if self.namespace.is_some() || self.cluster_name.is_some() {
            // A cluster name read from slurm.conf is checked when it is read (namespace_for).
            self.namespace_for(self.cluster_name.as_deref().unwrap_or_default())?;
        }
        for name in &self.exclude_metrics {
            if slurm_cw_catalog::by_name(name).is_none() {
                return err(
                    "exclude_metrics",
                    format!("{name:?} is not a metric of the catalog (docs/metrics.md)"),
                );
            }
        }
        if self.collect_interval < Duration::from_secs(1) {
            return err("collect_interval", "must be at least 1s".into());
        }
        if self.flush_interval < self.collect_interval {
            return err("flush_interval", "must not be shorter than collect_interval".into());
        }
        if self.flush_interval > Duration::from_secs(3600) {
            return err("flush_interval", "must be at most 1h".into());
        }
        self.node.check()?;
        self.slurm.check()?;
        self.head.check()?;
        self.logs.check()?;
        self.spool.check()?;
        self.cloudwatch.check()?;
        self.otlp.check()?;
        self.prometheus.check()?;
        self.emf.check()?;
        self.cost.check()?;
        if tracing_subscriber::EnvFilter::try_new(&self.log.level).is_err() {
            return err("log.level", format!("{:?} is not a log filter", self.log.level));
        }
        Ok(())
    }
}

/// An environment value as TOML: booleans, numbers and arrays keep their type, anything else is
/// a string (so `30s` and `my-cluster` need no quotes).
fn env_value(raw: &str) -> toml::Value {
    let t = raw.trim();
    let typed = t == "true"
        || t == "false"
        || t.starts_with('[')
        || t.parse::<i64>().is_ok()
        || (t.parse::<f64>().is_ok() && t.contains('.'));
    if typed
        && let Ok(table) = toml::from_str::<toml::Table>(&format!("v = {t}"))
        && let Some(v) = table.get("v")
    {
        return v.clone();
    }
    toml::Value::String(raw.to_owned())
}

#[cfg(test)]
mod tests;
