//! The pipeline on a thread of its own. Collectors read files, run Slurm commands and ask NVML;
//! any of them can hang (an NFS-backed /proc read, a GPU that takes seconds to answer). Here
//! that stalls only collection: the daemon's loop, delivery, the hook and signals run on the
//! main runtime and go on. A collection still running when the next is due is not started
//! again but counted (`ShipperCollectionsMissed`); the hook answers `busy` meanwhile instead of
//! keeping its caller waiting.

use crate::pipeline::{Flushed, Pipeline};
use crate::sources::FinalSample;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, oneshot};

enum Work {
    Collect,
    Flush,
    Final { job: String, uid: u32, reply: oneshot::Sender<FinalSample> },
}

/// The daemon's handle on the collection thread.
pub struct Collection {
    work: std::sync::mpsc::Sender<Work>,
    /// What each flush made, in order.
    pub flushed: mpsc::UnboundedReceiver<Flushed>,
    busy: Arc<AtomicBool>,
    /// When the collection now running was asked for.
    started: Instant,
    missed: Arc<AtomicU64>,
    /// How long a collection may run before it counts as stuck: the collect interval.
    deadline: Duration,
    /// Flushes asked for whose result has not been taken from [`Collection::flushed`].
    pending: usize,
}

impl Collection {
    /// Starts the thread; `make` builds the pipeline there (its collectors need not be `Send`).
    pub fn start(
        make: impl FnOnce() -> Pipeline + Send + 'static,
        deadline: Duration,
    ) -> std::io::Result<Self> {
        let (work_tx, work_rx) = std::sync::mpsc::channel::<Work>();
        let (flushed_tx, flushed) = mpsc::unbounded_channel();
        let busy = Arc::new(AtomicBool::new(false));
        let missed = Arc::new(AtomicU64::new(0));
        let (b, m) = (busy.clone(), missed.clone());
        std::thread::Builder::new().name("collection".into()).spawn(move || {
            let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
                Ok(rt) => rt,
                Err(e) => {
                    tracing::error!(error = %e, "cannot start the collection thread's runtime");
                    return;
                }
            };
            let mut pipeline = make().counting_missed(m);
            for work in work_rx {
                match work {
                    Work::Collect => {
                        rt.block_on(pipeline.collect());
                        b.store(false, Ordering::Release);
                    }
                    Work::Flush => {
                        if flushed_tx.send(pipeline.flush()).is_err() {
                            return;
                        }
                    }
                    Work::Final { job, uid, reply } => {
                        // A client that gave up (its 3 s are over) needs no sample.
                        if !reply.is_closed() {
                            let _ = reply.send(pipeline.final_sample(&job, uid));
                        }
                    }
                }
            }
        })?;
        Ok(Collection { work: work_tx, flushed, busy, started: Instant::now(), missed, deadline, pending: 0 })
    }

    /// Starts a collection, unless the last one is still running: then it is counted as missed.
    pub fn collect(&mut self) {
        if self.busy.swap(true, Ordering::AcqRel) {
            self.missed.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(running_for = ?self.started.elapsed(), "the last collection has not finished; skipping this one");
            return;
        }
        self.started = Instant::now();
        if self.work.send(Work::Collect).is_err() {
            self.busy.store(false, Ordering::Release);
        }
    }

    /// Asks for a flush; what it made arrives on [`Collection::flushed`].
    pub fn flush(&mut self) -> bool {
        let sent = self.work.send(Work::Flush).is_ok();
        self.pending += usize::from(sent);
        sent
    }

    /// Says that one flush's result was taken from [`Collection::flushed`].
    pub fn took_flush(&mut self) {
        self.pending = self.pending.saturating_sub(1);
    }

    /// Flushes asked for and not taken yet.
    pub fn pending_flushes(&self) -> usize {
        self.pending
    }

    /// Hands a hook request on, or answers it `busy` while a collection is past its deadline:
    /// the answer would come after the hook's caller gave up.
    pub fn final_sample(&self, req: crate::hook::Request) {
        if self.stuck() {
            let _ = req.reply.send(FinalSample::Busy);
            return;
        }
        let _ = self.work.send(Work::Final { job: req.job, uid: req.uid, reply: req.reply });
    }

    /// Whether the running collection is past its deadline.
    pub fn stuck(&self) -> bool {
        self.busy.load(Ordering::Acquire) && self.started.elapsed() > self.deadline
    }
}
