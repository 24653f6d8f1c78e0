//! Who may connect to the hook socket, and how often: connection caps and token buckets per
//! uid and in all (see the limits in [`super`]).
//!
//! Fair by uid: the uids seen in the last [`ACTIVE_FOR`] share the connections and the main
//! loop's budget equally. Each holds at most its share of the connections, and spends its own
//! share bucket (the budget's rate and burst over the active uids) before the common one, so
//! however many uids flood, each other uid keeps its share and an honest user gets through.

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

/// One uid's open connections and budgets.
#[derive(Debug)]
struct Peer {
    open: usize,
    /// Connections a second.
    bucket: Bucket,
    /// Its share of the requests to the main loop.
    share: Bucket,
    /// Its last connection attempt, refused ones included.
    seen: Instant,
}

/// Connection counts and budgets, shared by the accept loop and the connections.
#[derive(Debug)]
pub(super) struct Gate {
    limits: Limits,
    /// The uids that own a job here, where known: every other uid (root's aside) is counted as
    /// one, [`STRANGERS`]. A user with subordinate uids (rootless containers, `unshare -U`)
    /// connects from hundreds of them; counted apart, they would shrink every job owner's share
    /// to nothing, and the TaskEpilogs of other users' jobs would time out.
    owners: Option<crate::sources::JobOwners>,
    open: usize,
    peers: HashMap<u32, Peer>,
    forward: Bucket,
    /// Refusals since the last log line, and when that was.
    refused: u64,
    logged_at: Option<Instant>,
}

/// The one peer all uids that own no job here are counted as (no uid is -1).
const STRANGERS: u32 = u32::MAX;

/// Peers kept before idle ones (no connection, full budget) are forgotten.
const PEERS_KEPT: usize = 256;
/// A uid that tried to connect this recently counts in the shares.
pub(super) const ACTIVE_FOR: Duration = Duration::from_secs(2);
/// At most one log line about refused connections per this long.
const REFUSAL_LOG_EVERY: Duration = Duration::from_secs(60);

impl Gate {
    pub(super) fn new(limits: Limits, now: Instant) -> Self {
        Gate {
            limits,
            owners: None,
            open: 0,
            peers: HashMap::new(),
            forward: Bucket::full(limits.burst, now),
            refused: 0,
            logged_at: None,
        }
    }

    /// Counts the uids that own no job in `owners` as one (None: every uid on its own).
    pub(super) fn pooling(mut self, owners: Option<crate::sources::JobOwners>) -> Self {
        self.owners = owners;
        self
    }

    /// Whom `uid` is counted as: itself (root, a job's owner, or any uid without owners to go
    /// by), else [`STRANGERS`].
    fn key(&self, uid: u32) -> u32 {
        let owns = |o: &crate::sources::JobOwners| o.lock().unwrap_or_else(|p| p.into_inner()).contains(&uid);
        match &self.owners {
            Some(o) if uid != 0 && !owns(o) => STRANGERS,
            _ => uid,
        }
    }

    /// Admits a connection of `uid` (counted open, as the key returned, until [`Gate::close`])
    /// or says why not.
    pub(super) fn admit(&mut self, uid: u32, now: Instant) -> Result<u32, Refused> {
        let uid = self.key(uid);
        let l = self.limits;
        if self.peers.len() >= PEERS_KEPT {
            self.peers.retain(|_, p| {
                p.bucket.refill(l.uid_rate, l.uid_burst, now);
                p.open > 0 || p.bucket.tokens < l.uid_burst || active(p, now)
            });
        }
        self.peers
            .entry(uid)
            .or_insert_with(|| Peer {
                open: 0,
                bucket: Bucket::full(l.uid_burst, now),
                share: Bucket::full(l.burst, now),
                seen: now,
            })
            .seen = now;
        // Each active uid may hold its share of the connections: a uid refused for want of one
        // is active now, so the others' shares shrink and its place comes free as they close.
        let share = (l.connections / self.active(now)).max(1);
        let open = self.open;
        let Some(peer) = self.peers.get_mut(&uid) else { return Err(Refused::TooMany) };
        let verdict = if open >= l.connections || peer.open >= l.per_uid.min(share) {
            Err(Refused::TooMany)
        } else if !peer.bucket.take(l.uid_rate, l.uid_burst, now) {
            Err(Refused::Busy)
        } else {
            peer.open += 1;
            self.open += 1;
            Ok(uid)
        };
        if let Err(why) = verdict {
            self.note_refusal(uid, why, now);
        }
        verdict
    }

