//! The scheduled Lambda: the cluster's CPU efficiency and idle GPU-hours from the nodes' totals,
//! events when the autoscaling signal moves or (on AWS PCS) a node's launch fails, notices of the
//! job findings the nodes record, notices of accounts passing their monthly budgets, and
//! alarm upkeep, from what the shippers sent to CloudWatch. (Rates, utilisation and the
//! autoscaling signal itself are derived on the head node, from its own readings.)
//!
//! [`handler::handle`] runs one invocation, stage by stage: [`cluster`] (over the [`minutes`]
//! since the last run), publishing
//! (through slurm-cw-sink), [`findings`] (with [`notify`]), [`scaling`] (AWS PCS's launch
//! failures, where configured), [`alarms`]. [`cw`] reads CloudWatch; [`state`] keeps the stages'
//! cursors between runs.

pub mod alarms;
pub mod budgets;
pub mod cluster;
pub mod config;
pub mod cw;
pub mod findings;
pub mod handler;
pub mod minutes;
pub mod notify;
pub mod scaling;
pub mod state;
