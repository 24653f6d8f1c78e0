//! The metric catalog: the one list of every metric the shipper and the Lambda emit.
//!
//! Each metric is a `pub static` [`Metric`] in [`metrics`]; code refers to the static, never to
//! the name as a string, so a name is spelled exactly once in the whole project. The same list
//! generates `docs/metrics.md`, the dashboards, the alarm rules and the IAM namespace condition.

pub mod alarms;
pub mod dashboard;
pub mod docs;
pub mod events;
pub mod generated;
pub mod metrics;
pub mod pcs;
pub mod records;
pub mod series;
pub mod views;

pub use metrics::ALL;

/// The start of the namespace used when the configuration names none: `Slurm/<cluster>`.
pub const NAMESPACE_PREFIX: &str = "Slurm";

/// The namespace a cluster's figures go to when the configuration names none. One per cluster
/// because IAM can confine PutMetricData to a namespace (`cloudwatch:namespace`) but not to a
/// dimension value: with a shared namespace, one cluster's nodes could write another's figures.
pub fn default_namespace(cluster: &str) -> String {
    format!("{NAMESPACE_PREFIX}/{cluster}")
}

/// Dimension names. Every metric carries [`dims::CLUSTER_NAME`].
pub mod dims {
    pub const CLUSTER_NAME: &str = "ClusterName";
    pub const PARTITION: &str = "Partition";
    pub const STATE: &str = "State";
    pub const FLAG: &str = "Flag";
    pub const REASON: &str = "Reason";
    pub const MESSAGE_TYPE: &str = "MessageType";
    pub const COLLECTOR: &str = "Collector";
    pub const NODE_NAME: &str = "NodeName";
    pub const JOB_ID: &str = "JobId";
    pub const USER: &str = "User";
    pub const ACCOUNT: &str = "Account";
    pub const THREAD_STATE: &str = "ThreadState";
    pub const EXECUTABLE: &str = "Executable";
    pub const GPU: &str = "Gpu";
    pub const GPU_UUID: &str = "GpuUuid";
    /// A destination other than CloudWatch (`otlp`, `prometheus`), on the delivery figures.
    pub const SINK: &str = "Sink";

    /// Every primary node state a parser can give (`NodeCount`'s `State`): the dashboard's
    /// *Nodes by state* chart draws each from the head's record.
    pub const NODE_STATES: &[&str] = &[
        "allocated",
        "mixed",
        "idle",
        "down",
        "error",
        "drained",
        "draining",
        "completing",
        "fail",
        "failing",
        "maint",
        "reserved",
        "blocked",
        "planned",
        "future",
        "powered_down",
        "powering_up",
        "powering_down",
        "inval",
        "unknown",
        "other",
    ];

    /// Node states counted even when no node is in them, so dashboards and alarms see zeros
    /// rather than gaps. Other states appear only while a node is in them.
    pub const CORE_NODE_STATES: &[&str] = &[
        "allocated",
        "mixed",
        "idle",
        "down",
        "drained",
        "draining",
        "fail",
        "completing",
        "powered_down",
        "powering_up",
    ];

    /// A job's base states (JOB_STATE_BASE): what `squeue --json` of 23.11+ lists first.
    pub const JOB_BASE_STATES: &[&str] = &[
        "pending",
        "running",
        "suspended",
        "completed",
        "cancelled",
        "failed",
        "timeout",
        "node_fail",
        "preempted",
        "boot_fail",
        "deadline",
        "out_of_memory",
    ];

    /// A job's state flags (JOB_STATE_FLAGS of 21.08 to 25.11, lowercase); `other` for one this
    /// version does not know.
    pub const JOB_FLAGS: &[&str] = &[
        "completing",
        "configuring",
        "expediting",
        "launch_failed",
        "power_up_node",
        "reconfig_fail",
        "requeue_fed",
        "requeue_hold",
        "requeued",
        "resizing",
        "resv_del_hold",
        "revoked",
        "signaling",
        "special_exit",
        "stage_out",
        "stopped",
        "update_db",
        "other",
    ];

