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
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn the_example_file_names_real_keys_with_their_defaults() {
        // Every commented `# key = value` line of the installed example, uncommented.
        let example = include_str!("../../../infra/systemd/config.toml.example");
        let text: String = example
            .lines()
            .map(|l| match l.strip_prefix("# ") {
                Some(kv)
                    if kv
                        .split_once(" = ")
                        .is_some_and(|(k, _)| k.chars().all(|c| c.is_ascii_lowercase() || c == '_')) =>
                {
                    kv
                }
                _ => l,
            })
            .map(|l| format!("{l}\n"))
            .collect();
        let mut c =
            Settings::from_toml(&text, "config.toml.example", env(&[])).unwrap_or_else(|e| panic!("{e}"));
        // The lines that show an example value rather than the default (which is "none").
        assert_eq!(c.cloudwatch.region.take().as_deref(), Some("us-east-1"));
        assert!(c.cloudwatch.endpoint.take().is_some());
        assert_eq!(c.logs.group.take().as_deref(), Some("/slurm-cw/hpc/jobs"));
        assert_eq!(c.cluster_name.take().as_deref(), Some("my-cluster"));
        // Shown as the default this cluster name gives.
        assert_eq!(c.namespace.take(), Some(slurm_cw_catalog::default_namespace("my-cluster")));
        assert_eq!(c.node_name.take().as_deref(), Some("compute-dy-c6i-1"));
        assert_eq!(c.slurm.conf.take(), Some(PathBuf::from("/opt/slurm/etc/slurm.conf")));
        assert_eq!(c.slurm.bin_dir.take(), Some(PathBuf::from("/opt/slurm/bin")));
        assert!(c.head.metrics_url.take().is_some() && c.head.metrics_token_file.take().is_some());
        assert!(c.prometheus.bearer_token_file.take().is_some());
        assert_eq!(c.head.metrics_token_user.take().as_deref(), Some("slurm-metrics"));
        assert!(c.otlp.endpoint.take().is_some_and(|e| e.ends_with("/v1/metrics")));
        assert_eq!(c.otlp.region.take().as_deref(), Some("us-east-1"));
        assert_eq!(c.emf.log_group.take().as_deref(), Some("/slurm-cw/my-cluster/metrics"));
        assert_eq!(c.emf.log_stream.take().as_deref(), Some("node-1"));
        assert_eq!(c.cost.hourly_price.take(), Some(3.06));
        assert_eq!(std::mem::take(&mut c.cost.prices).get("p5.48xlarge"), Some(&55.04));
        assert_eq!(c, Settings::default(), "every other key at its default");
    }

    #[test]
    fn destinations_by_name_or_list_from_the_file_or_the_environment() {
        let c = Settings::from_toml("", "t", env(&[("SLURM_CW_SINK", "prometheus")])).unwrap();
        assert_eq!(c.sink, SinkKind::named("prometheus").unwrap());
        let c = Settings::from_toml(
            "sink = [\"cloudwatch\", \"otlp\"]\n[otlp]\nendpoint = \"http://127.0.0.1:1/v1/metrics\"\n",
            "t",
            env(&[("SLURM_CW_PROMETHEUS__ADDRESS", "127.0.0.1:29100")]),
        )
        .unwrap();
        assert_eq!(
            c.sink.iter().collect::<Vec<_>>(),
            [SinkKind::named("cloudwatch").unwrap(), SinkKind::named("otlp").unwrap()]
        );
        assert_eq!(c.prometheus.address, "127.0.0.1:29100");
        let c = Settings::from_toml("", "t", env(&[("SLURM_CW_SINK", "cloudwatch,prometheus")])).unwrap();
        assert!(
            c.sink.contains(SinkKind::named("prometheus").unwrap())
                && c.sink.contains(SinkKind::named("cloudwatch").unwrap())
        );
        for (bad, says) in [
            ("sink = \"kafka\"", "unknown destination"),
            ("[prometheus]\naddress = \"localhost\"", "prometheus.address"),
            ("[otlp]\nendpoint = \"monitoring.us-east-1.amazonaws.com\"", "otlp.endpoint"),
        ] {
            let e = Settings::from_toml(bad, "t", env(&[])).unwrap_err().to_string();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }

    #[test]
    fn defaults_need_no_file() {
        let c = Settings::from_toml("", "t", env(&[])).unwrap();
        assert_eq!(c.namespace, None);
        assert_eq!(c.namespace_for("prod").unwrap(), "Slurm/prod", "one namespace per cluster");
        assert_eq!(c.collect_interval, Duration::from_secs(30));
        assert_eq!(c.flush_interval, Duration::from_secs(120));
        assert_eq!(c.sink, SinkKind::named("cloudwatch").unwrap());
        assert_eq!(c.role, None);
        assert_eq!(c.cloudwatch.storage_resolution, 60);
    }

    #[test]
    fn file_values_are_read() {
        let c = Settings::from_toml(
            "cluster_name = \"prod\"\ncollect_interval = \"10s\"\n[cloudwatch]\nmax_retries = 2\n",
            "t",
            env(&[]),
        )
        .unwrap();
        assert_eq!(c.cluster_name.as_deref(), Some("prod"));
        assert_eq!(c.collect_interval, Duration::from_secs(10));
        assert_eq!(c.cloudwatch.max_retries, 2);
    }

    #[test]
    fn environment_overrides_keys() {
        let c = Settings::from_toml(
            "cluster_name = \"file\"\n",
            "t",
            env(&[
                ("SLURM_CW_CLUSTER_NAME", "2024"),
                ("SLURM_CW_FLUSH_INTERVAL", "2m"),
                ("SLURM_CW_CLOUDWATCH__MAX_RETRIES", "3"),
                ("SLURM_CW_CLOUDWATCH__FLUSH_JITTER", "false"),
                ("SLURM_CW_HEAD__PER_PARTITION", "false"),
                ("UNRELATED", "x"),
            ]),
        )
        .unwrap();
        assert_eq!(c.cluster_name.as_deref(), Some("2024"), "a numeric name stays a string");
        assert_eq!(c.flush_interval, Duration::from_secs(120));
        assert_eq!(c.cloudwatch.max_retries, 3);
        assert!(!c.delivery.flush_jitter, "the old key still works");
        assert_eq!(c.deprecated, ["cloudwatch.flush_jitter is now delivery.flush_jitter"]);
        assert_eq!(c.head.per_partition, Toggle::Off, "false, as when it was a boolean");
    }

    #[test]
    fn delivery_keys_moved_out_of_cloudwatch() {
        let c = Settings::from_toml("[delivery]\nmax_backlog = 10\nflush_jitter = false\n", "t", env(&[]))
            .unwrap();
        assert_eq!((c.delivery.max_backlog, c.delivery.flush_jitter), (10, false));
        assert!(c.deprecated.is_empty());
        let c = Settings::from_toml("[cloudwatch]\nmax_backlog = 7\n", "t", env(&[])).unwrap();
        assert_eq!(c.delivery.max_backlog, 7);
        assert_eq!(c.cloudwatch.max_backlog, None, "moved, not kept in two places");
        assert_eq!(c.deprecated, ["cloudwatch.max_backlog is now delivery.max_backlog"]);
    }

    #[test]
    fn unknown_keys_are_errors_that_name_the_key() {
        let e = Settings::from_toml("colect_interval = \"10s\"\n", "cfg.toml", env(&[])).unwrap_err();
        assert!(e.to_string().contains("colect_interval") && e.to_string().contains("cfg.toml"), "{e}");
        assert!(e.to_string().contains("line 1"), "{e}");
        let e = Settings::from_toml("[cloudwatch]\nretries = 1\n", "cfg.toml", env(&[])).unwrap_err();
        assert!(e.to_string().contains("retries"), "{e}");
        let e = Settings::from_toml("", "t", env(&[("SLURM_CW_NO_SUCH_KEY", "1")])).unwrap_err();
        assert!(
            e.to_string().contains("no_such_key") && e.to_string().contains("SLURM_CW_NO_SUCH_KEY"),
            "{e}"
        );
    }

    #[test]
    fn bad_values_are_errors_that_name_the_key() {
        let cases = [
            ("collect_interval = \"soon\"\n", "collect_interval"),
            ("namespace = \"AWS/Slurm\"\n", "namespace"),
            ("flush_interval = \"5s\"\ncollect_interval = \"10s\"\n", "flush_interval"),
            ("[cloudwatch]\nstorage_resolution = 30\n", "storage_resolution"),
            ("sink = \"kafka\"\n", "kafka"),
            ("role = \"login\"\n", "login"),
            ("[cloudwatch]\nmax_retries = -1\n", "max_retries"),
            ("cluster_name = \"  \"\n", "cluster_name"),
            ("exclude_metrics = [\"NoSuchMetric\"]\n", "NoSuchMetric"),
            ("[node]\njob_dir_prefix = \"a/b\"\n", "job_dir_prefix"),
            ("[node]\ncgroup_version = \"v3\"\n", "v3"),
            ("[head]\nmetrics_token_user = \"root\"\n", "head.metrics_token_user"),
            ("[head]\nmetrics_token_user = \"a b\"\n", "head.metrics_token_user"),
            ("[node]\nprocess_every = 0\n", "process_every"),
        ];
        for (text, key) in cases {
            let e = Settings::from_toml(text, "t", env(&[])).unwrap_err();
            assert!(e.to_string().contains(key), "{text:?} -> {e}");
        }
        let e = Settings::from_toml("", "t", env(&[("SLURM_CW_COLLECT_INTERVAL", "fast")])).unwrap_err();
        assert!(e.to_string().contains("SLURM_CW_COLLECT_INTERVAL") && e.to_string().contains("fast"), "{e}");
    }

    #[test]
    fn cluster_name_comes_from_slurm_conf() {
        let dir = tempfile::tempdir().unwrap();
        let conf = dir.path().join("slurm.conf");
        std::fs::write(&conf, "# comment\nclustername=from-conf\n").unwrap();
        let c = Settings::from_toml(
            &format!("[slurm]\nconf = {:?}\n", conf.display().to_string()),
            "t",
            env(&[]),
        )
        .unwrap();
        assert_eq!(c.resolve_cluster_name().unwrap().0, "from-conf");
        std::fs::write(&conf, "SlurmctldHost=x\n").unwrap();
        let e = c.resolve_cluster_name().unwrap_err();
        assert!(e.to_string().contains("cluster_name"), "{e}");
    }
}
