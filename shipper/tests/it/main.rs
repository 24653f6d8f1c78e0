//! The shipper's integration tests, one binary (one link of the AWS SDK instead of one per
//! file): each module is one subject, run alone with `cargo test -p slurm-cw-shipper --test it
//! <module>::`. The fixture and loopback tests are the modules here; the tests that need a
//! bench (Slurm, LocalStack, Prometheus, the cgroup v2 VM) are under [`bench`], `#[ignore]`d so
//! that a plain `cargo test` skips them, and run by scripts/test.sh with `--include-ignored`
//! (the Slurm 24.11 and 26.05 stages by module: `bench::node_slurm::`). The helpers they share
//! are [`common`].

mod bench;
mod common;
mod install;
mod otlp_client;

mod check_first_line;
mod daemon;
mod golden;
mod gpu_fake;
mod gpu_mig;
mod gpu_nodes;
mod gpu_records;
mod gpu_shared;
mod head_fallback;
mod head_openmetrics_bounds;
mod head_token_user;
mod hook_abuse;
mod host_fixtures;
mod host_pipeline;
mod no_ca_certificates;
mod node_fixtures;
mod node_neighbours;
mod node_requeued;
mod node_sluid;
mod node_suspended;
mod prometheus_abuse;
mod prometheus_socket;
mod report_render;
mod slurm_24_11_real;
mod slurm_fixtures;
mod state_help;
