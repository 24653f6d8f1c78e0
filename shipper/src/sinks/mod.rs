//! Where datums go: CloudWatch, or standard output. [`delivery`] sits in front of both:
//! validation, the count of what was sent and dropped, and the backlog of what could not be
//! sent yet.

pub mod delivery;
pub mod spool;
pub mod stdout;

pub use slurm_cw_sink::{cloudwatch, validate};

use crate::datum::Datum;
use cloudwatch::{CloudWatchSink, PutOutcome};
use stdout::StdoutSink;

pub enum Sink {
    CloudWatch(CloudWatchSink),
    Stdout(StdoutSink),
}

impl Sink {
    pub fn namespace(&self) -> &str {
        match self {
            Sink::CloudWatch(s) => s.namespace(),
            Sink::Stdout(s) => s.namespace(),
        }
    }

    /// Sends `datums` into `namespace` (a spooled batch keeps the namespace it was made for).
    pub async fn put_in(&mut self, namespace: &str, datums: Vec<Datum>) -> PutOutcome {
        match self {
            Sink::CloudWatch(s) => s.put_in(namespace, datums).await,
            Sink::Stdout(s) => match s.put_in(namespace, &datums) {
                Ok(()) => PutOutcome { sent: datums.len(), ..PutOutcome::default() },
                Err(e) => {
                    let msg = format!("cannot write to standard output: {e}");
                    let gone = e.kind() == std::io::ErrorKind::BrokenPipe;
                    PutOutcome {
                        undelivered: datums,
                        fatal: gone.then(|| msg.clone()),
                        last_error: Some(msg),
                        ..PutOutcome::default()
                    }
                }
            },
        }
    }
}
