//! One destination's pieces: the sink, its spool directory, its intake and its delivery, and
//! the counts of what they did.

use crate::sinks::config::{DeliveryConfig, SpoolConfig};
use crate::sinks::delivery::{Delivery, Destination, Intake, SharedSpool, StatsHandle};
use crate::sinks::spool::Spool;
use crate::sinks::validate::DropReason;
use slurm_cw_formats::spool::Item;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// One destination's intake, spool and delivery, and the counts of what they did.
pub struct Route<D: Destination> {
    pub intake: Intake<D::Item>,
    pub delivery: Delivery<D>,
    pub stats: StatsHandle,
    pub spool: Option<SharedSpool<D::Item>>,
}

impl<D: Destination> Route<D> {
    /// `dir`: this destination's spool directory, if it spools (and `spool.enabled`).
    pub fn open(
        spool: &SpoolConfig,
        delivery: &DeliveryConfig,
        label: &str,
        dir: Option<PathBuf>,
        sink: D,
    ) -> Self {
        let stats = StatsHandle::default();
        let max_backlog = delivery.max_backlog;
        let spool = match dir {
            Some(dir) if spool.enabled => open_spool(&dir, spool.max_bytes, &stats),
            _ => None,
        };
        let intake = Intake::new(label, spool.clone(), stats.clone(), sink.checks());
        let delivery = Delivery::new(sink, spool.clone(), max_backlog, stats.clone());
        Route { intake, delivery, stats, spool }
    }
}

/// A disk spool. When it cannot be opened the shipper runs on without it (one error line;
/// undelivered data then waits in memory).
pub fn open_spool<T: Item>(dir: &Path, max_bytes: u64, stats: &StatsHandle) -> Option<SharedSpool<T>> {
    match Spool::open(dir, max_bytes) {
        Ok((spool, dropped)) => {
            if dropped.corrupt_files > 0 {
                tracing::warn!(
                    dir = %dir.display(),
                    files = dropped.corrupt_files,
                    items = dropped.corrupt_datums,
                    "removed torn spool files of an earlier crash"
                );
            }
            stats.count_drop(DropReason::SpoolCorrupt, dropped.corrupt_datums);
            if !spool.is_empty() {
                tracing::info!(
                    dir = %dir.display(),
                    files = spool.files(),
                    bytes = spool.bytes(),
                    "spooled data from an earlier run will be sent first"
                );
            }
            Some(Arc::new(Mutex::new(spool)))
        }
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
            tracing::warn!(error = %e, "the spool is another process's: this one keeps undelivered data in memory");
            None
        }
        Err(e) => {
            tracing::error!(dir = %dir.display(), error = %e, "cannot use the spool; undelivered data will wait in memory");
            None
        }
    }
}
