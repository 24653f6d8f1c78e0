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

/// An account's spend this month passed a share of its budget (80 % and 100 %, once each a
/// month). The `detail` holds [`CLUSTER`] and the keys below; dollars are numbers.
pub mod budget {
    pub const DETAIL_TYPE: &str = "Slurm Account Budget Threshold Crossed";
    pub const ACCOUNT: &str = "account";
    /// The month, `YYYY-MM` (UTC).
    pub const MONTH: &str = "month";
    /// The threshold crossed, in percent of the budget.
    pub const THRESHOLD_PERCENT: &str = "threshold_percent";
    pub const SPENT_USD: &str = "spent_usd";
    pub const BUDGET_USD: &str = "budget_usd";
    /// The jobs that spent most this month: a list of {job, user, cost_usd}...
    pub const TOP_JOBS: &str = "top_jobs";
    /// ...among those whose summaries since this time (RFC 3339) were all read: the month's
    /// start when every one was; null when not even the last day's could be read in time.
    pub const TOP_JOBS_SINCE: &str = "top_jobs_since";
}
