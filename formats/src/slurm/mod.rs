//! Slurm command output.

pub mod gres;
pub mod gres_conf;
pub mod job;
pub mod job_json;
pub mod job_state;
pub mod node;
pub mod openmetrics;
pub mod reason;
pub mod sdiag;
pub mod sinfo;
pub mod squeue;
pub mod state;