    /// Every job state a parser can give: a base state; in squeue's text (and the single
    /// string of 22.05 and 23.02 JSON), where Slurm prints a flag instead of the base state
    /// (job_state_string()), that flag; `other` for a state this version does not know.
    pub fn job_states() -> impl Iterator<Item = &'static str> {
        JOB_BASE_STATES.iter().chain(JOB_FLAGS).copied()
    }

    /// Job states counted even when no job is in them (`JobCount`'s `State`).
    pub const CORE_JOB_STATES: &[&str] =
        &["pending", "running", "suspended", "completing", "completed", "failed", "cancelled", "timeout"];

    /// Every dimension above: what a name read back from disk is checked against.
    pub const ALL: &[&str] = &[
        CLUSTER_NAME,
        PARTITION,
        STATE,
        FLAG,
        REASON,
        MESSAGE_TYPE,
        COLLECTOR,
        NODE_NAME,
        JOB_ID,
        USER,
        ACCOUNT,
        THREAD_STATE,
        EXECUTABLE,
        GPU,
        GPU_UUID,
        SINK,
    ];

    /// The catalog's own spelling of a dimension name, if it has one.
    pub fn named(name: &str) -> Option<&'static str> {
        ALL.iter().copied().find(|d| *d == name)
    }
}

/// CloudWatch `StandardUnit` values the catalog uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
pub enum Unit {
    Count,
    CountPerSecond,
    Bytes,
    BytesPerSecond,
    Seconds,
    Milliseconds,
    Microseconds,
    Percent,
    /// A quantity CloudWatch has no unit for (watts, degrees, MHz); the help text names it.
    None,
}

impl Unit {
    /// The exact string CloudWatch expects in `Unit`.
    pub fn as_str(self) -> &'static str {
        match self {
            Unit::Count => "Count",
            Unit::CountPerSecond => "Count/Second",
            Unit::Bytes => "Bytes",
            Unit::BytesPerSecond => "Bytes/Second",
            Unit::Seconds => "Seconds",
            Unit::Milliseconds => "Milliseconds",
            Unit::Microseconds => "Microseconds",
            Unit::Percent => "Percent",
            Unit::None => "None",
        }
    }
}

/// How a metric's value moves over time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
pub enum Kind {
    /// A level sampled at a moment (nodes idle, bytes used).
    Gauge,
    /// Monotonically increasing until it resets (sdiag counters). Read, never sent: the head
    /// node sends its increase between reads as the metric whose `rate_of` names it.
    Counter,
    /// The increase of a counter between two reads, reset-aware: its `Sum` over a period is the
    /// count in the period (jobs submitted in the minute, say).
    Increase,
    /// A node's count (of its jobs, say) that adds up across nodes: one value per flush, the
    /// mean of the flush's samples, so that `Sum` over the flush interval is the cluster total.
    Total,
}

/// Who emits a metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
pub enum Role {
    /// The shipper on every compute node.
    Node,
    /// The shipper on the head node.
    Head,
    /// The scheduled Lambda, from what the shippers sent.
    Lambda,
    /// Any shipper, about itself.
    Shipper,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Node => "node",
            Role::Head => "head",
            Role::Lambda => "lambda",
            Role::Shipper => "shipper",
        }
    }
}

/// One CloudWatch metric: its name and everything needed to emit, validate, chart and document it.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct Metric {
    pub name: &'static str,
    pub unit: Unit,
    pub kind: Kind,
    pub roles: &'static [Role],
    /// The dimension sets this metric is emitted with, each without `ClusterName`, which every
    /// set carries first. An empty set means `ClusterName` alone.
    pub dimension_sets: &'static [&'static [&'static str]],
    pub group: Group,
    pub help: &'static str,
    /// For a derived rate: the counter it is the rate of.
    pub rate_of: Option<&'static Metric>,
}

impl Metric {
    /// The dimension sets with `ClusterName` first, as they appear in CloudWatch.
    pub fn full_dimension_sets(&self) -> impl Iterator<Item = Vec<&'static str>> + '_ {
        self.dimension_sets.iter().map(|set| {
            let mut full = Vec::with_capacity(set.len() + 1);
            full.push(dims::CLUSTER_NAME);
            full.extend_from_slice(set);
            full
        })
    }

    /// True when `names` (in any order, `ClusterName` included) is one of the declared sets.
    pub fn accepts_dimensions<'a>(&self, names: impl IntoIterator<Item = &'a str>) -> bool {
        let mut given: Vec<&str> = names.into_iter().collect();
        given.sort_unstable();
        self.full_dimension_sets().any(|mut set| {
            set.sort_unstable();
            set == given
        })
    }
}

impl std::fmt::Display for Metric {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}

