//! Who may connect to the hook socket, and how often: connection caps and token buckets per
//! uid and in all (see the limits in [`super`]).

use super::Limits;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// A token bucket.
#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

impl Bucket {
    fn full(burst: f64, now: Instant) -> Self {
        Bucket { tokens: burst, at: now }
    }

    fn refill(&mut self, rate: f64, burst: f64, now: Instant) {
        let secs = now.saturating_duration_since(self.at).as_secs_f64();
        self.tokens = (self.tokens + secs * rate).min(burst);
        self.at = now;
    }

    fn take(&mut self, rate: f64, burst: f64, now: Instant) -> bool {
        self.refill(rate, burst, now);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

/// Why a connection was refused before its request was read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Refused {
    /// Over the cap of open connections, in all or for this uid.
    TooMany,
    /// This uid's budget is spent.
    Busy,
}

/// One uid's open connections and budget.
#[derive(Debug)]
struct Peer {
    open: usize,
    bucket: Bucket,
}

/// Connection counts and budgets, shared by the accept loop and the connections.
#[derive(Debug)]
pub(super) struct Gate {
    limits: Limits,
    open: usize,
    peers: HashMap<u32, Peer>,
    forward: Bucket,
    /// Refusals since the last log line, and when that was.
    refused: u64,
    logged_at: Option<Instant>,
}

/// Peers kept before idle ones (no connection, full budget) are forgotten.
const PEERS_KEPT: usize = 256;
/// At most one log line about refused connections per this long.
const REFUSAL_LOG_EVERY: Duration = Duration::from_secs(60);

impl Gate {
    pub(super) fn new(limits: Limits, now: Instant) -> Self {
        Gate {
            limits,
            open: 0,
            peers: HashMap::new(),
            forward: Bucket::full(limits.burst, now),
            refused: 0,
            logged_at: None,
        }
    }

    /// Admits a connection of `uid` (counted open until [`Gate::close`]) or says why not.
    pub(super) fn admit(&mut self, uid: u32, now: Instant) -> Result<(), Refused> {
        let l = self.limits;
        if self.peers.len() >= PEERS_KEPT {
            self.peers.retain(|_, p| {
                p.bucket.refill(l.uid_rate, l.uid_burst, now);
                p.open > 0 || p.bucket.tokens < l.uid_burst
            });
        }
        let peer =
            self.peers.entry(uid).or_insert_with(|| Peer { open: 0, bucket: Bucket::full(l.uid_burst, now) });
        let verdict = if self.open >= l.connections || peer.open >= l.per_uid {
            Err(Refused::TooMany)
        } else if !peer.bucket.take(l.uid_rate, l.uid_burst, now) {
            Err(Refused::Busy)
        } else {
            peer.open += 1;
            self.open += 1;
            Ok(())
        };
        if let Err(why) = verdict {
            self.note_refusal(uid, why, now);
        }
        verdict
    }

    pub(super) fn close(&mut self, uid: u32) {
        self.open = self.open.saturating_sub(1);
        if let Some(p) = self.peers.get_mut(&uid) {
            p.open = p.open.saturating_sub(1);
        }
    }

    /// A request may go to the main loop (the budget of all uids together).
    pub(super) fn forward(&mut self, now: Instant) -> bool {
        self.forward.take(self.limits.rate, self.limits.burst, now)
    }

    /// Logs the first refusal, then at most once a minute with the count since.
    fn note_refusal(&mut self, uid: u32, why: Refused, now: Instant) {
        self.refused += 1;
        if self.logged_at.is_none_or(|t| now.saturating_duration_since(t) >= REFUSAL_LOG_EVERY) {
            tracing::warn!(
                uid,
                reason = ?why,
                refused = self.refused,
                "hook socket: refusing connections over the per-user limits"
            );
            self.refused = 0;
            self.logged_at = Some(now);
        }
    }
}

pub(super) fn lock(gate: &Mutex<Gate>) -> MutexGuard<'_, Gate> {
    // The counts stay usable even if a holder panicked.
    gate.lock().unwrap_or_else(|p| p.into_inner())
}

/// An admitted connection; closing it frees its place.
pub(super) struct Slot {
    pub(super) gate: Arc<Mutex<Gate>>,
    pub(super) uid: u32,
}

impl Drop for Slot {
    fn drop(&mut self) {
        lock(&self.gate).close(self.uid);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hook::tests::roomy;

    #[test]
    fn buckets_refill_at_their_rate_up_to_the_burst() {
        let t0 = Instant::now();
        let mut b = Bucket::full(2.0, t0);
        assert!(b.take(10.0, 2.0, t0) && b.take(10.0, 2.0, t0));
        assert!(!b.take(10.0, 2.0, t0), "burst spent");
        assert!(!b.take(10.0, 2.0, t0 + Duration::from_millis(50)));
        assert!(b.take(10.0, 2.0, t0 + Duration::from_millis(100)), "one token per 100 ms at 10/s");
        b.refill(10.0, 2.0, t0 + Duration::from_secs(60));
        assert_eq!(b.tokens, 2.0, "never more than the burst");
    }

    #[test]
    fn the_gate_caps_connections_per_uid_and_in_all_and_spends_budgets() {
        let t = Instant::now();
        let limits = Limits { connections: 3, per_uid: 2, ..roomy() };
        let mut g = Gate::new(limits, t);
        assert_eq!(g.admit(1, t), Ok(()));
        assert_eq!(g.admit(1, t), Ok(()));
        assert_eq!(g.admit(1, t), Err(Refused::TooMany), "per uid");
        assert_eq!(g.admit(2, t), Ok(()));
        assert_eq!(g.admit(3, t), Err(Refused::TooMany), "in all");
        g.close(1);
        assert_eq!(g.admit(3, t), Ok(()));
        assert_eq!(g.open, 3);

        let limits = Limits { uid_rate: 1.0, uid_burst: 2.0, ..roomy() };
        let mut g = Gate::new(limits, t);
        for _ in 0..2 {
            assert_eq!(g.admit(5, t), Ok(()));
            g.close(5);
        }
        assert_eq!(g.admit(5, t), Err(Refused::Busy), "budget spent, whether or not it was served");
        assert_eq!(g.admit(6, t), Ok(()), "another uid has its own");
        assert_eq!(g.admit(5, t + Duration::from_secs(1)), Ok(()), "refilled");
        assert_eq!(g.refused, 0, "the refusal was logged, and the count restarted");
    }

    #[test]
    fn idle_peers_are_forgotten_once_many() {
        let t = Instant::now();
        let mut g = Gate::new(Limits::default(), t);
        for uid in 0..PEERS_KEPT as u32 {
            assert_eq!(g.admit(uid, t), Ok(()));
            g.close(uid);
        }
        assert_eq!(g.peers.len(), PEERS_KEPT);
        let later = t + Duration::from_secs(10);
        assert_eq!(g.admit(9999, later), Ok(()));
        assert_eq!(g.peers.len(), 1, "refilled and closed peers are dropped");
    }
}
