//! The delivery task of one destination: sends what waits, oldest first, at most one request
//! set per replay gap while a backlog goes out, backing off after failures; a new flush is
//! tried at once.

use crate::sinks::delivery::{Delivery, Destination, Step};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use tokio::sync::mpsc;

/// How delivery paces itself: at most one request set per `replay_gap` while a backlog is sent,
/// and after a failure a doubling wait of up to `max_backoff` (the flush interval) before the
/// next try.
#[derive(Debug, Clone, Copy)]
pub struct Pace {
    pub replay_gap: Duration,
    pub max_backoff: Duration,
}

/// Sends what waits, oldest first, paced; a new flush is tried at once. Stops when the main
/// loop hangs up (one last paced drain, bounded by the caller's grace) or when the sink cannot
/// work any more; then returns why it gave up. `in_memory` says, all along, how many datums
/// wait in memory alone (the spool could not take them): what a stop cut by its grace loses.
pub async fn deliver_loop<D: Destination>(
    mut delivery: Delivery<D>,
    mut rx: mpsc::UnboundedReceiver<Vec<D::Item>>,
    pace: Pace,
    in_memory: Arc<AtomicUsize>,
) -> Option<String> {
    let mut next = tokio::time::Instant::now();
    let mut failures: u32 = 0;
    let mut open = true;
    while open || delivery.has_backlog() {
        in_memory.store(delivery.in_memory(), Ordering::Relaxed);
        let backlog = delivery.has_backlog();
        tokio::select! {
            biased;
            msg = rx.recv(), if open => match msg {
                Some(held) => {
                    delivery.hold(held);
                    // A new flush: try now, unless CloudWatch just failed us.
                    if failures == 0 {
                        next = tokio::time::Instant::now();
                    }
                }
                None => {
                    open = false;
                    // Into the spool first: the last sends may outlast the stop's grace.
                    delivery.spool_memory();
                    next = tokio::time::Instant::now();
                }
            },
            _ = tokio::time::sleep_until(next), if backlog => {
                match delivery.send_oldest().await {
                    Step::Sent | Step::Empty => {
                        failures = 0;
                        next = tokio::time::Instant::now() + pace.replay_gap;
                    }
                    Step::Failed(e) => {
                        if failures == 0 {
                            let (held, files) = delivery.waiting();
                            tracing::warn!(error = %e, spooled_flushes = files, held_in_memory = held, "cannot deliver; will retry");
                        }
                        if !open {
                            // Stopping: what is left stays in the spool, and what waits in
                            // memory goes there too where it can.
                            delivery.at_stop();
                            in_memory.store(0, Ordering::Relaxed);
                            return None;
                        }
                        failures += 1;
                        let wait = pace.replay_gap.saturating_mul(1 << failures.min(16)).min(pace.max_backoff);
                        next = tokio::time::Instant::now() + wait;
                    }
                    Step::Fatal(e) => {
                        // Dropping the receiver makes the main loop's next flush fail and the daemon exit.
                        if !super::stdout::closed_pipe(&e) {
                            tracing::error!(error = %e, "delivery cannot continue");
                        }
                        return Some(e);
                    }
                }
            }
        }
    }
    in_memory.store(delivery.in_memory(), Ordering::Relaxed);
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aggregate::{Aggregate, Summary};
    use crate::sample::Dims;
    use crate::sinks::delivery::{Checks, StatsHandle};
    use crate::sinks::spool::Spool;
    use slurm_cw_sink::outcome::Outcome;
    use slurm_cw_sink::validate::DropReason;
    use std::sync::{Arc, Mutex};
    use std::time::SystemTime;

    /// A destination that cannot be reached.
    struct Down;

    struct Any;

    impl Checks<Aggregate> for Any {
        fn retain_sendable(&mut self, _: &mut Vec<Aggregate>, _: &StatsHandle) {}
    }

    impl Destination for Down {
        type Item = Aggregate;

        fn label(&self) -> &str {
            "Slurm/test"
        }

        fn checks(&self) -> Box<dyn Checks<Aggregate>> {
            Box::new(Any)
        }

        async fn put_in(&mut self, _: &str, items: Vec<Aggregate>) -> Outcome<Aggregate> {
            Outcome { undelivered: items, last_error: Some("unreachable".into()), ..Outcome::default() }
        }
    }

    fn items(n: usize) -> Vec<Aggregate> {
        let metric = &slurm_cw_catalog::metrics::SHIPPER_MEMORY_RSS;
        let dims = Dims::new().with(slurm_cw_catalog::dims::CLUSTER_NAME, "c");
        let value = Summary::Value { value: 1.0 };
        (0..n)
            .map(|_| Aggregate { metric, dims: dims.clone(), time: SystemTime::now(), value: value.clone() })
            .collect()
    }

    /// Stops with `held` items in memory and the destination down; the drops counted.
    async fn stop_holding(spool: Option<Arc<Mutex<Spool<Aggregate>>>>, held: usize) -> u64 {
        let stats = StatsHandle::default();
        let mut delivery = Delivery::new(Down, spool, 1000, stats.clone());
        delivery.hold(items(held));
        let (tx, rx) = mpsc::unbounded_channel();
        drop(tx);
        let pace = Pace { replay_gap: Duration::from_millis(1), max_backoff: Duration::from_millis(1) };
        assert_eq!(deliver_loop(delivery, rx, pace, Arc::default()).await, None);
        stats.take().dropped.get(&DropReason::Stopped).copied().unwrap_or(0)
    }

    #[tokio::test]
    async fn what_memory_holds_at_a_stop_goes_to_the_spool_or_is_counted_lost() {
        // Without a spool (or one that cannot take it): lost, and counted, not silently.
        assert_eq!(stop_holding(None, 3).await, 3);
        // A spool that takes it now: kept for the next start.
        let dir = tempfile::tempdir().unwrap();
        let (spool, _) = Spool::open(dir.path(), 1 << 20).unwrap();
        let spool = Arc::new(Mutex::new(spool));
        assert_eq!(stop_holding(Some(spool.clone()), 3).await, 0);
        drop(spool);
        let (mut reopened, _) = Spool::<Aggregate>::open(dir.path(), 1 << 20).unwrap();
        let oldest = reopened.oldest().expect("a file for the next start");
        assert_eq!(reopened.read(&oldest).unwrap().items.len(), 3);
    }

    /// A destination whose request never returns (a network that swallows it).
    struct Hangs;

    impl Destination for Hangs {
        type Item = Aggregate;

        fn label(&self) -> &str {
            "Slurm/test"
        }

        fn checks(&self) -> Box<dyn Checks<Aggregate>> {
            Box::new(Any)
        }

        async fn put_in(&mut self, _: &str, _: Vec<Aggregate>) -> Outcome<Aggregate> {
            std::future::pending().await
        }
    }

    #[tokio::test]
    async fn a_stop_cut_by_its_grace_knows_what_memory_held() {
        // No spool: the flush waits in memory while its send hangs, and the stop's grace runs out.
        let mut delivery = Delivery::new(Hangs, None, 1000, StatsHandle::default());
        delivery.hold(items(4));
        let (tx, rx) = mpsc::unbounded_channel();
        drop(tx);
        let pace = Pace { replay_gap: Duration::from_millis(1), max_backoff: Duration::from_millis(1) };
        let in_memory = Arc::new(AtomicUsize::new(0));
        let cut = tokio::time::timeout(
            Duration::from_millis(200),
            deliver_loop(delivery, rx, pace, in_memory.clone()),
        );
        assert!(cut.await.is_err(), "the send hangs");
        assert_eq!(in_memory.load(Ordering::Relaxed), 4, "what the daemon reports lost");
    }
}
