//! Delivery to one destination (metrics, or job records), in two halves:
//!
//! - [`Intake`] (the main loop's, at each flush): checks the items and writes them ahead to
//!   the disk spool, synchronously, so that a flush is safe on disk before anything is sent; a
//!   batch the spool cannot take (no spool, disk full) goes to delivery in memory instead.
//! - [`Delivery`] (a task of its own): sends the oldest waiting batch first, spool files before
//!   batches in memory, one request set at a time, and removes what the service accepted.
//!
//! Both count what they send and drop in a [`StatsHandle`] for the self-metrics. What differs
//! between destinations is behind [`Destination`] (where items go) and [`Checks`] (what may go).

use super::spool::{ReadError, Spool};
use super::validate::{DropReason, Validator};
use crate::aggregate::Aggregate;
use slurm_cw_formats::record::Record;
use slurm_cw_formats::spool::Item;
use slurm_cw_sink::outcome::Outcome;
use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

/// Where a delivery sends: a metric destination (any of [`crate::sinks::REGISTRY`])
/// or the job records' (CloudWatch Logs, standard output).
#[allow(async_fn_in_trait)]
pub trait Destination {
    type Item: Item + Named;
    /// Where a batch held in memory goes (the namespace, the log group).
    fn label(&self) -> &str;
    /// The destination's own rules of what may go (CloudWatch's limits for CloudWatch).
    fn checks(&self) -> Box<dyn Checks<Self::Item>>;
    async fn put_in(&mut self, label: &str, items: Vec<Self::Item>) -> Outcome<Self::Item>;
}

/// A destination's rules, applied before items are spooled and again before they are sent (a
/// spooled batch may have aged past the service's window): what fails is dropped, logged once
/// and counted.
pub trait Checks<T>: Send {
    fn retain_sendable(&mut self, items: &mut Vec<T>, stats: &StatsHandle);
}

/// What an item is called in logs: the metric of a datum, "record" for a record.
pub trait Named {
    fn what(&self) -> &str;
}

impl Named for Aggregate {
    fn what(&self) -> &str {
        self.metric.name
    }
}

impl Named for Record {
    fn what(&self) -> &str {
        "record"
    }
}

/// A spool, shared by the intake (writes) and delivery (reads and removes).
pub type SharedSpool<T> = Arc<Mutex<Spool<T>>>;

fn lock<T>(s: &SharedSpool<T>) -> MutexGuard<'_, Spool<T>> {
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

/// The flush side: checks and the write-ahead to the spool.
pub struct Intake<T> {
    label: String,
    checks: Box<dyn Checks<T>>,
    /// Logs each kind of drop once.
    drops: Validator,
    validate: bool,
    spool: Option<SharedSpool<T>>,
    stats: StatsHandle,
    trouble: Trouble,
}

