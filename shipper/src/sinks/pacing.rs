//! The delivery task of one destination: sends what waits, oldest first, at most one request
//! set per replay gap while a backlog goes out, backing off after failures; a new flush is
//! tried at once.

use crate::sinks::delivery::{Delivery, Destination, Step};
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
/// work any more; then returns why it gave up.
pub async fn deliver_loop<D: Destination>(
    mut delivery: Delivery<D>,
    mut rx: mpsc::UnboundedReceiver<Vec<D::Item>>,
    pace: Pace,
) -> Option<String> {
    let mut next = tokio::time::Instant::now();
    let mut failures: u32 = 0;
    let mut open = true;
    while open || delivery.has_backlog() {
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
                            return None; // stopping: what is left stays in the spool
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
    None
}
