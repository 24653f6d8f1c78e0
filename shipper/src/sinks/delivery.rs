//! Delivery, in two halves:
//!
//! - [`Intake`] (the main loop's, at each flush): validates the datums and writes them ahead to
//!   the disk spool, synchronously, so that a flush is safe on disk before anything is sent; a
//!   batch the spool cannot take (no spool, disk full) goes to delivery in memory instead.
//! - [`Delivery`] (a task of its own): sends the oldest waiting batch first, spool files before
//!   batches in memory, one request set at a time, and removes what CloudWatch accepted.
//!
//! Both count what they send and drop in a [`StatsHandle`] for the self-metrics.

use super::Sink;
use super::spool::Spool;
use super::validate::{DropReason, Validator};
use crate::datum::Datum;
use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::SystemTime;

/// The spool, shared by the intake (writes) and delivery (reads and removes).
pub type SharedSpool = Arc<Mutex<Spool>>;

fn lock(s: &SharedSpool) -> MutexGuard<'_, Spool> {
    match s.lock() {
        Ok(g) => g,
        Err(poisoned) => poisoned.into_inner(),
    }
}

/// Totals since the last [`StatsHandle::take`].
#[derive(Debug, Default, Clone, PartialEq)]
pub struct DeliveryStats {
    pub sent: u64,
    pub requests: u64,
    pub retries: u64,
    pub bytes: u64,
    pub dropped: BTreeMap<DropReason, u64>,
}

/// Shared view of the delivery counters, read by the self-metrics at each flush.
#[derive(Debug, Clone, Default)]
pub struct StatsHandle(Arc<Mutex<DeliveryStats>>);

impl StatsHandle {
    /// Returns the counts so far and starts again from zero.
    pub fn take(&self) -> DeliveryStats {
        match self.0.lock() {
            Ok(mut s) => std::mem::take(&mut *s),
            Err(poisoned) => std::mem::take(&mut *poisoned.into_inner()),
        }
    }

    fn update(&self, f: impl FnOnce(&mut DeliveryStats)) {
        match self.0.lock() {
            Ok(mut s) => f(&mut s),
            Err(poisoned) => f(&mut poisoned.into_inner()),
        }
    }

    pub fn count_drop(&self, reason: DropReason, n: u64) {
        if n > 0 {
            self.update(|s| *s.dropped.entry(reason).or_default() += n);
        }
    }
}

/// Logs an error the first time it (or a new one) happens, and when it clears.
#[derive(Debug, Default)]
struct Trouble(Option<String>);

impl Trouble {
    fn set(&mut self, what: &str, e: String) {
        if self.0.as_deref() != Some(&e) {
            tracing::error!(error = %e, "{what}");
            self.0 = Some(e);
        }
    }

    fn clear(&mut self, what: &str) {
        if self.0.take().is_some() {
            tracing::info!("{what}");
        }
    }
}

/// The flush side: validation and the write-ahead to the spool.
pub struct Intake {
    namespace: String,
    validator: Validator,
    validate: bool,
    spool: Option<SharedSpool>,
    stats: StatsHandle,
    trouble: Trouble,
}

impl Intake {
    pub fn new(namespace: &str, spool: Option<SharedSpool>, stats: StatsHandle) -> Self {
        Intake {
            namespace: namespace.to_owned(),
            validator: Validator::new(),
            validate: true,
            spool,
            stats,
            trouble: Trouble::default(),
        }
    }

    /// Lets invalid datums through to CloudWatch (tests of its own checks). Never in the daemon.
    pub fn without_validation(mut self) -> Self {
        self.validate = false;
        self
    }

    /// Validates a flush and writes it to the spool. Returns what the spool could not take, for
    /// delivery to hold in memory (everything, without a spool).
    pub fn take(&mut self, mut datums: Vec<Datum>) -> Vec<Datum> {
        if self.validate {
            for (_, reason) in self.validator.retain_valid(&mut datums, SystemTime::now()) {
                self.stats.count_drop(reason, 1);
            }
        }
        if datums.is_empty() {
            return datums;
        }
        let Some(spool) = &self.spool else { return datums };
        let result = lock(spool).push(&self.namespace, &datums);
        match result {
            Ok((_, dropped)) => {
                if dropped.full > 0 {
                    self.validator.log_once(
                        DropReason::SpoolFull,
                        "*",
                        "the spool is full: the oldest data was dropped",
                    );
                }
                self.stats.count_drop(DropReason::SpoolFull, dropped.full);
                self.trouble.clear("the spool takes data again");
                Vec::new()
            }
            Err(e) => {
                let dir = lock(spool).dir().display().to_string();
                self.trouble.set(
                    "cannot write the spool; keeping data in memory until it can (see cloudwatch.max_backlog)",
                    format!("{dir}: {e}"),
                );
                datums
            }
        }
    }
}

/// What one step of delivery did.
#[derive(Debug, PartialEq)]
pub enum Step {
    /// A batch went out (or was dropped as unreadable): go on.
    Sent,
    /// The batch could not be sent; it stays for later.
    Failed(String),
    /// Nothing waits.
    Empty,
    /// The sink cannot work any more (standard output closed).
    Fatal(String),
}

