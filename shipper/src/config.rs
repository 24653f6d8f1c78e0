//! Configuration: a TOML file whose defaults work on a ParallelCluster node, with environment
//! variables overriding keys.
//!
//! `SLURM_CW_<KEY>` overrides a top-level key and `SLURM_CW_<SECTION>__<KEY>` (two underscores) a
//! key in a section: `SLURM_CW_FLUSH_INTERVAL=30s`, `SLURM_CW_CLOUDWATCH__MAX_RETRIES=3`.
//! Unknown keys and bad values are errors that name the key (and the file line or the variable).

pub use crate::transforms::findings::Thresholds;
pub use crate::transforms::shape::JobMetrics;
use serde::{Deserialize, Deserializer};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Where the daemon looks for its configuration when `--config` is not given.
pub const DEFAULT_PATH: &str = "/etc/slurm-cw-shipper/config.toml";
/// Prefix of the environment variables that override configuration keys.
pub const ENV_PREFIX: &str = "SLURM_CW_";

/// A configuration error: the process exits with status 2.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ConfigError(pub String);

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RoleSetting {
    Auto,
    Node,
    Head,
    All,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SinkKind {
    Cloudwatch,
    Stdout,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Toggle {
    Auto,
    On,
    Off,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CgroupVersion {
    Auto,
    V1,
    V2,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// The `ClusterName` dimension; from slurm.conf's ClusterName when not set.
    #[serde(deserialize_with = "opt_string")]
    pub cluster_name: Option<String>,
    /// CloudWatch namespace of every metric.
    #[serde(deserialize_with = "string")]
    pub namespace: String,
    /// The `NodeName` dimension of this host's own figures; the short host name when not set.
    #[serde(deserialize_with = "opt_string")]
    pub node_name: Option<String>,
    /// auto | node | head | all (`--role` overrides it).
    pub role: RoleSetting,
    /// How often collectors sample.
    #[serde(deserialize_with = "duration")]
    pub collect_interval: Duration,
    /// How often aggregated samples are sent (about one PutMetricData request per flush).
    #[serde(deserialize_with = "duration")]
    pub flush_interval: Duration,
    /// cloudwatch | stdout (`--sink` overrides it).
    pub sink: SinkKind,
    /// Metrics never shipped (by catalog name), to trim cost.
    pub exclude_metrics: Vec<String>,
    /// Host figures (the shipper's own, jobs and GPUs per node) per node as well as across the
    /// cluster: one more metric per host for each.
    pub self_metrics_per_node: bool,
    pub cloudwatch: CloudWatchConfig,
    pub logs: LogsConfig,
    pub slurm: SlurmConfig,
    pub head: HeadConfig,
    pub node: NodeConfig,
    pub gpu: GpuConfig,
    pub spool: SpoolConfig,
    pub log: LogConfig,
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
    /// Start flushing at a random offset within the flush interval, so a fleet of nodes
    /// does not call the API in the same second.
    pub flush_jitter: bool,
    /// Undelivered datums kept in memory when the spool cannot take them (disk full, no spool).
    pub max_backlog: usize,
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
}

impl LogsConfig {
    pub fn group_for(&self, cluster: &str) -> String {
        self.group.clone().unwrap_or_else(|| format!("/slurm-cw/{cluster}/jobs"))
    }
}

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
    /// Publish node, capacity and job figures per partition as well as for the cluster.
    pub per_partition: bool,
    /// Pending reasons shipped by name per partition; the rest are summed as Other.
    pub top_pending_reasons: usize,
    /// RPC message types shipped by name (by count); the rest are left out.
    pub top_rpc_types: usize,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct NodeConfig {
    /// Root of the cgroup file systems.
    pub cgroup_root: PathBuf,
    /// auto | v1 | v2
    pub cgroup_version: CgroupVersion,
    /// v1: Slurm's directory under each controller (`slurm`, or `slurm_<node>` with several
    /// slurmd on one host).
    #[serde(deserialize_with = "string")]
    pub v1_slurm_dir: String,
    /// v2: the parent of Slurm's scope, and the scope's name (`[<node>_]slurmstepd.scope`).
    #[serde(deserialize_with = "string")]
    pub v2_parent: String,
    #[serde(deserialize_with = "string")]
    pub v2_scope: String,
    /// The prefix of job directories.
    #[serde(deserialize_with = "string")]
    pub job_dir_prefix: String,
    /// Root of /proc.
    pub proc_root: PathBuf,
    /// Root of /sys: EFA and InfiniBand counters (`class/infiniband`), RAPL energy
    /// (`class/powercap`) and the Lustre client's stats on 2.12 and newer
    /// (`kernel/debug/lustre/llite`; older clients are under `proc_root`).
    pub sys_root: PathBuf,
    /// Unix socket on which the Slurm TaskEpilog hook asks for a job's final sample.
    pub hook_socket: PathBuf,
    /// Add per-node detail (a `NodeName` dimension set) to per-job metrics: one more metric per
    /// job and node.
    pub per_node_dimensions: bool,
    /// Executables shipped by name in ProcessCpuUsage, per job.
    pub top_executables: usize,
    /// Read each job's processes in /proc (threads by state, open files, CPU by executable)
    /// every Nth collection; cgroup files are read every collection. Most of a cycle's cost is
    /// per process, and these figures move slowly.
    pub process_every: u32,
    /// logs | metrics | both: per-job figures as job records in CloudWatch Logs (default), as
    /// per-job custom metrics (billed per metric and hour: docs/cost.md), or both.
    pub job_metrics: JobMetrics,
    /// Population metrics per user as well as per cluster, partition and account.
    pub population_per_user: bool,
    /// When the node reports a job as wasteful (`job_finding` records).
    pub findings: Thresholds,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct GpuConfig {
    /// auto: on when the NVIDIA driver is present.
    pub enabled: Toggle,
    /// Add per-GPU detail (NodeName + Gpu index) to per-job GPU metrics.
    pub per_gpu_dimensions: bool,
    /// Use the GPU UUID rather than its index in per-GPU detail.
    pub uuid_dimension: bool,
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

impl Default for Config {
    fn default() -> Self {
        Config {
            cluster_name: None,
            namespace: slurm_cw_catalog::DEFAULT_NAMESPACE.to_owned(),
            node_name: None,
            role: RoleSetting::Auto,
            collect_interval: Duration::from_secs(30),
            flush_interval: Duration::from_secs(120),
            sink: SinkKind::Cloudwatch,
            exclude_metrics: Vec::new(),
            self_metrics_per_node: false,
            cloudwatch: CloudWatchConfig::default(),
            logs: LogsConfig::default(),
            slurm: SlurmConfig::default(),
            head: HeadConfig::default(),
            node: NodeConfig::default(),
            gpu: GpuConfig::default(),
            spool: SpoolConfig::default(),
            log: LogConfig::default(),
        }
    }
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
            flush_jitter: true,
            max_backlog: 50_000,
        }
    }
}

impl Default for SlurmConfig {
    fn default() -> Self {
        SlurmConfig { conf: None, bin_dir: None, command_timeout: Duration::from_secs(20) }
    }
}

impl Default for HeadConfig {
    fn default() -> Self {
        HeadConfig { per_partition: true, top_pending_reasons: 10, top_rpc_types: 10 }
    }
}

impl Default for NodeConfig {
    fn default() -> Self {
        NodeConfig {
            cgroup_root: PathBuf::from("/sys/fs/cgroup"),
            cgroup_version: CgroupVersion::Auto,
            v1_slurm_dir: "slurm".to_owned(),
            v2_parent: "system.slice".to_owned(),
            v2_scope: "slurmstepd.scope".to_owned(),
            job_dir_prefix: "job_".to_owned(),
            proc_root: PathBuf::from("/proc"),
            sys_root: PathBuf::from("/sys"),
            hook_socket: PathBuf::from("/run/slurm-cw-shipper/hook.sock"),
            per_node_dimensions: false,
            top_executables: 5,
            process_every: 2,
            job_metrics: JobMetrics::Logs,
            population_per_user: false,
            findings: Thresholds::default(),
        }
    }
}

impl Default for GpuConfig {
    fn default() -> Self {
        GpuConfig { enabled: Toggle::Auto, per_gpu_dimensions: false, uuid_dimension: false }
    }
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig { level: "warn".to_owned(), format: LogFormat::Text }
    }
}

impl Config {
    /// Reads the file (if any), applies the `SLURM_CW_*` variables from `env`, and checks the
    /// values. `path = None` reads [`DEFAULT_PATH`] when it exists and uses the defaults when not.
    pub fn load(
        path: Option<&Path>,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Config, ConfigError> {
        let (text, origin) = match path {
            Some(p) => (
                std::fs::read_to_string(p)
                    .map_err(|e| ConfigError(format!("cannot read {}: {e}", p.display())))?,
                p.display().to_string(),
            ),
            None if Path::new(DEFAULT_PATH).exists() => (
                std::fs::read_to_string(DEFAULT_PATH)
                    .map_err(|e| ConfigError(format!("cannot read {DEFAULT_PATH}: {e}")))?,
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
    ) -> Result<Config, ConfigError> {
        // The file alone first, so that its errors carry its line numbers.
        let _: Config = toml::from_str(text).map_err(|e| ConfigError(format!("{origin}: {e}")))?;
        let mut table: toml::Table =
            toml::from_str(text).map_err(|e| ConfigError(format!("{origin}: {e}")))?;
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
                        _ => return Err(ConfigError(format!("{var}: `{s}` is not a section"))),
                    }
                }
            };
            target.insert(field, value);
            overridden.push(var);
        }
        let config: Config = toml::Value::Table(table).try_into().map_err(|e| {
            ConfigError(format!("{origin} with environment overrides {}: {e}", overridden.join(", ")))
        })?;
        config.check()?;
        Ok(config)
    }

    /// Value checks that types alone cannot express; each error names its key.
    pub fn check(&self) -> Result<(), ConfigError> {
        let err = |key: &str, why: String| Err(ConfigError(format!("{key}: {why}")));
        if let Err(why) = crate::sinks::validate::check_namespace(&self.namespace) {
            return err("namespace", why);
        }
        if let Some(c) = &self.cluster_name
            && (c.trim().is_empty() || c.len() > 1024 || c.chars().any(char::is_control))
        {
            return err("cluster_name", "must be 1 to 1024 printable characters".into());
        }
        for name in &self.exclude_metrics {
            if slurm_cw_catalog::by_name(name).is_none() {
                return err(
                    "exclude_metrics",
                    format!("{name:?} is not a metric of the catalog (docs/metrics.md)"),
                );
            }
        }
        for (key, v) in [
            ("node.v1_slurm_dir", &self.node.v1_slurm_dir),
            ("node.v2_parent", &self.node.v2_parent),
            ("node.v2_scope", &self.node.v2_scope),
            ("node.job_dir_prefix", &self.node.job_dir_prefix),
        ] {
            if v.is_empty() || v.contains('/') {
                return err(key, "must be a non-empty directory name without '/'".into());
            }
        }
        if let Err(why) = self.node.findings.check() {
            return Err(ConfigError(why));
        }
        if let Some(g) = &self.logs.group
            && (g.is_empty()
                || g.len() > 512
                || !g.chars().all(|c| c.is_ascii_alphanumeric() || "_-/.#".contains(c)))
        {
            return err("logs.group", "must be 1 to 512 characters of letters, digits and _ - / . #".into());
        }
        if let Some(s) = &self.logs.stream
            && (s.is_empty() || s.len() > 512 || s.contains(':') || s.contains('*'))
        {
            return err("logs.stream", "must be 1 to 512 characters without ':' or '*'".into());
        }
        if !(1..=60).contains(&self.node.process_every) {
            return err("node.process_every", "must be 1 to 60 collections".into());
        }
        if !(self.spool.replay_rate > 0.0 && self.spool.replay_rate <= 100.0) {
            return err("spool.replay_rate", "must be above 0 and at most 100 requests per second".into());
        }
        if self.spool.max_bytes < 1 << 20 {
            return err("spool.max_bytes", "must be at least 1 MiB".into());
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
        if ![1, 60].contains(&self.cloudwatch.storage_resolution) {
            return err("cloudwatch.storage_resolution", "must be 1 or 60".into());
        }
        if self.cloudwatch.retry_base_delay.is_zero()
            || self.cloudwatch.retry_max_delay < self.cloudwatch.retry_base_delay
        {
            return err(
                "cloudwatch.retry_max_delay",
                "retry_base_delay must be > 0 and retry_max_delay >= retry_base_delay".into(),
            );
        }
        if self.cloudwatch.attempt_timeout < Duration::from_millis(100) {
            return err("cloudwatch.attempt_timeout", "must be at least 100ms".into());
        }
        if self.slurm.command_timeout < Duration::from_millis(100) {
            return err("slurm.command_timeout", "must be at least 100ms".into());
        }
        if tracing_subscriber::EnvFilter::try_new(&self.log.level).is_err() {
            return err("log.level", format!("{:?} is not a log filter", self.log.level));
        }
        Ok(())
    }

    /// The `NodeName` dimension of this host.
    pub fn node_name(&self) -> String {
        self.node_name.clone().unwrap_or_else(short_hostname)
    }

    /// The slurm.conf to read: the configured one, else the first that exists of $SLURM_CONF and
    /// the usual places.
    pub fn slurm_conf_path(&self) -> Option<PathBuf> {
        if let Some(p) = &self.slurm.conf {
            return Some(p.clone());
        }
        let mut candidates: Vec<PathBuf> = Vec::new();
        if let Some(p) = std::env::var_os("SLURM_CONF") {
            candidates.push(p.into());
        }
        for p in ["/opt/slurm/etc/slurm.conf", "/etc/slurm/slurm.conf", "/etc/slurm-llnl/slurm.conf"] {
            candidates.push(p.into());
        }
        candidates.into_iter().find(|p| p.is_file())
    }

    /// The cluster name: configured, or slurm.conf's ClusterName.
    pub fn resolve_cluster_name(&self) -> Result<(String, String), ConfigError> {
        if let Some(c) = &self.cluster_name {
            return Ok((c.clone(), "configuration".into()));
        }
        let Some(conf) = self.slurm_conf_path() else {
            return Err(ConfigError(
                "cluster_name: not set, and no slurm.conf found ($SLURM_CONF, /opt/slurm/etc, \
                 /etc/slurm, /etc/slurm-llnl) to read ClusterName from; set cluster_name or \
                 SLURM_CW_CLUSTER_NAME"
                    .into(),
            ));
        };
        match crate::slurm_conf::cluster_name(&conf) {
            Ok(Some(name)) => Ok((name, conf.display().to_string())),
            Ok(None) => Err(ConfigError(format!(
                "cluster_name: not set, and {} has no ClusterName; set cluster_name",
                conf.display()
            ))),
            Err(e) => Err(ConfigError(format!("cluster_name: not set, and {e}"))),
        }
    }
}

/// The host name up to its first dot.
pub fn short_hostname() -> String {
    let raw = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    let name = raw.trim().split('.').next().unwrap_or("").to_owned();
    if name.is_empty() { "unknown-host".to_owned() } else { name }
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

/// Accepts a string, or a number written without quotes (from an environment variable).
fn string<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Lenient {
        S(String),
        I(i64),
        F(f64),
    }
    Ok(match Lenient::deserialize(d)? {
        Lenient::S(s) => s,
        Lenient::I(i) => i.to_string(),
        Lenient::F(f) => f.to_string(),
    })
}

fn opt_string<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    string(d).map(Some)
}

/// A human duration: "30s", "1m", "500ms", "1h 30m".
fn duration<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    let s = String::deserialize(d)?;
    humantime::parse_duration(&s)
        .map_err(|e| serde::de::Error::custom(format!("{s:?} is not a duration like 30s or 1m: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn the_example_file_names_real_keys_with_their_defaults() {
        // Every commented `# key = value` line of the installed example, uncommented.
        let example = include_str!("../../infra/systemd/config.toml.example");
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
            Config::from_toml(&text, "config.toml.example", env(&[])).unwrap_or_else(|e| panic!("{e}"));
        // The lines that show an example value rather than the default (which is "none").
        assert_eq!(c.cloudwatch.region.take().as_deref(), Some("us-east-1"));
        assert!(c.cloudwatch.endpoint.take().is_some());
        assert_eq!(c.logs.group.take().as_deref(), Some("/slurm-cw/hpc/jobs"));
        assert_eq!(c.cluster_name.take().as_deref(), Some("my-cluster"));
        assert_eq!(c.node_name.take().as_deref(), Some("compute-dy-c6i-1"));
        assert_eq!(c.slurm.conf.take(), Some(PathBuf::from("/opt/slurm/etc/slurm.conf")));
        assert_eq!(c.slurm.bin_dir.take(), Some(PathBuf::from("/opt/slurm/bin")));
        assert_eq!(c, Config::default(), "every other key at its default");
    }

    #[test]
    fn defaults_need_no_file() {
        let c = Config::from_toml("", "t", env(&[])).unwrap();
        assert_eq!(c.namespace, "Slurm");
        assert_eq!(c.collect_interval, Duration::from_secs(30));
        assert_eq!(c.flush_interval, Duration::from_secs(120));
        assert_eq!(c.sink, SinkKind::Cloudwatch);
        assert_eq!(c.role, RoleSetting::Auto);
        assert_eq!(c.cloudwatch.storage_resolution, 60);
    }

    #[test]
    fn file_values_are_read() {
        let c = Config::from_toml(
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
        let c = Config::from_toml(
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
        assert!(!c.cloudwatch.flush_jitter);
        assert!(!c.head.per_partition);
    }

    #[test]
    fn unknown_keys_are_errors_that_name_the_key() {
        let e = Config::from_toml("colect_interval = \"10s\"\n", "cfg.toml", env(&[])).unwrap_err();
        assert!(e.0.contains("colect_interval") && e.0.contains("cfg.toml"), "{e}");
        assert!(e.0.contains("line 1"), "{e}");
        let e = Config::from_toml("[cloudwatch]\nretries = 1\n", "cfg.toml", env(&[])).unwrap_err();
        assert!(e.0.contains("retries"), "{e}");
        let e = Config::from_toml("", "t", env(&[("SLURM_CW_NO_SUCH_KEY", "1")])).unwrap_err();
        assert!(e.0.contains("no_such_key") && e.0.contains("SLURM_CW_NO_SUCH_KEY"), "{e}");
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
            ("[node]\nprocess_every = 0\n", "process_every"),
        ];
        for (text, key) in cases {
            let e = Config::from_toml(text, "t", env(&[])).unwrap_err();
            assert!(e.0.contains(key), "{text:?} -> {e}");
        }
        let e = Config::from_toml("", "t", env(&[("SLURM_CW_COLLECT_INTERVAL", "fast")])).unwrap_err();
        assert!(e.0.contains("SLURM_CW_COLLECT_INTERVAL") && e.0.contains("fast"), "{e}");
    }

    #[test]
    fn cluster_name_comes_from_slurm_conf() {
        let dir = tempfile::tempdir().unwrap();
        let conf = dir.path().join("slurm.conf");
        std::fs::write(&conf, "# comment\nclustername=from-conf\n").unwrap();
        let c =
            Config::from_toml(&format!("[slurm]\nconf = {:?}\n", conf.display().to_string()), "t", env(&[]))
                .unwrap();
        assert_eq!(c.resolve_cluster_name().unwrap().0, "from-conf");
        std::fs::write(&conf, "SlurmctldHost=x\n").unwrap();
        let e = c.resolve_cluster_name().unwrap_err();
        assert!(e.0.contains("cluster_name"), "{e}");
    }
}
