//! "Log this once": a problem that persists (a bad datum every flush, a missing controller
//! every cycle) is logged the first time its key is seen; a counter says how often it happens.
//! Callers log with their own level and fields, so a line keeps its module as its target.

use std::borrow::Borrow;
use std::collections::HashSet;
use std::hash::Hash;

/// Keys remembered before the set starts over: a flood of distinct keys (a new error text each
/// cycle) then logs again now and then instead of growing the set for the life of the process.
pub const MAX_KEYS: usize = 10_000;

/// The keys already logged.
#[derive(Debug)]
pub struct LogOnce<K = String> {
    seen: HashSet<K>,
}

impl<K> Default for LogOnce<K> {
    fn default() -> Self {
        LogOnce { seen: HashSet::new() }
    }
}

impl<K: Eq + Hash> LogOnce<K> {
    /// True the first time `key` comes (log then), false after. Takes a borrowed key (`&str`
    /// for `String`) so a key seen before costs no allocation.
    pub fn first<Q>(&mut self, key: &Q) -> bool
    where
        K: Borrow<Q>,
        Q: Eq + Hash + ToOwned<Owned = K> + ?Sized,
    {
        if self.seen.contains(key) {
            return false;
        }
        if self.seen.len() >= MAX_KEYS {
            self.seen.clear();
        }
        self.seen.insert(key.to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_key_is_first_once() {
        let mut log = LogOnce::default();
        assert!(log.first("a"));
        assert!(!log.first("a"));
        assert!(log.first("b"));
        let mut pairs: LogOnce<(u8, String)> = LogOnce::default();
        assert!(pairs.first(&(1, "m".into())));
        assert!(pairs.first(&(2, "m".into())));
        assert!(!pairs.first(&(1, "m".into())));
    }

    #[test]
    fn the_set_is_bounded_and_starts_over_when_full() {
        let mut log = LogOnce::default();
        for i in 0..MAX_KEYS {
            assert!(log.first(&i));
        }
        assert!(!log.first(&0));
        assert!(log.first(&MAX_KEYS), "a new key past the bound still logs");
        assert_eq!(log.seen.len(), 1);
        assert!(log.first(&0), "and what was forgotten logs again");
    }
}
