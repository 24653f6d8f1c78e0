//! Delivery: validates each flush, sends it after whatever is still waiting from earlier
//! flushes (oldest first), keeps what could not be sent, and counts everything for the
//! self-metrics.

use super::Sink;
use super::validate::{DropReason, Validator};
use crate::datum::Datum;
use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

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

/// The result of one delivery.
#[derive(Debug, Default, PartialEq)]
pub struct Report {
    pub sent: usize,
    pub dropped: usize,
    /// Datums still waiting to be sent after this delivery.
    pub pending: usize,
    pub error: Option<String>,
    /// The sink cannot work any more; see [`crate::sinks::cloudwatch::PutOutcome::fatal`].
    pub fatal: Option<String>,
}

pub struct Delivery {
    sink: Sink,
    validator: Validator,
    validate: bool,
    backlog: VecDeque<Datum>,
    max_backlog: usize,
    stats: StatsHandle,
}

impl Delivery {
    /// `max_backlog`: how many undelivered datums to hold in memory; beyond it the oldest are
    /// dropped and counted as `queue_full`.
    pub fn new(sink: Sink, max_backlog: usize, stats: StatsHandle) -> Self {
        Delivery {
            sink,
            validator: Validator::new(),
            validate: true,
            backlog: VecDeque::new(),
            max_backlog,
            stats,
        }
    }

    /// Sends without local validation, so that CloudWatch's own checks can be exercised against
    /// a real endpoint (tests of the split-on-400 path). Never used by the daemon.
    pub fn without_validation(mut self) -> Self {
        self.validate = false;
        self
    }

    pub fn namespace(&self) -> &str {
        self.sink.namespace()
    }

    pub fn pending(&self) -> usize {
        self.backlog.len()
    }

    pub async fn deliver(&mut self, datums: Vec<Datum>) -> Report {
        let mut all: Vec<Datum> = self.backlog.drain(..).collect();
        all.extend(datums);
        let mut report = Report::default();
        if self.validate {
            // The backlog is checked again: its timestamps may have aged out of the window.
            for (_, reason) in self.validator.retain_valid(&mut all, SystemTime::now()) {
                self.stats.count_drop(reason, 1);
                report.dropped += 1;
            }
        }
        if all.is_empty() {
            return report;
        }
        let outcome = self.sink.put(all).await;
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
        report.sent = outcome.sent;
        report.dropped += outcome.rejected.len();
        report.error = outcome.last_error;
        report.fatal = outcome.fatal;
        self.backlog.extend(outcome.undelivered);
        let overflow = self.backlog.len().saturating_sub(self.max_backlog);
        if overflow > 0 {
            self.backlog.drain(..overflow);
            self.stats.count_drop(DropReason::QueueFull, overflow as u64);
            self.validator.log_once(DropReason::QueueFull, "*", "undelivered backlog is full");
            report.dropped += overflow;
        }
        report.pending = self.backlog.len();
        report
    }
}