    /// Uids seen within [`ACTIVE_FOR`] (at least 1).
    fn active(&self, now: Instant) -> usize {
        self.peers.values().filter(|p| active(p, now)).count().max(1)
    }

    pub(super) fn close(&mut self, uid: u32) {
        self.open = self.open.saturating_sub(1);
        if let Some(p) = self.peers.get_mut(&uid) {
            p.open = p.open.saturating_sub(1);
        }
    }

    /// A request of `uid` may go to the main loop: it spends a token of the uid's share of the
    /// budget, then one of the budget of all uids together. A uid's share is the budget's rate
    /// and burst over the active uids; a token of the share is given back when the common
    /// budget has none, so that others' use never costs a uid its share.
    pub(super) fn forward(&mut self, uid: u32, now: Instant) -> bool {
        let l = self.limits;
        let n = self.active(now) as f64;
        let (rate, burst) = (l.rate / n, (l.burst / n).max(1.0));
        let Some(peer) = self.peers.get_mut(&uid) else { return false };
        if !peer.share.take(rate, burst, now) {
            return false;
        }
        if self.forward.take(l.rate, l.burst, now) {
            return true;
        }
        peer.share.tokens += 1.0;
        false
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

fn active(p: &Peer, now: Instant) -> bool {
    now.saturating_duration_since(p.seen) < ACTIVE_FOR
}

pub(super) fn lock(gate: &Mutex<Gate>) -> MutexGuard<'_, Gate> {
    // The counts stay usable even if a holder panicked.
    gate.lock().unwrap_or_else(|p| p.into_inner())
}

/// An admitted connection; closing it frees its place.
pub(super) struct Slot {
    pub(super) gate: Arc<Mutex<Gate>>,
    pub(super) uid: u32,
    /// Whom it is counted as ([`Gate::admit`]).
    pub(super) key: u32,
}

impl Drop for Slot {
    fn drop(&mut self) {
        lock(&self.gate).close(self.key);
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
        assert_eq!(g.admit(1, t).map(drop), Ok(()));
        assert_eq!(g.admit(1, t).map(drop), Ok(()));
        assert_eq!(g.admit(1, t), Err(Refused::TooMany), "per uid");
        assert_eq!(g.admit(2, t).map(drop), Ok(()));
        assert_eq!(g.admit(3, t), Err(Refused::TooMany), "in all");
        g.close(1);
        assert_eq!(g.admit(3, t).map(drop), Ok(()));
        assert_eq!(g.open, 3);

        let limits = Limits { uid_rate: 1.0, uid_burst: 2.0, ..roomy() };
        let mut g = Gate::new(limits, t);
        for _ in 0..2 {
            assert_eq!(g.admit(5, t).map(drop), Ok(()));
            g.close(5);
        }
        assert_eq!(g.admit(5, t), Err(Refused::Busy), "budget spent, whether or not it was served");
        assert_eq!(g.admit(6, t).map(drop), Ok(()), "another uid has its own");
        assert_eq!(g.admit(5, t + Duration::from_secs(1)).map(drop), Ok(()), "refilled");
        assert_eq!(g.refused, 0, "the refusal was logged, and the count restarted");
    }

    /// Connections as the server takes them: admitted, forwarded or not, closed.
    fn try_forward(g: &mut Gate, uid: u32, now: Instant) -> bool {
        if g.admit(uid, now).is_err() {
            return false;
        }
        let sent = g.forward(uid, now);
        g.close(uid);
        sent
    }

