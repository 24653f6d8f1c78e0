//! The tests that need a bench: real Slurm, LocalStack, Prometheus, VictoriaMetrics, the cgroup
//! v2 VM's output (`scripts/bench/`). Each is `#[ignore = "needs <bench>: ..."]`; scripts/test.sh
//! runs them with `--include-ignored`, and without their bench they say why and pass (fail with
//! CI=true). The test command runs them a module at a time, as when each module was a binary of
//! its own; within a module, a test that changes the bench Slurm (jobs, drained nodes) holds
//! `common::SLURM_LOCK` while it does.

mod cloudwatch_sink;
mod delivery_faults;
mod emf_sink;
mod head_login_node;
mod head_once;
mod head_openmetrics;
mod head_scenario;
mod host_localstack;
mod job_cost;
mod logs_sink;
mod namespace_default;
mod node_cgroupfs;
mod node_leftover;
mod node_pcluster;
mod node_slurm;
mod otlp_sink;
mod prometheus_held;
mod prometheus_sink;
mod report;
mod role_auto;
mod sinks_several;
mod slow_read;
mod vm_cgroup_v2;
