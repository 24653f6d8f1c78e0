//! slurm-cw-shipper: Slurm metrics for Amazon CloudWatch.
//!
//! A metric's path through the code follows the module names:
//! `sources::*` (read and parse) -> [`sample`] -> [`transforms`] (job records, population
//! figures, what becomes a metric) -> [`aggregate`] (a neutral `Aggregate` per series and
//! period) -> `sinks::delivery` (each destination's rules; the spool keeps what could not be
//! sent) -> `sinks::<destination>`, whose `encode` makes its wire form. [`app`] runs the loop;
//! [`config`] and [`cli`] say how. `datum` (CloudWatch's datum and the spool's line) and
//! `validate` live in the slurm-cw-sink crate, which the Lambda shares, and are re-exported here.

#![deny(unsafe_code)]

pub use slurm_cw_sink::{aws, datum};

pub mod aggregate;
pub mod app;
pub mod check;
pub mod cli;
pub mod collection;
pub mod config;
pub mod cost;
pub mod daemon;
pub mod hook;
pub mod http_client;
pub mod install;
pub mod logging;
pub mod peer;
pub mod pipeline;
pub mod report;
pub mod role;
pub mod sample;
pub mod secret;
pub mod settings;
pub mod sinks;
pub mod slurm_conf;
pub mod sources;
pub mod sys;
pub mod transforms;

/// How the process ends.
#[derive(Debug, PartialEq)]
pub enum Exit {
    Ok,
    /// Exit status 1, with a one-line reason.
    Failed(String),
    /// Exit status 2: the configuration (or the command line) cannot work.
    BadConfig(String),
}