    #[test]
    fn flooding_uids_leave_each_other_uid_its_share_of_the_main_loop() {
        let t0 = Instant::now();
        let l = Limits::default();
        let mut g = Gate::new(l, t0);
        let abusers = [2001, 2002, 2003, 2004];
        let mut sent = std::collections::BTreeMap::<u32, usize>::new();
        // Every abuser asks each millisecond for 10 s; the honest user from 5 s, every 100 ms.
        let mut honest_first = None;
        for ms in 0..10_000u64 {
            let now = t0 + Duration::from_millis(ms);
            for uid in abusers {
                *sent.entry(uid).or_default() += usize::from(try_forward(&mut g, uid, now));
            }
            if ms >= 5_000 && ms % 100 == 0 && try_forward(&mut g, 1000, now) {
                *sent.entry(1000).or_default() += 1;
                honest_first.get_or_insert(ms);
            }
        }
        let total: usize = sent.values().sum();
        assert!(total as f64 <= l.burst + l.rate * 10.0, "{sent:?}");
        // Served within its first half second, then about its fifth of 20 a second.
        assert!(honest_first.is_some_and(|ms| ms < 5_500), "{honest_first:?}");
        assert!(sent[&1000] >= 15, "{sent:?}");
        for uid in abusers {
            assert!(sent[&uid] >= 40, "each abuser keeps its share too: {sent:?}");
        }
    }

    /// A user with subordinate uids (rootless containers) connects from 200 of them: counted
    /// as one, beside the job owner and root, not as 200 that leave the owner a 202nd.
    #[test]
    fn uids_that_own_no_job_here_count_as_one() {
        let t = Instant::now();
        let owners = crate::sources::JobOwners::default();
        owners.lock().unwrap().insert(1000);
        let limits = Limits { connections: 64, per_uid: 8, rate: 20.0, burst: 30.0, ..roomy() };
        let mut g = Gate::new(limits, t).pooling(Some(owners.clone()));
        let admitted = (100_000..100_200).filter(|uid| g.admit(*uid, t).is_ok()).count();
        assert_eq!((admitted, g.active(t)), (8, 1), "one peer's connections");
        assert_eq!(g.admit(1000, t), Ok(1000), "the job's owner on its own");
        assert_eq!(g.admit(0, t), Ok(0), "root too");
        assert_eq!(g.active(t), 3);
        // The owner keeps a third of the main loop's burst (10 of 30); before, a 202nd (1).
        let sent = (0..100).filter(|_| g.forward(1000, t)).count();
        assert_eq!(sent, 10);
        // A uid that comes to own a job here (the node collector's next cycle) is its own.
        owners.lock().unwrap().insert(100_007);
        assert_eq!(g.admit(100_007, t), Ok(100_007));
        // Without owners to go by, every uid is its own, as before.
        let mut g = Gate::new(limits, t);
        assert_eq!(g.admit(100_001, t), Ok(100_001));
    }

    #[test]
    fn a_uid_holds_its_share_of_the_connections_once_others_want_theirs() {
        let t = Instant::now();
        let limits = Limits { connections: 16, per_uid: 8, ..roomy() };
        let mut g = Gate::new(limits, t);
        for uid in [1, 2] {
            for _ in 0..8 {
                assert_eq!(g.admit(uid, t).map(drop), Ok(()));
            }
        }
        assert_eq!(g.admit(3, t), Err(Refused::TooMany), "all 16 held");
        // Uid 3 is active now: 16 / 3 = 5 each. The others get none back until under it.
        for _ in 0..3 {
            g.close(1);
            assert_eq!(g.admit(1, t), Err(Refused::TooMany));
        }
        assert_eq!(g.admit(3, t).map(drop), Ok(()), "a place came free for uid 3");
        // Two seconds on, uid 3 is gone: the shares grow back.
        let later = t + ACTIVE_FOR + Duration::from_millis(1);
        g.close(3);
        for _ in 0..3 {
            assert_eq!(g.admit(1, later).map(drop), Ok(()));
        }
        assert_eq!(g.admit(1, later), Err(Refused::TooMany), "8 per uid");
    }

    #[test]
    fn idle_peers_are_forgotten_once_many() {
        let t = Instant::now();
        let mut g = Gate::new(Limits::default(), t);
        for uid in 0..PEERS_KEPT as u32 {
            assert_eq!(g.admit(uid, t).map(drop), Ok(()));
            g.close(uid);
        }
        assert_eq!(g.peers.len(), PEERS_KEPT);
        let later = t + Duration::from_secs(10);
        assert_eq!(g.admit(9999, later).map(drop), Ok(()));
        assert_eq!(g.peers.len(), 1, "refilled and closed peers are dropped");
    }
}
