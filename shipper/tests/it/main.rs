//! The shipper's fixture and loopback tests, one binary (one link of the AWS SDK instead of
//! one per file): each module is one subject, run alone with `cargo test -p slurm-cw-shipper
//! --test it <module>::`. The tests that need a bench (Slurm, LocalStack, Prometheus) are
//! their own binaries, which scripts/test.sh runs by name.

#[path = "../common/mod.rs"]
mod common;

mod check_first_line;
mod daemon;
mod golden;
mod gpu_fake;
mod gpu_nodes;
mod head_fallback;
mod head_openmetrics_bounds;
mod head_token_user;
mod hook_abuse;
mod host_fixtures;
mod host_pipeline;
mod no_ca_certificates;
mod node_fixtures;
mod node_sluid;
mod slurm_24_11_real;
mod slurm_fixtures;
mod state_help;