/// The sending side.
pub struct Delivery {
    sink: Sink,
    validator: Validator,
    validate: bool,
    spool: Option<SharedSpool>,
    memory: VecDeque<Vec<Datum>>,
    max_backlog: usize,
    stats: StatsHandle,
}

impl Delivery {
    /// `max_backlog`: datums held in memory (what the spool could not take); beyond it the
    /// oldest are dropped and counted as `queue_full`.
    pub fn new(sink: Sink, spool: Option<SharedSpool>, max_backlog: usize, stats: StatsHandle) -> Self {
        Delivery {
            sink,
            validator: Validator::new(),
            validate: true,
            spool,
            memory: VecDeque::new(),
            max_backlog,
            stats,
        }
    }

    /// See [`Intake::without_validation`].
    pub fn without_validation(mut self) -> Self {
        self.validate = false;
        self
    }

    /// Holds a batch the spool could not take.
    pub fn hold(&mut self, datums: Vec<Datum>) {
        if datums.is_empty() {
            return;
        }
        self.memory.push_back(datums);
        let mut held: usize = self.memory.iter().map(Vec::len).sum();
        while held > self.max_backlog {
            let Some(front) = self.memory.front_mut() else { break };
            let over = (held - self.max_backlog).min(front.len());
            front.drain(..over);
            if front.is_empty() {
                self.memory.pop_front();
            }
            held -= over;
            self.stats.count_drop(DropReason::QueueFull, over as u64);
            self.validator.log_once(DropReason::QueueFull, "*", "the in-memory backlog is full");
        }
    }

    /// Datums held in memory, and files in the spool.
    pub fn waiting(&self) -> (usize, usize) {
        let files = self.spool.as_ref().map_or(0, |s| lock(s).files());
        (self.memory.iter().map(Vec::len).sum(), files)
    }

    pub fn has_backlog(&self) -> bool {
        let (d, f) = self.waiting();
        d + f > 0
    }

    /// Sends the oldest waiting batch (spool files first: they are older).
    pub async fn send_oldest(&mut self) -> Step {
        if let Some(spool) = self.spool.clone() {
            let oldest = lock(&spool).oldest();
            if let Some(name) = oldest {
                let read = lock(&spool).read(&name);
                let entry = match read {
                    Ok(e) => e,
                    Err((e, datums)) => {
                        self.validator.log_once(DropReason::SpoolCorrupt, "*", &e.to_string());
                        self.stats.count_drop(DropReason::SpoolCorrupt, datums);
                        return Step::Sent;
                    }
                };
                let (step, left) = self.send(&entry.namespace, entry.datums).await;
                let mut s = lock(&spool);
                match &left {
                    None => s.remove(&name),
                    Some(rest) => {
                        // Keep only what was not delivered, so nothing is sent twice.
                        if let Err(e) = s.rewrite(&name, &entry.namespace, rest) {
                            tracing::warn!(error = %e, "cannot rewrite a spool file; it will be sent whole again");
                        }
                    }
                }
                return step;
            }
        }
        let Some(batch) = self.memory.pop_front() else { return Step::Empty };
        let namespace = self.sink.namespace().to_owned();
        let (step, left) = self.send(&namespace, batch).await;
        if let Some(rest) = left {
            self.memory.push_front(rest);
        }
        step
    }

    /// Sends one batch; returns the step and what is left undelivered, if anything.
    async fn send(&mut self, namespace: &str, mut datums: Vec<Datum>) -> (Step, Option<Vec<Datum>>) {
        if self.validate {
            // Checked again: a spooled batch may have aged out of CloudWatch's 14 days.
            for (_, reason) in self.validator.retain_valid(&mut datums, SystemTime::now()) {
                self.stats.count_drop(reason, 1);
            }
        }
        if datums.is_empty() {
            return (Step::Sent, None);
        }
        let outcome = self.sink.put_in(namespace, datums).await;
        for d in &outcome.rejected {
            self.validator.log_once(DropReason::Rejected, &d.metric, "refused by CloudWatch");
        }
        self.stats.count_drop(DropReason::Rejected, outcome.rejected.len() as u64);
        self.stats.update(|s| {
            s.sent += outcome.sent as u64;
            s.requests += outcome.requests;
            s.retries += outcome.retries;
            s.bytes += outcome.bytes;
        });
        if let Some(e) = outcome.fatal {
            return (Step::Fatal(e), Some(outcome.undelivered));
        }
        if outcome.undelivered.is_empty() {
            (Step::Sent, None)
        } else {
            let why = outcome.last_error.unwrap_or_else(|| "unknown error".into());
            (Step::Failed(why), Some(outcome.undelivered))
        }
    }

    /// Sends everything waiting, oldest first, until it is all sent or a send fails.
    pub async fn drain(&mut self) -> Step {
        loop {
            match self.send_oldest().await {
                Step::Sent => continue,
                other => return other,
            }
        }
    }
}
