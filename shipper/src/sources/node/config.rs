//! `[node]`: where the node collector finds job cgroups, /proc and /sys, and what it ships.

use crate::config::{ConfigError, Toggle, string};
use crate::transforms::findings::Thresholds;
use crate::transforms::shape::JobMetrics;
use serde::Deserialize;
use std::path::PathBuf;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CgroupVersion {
    Auto,
    V1,
    V2,
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
    /// at least every Nth collection, and at once when its process set changes; cgroup files
    /// are read every collection. Most of a cycle's cost is per process, and these figures
    /// move slowly.
    pub process_every: u32,
    /// logs | metrics | both: per-job figures as job records in CloudWatch Logs (default), as
    /// per-job custom metrics (billed per metric and hour: docs/cost.md), or both.
    pub job_metrics: JobMetrics,
    /// Population metrics per user as well as per cluster, partition and account.
    pub population_per_user: bool,
    /// Job population figures per partition: `auto` those a view reads per partition (cores
    /// used and allocated, spend), `on` all, `off` none.
    #[serde(deserialize_with = "crate::config::de::toggle")]
    pub per_partition: Toggle,
    /// The same per account: `auto` those a view reads per account (CPU efficiency, spend,
    /// waste), `on` all, `off` none.
    #[serde(deserialize_with = "crate::config::de::toggle")]
    pub per_account: Toggle,
    /// When the node reports a job as wasteful (`job_finding` records).
    pub findings: Thresholds,
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
            process_every: 10,
            job_metrics: JobMetrics::Logs,
            population_per_user: false,
            per_partition: Toggle::Auto,
            per_account: Toggle::Auto,
            findings: Thresholds::default(),
        }
    }
}

impl NodeConfig {
    /// The `[node]` keys' values.
    pub fn check(&self) -> Result<(), ConfigError> {
        let err = |key: &str, why: &str| Err(ConfigError::invalid(key, why));
        for (key, v) in [
            ("node.v1_slurm_dir", &self.v1_slurm_dir),
            ("node.v2_parent", &self.v2_parent),
            ("node.v2_scope", &self.v2_scope),
            ("node.job_dir_prefix", &self.job_dir_prefix),
        ] {
            if v.is_empty() || v.contains('/') {
                return err(key, "must be a non-empty directory name without '/'");
            }
        }
        self.findings.check()?;
        if !(1..=60).contains(&self.process_every) {
            return err("node.process_every", "must be 1 to 60 collections");
        }
        Ok(())
    }
}