/// Sections of the catalog, in the order the docs and dashboards show them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
pub enum Group {
    Nodes,
    Capacity,
    Jobs,
    Scheduler,
    Health,
    JobMemory,
    JobCpu,
    JobProcesses,
    JobIo,
    Gpu,
    GpuProfiling,
    JobPopulation,
    NodeHardware,
    Derived,
    Shipper,
}

impl Group {
    pub fn title(self) -> &'static str {
        match self {
            Group::Nodes => "Node states (head)",
            Group::Capacity => "Capacity (head)",
            Group::Jobs => "Job states and demand (head)",
            Group::Scheduler => "Scheduler statistics, from sdiag (head)",
            Group::Health => "Health",
            Group::JobMemory => "Job memory (node)",
            Group::JobCpu => "Job CPU (node)",
            Group::JobProcesses => "Job processes and files (node)",
            Group::JobIo => "Job I/O (node)",
            Group::Gpu => "Job GPUs, from NVML (node)",
            Group::GpuProfiling => "Job GPU profiling, from NVML GPM on Hopper and newer (node)",
            Group::JobPopulation => "Job population: figures across jobs, never per job (node)",
            Group::NodeHardware => {
                "Node fabric, Lustre and CPU power: across nodes, per node with self_metrics_per_node (node)"
            }
            Group::Derived => {
                "Derived: by the head node from its readings, by the Lambda from the nodes' totals"
            }
            Group::Shipper => "The shipper itself",
        }
    }
}

/// Finds a metric by its CloudWatch name (for configuration and rule files, which name metrics
/// as strings written by people).
pub fn by_name(name: &str) -> Option<&'static Metric> {
    ALL.iter().copied().find(|m| m.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn names_are_unique_and_pascal_case() {
        let mut seen = HashSet::new();
        for m in ALL {
            assert!(seen.insert(m.name), "{} is listed twice", m.name);
            let first = m.name.chars().next().unwrap_or('a');
            assert!(first.is_ascii_uppercase(), "{} is not PascalCase", m.name);
            assert!(m.name.chars().all(|c| c.is_ascii_alphanumeric()), "{}", m.name);
            assert!(m.name.len() <= 255);
        }
    }

    #[test]
    fn every_dimension_a_metric_declares_is_one_of_dims_all() {
        for m in ALL {
            for d in m.dimension_sets.iter().flat_map(|s| s.iter()) {
                assert_eq!(dims::named(d), Some(*d), "{}: {d} is not in dims::ALL", m.name);
            }
        }
    }

    #[test]
    fn every_metric_is_documented_and_has_a_dimension_set() {
        for m in ALL {
            assert!(!m.help.is_empty(), "{} has no help", m.name);
            assert!(m.help.ends_with('.'), "{}: help should be a sentence", m.name);
            assert!(!m.dimension_sets.is_empty(), "{} has no dimension set", m.name);
            assert!(!m.roles.is_empty(), "{} has no role", m.name);
            assert!(
                m.full_dimension_sets().all(|s| s.len() <= 30 && s[0] == dims::CLUSTER_NAME),
                "{}",
                m.name
            );
        }
    }

    #[test]
    fn increases_point_at_counters_of_the_head_node() {
        for m in ALL {
            if let Some(src) = m.rate_of {
                assert_eq!(src.kind, Kind::Counter, "{} is a rate of a non-counter", m.name);
                assert_eq!(m.kind, Kind::Increase, "{}", m.name);
                assert_eq!(m.roles, src.roles, "{} is derived where its counter is read", m.name);
                assert!(ALL.contains(&src), "{} derives from an unlisted metric", m.name);
            }
        }
    }

    #[test]
    fn every_head_counter_has_a_rate() {
        // Counters are never sent: each must have the metric that carries its increase.
        for m in ALL.iter().filter(|m| m.kind == Kind::Counter) {
            assert!(ALL.iter().any(|r| r.rate_of == Some(*m)), "counter {} has no derived rate", m.name);
        }
    }

    #[test]
    fn accepts_dimensions_ignores_order() {
        let m = &metrics::NODE_COUNT;
        assert!(m.accepts_dimensions(["State", "ClusterName"]));
        assert!(m.accepts_dimensions(["Partition", "ClusterName", "State"]));
        assert!(!m.accepts_dimensions(["State"]));
        assert!(!m.accepts_dimensions(["ClusterName", "State", "Flag"]));
        assert_eq!(by_name("NodeCount"), Some(&metrics::NODE_COUNT));
        assert_eq!(by_name("NoSuchMetric"), None);
    }
}
