//! Who a job belongs to, without asking slurmctld from every node: the user name of its uid
//! (the passwd database through NSS, so LDAP and SSSD users resolve too) and the account and
//! partition from SLURM_JOB_ACCOUNT and SLURM_JOB_PARTITION in a job process's environment. All
//! are cached: they do not change while a job runs. What cannot be found becomes [`UNKNOWN`],
//! never a failure; a job whose processes show no account is looked at again only after a
//! pause ([`MISS_RETRY_FIRST`], doubling to [`MISS_RETRY_MAX`]), not every cycle.

use std::collections::HashMap;
use std::time::{Duration, Instant};

/// The pause after a job's first miss: short, since a job seen before its tasks started (only
/// Slurm's own processes, without the variables) finds its account a cycle or two later.
pub const MISS_RETRY_FIRST: Duration = Duration::from_secs(10);
/// The longest pause: a job that unset the variables costs one look per job this often.
pub const MISS_RETRY_MAX: Duration = Duration::from_secs(300);

/// The dimension value of a user or account that cannot be found.
pub const UNKNOWN: &str = "unknown";

pub use crate::sys::user::user_name;

/// Cached user names and accounts.
#[derive(Debug, Default)]
pub struct Owners {
    users: HashMap<u32, String>,
    /// job id -> (account, partition), once found.
    accounts: HashMap<String, (String, String)>,
    /// job id -> misses in a row and when to look again.
    misses: HashMap<String, (u32, Instant)>,
}

/// The pause after `misses` misses in a row (1 or more).
fn miss_retry(misses: u32) -> Duration {
    MISS_RETRY_FIRST.saturating_mul(1 << misses.saturating_sub(1).min(16)).min(MISS_RETRY_MAX)
}

impl Owners {
    pub fn user(&mut self, uid: Option<u32>) -> String {
        let Some(uid) = uid else {
            return UNKNOWN.to_owned();
        };
        self.users.entry(uid).or_insert_with(|| user_name(uid).unwrap_or_else(|| uid.to_string())).clone()
    }

    /// The account and partition of `job`, looking into the environment of its processes when
    /// not cached and not missed lately.
    pub fn account(
        &mut self,
        job: &str,
        lookup: impl FnOnce() -> Option<(String, String)>,
    ) -> (String, String) {
        self.account_at(job, Instant::now(), lookup)
    }

    fn account_at(
        &mut self,
        job: &str,
        now: Instant,
        lookup: impl FnOnce() -> Option<(String, String)>,
    ) -> (String, String) {
        if let Some(a) = self.accounts.get(job) {
            return a.clone();
        }
        let unknown = || (UNKNOWN.to_owned(), UNKNOWN.to_owned());
        let misses = match self.misses.get(job) {
            Some(&(_, retry_at)) if now < retry_at => return unknown(),
            Some(&(n, _)) => n,
            None => 0,
        };
        match lookup() {
            Some(a) => {
                self.misses.remove(job);
                self.accounts.insert(job.to_owned(), a.clone());
                a
            }
            None => {
                let n = misses.saturating_add(1);
                self.misses.insert(job.to_owned(), (n, now + miss_retry(n)));
                unknown()
            }
        }
    }

    /// Forgets jobs that are gone.
    pub fn retain_jobs(&mut self, alive: impl Fn(&str) -> bool) {
        self.accounts.retain(|j, _| alive(j));
        self.misses.retain(|j, _| alive(j));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_resolves_and_unknown_uids_stay_numeric() {
        assert_eq!(user_name(0).as_deref(), Some("root"));
        let mut o = Owners::default();
        assert_eq!(o.user(Some(0)), "root");
        assert_eq!(o.user(Some(4_000_000_123)), "4000000123");
        assert_eq!(o.user(None), UNKNOWN);
    }

    #[test]
    fn accounts_are_cached_once_found() {
        let mut o = Owners::default();
        let unknown = (UNKNOWN.to_owned(), UNKNOWN.to_owned());
        let physics = ("physics".to_owned(), "cpu".to_owned());
        assert_eq!(o.account("1", || Some(physics.clone())), physics);
        assert_eq!(o.account("1", || panic!("cached")), physics);
        o.retain_jobs(|j| j != "1");
        assert_eq!(o.account("1", || None), unknown);
        assert_eq!(o.account("1", || panic!("a miss is not looked at again at once")), unknown);
    }

    #[test]
    fn a_miss_is_remembered_and_looked_at_again_later_and_later() {
        let mut o = Owners::default();
        let unknown = (UNKNOWN.to_owned(), UNKNOWN.to_owned());
        let t0 = Instant::now();
        let mut looks = 0;
        let mut at = |o: &mut Owners, secs: u64| {
            o.account_at("5", t0 + Duration::from_secs(secs), || {
                looks += 1;
                None
            })
        };
        // Looks at 0, 10, 30, 70 s...: 10 s after the first miss, then twice as long each time.
        for s in [0, 1, 9, 10, 11, 29, 30, 31, 69, 70] {
            assert_eq!(at(&mut o, s), unknown);
        }
        assert_eq!(looks, 4);
        assert_eq!(miss_retry(5), Duration::from_secs(160));
        assert_eq!(miss_retry(6), MISS_RETRY_MAX);
        assert_eq!(miss_retry(u32::MAX), MISS_RETRY_MAX);
        // Found at the next look, then cached; a job that is gone is forgotten, misses too.
        let physics = ("physics".to_owned(), "cpu".to_owned());
        assert_eq!(o.account_at("5", t0 + Duration::from_secs(150), || Some(physics.clone())), physics);
        assert_eq!(o.account("5", || panic!("cached")), physics);
        assert_eq!(o.account("6", || None), unknown);
        o.retain_jobs(|j| j != "6");
        assert!(o.misses.is_empty());
    }
}
