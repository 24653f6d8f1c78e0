//! The thread that asks Slurm about jobs, so that a slow or unreachable slurmctld never holds
//! up collection: keys in, answers out, [`IN_FLIGHT`] scontrol at once at most.
//!
//! `scontrol show job --json` came with Slurm 23.02. Before it (22.05) the structured answer is
//! `squeue --json`, which there ignores `--jobs` and lists the whole queue: one call then
//! answers every key waiting, each from the record whose JobId matches.

use crate::sources::head::command::{CommandError, SlurmCommands};
use slurm_cw_formats::slurm::job::JobDetail;
use slurm_cw_formats::slurm::job_json;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// scontrol processes at once: enough for a node that starts many jobs together, few enough
/// not to add to slurmctld's load in a burst.
const IN_FLIGHT: usize = 4;
/// Keys waiting to be asked at most; past it a key is asked in a later collection.
const QUEUE: usize = 1024;
/// Without `scontrol --json` (22.05), one `squeue --json --all` answers every key waiting; at
/// most one such listing of the whole queue a second, however many jobs start (the keys of
/// one collection come together: one listing a collection), and every job still answered
/// within the collection's wait.
const QUEUE_GAP: Duration = Duration::from_secs(1);

#[derive(Debug, thiserror::Error)]
pub enum Failure {
    #[error(transparent)]
    Command(CommandError),
    #[error("scontrol's JSON answer could not be read")]
    Unreadable,
    /// Slurm's list lacks the job: it has forgotten it, or (Slurm 24.11) slurmctld could not
    /// be reached.
    #[error("Slurm's answer does not list the job")]
    NotThisJob,
    #[error("the lookups' queue was full")]
    QueueFull,
}

pub type Answer = (String, Result<JobDetail, Failure>);

pub struct Worker {
    asks: mpsc::SyncSender<String>,
    answers: mpsc::Receiver<Answer>,
}

impl Worker {
    /// Starts the thread; it ends when the worker is dropped.
    pub fn start(cmds: SlurmCommands) -> Worker {
        let (asks, asked) = mpsc::sync_channel::<String>(QUEUE);
        let (answer, answers) = mpsc::channel::<Answer>();
        let requeue = asks.clone();
        let spawned = std::thread::Builder::new().name("slurm-lookups".into()).spawn(move || {
            let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
                Ok(rt) => rt,
                Err(e) => {
                    tracing::error!(error = %e, "cannot start the Slurm lookups' runtime");
                    return;
                }
            };
            rt.block_on(serve(cmds, asked, answer, requeue));
        });
        if let Err(e) = spawned {
            tracing::error!(error = %e, "cannot start the Slurm lookups' thread; jobs ship as unknown");
        }
        Worker { asks, answers }
    }

    /// Queues a key; false when the queue is full or the thread is gone.
    pub fn ask(&self, key: &str) -> bool {
        self.asks.try_send(key.to_owned()).is_ok()
    }

    /// The answers there are, waiting up to `wait` for the first when given.
    pub fn answers(&self, wait: Option<Duration>) -> Vec<Answer> {
        let mut out = Vec::new();
        if let Some(wait) = wait
            && let Ok(a) = self.answers.recv_timeout(wait)
        {
            out.push(a);
        }
        out.extend(self.answers.try_iter());
        out
    }
}

async fn serve(
    cmds: SlurmCommands,
    asked: mpsc::Receiver<String>,
    answer: mpsc::Sender<Answer>,
    requeue: mpsc::SyncSender<String>,
) {
    let cmds = Arc::new(cmds);
    let slots = Arc::new(tokio::sync::Semaphore::new(IN_FLIGHT));
    let asked = Arc::new(Mutex::new(asked));
    // Set once scontrol says it has no --json (Slurm 22.05).
    let queue_only = Arc::new(AtomicBool::new(false));
    let mut listed_at: Option<tokio::time::Instant> = None;
    loop {
        // The std receiver blocks: wait on it off the runtime's thread, then take what else
        // is waiting.
        let rx = asked.clone();
        let next = tokio::task::spawn_blocking(move || {
            let r = rx.lock().ok()?;
            let first = r.recv().ok()?;
            Some(std::iter::once(first).chain(r.try_iter()).collect::<Vec<_>>())
        })
        .await;
        let Ok(Some(mut keys)) = next else { return };
        if queue_only.load(Ordering::Relaxed) {
            // One listing per gap: the keys that come meanwhile ride on it.
            if let Some(at) = listed_at {
                tokio::time::sleep_until(at + QUEUE_GAP).await;
            }
            if let Ok(r) = asked.lock() {
                keys.extend(r.try_iter());
            }
            keys.sort();
            keys.dedup();
            listed_at = Some(tokio::time::Instant::now());
            for a in from_queue(&cmds, keys).await {
                let _ = answer.send(a);
            }
            continue;
        }
        for key in keys {
            let Ok(permit) = slots.clone().acquire_owned().await else { return };
            let (cmds, answer, queue_only) = (cmds.clone(), answer.clone(), queue_only.clone());
            let requeue = requeue.clone();
            tokio::spawn(async move {
                let result = match lookup(&cmds, &key).await {
                    Err(Failure::Command(CommandError::Failed { all_stderr, .. }))
                        if all_stderr.contains("unrecognized option") =>
                    {
                        if !queue_only.swap(true, Ordering::Relaxed) {
                            tracing::info!(
                                "scontrol has no --json (Slurm before 23.02): jobs are looked up in squeue --json"
                            );
                        }
                        drop(permit);
                        // Back in line, for the next listing of the whole queue with the others.
                        if requeue.try_send(key.clone()).is_ok() {
                            return;
                        }
                        Err(Failure::QueueFull)
                    }
                    other => {
                        drop(permit);
                        other
                    }
                };
                let _ = answer.send((key, result));
            });
        }
    }
}

