//! AWS PCS's vended logs, as the Lambda reads them and the dashboard queries them: the field
//! names of the scaling log records (`PCS_SCALING_LOGS`) as the AWS PCS User Guide documents
//! them (<https://docs.aws.amazon.com/pcs/latest/userguide/monitoring_scaling-logs.html>), and
//! the fields of the events the Lambda sends for a launch failure. Named here once.

/// A top-level field of a scaling log record.
pub mod scaling {
    /// The PCS cluster id (`pcs_...`).
    pub const RESOURCE_ID: &str = "resource_id";
    /// Epoch milliseconds of the transition.
    pub const EVENT_TIMESTAMP: &str = "event_timestamp";
    pub const COMPUTE_NODE_GROUP_ID: &str = "compute_node_group_id";
    /// The Slurm node name (`compute-1`).
    pub const SCHEDULER_NODE_ID: &str = "scheduler_node_id";
    /// The state the node entered: `LAUNCHED`, `REGISTERED`, `ACTIVE`, `LAUNCH_FAILED`, ...
    pub const STATUS_CODE: &str = "status_code";
    /// Why: `INSUFFICIENT_CAPACITY`, `LIMIT_EXCEEDED`, `LAUNCH_ERROR`, ...
    pub const REASON_CODE: &str = "reason_code";
    pub const DESCRIPTION: &str = "description";
    /// An object of the keys below, present when there is context.
    pub const DETAILS: &str = "details";

    /// Keys of [`DETAILS`].
    pub mod details {
        pub const INSTANCE_ID: &str = "instance_id";
        /// EC2's error code of a failed launch (`InsufficientInstanceCapacity`).
        pub const EC2_ERROR_CODE: &str = "ec2_error_code";
        pub const INSTANCE_TYPE: &str = "instance_type";
        pub const SUBNET_ID: &str = "subnet_id";
    }

    /// The [`STATUS_CODE`] of a launch that failed.
    pub const LAUNCH_FAILED: &str = "LAUNCH_FAILED";
}

/// The `detail` of a launch-failure event (source [`crate::events::SOURCE`], detail-type
/// [`LAUNCH_FAILED_DETAIL_TYPE`]): [`CLUSTER`](crate::events::CLUSTER) (the Slurm cluster, as in backlog events), `time`
/// (RFC 3339), and the record's own fields under their PCS names: [`scaling::RESOURCE_ID`],
/// [`scaling::COMPUTE_NODE_GROUP_ID`], [`scaling::SCHEDULER_NODE_ID`], [`scaling::REASON_CODE`],
/// [`scaling::DESCRIPTION`], and the [`scaling::details`] keys that were present.
pub mod event {
    pub use crate::events::CLUSTER;
    pub const TIME: &str = "time";
}

/// The detail-type of the Lambda's launch-failure events.
pub const LAUNCH_FAILED_DETAIL_TYPE: &str = "Slurm Node Launch Failed";
