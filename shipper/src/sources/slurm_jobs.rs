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
//! Slurm is asked again, every [`RECHECK_EVERY`], about a job the node collector doubts (no
//! process left in its cgroup, or past the end Slurm gave it): a cgroup that outlives its job
//! (processes Slurm could not kill, a slurmd that died before cleaning up) would otherwise be
//! counted as a running job, and billed, for as long as it stays; every other job is asked
//! about again every [`RECHECK_ALL`]. A job Slurm says has ended or was requeued is
//! [`SlurmJobs::ended`]; so is one Slurm has not listed for [`UNLISTED_FOR`] while
//! `scontrol ping` found slurmctld up (Slurm 24.11 answers an unknown job and an unreachable
//! slurmctld alike: an empty list, exit 0).
//! Ended jobs are asked about still, and come back if Slurm lists them running again. A SLUID
//! directory Slurm never named (26.05: the job was forgotten before it was asked about) ends
//! the same way, by its SLUID.
//!
//! Shared by the node and GPU collectors, which run on the collection thread (an
//! `Rc<RefCell<..>>`); the node collector refreshes it at the start of each collection.

mod worker;

use crate::sources::head::command::{CommandError, SlurmCommands};
use slurm_cw_formats::slurm::job::JobDetail;
use slurm_cw_formats::slurm::job_state::{JOB_BASE_STATES, job_state};
use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::rc::Rc;
use std::time::{Duration, Instant};

/// How long a collection waits for the answers about the jobs it found new.
pub const WAIT: Duration = Duration::from_secs(2);
/// How long a job Slurm could not answer for waits before it is asked again.
const RETRY_AFTER: Duration = Duration::from_secs(60);
/// How often a job in doubt, or taken as ended, is asked about again.
pub const RECHECK_EVERY: Duration = Duration::from_secs(300);
/// How often every other job is asked about again: one cancelled while processes Slurm could
/// not kill stay has processes and is not past its end.
pub const RECHECK_ALL: Duration = Duration::from_secs(3600);
/// How long Slurm must go on not listing a job before it counts as ended.
pub const UNLISTED_FOR: Duration = Duration::from_secs(900);
/// Whether a state Slurm gives (its words and codes in any case, as [`job_state`] reads them)
/// means the job does not run here any more: every base state but running and suspended (over,
/// or pending again after a requeue), and the flags Slurm prints alone for a job leaving its
/// nodes (`completing`, which 22.05 prints alone; requeued).
fn ended_state(state: &str) -> bool {
    const STILL_HERE: [&str; 2] = ["running", "suspended"];
    const LEAVING: [&str; 3] = ["completing", "requeued", "requeue_hold"];
    job_state(state).is_some_and(|s| {
        if JOB_BASE_STATES.contains(&s) { !STILL_HERE.contains(&s) } else { LEAVING.contains(&s) }
    })
}

pub type Shared = Rc<RefCell<SlurmJobs>>;

/// How often jobs are asked about again, and how long an unlisted one waits to count as ended.
#[derive(Debug, Clone, Copy)]
pub struct Pace {
    pub doubtful: Duration,
    pub all: Duration,
    pub unlisted_for: Duration,
    /// How long a key Slurm could not answer for waits before it is asked again.
    pub retry: Duration,
}

impl Default for Pace {
    fn default() -> Self {
        Pace { doubtful: RECHECK_EVERY, all: RECHECK_ALL, unlisted_for: UNLISTED_FOR, retry: RETRY_AFTER }
    }
}

