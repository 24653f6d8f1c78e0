//! The scheduled Lambda: derived rates, cluster efficiency, the autoscaling signal, job rollups
//! and notices, and alarm upkeep, from what the shippers sent to CloudWatch.
//!
//! [`handler::handle`] runs one invocation: [`rates`] -> [`cluster`] -> [`jobs`] ->
//! publishing (through slurm-cw-sink) -> [`notify`] -> [`alarms`]. [`cw`] reads CloudWatch.

pub mod alarms;
pub mod cluster;
pub mod config;
pub mod cw;
pub mod handler;
pub mod jobs;
pub mod notify;
pub mod rates;
