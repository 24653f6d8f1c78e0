//! The thread that asks Slurm about jobs, so that a slow or unreachable slurmctld never holds
//! up collection: keys in, answers out, [`IN_FLIGHT`] scontrol at once at most.

use crate::sources::head::command::{CommandError, SlurmCommands};
use slurm_cw_formats::slurm::job::JobDetail;
use slurm_cw_formats::slurm::job_json;
use std::sync::Arc;
use std::sync::mpsc;
use std::time::Duration;

/// scontrol processes at once: enough for a node that starts many jobs together, few enough
/// not to add to slurmctld's load in a burst.
const IN_FLIGHT: usize = 4;
/// Keys waiting to be asked at most; past it a key is asked in a later collection.
const QUEUE: usize = 1024;

#[derive(Debug, thiserror::Error)]
pub enum Failure {
    #[error(transparent)]
    Command(CommandError),
    #[error("scontrol's JSON answer could not be read")]
    Unreadable,
    #[error("scontrol answered for another job")]
    NotThisJob,
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
        let spawned = std::thread::Builder::new().name("slurm-lookups".into()).spawn(move || {
            let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
                Ok(rt) => rt,
                Err(e) => {
                    tracing::error!(error = %e, "cannot start the Slurm lookups' runtime");
                    return;
                }
            };
            rt.block_on(serve(cmds, asked, answer));
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

async fn serve(cmds: SlurmCommands, asked: mpsc::Receiver<String>, answer: mpsc::Sender<Answer>) {
    let cmds = Arc::new(cmds);
    let slots = Arc::new(tokio::sync::Semaphore::new(IN_FLIGHT));
    let asked = Arc::new(std::sync::Mutex::new(asked));
    loop {
        // The std receiver blocks: wait on it off the runtime's thread.
        let rx = asked.clone();
        let next = tokio::task::spawn_blocking(move || rx.lock().ok().and_then(|r| r.recv().ok())).await;
        let Ok(Some(key)) = next else { return };
        let Ok(permit) = slots.clone().acquire_owned().await else { return };
        let (cmds, answer) = (cmds.clone(), answer.clone());
        tokio::spawn(async move {
            let result = lookup(&cmds, &key).await;
            drop(permit);
            let _ = answer.send((key, result));
        });
    }
}

/// One job, by id or SLUID.
async fn lookup(cmds: &SlurmCommands, key: &str) -> Result<JobDetail, Failure> {
    let out = cmds.run("scontrol", &["show", "job", "--json", key]).await.map_err(Failure::Command)?;
    match job_json::parse(out.stdout.as_bytes(), key) {
        Ok(d) => Ok(d),
        Err(slurm_cw_formats::slurm::job::JobError::NoJobId) => Err(Failure::NotThisJob),
        Err(_) => Err(Failure::Unreadable),
    }
}
