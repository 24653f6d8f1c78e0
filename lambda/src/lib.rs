//! The scheduled Lambda: derived rates, cluster utilisation and efficiency, the autoscaling
//! signal, notices of the job findings the nodes record, and alarm upkeep, from what the
//! shippers sent to CloudWatch.
//!
//! [`handler::handle`] runs one invocation, stage by stage: [`rates`], [`cluster`], publishing
//! (through slurm-cw-sink), [`findings`] (with [`notify`]), [`alarms`]. [`cw`] reads CloudWatch.

pub mod alarms;
pub mod cluster;
pub mod config;
pub mod cw;
pub mod findings;
pub mod handler;
pub mod notify;
pub mod rates;
