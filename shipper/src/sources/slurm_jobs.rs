//! What Slurm itself says of the jobs on this node: account, partition and the GPU indices each
//! holds here, from `scontrol show job -d -o <id>` (argv, timeout, bounded output), asked once
//! per job and kept while it runs. A job's own environment (SLURM_JOB_ACCOUNT, SLURM_JOB_GPUS,
//! CUDA_VISIBLE_DEVICES) is written by its user, who could bill another account or claim every
//! GPU on the node; it is only a fallback where Slurm cannot be asked, and then marked.
//!
//! Shared by the node and GPU collectors (one single-threaded runtime: an `Rc<RefCell<..>>`);
//! the node collector refreshes it at the start of each collection.

use crate::sources::head::command::{CommandError, SlurmCommands};
use slurm_cw_formats::slurm::job::{self, JobDetail};
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::time::{Duration, Instant};

/// New jobs asked about per collection: a node that starts many jobs at once catches up over a
/// few collections instead of stalling one.
const PER_CYCLE: usize = 16;
/// How long a job Slurm could not answer for waits before it is asked again.
const RETRY_AFTER: Duration = Duration::from_secs(60);

pub type Shared = Rc<RefCell<SlurmJobs>>;

pub struct SlurmJobs {
    cmds: SlurmCommands,
    known: HashMap<String, JobDetail>,
    retry_at: HashMap<String, Instant>,
    /// scontrol is not there at all: nothing to ask, logged once.
    missing: bool,
}

/// The dimension value of an account or partition taken from a job's environment.
pub fn unverified(value: &str) -> String {
    if value == crate::sources::node::owner::UNKNOWN {
        value.to_owned()
    } else {
        format!("{value} (unverified)")
    }
}

impl SlurmJobs {
    pub fn new(cmds: SlurmCommands) -> Shared {
        Rc::new(RefCell::new(SlurmJobs {
            cmds,
            known: HashMap::new(),
            retry_at: HashMap::new(),
            missing: false,
        }))
    }

    /// A Slurm that has already answered for these jobs (tests of the collectors).
    pub fn answered(cmds: SlurmCommands, details: Vec<JobDetail>) -> Shared {
        let known = details.into_iter().map(|d| (d.job_id.clone(), d)).collect();
        Rc::new(RefCell::new(SlurmJobs { cmds, known, retry_at: HashMap::new(), missing: false }))
    }

    pub fn get(&self, id: &str) -> Option<&JobDetail> {
        self.known.get(id)
    }

    /// Whether Slurm can be asked here at all.
    pub fn available(&self) -> bool {
        !self.missing
    }

    /// Asks Slurm about the jobs in `ids` it has not answered for yet; forgets jobs not listed.
    pub async fn refresh(this: &Shared, ids: &[String]) {
        let (cmds, todo) = {
            let mut s = this.borrow_mut();
            s.known.retain(|id, _| ids.contains(id));
            s.retry_at.retain(|id, _| ids.contains(id));
            if s.missing {
                return;
            }
            let now = Instant::now();
            let todo: Vec<String> = ids
                .iter()
                .filter(|id| !s.known.contains_key(*id) && s.retry_at.get(*id).is_none_or(|t| *t <= now))
                .take(PER_CYCLE)
                .cloned()
                .collect();
            (s.cmds.clone(), todo)
        };
        for id in todo {
            let answer = cmds.run("scontrol", &["show", "job", "-d", "-o", &id]).await;
            let mut s = this.borrow_mut();
            match answer.map(|o| job::parse(&o.stdout)) {
                Ok(Ok(d)) if d.job_id == id => {
                    s.known.insert(id, d);
                }
                Err(CommandError::NotFound(..)) => {
                    tracing::warn!(
                        "scontrol not found: job accounts and GPUs come from the jobs' own environment, marked unverified"
                    );
                    s.missing = true;
                    return;
                }
                other => {
                    tracing::debug!(job = id, answer = ?other.map(|r| r.map(|d| d.job_id)), "Slurm did not describe the job; asking again later");
                    s.retry_at.insert(id, Instant::now() + RETRY_AFTER);
                }
            }
        }
    }
}
