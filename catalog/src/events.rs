//! The EventBridge events the Lambda sends, for autoscalers and admins' rules: their source,
//! detail-types and detail keys, named here once for the Lambda and its tests.

/// The `source` of every event.
pub const SOURCE: &str = "slurm-cw";
/// In every event's `detail`: the Slurm cluster's name.
pub const CLUSTER: &str = "cluster";

/// A partition's backlog changed: pending jobs need more nodes than are idle, or no longer do.
/// The `detail` holds [`CLUSTER`] and the keys below; node counts are numbers.
pub mod backlog {
    pub const DETAIL_TYPE: &str = "Slurm Backlog Changed";
    pub const PARTITION: &str = "partition";
    /// Nodes the partition's pending jobs need beyond its idle nodes.
    pub const BACKLOG_NODES: &str = "backlog_nodes";
    pub const IDLE_NODES: &str = "idle_nodes";
    /// [`BACKLOG_NODES`] when the last event was sent (null for the first).
    pub const PREVIOUS_BACKLOG_NODES: &str = "previous_backlog_nodes";
}
