//! slurm-cw-shipper: Slurm metrics for Amazon CloudWatch.
//!
//! A metric's path through the code follows the module names:
//! `sources::*` (read and parse) -> [`sample`] -> [`aggregate`] -> [`datum`] ->
//! `sinks::delivery` (validate, keep what could not be sent) -> `sinks::cloudwatch` or
//! `sinks::stdout`. [`app`] runs the loop; [`config`] and [`cli`] say how.

pub mod aggregate;
pub mod app;
pub mod aws;
pub mod check;
pub mod cli;
pub mod config;
pub mod datum;
pub mod hook;
pub mod role;
pub mod sample;
pub mod sinks;
pub mod slurm_conf;
pub mod sources;
