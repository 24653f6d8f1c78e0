//! The collectors as a table, node_exporter's way: each source's folder says which roles run it
//! and how it is built ([`CollectorSpec`]); the pipeline builds every entry of [`COLLECTORS`]
//! its role runs, in this order, with what they share ([`Shared`]).

use super::Collector;
use super::head::command::SlurmCommands;
use super::node::table::SharedJobs;
use super::slurm_jobs::{self, SlurmJobs};
use crate::config::{Config, Role};
use std::cell::OnceCell;

/// One collector: its name, the roles that run it, and how it is built (None: not here, as a
/// GPU collector where no driver loads).
pub struct CollectorSpec {
    pub name: &'static str,
    pub runs_on: fn(Role) -> bool,
    pub build: fn(&Config, &str, &Shared) -> Option<Box<dyn Collector>>,
}

/// Every collector, in the order each collection runs them: the GPU collector after the node
/// collector, whose job table it reads.
pub const COLLECTORS: &[CollectorSpec] = &[
    super::head::COLLECTOR,
    super::node::COLLECTOR,
    super::gpu::COLLECTOR,
    super::host::COLLECTOR,
    super::shipper::COLLECTOR,
];

/// What collectors share, made once per pipeline.
pub struct Shared {
    commands: SlurmCommands,
    slurm: OnceCell<slurm_jobs::Shared>,
    /// The node collector's job table, which the GPU collector reads.
    pub jobs: SharedJobs,
}

impl Shared {
    pub fn new(config: &Config) -> Self {
        Shared {
            commands: SlurmCommands::new(config.slurm.bin_dir.clone(), config.slurm.command_timeout),
            slurm: OnceCell::new(),
            jobs: SharedJobs::default(),
        }
    }

    /// Slurm's answers about this node's jobs (accounts, partitions, GPU allocations, as Slurm
    /// says, not as a job's user wrote), started by the first collector that asks.
    pub fn slurm(&self) -> slurm_jobs::Shared {
        self.slurm.get_or_init(|| SlurmJobs::new(self.commands.clone())).clone()
    }
}

/// Every collector `role` runs here.
pub fn build(config: &Config, role: Role, node: &str) -> Vec<Box<dyn Collector>> {
    let shared = Shared::new(config);
    COLLECTORS.iter().filter(|c| (c.runs_on)(role)).filter_map(|c| (c.build)(config, node, &shared)).collect()
}
