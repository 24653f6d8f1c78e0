//! The pipeline on a thread of its own. Collectors read files, run Slurm commands and ask NVML;
//! any of them can hang (an NFS-backed /proc read, a GPU that takes seconds to answer). Here
//! that stalls only collection: the daemon's loop, delivery, the hook and signals run on the
//! main runtime and go on. A collection still running when the next is due is not started
//! again but counted (`ShipperCollectionsMissed`); the hook answers `busy` meanwhile instead of
//! keeping its caller waiting.
//!
//! The thread keeps its own schedule (one collection every interval, the first at once) and
//! sleeps until the next is due or the main loop asks for something (a flush, a final sample).
//! The main thread is not woken each collection to say "collect": on a node that idles between
//! collections each wake-up is a fair share of the daemon's CPU (docs/testing.md).

use crate::pipeline::{Flushed, Pipeline};
use crate::sources::FinalSample;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::RecvTimeoutError;
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, oneshot};

enum Work {
    Flush,
    Final { job: String, uid: u32, reply: oneshot::Sender<FinalSample> },
}

/// Whether a collection is running and since when, as the collection thread says.
struct Running {
    /// Nanoseconds from `base` to the start of the running collection, plus one; 0 while none
    /// runs (one value: the main loop never sees a start without its time).
    since: AtomicU64,
    base: Instant,
}

impl Running {
    fn new() -> Self {
        Running { since: AtomicU64::new(0), base: Instant::now() }
    }

    fn start(&self) {
        let ns = u64::try_from(self.base.elapsed().as_nanos()).unwrap_or(u64::MAX - 1);
        self.since.store(ns + 1, Ordering::Release);
    }

    fn stop(&self) {
        self.since.store(0, Ordering::Release);
    }

    /// How long the running collection has run; None when none runs.
    fn running_for(&self) -> Option<Duration> {
        let since = self.since.load(Ordering::Acquire).checked_sub(1)?;
        Some(self.base.elapsed().saturating_sub(Duration::from_nanos(since)))
    }
}

/// The daemon's handle on the collection thread.
pub struct Collection {
    work: std::sync::mpsc::Sender<Work>,
    /// What each flush made, in order.
    pub flushed: mpsc::UnboundedReceiver<Flushed>,
    running: Arc<Running>,
    /// How long a collection may run before it counts as stuck: the collect interval.
    deadline: Duration,
    /// Flushes asked for whose result has not been taken from [`Collection::flushed`].
    pending: usize,
}

/// When the collection after one that was due at `due` and ended at `ended` is due, and how
/// many it skipped: each due time it ran past (the one it ended on runs at once).
fn next_due(due: Instant, ended: Instant, every: Duration) -> (Instant, u64) {
    let next = due + every;
    if ended <= next {
        return (next, 0);
    }
    let every_ns = every.as_nanos().max(1);
    let missed = u64::try_from((ended - next).as_nanos().div_ceil(every_ns)).unwrap_or(u64::MAX);
    (next + every.saturating_mul(u32::try_from(missed).unwrap_or(u32::MAX)), missed)
}

