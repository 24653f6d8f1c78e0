//! The collectors as a table, node_exporter's way: each entry says which roles run it and how
//! it is built from its own section ([`CollectorSpec`]); the pipeline builds every entry of
//! [`COLLECTORS`] its role runs, in this order, with what they share ([`Shared`]).

use super::Collector;
use super::head::command::SlurmCommands;
use super::node::table::SharedJobs;
use super::slurm_jobs::{self, SlurmJobs};
use super::{gpu, head, host, node, shipper};
use crate::config::Role;
use crate::settings::Settings;
use std::cell::OnceCell;
use std::path::PathBuf;

/// One collector: its name, the roles that run it, and how it is built from its own section of
/// the settings (None: not here, as a GPU collector where no driver loads). The table below is
/// the one place that picks each collector's section out of the whole.
pub struct CollectorSpec {
    pub name: &'static str,
    pub runs_on: fn(Role) -> bool,
    pub build: fn(&Settings, &Shared) -> Option<Box<dyn Collector>>,
}

/// Every collector, in the order each collection runs them: the GPU collector after the node
/// collector, whose job table it reads.
pub const COLLECTORS: &[CollectorSpec] = &[
    CollectorSpec { name: "head", runs_on: Role::runs_head, build: |s, shared| head::build(&s.head, shared) },
    CollectorSpec { name: "node", runs_on: Role::runs_node, build: |s, shared| node::build(&s.node, shared) },
    CollectorSpec {
        name: "gpu",
        runs_on: Role::runs_node,
        build: |s, shared| gpu::build(&s.gpu, &s.node, shared),
    },
    CollectorSpec { name: "host", runs_on: Role::runs_node, build: |s, shared| host::build(&s.node, shared) },
    CollectorSpec { name: "shipper", runs_on: |_| true, build: |_, shared| shipper::build(shared) },
];

/// What collectors share, made once per pipeline: where they run and how Slurm is asked.
pub struct Shared {
    /// The `NodeName` dimension of this host's figures.
    pub node: String,
    /// The slurm.conf this host reads (gres.conf beside it, slurmctld's address in it).
    pub slurm_conf: Option<PathBuf>,
    commands: SlurmCommands,
    slurm: OnceCell<slurm_jobs::Shared>,
    /// The node collector's job table, which the GPU collector reads.
    pub jobs: SharedJobs,
    /// The uids that own a job on this node, as the node collector last saw them: the hook
    /// socket serves each at its own share, every other uid in one (`hook::Gate`).
    pub job_owners: JobOwners,
}

/// The uids that own a job on this node, published by the collection thread each cycle.
pub type JobOwners = std::sync::Arc<std::sync::Mutex<std::collections::HashSet<u32>>>;

impl Shared {
    pub fn new(node: &str, slurm_conf: Option<PathBuf>, commands: SlurmCommands) -> Self {
        Shared {
            node: node.to_owned(),
            slurm_conf,
            commands,
            slurm: OnceCell::new(),
            jobs: SharedJobs::default(),
            job_owners: JobOwners::default(),
        }
    }

    /// With the set the daemon shares with its hook socket.
    pub fn publishing_owners(mut self, owners: JobOwners) -> Self {
        self.job_owners = owners;
        self
    }

    /// How Slurm's commands are run (`slurm.*`).
    pub fn commands(&self) -> &SlurmCommands {
        &self.commands
    }

    /// Slurm's answers about this node's jobs (accounts, partitions, GPU allocations, as Slurm
    /// says, not as a job's user wrote), started by the first collector that asks.
    pub fn slurm(&self) -> slurm_jobs::Shared {
        self.slurm.get_or_init(|| SlurmJobs::new(self.commands.clone())).clone()
    }
}

/// Every collector `role` runs here; the node collector publishes the jobs' owners in `owners`.
pub fn build(settings: &Settings, role: Role, node: &str, owners: JobOwners) -> Vec<Box<dyn Collector>> {
    let shared =
        Shared::new(node, settings.slurm_conf_path(), settings.slurm.commands()).publishing_owners(owners);
    COLLECTORS.iter().filter(|c| (c.runs_on)(role)).filter_map(|c| (c.build)(settings, &shared)).collect()
}
