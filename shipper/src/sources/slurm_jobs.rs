//! What Slurm itself says of the jobs on this node: account, partition, the GPU indices each
//! holds here and, on Slurm 26.05, the job id behind a cgroup named by SLUID. Asked with
//! `scontrol show job --json <id or SLUID>` (argv, timeout, bounded output), once per job,
//! kept while it runs. JSON because the one-line text form prints the job's free text
//! (WorkDir, JobName, Comment...) unquoted among the keys, where its user can write
//! `Account=victim`. An answer that cannot be read leaves the job `unknown`: never its
//! environment. A job's own environment (SLURM_JOB_ACCOUNT, SLURM_JOB_GPUS,
//! CUDA_VISIBLE_DEVICES) is its user's to write; it is used only where scontrol is not
//! installed at all, and then the values are marked.
//!
//! The lookups run on a thread of their own ([`worker`]), a few at once: an unreachable
//! slurmctld costs each collection at most [`WAIT`], never a timeout per job. A job whose
//! answer has not come yet is read without it (its account `unknown`) and asked about until
//! Slurm answers or forgets the job.
//!
//! Shared by the node and GPU collectors, which run on the collection thread (an
//! `Rc<RefCell<..>>`); the node collector refreshes it at the start of each collection.

mod worker;

use crate::sources::head::command::{CommandError, SlurmCommands};
use slurm_cw_formats::slurm::job::JobDetail;
use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::rc::Rc;
use std::time::{Duration, Instant};

/// How long a collection waits for the answers about the jobs it found new.
pub const WAIT: Duration = Duration::from_secs(2);
/// How long a job Slurm could not answer for waits before it is asked again.
const RETRY_AFTER: Duration = Duration::from_secs(60);

pub type Shared = Rc<RefCell<SlurmJobs>>;

pub struct SlurmJobs {
    worker: Option<worker::Worker>,
    /// By job id.
    known: HashMap<String, JobDetail>,
    /// SLUID -> job id, of the jobs in `known` that have one.
    sluids: HashMap<String, String>,
    /// Keys (job ids or SLUIDs) asked and not answered yet.
    asked: HashSet<String>,
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

/// Whether a cgroup directory name is a Slurm 26.05 SLUID (`s5F1M87GJ0R200`: `s` and 13
/// characters of Crockford base32, upper case).
pub fn is_sluid(name: &str) -> bool {
    name.len() == 14
        && name.starts_with('s')
        && name[1..].bytes().all(|b| b.is_ascii_digit() || (b.is_ascii_uppercase() && !b"ILOU".contains(&b)))
}

/// The job id of a SLUID as Slurm gave it, for [`crate::sources::node::table::JobTable`];
/// without Slurm, none.
pub fn resolver(slurm: Option<&Shared>) -> impl Fn(&str) -> Option<String> + '_ {
    move |sluid| slurm.and_then(|s| s.borrow().job_id_of(sluid).map(str::to_owned))
}

impl SlurmJobs {
    pub fn new(cmds: SlurmCommands) -> Shared {
        Self::with(Some(worker::Worker::start(cmds)), Vec::new())
    }

    /// A Slurm that has already answered for these jobs (tests of the collectors).
    pub fn answered(_cmds: SlurmCommands, details: Vec<JobDetail>) -> Shared {
        Self::with(None, details)
    }

    fn with(worker: Option<worker::Worker>, details: Vec<JobDetail>) -> Shared {
        let mut s = SlurmJobs {
            worker,
            known: HashMap::new(),
            sluids: HashMap::new(),
            asked: HashSet::new(),
            retry_at: HashMap::new(),
            missing: false,
        };
        details.into_iter().for_each(|d| s.keep(d));
        Rc::new(RefCell::new(s))
    }

    fn keep(&mut self, d: JobDetail) {
        if let Some(sluid) = &d.sluid {
            self.sluids.insert(sluid.clone(), d.job_id.clone());
        }
        self.known.insert(d.job_id.clone(), d);
    }

    pub fn get(&self, id: &str) -> Option<&JobDetail> {
        self.known.get(id)
    }

    /// The job id Slurm gave for a SLUID.
    pub fn job_id_of(&self, sluid: &str) -> Option<&str> {
        self.sluids.get(sluid).map(String::as_str)
    }

    /// Whether Slurm can be asked here at all.
    pub fn available(&self) -> bool {
        !self.missing
    }

    /// Asks Slurm about the jobs in `keys` (job ids, or SLUIDs of jobs whose id is not known
    /// yet) it has not answered for, and waits at most [`WAIT`] for the answers; forgets
    /// jobs no longer listed.
    pub fn refresh(this: &Shared, keys: &[String]) {
        let deadline = Instant::now() + WAIT;
        let mut s = this.borrow_mut();
        let listed: HashSet<&String> = keys.iter().collect();
        s.known.retain(|id, d| listed.contains(id) || d.sluid.as_ref().is_some_and(|u| listed.contains(u)));
        let SlurmJobs { known, sluids, .. } = &mut *s;
        sluids.retain(|_, id| known.contains_key(id));
        s.retry_at.retain(|k, _| listed.contains(k));
        s.take_answers(None);
        if s.missing || s.worker.is_none() {
            return;
        }
        let now = Instant::now();
        let todo: Vec<String> = keys
            .iter()
            .filter(|k| {
                !s.known.contains_key(*k)
                    && !s.sluids.contains_key(*k)
                    && !s.asked.contains(*k)
                    && s.retry_at.get(*k).is_none_or(|t| *t <= now)
            })
            .cloned()
            .collect();
        for key in &todo {
            if s.worker.as_ref().is_some_and(|w| w.ask(key)) {
                s.asked.insert(key.clone());
            }
        }
        while todo.iter().any(|k| s.asked.contains(k)) && !s.missing {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() || !s.take_answers(Some(left)) {
                break;
            }
        }
    }

    /// Takes the answers that have come (waiting up to `wait` for the first, when given);
    /// false when none came.
    fn take_answers(&mut self, wait: Option<Duration>) -> bool {
        let Some(w) = &self.worker else { return false };
        let answers = w.answers(wait);
        let any = !answers.is_empty();
        for (key, answer) in answers {
            self.asked.remove(&key);
            match answer {
                Ok(d) => self.keep(d),
                Err(worker::Failure::Command(CommandError::NotFound(..))) => {
                    if !self.missing {
                        tracing::warn!(
                            "scontrol not found: job accounts and GPUs come from the jobs' own environment, marked unverified"
                        );
                    }
                    self.missing = true;
                }
                Err(e) => {
                    tracing::debug!(job = key, error = %e, "Slurm did not describe the job; asking again later");
                    self.retry_at.insert(key, Instant::now() + RETRY_AFTER);
                }
            }
        }
        any
    }
}