pub struct SlurmJobs {
    worker: Option<worker::Worker>,
    /// By job id.
    known: HashMap<String, JobDetail>,
    /// SLUID -> job id, of the jobs in `known` that have one.
    sluids: HashMap<String, String>,
    /// Keys (job ids or SLUIDs) asked and not answered yet.
    asked: HashSet<String>,
    retry_at: HashMap<String, Instant>,
    /// When each key was last asked about.
    asked_at: HashMap<String, Instant>,
    /// Since when Slurm has answered each key with a list that lacks it.
    unlisted_since: HashMap<String, Instant>,
    /// Job id (or SLUID Slurm never named) -> why it counts as ended (Slurm's state, or not
    /// listed).
    ended: HashMap<String, String>,
    pace: Pace,
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
            asked_at: HashMap::new(),
            unlisted_since: HashMap::new(),
            ended: HashMap::new(),
            pace: Pace::default(),
            missing: false,
        };
        details.into_iter().for_each(|d| s.keep(d));
        Rc::new(RefCell::new(s))
    }

    /// Asks again at another pace (tests).
    pub fn with_pace(this: Shared, pace: Pace) -> Shared {
        this.borrow_mut().pace = pace;
        this
    }

    fn keep(&mut self, d: JobDetail) {
        self.unlisted_since.remove(&d.job_id);
        match d.state.as_deref().filter(|s| ended_state(s)) {
            Some(state) => self.ended.insert(d.job_id.clone(), state.to_owned()),
            None => self.ended.remove(&d.job_id),
        };
        if let Some(sluid) = &d.sluid {
            // Named at last: the job's id speaks for it from now on.
            self.unlisted_since.remove(sluid);
            self.ended.remove(sluid);
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

    /// Why job `id` (or a SLUID Slurm never named) counts as ended although its cgroup is
    /// still here: Slurm's state for it, or that Slurm has not listed it for [`UNLISTED_FOR`].
    pub fn ended(&self, id: &str) -> Option<&str> {
        self.ended.get(id).map(String::as_str)
    }

    /// Whether Slurm can be asked here at all.
    pub fn available(&self) -> bool {
        !self.missing
    }

    /// Asks Slurm about the jobs in `keys` (job ids, or SLUIDs of jobs whose id is not known
    /// yet) it has not answered for, and waits at most [`WAIT`] for the answers; forgets
    /// jobs no longer listed. Asks again, without waiting, about the jobs in `doubtful` and
    /// those taken as ended, each once every [`RECHECK_EVERY`].
    pub fn refresh(this: &Shared, keys: &[String], doubtful: &[&str]) {
        let deadline = Instant::now() + WAIT;
        let mut s = this.borrow_mut();
        let listed: HashSet<&String> = keys.iter().collect();
        s.known.retain(|id, d| listed.contains(id) || d.sluid.as_ref().is_some_and(|u| listed.contains(u)));
        let SlurmJobs { known, sluids, .. } = &mut *s;
        sluids.retain(|_, id| known.contains_key(id));
        s.retry_at.retain(|k, _| listed.contains(k));
        s.asked_at.retain(|k, _| listed.contains(k));
        s.unlisted_since.retain(|k, _| listed.contains(k));
        s.ended.retain(|id, _| listed.contains(id));
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
            s.ask(key, now);
        }
        let since = |k: &str| s.asked_at.get(k).map_or(Duration::MAX, |t| now.duration_since(*t));
        let mut again: Vec<String> = doubtful
            .iter()
            .copied()
            .chain(s.ended.keys().map(String::as_str))
            .filter(|k| since(k) >= s.pace.doubtful)
            .chain(s.known.keys().map(String::as_str).filter(|k| since(k) >= s.pace.all))
            .filter(|k| s.known.contains_key(*k) && !s.asked.contains(*k))
            .map(str::to_owned)
            .collect();
        again.sort_unstable();
        again.dedup();
        for key in &again {
            s.ask(key, now);
        }
        s.wait_for(&todo, deadline);
    }

    /// Asks Slurm again about jobs whose cgroup directory is another since the last collection
    /// (requeued, and started again here before a collection saw them gone), and waits at most
    /// [`WAIT`] for the answers: their new run's start, which names the run in the records.
    /// What Slurm said before stands until it answers.
    pub fn renew(this: &Shared, ids: &[String]) {
        if ids.is_empty() {
            return;
        }
        let deadline = Instant::now() + WAIT;
        let mut s = this.borrow_mut();
        if s.missing || s.worker.is_none() {
            return;
        }
        let now = Instant::now();
        for id in ids {
            if !s.asked.contains(id) {
                s.ask(id, now);
            }
        }
        s.wait_for(ids, deadline);
    }

    /// Takes answers until none of `keys` waits for one, or until `deadline`.
    fn wait_for(&mut self, keys: &[String], deadline: Instant) {
        while keys.iter().any(|k| self.asked.contains(k)) && !self.missing {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() || !self.take_answers(Some(left)) {
                break;
            }
        }
    }

    fn ask(&mut self, key: &str, now: Instant) {
        if self.worker.as_ref().is_some_and(|w| w.ask(key)) {
            self.asked.insert(key.to_owned());
            self.asked_at.insert(key.to_owned(), now);
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
                    if matches!(e, worker::Failure::NotThisJob) {
                        self.unlisted(&key);
                    }
                    // A key taken as ended (a SLUID never named, a job id never answered) is
                    // asked about at the pace of the doubtful jobs.
                    let wait = if self.ended.contains_key(&key) {
                        self.pace.retry.max(self.pace.doubtful)
                    } else {
                        self.pace.retry
                    };
                    self.retry_at.insert(key, Instant::now() + wait);
                }
            }
        }
        any
    }

    /// Slurm answered with a list that lacks `key`: ended once that has gone on for
    /// [`UNLISTED_FOR`].
    fn unlisted(&mut self, key: &str) {
        let since = *self.unlisted_since.entry(key.to_owned()).or_insert_with(Instant::now);
        if since.elapsed() >= self.pace.unlisted_for {
            self.ended.entry(key.to_owned()).or_insert_with(|| "not listed by Slurm".to_owned());
        }
    }
}

#[cfg(test)]
mod tests;