impl Collection {
    /// Starts the thread, which collects every `every` from now on; `make` builds the pipeline
    /// there (its collectors need not be `Send`).
    pub fn start(make: impl FnOnce() -> Pipeline + Send + 'static, every: Duration) -> std::io::Result<Self> {
        let (work_tx, work_rx) = std::sync::mpsc::channel::<Work>();
        let (flushed_tx, flushed) = mpsc::unbounded_channel();
        let running = Arc::new(Running::new());
        let missed = Arc::new(AtomicU64::new(0));
        let r = running.clone();
        std::thread::Builder::new().name("collection".into()).spawn(move || {
            let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
                Ok(rt) => rt,
                Err(e) => {
                    tracing::error!(error = %e, "cannot start the collection thread's runtime");
                    return;
                }
            };
            let mut pipeline = make().counting_missed(missed.clone());
            // What the main loop asks for; false once it is gone (the process stops).
            let answer = |work: Work, pipeline: &mut Pipeline| match work {
                Work::Flush => flushed_tx.send(pipeline.flush()).is_ok(),
                Work::Final { job, uid, reply } => {
                    // A client that gave up (its 3 s are over) needs no sample.
                    if !reply.is_closed() {
                        let _ = reply.send(pipeline.final_sample(&job, uid));
                    }
                    true
                }
            };
            let mut due = Instant::now();
            loop {
                let now = Instant::now();
                if now < due {
                    let going = match work_rx.recv_timeout(due - now) {
                        Ok(work) => answer(work, &mut pipeline),
                        Err(RecvTimeoutError::Timeout) => true,
                        Err(RecvTimeoutError::Disconnected) => false,
                    };
                    if !going {
                        return;
                    }
                    if Instant::now() < due {
                        continue;
                    }
                }
                // What was asked before this collection was due goes first (a flush due at the
                // same instant holds the collections before it), but never more than the hook's
                // queue: a flood of hook requests must not keep collection from running.
                for work in work_rx.try_iter().take(crate::hook::QUEUE) {
                    if !answer(work, &mut pipeline) {
                        return;
                    }
                }
                r.start();
                rt.block_on(pipeline.collect());
                r.stop();
                let ended = Instant::now();
                let (next, skipped) = next_due(due, ended, every);
                if skipped > 0 {
                    missed.fetch_add(skipped, Ordering::Relaxed);
                    tracing::warn!(ran_for = ?ended - due, skipped, "a collection ran past the next; skipped the ones it overran");
                }
                due = next;
            }
        })?;
        Ok(Collection { work: work_tx, flushed, running, deadline: every, pending: 0 })
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
        if self.stuck().is_some() {
            let _ = req.reply.send(FinalSample::Busy);
            return;
        }
        let _ = self.work.send(Work::Final { job: req.job, uid: req.uid, reply: req.reply });
    }

    /// How long the running collection has run, where that is past its deadline.
    pub fn stuck(&self) -> Option<Duration> {
        self.running.running_for().filter(|d| *d > self.deadline)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::{Options, Parts};
    use crate::role::Role;
    use crate::sample::Batch;
    use crate::sources::{Collector, Errors};
    use std::sync::atomic::AtomicBool;

    /// Counts the collections it takes part in.
    struct Counting(Arc<AtomicU64>);

    #[async_trait::async_trait(?Send)]
    impl Collector for Counting {
        fn name(&self) -> &'static str {
            "counting"
        }
        async fn collect(&mut self, _out: &mut Batch, _errors: &mut Errors) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
        /// Slower to answer than the flood below asks.
        fn final_sample(&mut self, _job: &str, _uid: u32, _out: &mut Batch) -> Option<FinalSample> {
            std::thread::sleep(Duration::from_millis(1));
            Some(FinalSample::Sampled(0))
        }
    }

    #[test]
    fn a_flood_of_hook_requests_does_not_keep_collection_from_running() {
        let collections = Arc::new(AtomicU64::new(0));
        let c = collections.clone();
        let make = move || {
            let collectors: Vec<Box<dyn Collector>> = vec![Box::new(Counting(c))];
            Pipeline::new(&Options::default(), Role::Node, collectors, Parts::cloudwatch("c", "n1"))
        };
        let collection = Collection::start(make, Duration::from_millis(20)).unwrap();
        let flooding = Arc::new(AtomicBool::new(true));
        let (work, f) = (collection.work.clone(), flooding.clone());
        let flood = std::thread::spawn(move || {
            // The callers wait for their answers: a request whose caller left is not answered.
            let mut waiting = Vec::new();
            while f.load(Ordering::Relaxed) {
                for _ in 0..4 {
                    let (reply, answer) = oneshot::channel();
                    let _ = work.send(Work::Final { job: "1".into(), uid: 1000, reply });
                    waiting.push(answer);
                }
                std::thread::sleep(Duration::from_millis(1));
            }
        });
        // Collections go on while the requests keep coming faster than they are answered.
        let started = Instant::now();
        let before = collections.load(Ordering::Relaxed);
        while collections.load(Ordering::Relaxed) < before + 3 && started.elapsed() < Duration::from_secs(20)
        {
            std::thread::sleep(Duration::from_millis(10));
        }
        flooding.store(false, Ordering::Relaxed);
        flood.join().unwrap();
        assert!(collections.load(Ordering::Relaxed) >= before + 3, "collection starved by hook requests");
    }

    #[test]
    fn a_collection_that_overruns_skips_the_ones_it_ran_past() {
        let t = Instant::now();
        let s = Duration::from_secs(1);
        assert_eq!(next_due(t, t + Duration::from_millis(200), s), (t + s, 0));
        // Ran 2.5 intervals: the ones due at +1 and +2 are skipped, the next is at +3.
        assert_eq!(next_due(t, t + Duration::from_millis(2500), s), (t + 3 * s, 2));
        // Ended when the next was due: that one runs at once; one that ended at +2 skipped +1.
        assert_eq!(next_due(t, t + s, s), (t + s, 0));
        assert_eq!(next_due(t, t + 2 * s, s), (t + 2 * s, 1));
    }
}