impl<T: Item + Named> Intake<T> {
    /// `label`: the namespace or log group every batch is spooled for; `checks`: the
    /// destination's ([`Destination::checks`]).
    pub fn new(
        label: &str,
        spool: Option<SharedSpool<T>>,
        stats: StatsHandle,
        checks: Box<dyn Checks<T>>,
    ) -> Self {
        Intake {
            label: label.to_owned(),
            checks,
            drops: Validator::new(),
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

    /// Whether the spool refused a flush, given what [`Intake::take`] kept of it (without a
    /// spool it keeps all, and refuses nothing).
    pub fn spool_refused(&self, kept: &[T]) -> bool {
        self.spool.is_some() && !kept.is_empty()
    }

    /// Checks a flush and writes it to the spool. Returns what the spool could not take, for
    /// delivery to hold in memory (everything, without a spool).
    pub fn take(&mut self, mut items: Vec<T>) -> Vec<T> {
        if self.validate {
            self.checks.retain_sendable(&mut items, &self.stats);
        }
        if items.is_empty() {
            return items;
        }
        let Some(spool) = &self.spool else { return items };
        let mut s = lock(spool);
        let result = s.push(&self.label, &items);
        match result {
            Ok((name, dropped)) => {
                s.keep_fresh(name, &self.label, items);
                drop(s);
                if dropped.full > 0 {
                    self.drops.log_once(
                        DropReason::SpoolFull,
                        "*",
                        "the spool is full: the oldest data was dropped",
                    );
                }
                self.stats.count_drop(DropReason::SpoolFull, dropped.full);
                self.trouble.clear("the spool takes data again");
                Vec::new()
            }
            Err(not) => {
                let dir = s.dir().display().to_string();
                drop(s);
                // Room was made before the write failed: those items are gone all the same.
                self.stats.count_drop(DropReason::SpoolFull, not.evicted);
                self.trouble.set(
                    "cannot write the spool; keeping data in memory until it can (see delivery.max_backlog)",
                    format!("{dir}: {}", not.error),
                );
                items
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

/// Persistent refusals of one spool file before newer files are tried past it.
pub const SET_ASIDE_AFTER: u32 = 3;

/// The sending side.
pub struct Delivery<D: Destination> {
    /// Spool files the service refused for good, and how many times.
    stuck: BTreeMap<String, (u32, String)>,
    sink: D,
    checks: Box<dyn Checks<D::Item>>,
    /// Logs each kind of drop once.
    drops: Validator,
    validate: bool,
    spool: Option<SharedSpool<D::Item>>,
    memory: VecDeque<Vec<D::Item>>,
    max_backlog: usize,
    stats: StatsHandle,
}

impl<D: Destination> Delivery<D> {
    /// `max_backlog`: items held in memory (what the spool could not take); beyond it the
    /// oldest are dropped and counted as `queue_full`.
    pub fn new(sink: D, spool: Option<SharedSpool<D::Item>>, max_backlog: usize, stats: StatsHandle) -> Self {
        Delivery {
            stuck: BTreeMap::new(),
            checks: sink.checks(),
            sink,
            drops: Validator::new(),
            validate: true,
            spool,
            memory: VecDeque::new(),
            max_backlog,
            stats,
        }
    }

    /// Where it sends (the sink's label: a namespace, a log group, an endpoint).
    pub fn label(&self) -> &str {
        self.sink.label()
    }

    /// See [`Intake::without_validation`].
    pub fn without_validation(mut self) -> Self {
        self.validate = false;
        self
    }

    /// Holds a batch the spool could not take.
    pub fn hold(&mut self, items: Vec<D::Item>) {
        if items.is_empty() {
            return;
        }
        self.memory.push_back(items);
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
            self.drops.log_once(DropReason::QueueFull, "*", "the in-memory backlog is full");
        }
    }

    /// At a stop with the destination failing: what waits in memory (the spool could not take
    /// it when it came) is written to the spool for the next start, where it takes it now. The
    /// rest is lost: counted (`stopped`) and logged with its number, never silently. Returns it.
    pub fn at_stop(&mut self) -> u64 {
        let label = self.sink.label().to_owned();
        self.spool_memory();
        let lost: u64 = self.memory.drain(..).map(|b| b.len() as u64).sum();
        if lost > 0 {
            self.stats.count_drop(DropReason::Stopped, lost);
            tracing::error!(
                lost,
                destination = label,
                "stopping: datums held in memory (the spool could not take them) are lost"
            );
        }
        lost
    }

    /// What memory holds (what the spool could not take when it came), written to the spool
    /// where it takes it now: at a stop, before the last sends, so that a stop cut short by its
    /// grace loses none of it. What it cannot take stays in memory.
    pub fn spool_memory(&mut self) {
        let Some(spool) = &self.spool else { return };
        let label = self.sink.label().to_owned();
        let mut kept = 0;
        let mut left = VecDeque::new();
        let mut s = lock(spool);
        while let Some(batch) = self.memory.pop_front() {
            match s.push(&label, &batch) {
                Ok((_, dropped)) => {
                    kept += batch.len();
                    self.stats.count_drop(DropReason::SpoolFull, dropped.full);
                }
                Err(not) => {
                    self.stats.count_drop(DropReason::SpoolFull, not.evicted);
                    left.push_back(batch);
                }
            }
        }
        drop(s);
        self.memory = left;
        if kept > 0 {
            tracing::info!(kept, "stopping: what was held in memory is in the spool for the next start");
        }
    }

    /// Datums held in memory alone (the spool could not take them when they came).
    pub fn in_memory(&self) -> usize {
        self.memory.iter().map(Vec::len).sum()
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
            // A file refused for good again and again does not hold the newer ones back.
            let stuck = &self.stuck;
            let oldest =
                lock(&spool).oldest_but(|n| stuck.get(n).is_some_and(|(k, _)| *k >= SET_ASIDE_AFTER));
            if let Some(name) = oldest {
                let (step, delivered) = self.send_file(&spool, &name).await;
                if delivered {
                    self.retry_or_set_aside_before(&spool, &name).await;
                }
                return step;
            }
        }
        let Some(batch) = self.memory.pop_front() else { return Step::Empty };
        let label = self.sink.label().to_owned();
        let (step, left, _) = self.send(&label, batch).await;
        if let Some(rest) = left {
            self.memory.push_front(rest);
        }
        step
    }

    /// Sends one spool file; true when all of it was delivered (or it was unreadable).
    async fn send_file(&mut self, spool: &SharedSpool<D::Item>, name: &str) -> (Step, bool) {
        let read = lock(spool).read(name);
        let entry = match read {
            Ok(e) => e,
            Err(ReadError::Corrupt(e, datums)) => {
                self.drops.log_once(DropReason::SpoolCorrupt, "*", &e.to_string());
                self.stats.count_drop(DropReason::SpoolCorrupt, datums);
                return (Step::Sent, false);
            }
            Err(ReadError::Unreadable(why)) => {
                // Not a drop: the file is kept aside (or was removed by someone else).
                tracing::error!(error = %why, "a spool file cannot be read; the next one is sent");
                return (Step::Sent, false);
            }
        };
        if entry.skipped > 0 {
            let why = "a spooled datum names a metric or dimension this version does not have";
            self.drops.log_once(DropReason::UnknownMetric, "*", why);
            self.stats.count_drop(DropReason::UnknownMetric, entry.skipped as u64);
        }
        let (step, left, persistent) = self.send(&entry.label, entry.items).await;
        let mut s = lock(spool);
        match &left {
            None => {
                s.remove(name);
                self.stuck.remove(name);
            }
            Some(rest) => {
                if persistent {
                    let why = if let Step::Failed(e) = &step { e.clone() } else { String::new() };
                    self.stuck.entry(name.to_owned()).or_insert((0, why)).0 += 1;
                }
                // Keep only what was not delivered, so nothing is sent twice.
                if let Err(e) = s.rewrite(name, &entry.label, rest) {
                    tracing::warn!(error = %e, "cannot rewrite a spool file; it will be sent whole again");
                }
            }
        }
        (step, left.is_none())
    }

    /// Newer data went through: each older file refused for good gets one more try now, and
    /// is set aside when it is refused again (its own fault, not the service's state).
    async fn retry_or_set_aside_before(&mut self, spool: &SharedSpool<D::Item>, name: &str) {
        let older: Vec<String> = self.stuck.range(..name.to_owned()).map(|(k, _)| k.clone()).collect();
        for old in older {
            let before = self.stuck.get(&old).map_or(0, |(n, _)| *n);
            let (_, delivered) = self.send_file(spool, &old).await;
            let Some((n, why)) = self.stuck.get(&old).cloned() else { continue };
            if delivered || n == before {
                continue; // sent now, or failed for a passing reason: it stays in line
            }
            self.stuck.remove(&old);
            let items = lock(spool).set_aside(&old);
            self.stats.count_drop(DropReason::SetAside, items);
            tracing::error!(
                file = %old, items, refusals = n, error = %why,
                "a spooled flush refused for good while newer ones go through was set aside (in the spool's aside/ directory)"
            );
        }
    }

    /// Sends one batch; returns the step, what is left undelivered if anything, and whether
    /// it was refused for good.
    async fn send(&mut self, label: &str, mut items: Vec<D::Item>) -> (Step, Option<Vec<D::Item>>, bool) {
        if self.validate {
            // Checked again: a spooled batch may have aged out of CloudWatch's 14 days.
            self.checks.retain_sendable(&mut items, &self.stats);
        }
        if items.is_empty() {
            return (Step::Sent, None, false);
        }
        let outcome = self.sink.put_in(label, items).await;
        for d in &outcome.rejected {
            self.drops.log_once(DropReason::Rejected, d.what(), "refused by the destination");
        }
        self.stats.count_drop(DropReason::Rejected, outcome.rejected.len() as u64);
        self.stats.update(|s| {
            s.sent += outcome.sent as u64;
            s.requests += outcome.requests;
            s.retries += outcome.retries;
            s.bytes += outcome.bytes;
        });
        if let Some(e) = outcome.fatal {
            return (Step::Fatal(e), Some(outcome.undelivered), false);
        }
        if outcome.undelivered.is_empty() {
            (Step::Sent, None, false)
        } else {
            let why = outcome.last_error.unwrap_or_else(|| "unknown error".into());
            (Step::Failed(why), Some(outcome.undelivered), outcome.persistent)
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
