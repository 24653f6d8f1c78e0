//! The shipper's own figures: its CPU and memory each collection ([`ShipperCollector`]), so
//! that its cost on a node is itself a metric, and what delivery did each flush
//! ([`DeliveryFigures`]).

use super::{Collector, Errors};
use crate::datum::Datum;
use crate::sample::{Batch, Dims};
use crate::sinks::SinkKind;
use crate::sinks::delivery::{DeliveryStats, SharedSpool, StatsHandle};
use crate::sinks::validate::DropReason;
use slurm_cw_catalog::dims::{NODE_NAME, REASON, SINK};
use slurm_cw_catalog::metrics::{
    JOB_RECORDS, SHIPPER_BYTES_SENT, SHIPPER_COLLECTIONS_MISSED, SHIPPER_CPU_USAGE, SHIPPER_DATUMS_DROPPED,
    SHIPPER_DATUMS_SENT, SHIPPER_MEMORY_RSS, SHIPPER_REQUESTS, SHIPPER_RETRIES, SHIPPER_SPOOL_BYTES,
    SHIPPER_SPOOL_FILES,
};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

pub struct ShipperCollector {
    node: String,
    last: Option<(Instant, f64)>,
    ticks_per_second: f64,
    page_size: f64,
}

impl ShipperCollector {
    pub fn new(node: impl Into<String>) -> Self {
        ShipperCollector {
            node: node.into(),
            last: None,
            ticks_per_second: procfs::ticks_per_second() as f64,
            page_size: procfs::page_size() as f64,
        }
    }
}

#[async_trait::async_trait(?Send)]
impl Collector for ShipperCollector {
    fn name(&self) -> &'static str {
        "shipper"
    }

    async fn collect(&mut self, out: &mut Batch, errors: &mut Errors) {
        errors.ran("shipper");
        let me = match procfs::process::Process::myself().and_then(|p| Ok((p.stat()?, p.statm()?))) {
            Ok(v) => v,
            Err(e) => {
                tracing::debug!(error = %e, "cannot read /proc/self");
                errors.add("shipper", 1);
                return;
            }
        };
        let (stat, statm) = me;
        let dims = Dims::new().with(NODE_NAME, self.node.as_str());
        out.push(&SHIPPER_MEMORY_RSS, dims.clone(), statm.resident as f64 * self.page_size);
        let cpu_seconds = (stat.utime + stat.stime) as f64 / self.ticks_per_second;
        let now = Instant::now();
        if let Some((then, before)) = self.last {
            let wall = now.duration_since(then).as_secs_f64();
            if wall > 0.0 {
                let pct = ((cpu_seconds - before).max(0.0) / wall) * 100.0;
                out.push(&SHIPPER_CPU_USAGE, dims, pct);
            }
        }
        self.last = Some((now, cpu_seconds));
    }
}

/// One destination's delivery, as the self-metrics see it.
#[derive(Clone)]
pub struct Delivered {
    pub sink: SinkKind,
    pub stats: StatsHandle,
    pub spool: Option<SharedSpool<Datum>>,
}

/// Delivery's own figures, read at each flush rather than each collection: what each
/// destination sent, retried and dropped, what waits in its spool, the job records written,
/// and the collections skipped. CloudWatch's (and standard output's) are the series without a
/// `Sink`; another destination's carry its name.
pub struct DeliveryFigures {
    pub node: String,
    pub metrics: Vec<Delivered>,
    pub records: Option<StatsHandle>,
    /// Collections skipped because the one before was still running (the collection thread
    /// counts them).
    pub missed: Arc<AtomicU64>,
}

impl DeliveryFigures {
    /// Pushes the figures since the last flush; `trimmed`: records trimmed by the transforms
    /// (counted as CloudWatch's drops, as the records are CloudWatch Logs'). Returns the counts
    /// taken: each metric destination's, and the records'.
    pub fn push(&self, batch: &mut Batch, trimmed: u64) -> (Vec<DeliveryStats>, Option<DeliveryStats>) {
        let host = Dims::new().with(NODE_NAME, self.node.as_str());
        let mut records_dropped = BTreeMap::new();
        let records = self.records.as_ref().map(StatsHandle::take);
        if let Some(r) = &records {
            batch.push(&JOB_RECORDS, Dims::new(), r.sent as f64);
            records_dropped = r.dropped.clone();
        }
        if trimmed > 0 {
            *records_dropped.entry(DropReason::Trimmed).or_default() += trimmed;
        }
        let missed = self.missed.swap(0, Ordering::Relaxed);
        batch.push(&SHIPPER_COLLECTIONS_MISSED, host.clone(), missed as f64);
        let mut total = 0;
        let mut first_plain = true;
        let mut taken = Vec::new();
        for d in &self.metrics {
            let mut s = d.stats.take();
            taken.push(s.clone());
            let dims = match d.sink {
                plain if plain.component().plain_self_metrics() => {
                    // Records drops count with CloudWatch's (once, with the first such route).
                    if std::mem::take(&mut first_plain) {
                        for (reason, n) in std::mem::take(&mut records_dropped) {
                            *s.dropped.entry(reason).or_default() += n;
                        }
                    }
                    host.clone()
                }
                other => host.clone().with(SINK, other.as_str()),
            };
            batch.push(&SHIPPER_DATUMS_SENT, dims.clone(), s.sent as f64);
            batch.push(&SHIPPER_REQUESTS, dims.clone(), s.requests as f64);
            batch.push(&SHIPPER_RETRIES, dims.clone(), s.retries as f64);
            batch.push(&SHIPPER_BYTES_SENT, dims.clone(), s.bytes as f64);
            for (reason, n) in &s.dropped {
                batch.push(&SHIPPER_DATUMS_DROPPED, dims.clone().with(REASON, reason.as_str()), *n as f64);
            }
            total += s.dropped.values().sum::<u64>();
            if let Some(spool) = &d.spool {
                let (files, bytes) = match spool.lock() {
                    Ok(g) => (g.files(), g.bytes()),
                    Err(p) => (p.get_ref().files(), p.get_ref().bytes()),
                };
                batch.push(&SHIPPER_SPOOL_FILES, dims.clone(), files as f64);
                batch.push(&SHIPPER_SPOOL_BYTES, dims, bytes as f64);
            }
        }
        // Drops of records with no CloudWatch route to count them with: still counted.
        for (reason, n) in &records_dropped {
            batch.push(&SHIPPER_DATUMS_DROPPED, host.clone().with(REASON, reason.as_str()), *n as f64);
            total += n;
        }
        // Cluster-wide, every host adds into one series that an alarm can watch (zero too, so
        // the alarm sees data).
        batch.push(&SHIPPER_DATUMS_DROPPED, Dims::new(), total as f64);
        (taken, records)
    }
}
