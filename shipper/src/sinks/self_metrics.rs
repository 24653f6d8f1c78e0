//! What delivery did, as metrics, read at each flush rather than each collection: what each
//! destination sent, retried and dropped, what waits in its spool, the job records written, and
//! the collections skipped ([`DeliveryFigures`]).

use crate::aggregate::Aggregate;
use crate::sample::{Batch, Dims};
use crate::sinks::SinkKind;
use crate::sinks::delivery::{DeliveryStats, SharedSpool, StatsHandle};
use crate::sinks::validate::DropReason;
use slurm_cw_catalog::dims::{NODE_NAME, REASON, SINK};
use slurm_cw_catalog::metrics::{
    JOB_RECORDS, SHIPPER_BYTES_SENT, SHIPPER_COLLECTIONS_MISSED, SHIPPER_DATUMS_DROPPED, SHIPPER_DATUMS_SENT,
    SHIPPER_REQUESTS, SHIPPER_RETRIES, SHIPPER_SPOOL_BYTES, SHIPPER_SPOOL_FILES,
};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// One destination's delivery, as the self-metrics see it.
#[derive(Clone)]
pub struct Delivered {
    pub sink: SinkKind,
    pub stats: StatsHandle,
    pub spool: Option<SharedSpool<Aggregate>>,
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