/// One job, by id or SLUID. Slurm 24.11 answers an empty list, exit 0, both for a job it does
/// not know and when slurmctld cannot be reached: an answer that lacks the job counts only
/// when `scontrol ping` then finds slurmctld up.
async fn lookup(cmds: &SlurmCommands, key: &str) -> Result<JobDetail, Failure> {
    let out = cmds.run("scontrol", &["show", "job", "--json", key]).await.map_err(Failure::Command)?;
    match pick(out.stdout.as_bytes(), key) {
        Err(Failure::NotThisJob) => match cmds.run("scontrol", &["ping"]).await {
            Ok(_) => Err(Failure::NotThisJob),
            Err(e) => Err(Failure::Command(e)),
        },
        other => other,
    }
}

/// Every key from one `squeue --json` of the whole queue.
async fn from_queue(cmds: &SlurmCommands, keys: Vec<String>) -> Vec<Answer> {
    let all = match cmds.run("squeue", &["--json", "--all"]).await {
        Ok(out) => job_json::parse_all(out.stdout.as_bytes()).map_err(|_| Failure::Unreadable),
        Err(e) => Err(Failure::Command(e)),
    };
    keys.into_iter()
        .map(|k| {
            let answer = match &all {
                Ok(jobs) => failure(job_json::pick(jobs.iter().cloned(), &k)),
                Err(Failure::Command(e)) => Err(Failure::Command(e.clone())),
                Err(_) => Err(Failure::Unreadable),
            };
            (k, answer)
        })
        .collect()
}

fn pick(json: &[u8], key: &str) -> Result<JobDetail, Failure> {
    failure(job_json::parse(json, key))
}

fn failure(r: Result<JobDetail, slurm_cw_formats::slurm::job::JobError>) -> Result<JobDetail, Failure> {
    r.map_err(|e| match e {
        slurm_cw_formats::slurm::job::JobError::NoJobId => Failure::NotThisJob,
        _ => Failure::Unreadable,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;
    use std::time::Instant;

    /// Slurm 22.05's commands: scontrol without --json, squeue listing jobs 1 to 30 and logging
    /// each call.
    fn slurm_22_05(dir: &std::path::Path) -> std::path::PathBuf {
        let log = dir.join("calls");
        let jobs: Vec<String> =
            (1..=30).map(|i| format!(r#"{{"job_id": {i}, "account": "a{i}"}}"#)).collect();
        let scripts = [
            ("scontrol", "echo \"scontrol: unrecognized option '--json'\" >&2; exit 1".to_owned()),
            (
                "squeue",
                format!("echo squeue >> {}; echo '{{\"jobs\": [{}]}}'", log.display(), jobs.join(",")),
            ),
        ];
        for (name, body) in scripts {
            let p = dir.join(name);
            std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        log
    }

    #[test]
    fn without_scontrol_json_the_whole_queue_is_listed_once_for_many_new_jobs() {
        let dir = tempfile::tempdir().unwrap();
        let log = slurm_22_05(dir.path());
        let w = Worker::start(SlurmCommands::new(Some(dir.path().to_owned()), Duration::from_secs(10)));
        // Twenty jobs start together, as on a node that takes a burst of array tasks.
        for i in 1..=20 {
            assert!(w.ask(&i.to_string()));
        }
        let mut answered = Vec::new();
        let until = Instant::now() + Duration::from_secs(60);
        while answered.len() < 20 && Instant::now() < until {
            answered.extend(w.answers(Some(Duration::from_secs(1))));
        }
        assert_eq!(answered.len(), 20, "every job answered");
        assert!(
            answered
                .iter()
                .all(|(k, a)| a.as_ref().is_ok_and(|d| d.job_id == *k && d.account == Some(format!("a{k}"))))
        );
        let calls = std::fs::read_to_string(&log).unwrap().lines().count();
        // The first scontrol refusals come in up to IN_FLIGHT at once and requeue their jobs:
        // at most two listings of the queue (one for the first refusal's batch, one for the rest
        // after the gap), never one a job.
        assert!((1..=2).contains(&calls), "squeue --json --all ran {calls} times for 20 jobs");
    }
}
