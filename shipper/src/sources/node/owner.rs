//! Who a job belongs to, without asking slurmctld from every node: the user name of its uid
//! (the passwd database through NSS, so LDAP and SSSD users resolve too) and the account and
//! partition from SLURM_JOB_ACCOUNT and SLURM_JOB_PARTITION in a job process's environment. All
//! are cached: they do not change while a job runs. What cannot be found becomes [`UNKNOWN`],
//! never a failure.

use std::collections::HashMap;

/// The dimension value of a user or account that cannot be found.
pub const UNKNOWN: &str = "unknown";

/// The user name of `uid`, or None.
pub fn user_name(uid: u32) -> Option<String> {
    let mut buf = vec![0u8; 4096];
    let mut pwd: libc::passwd = unsafe { std::mem::zeroed() };
    let mut result: *mut libc::passwd = std::ptr::null_mut();
    loop {
        // SAFETY: getpwuid_r writes into `pwd` and `buf`, which outlive the call; `result`
        // points at `pwd` or is null.
        let rc = unsafe { libc::getpwuid_r(uid, &mut pwd, buf.as_mut_ptr().cast(), buf.len(), &mut result) };
        if rc == libc::ERANGE && buf.len() < 1 << 20 {
            buf.resize(buf.len() * 4, 0);
            continue;
        }
        if rc != 0 || result.is_null() || pwd.pw_name.is_null() {
            return None;
        }
        // SAFETY: pw_name is a NUL-terminated string inside `buf`.
        let name = unsafe { std::ffi::CStr::from_ptr(pwd.pw_name) };
        return name.to_str().ok().map(str::to_owned);
    }
}

/// Cached user names and accounts.
#[derive(Debug, Default)]
pub struct Owners {
    users: HashMap<u32, String>,
    /// job id -> (account, partition); only what was found is kept, so a job whose processes
    /// were not readable yet is asked again next time.
    accounts: HashMap<String, (String, String)>,
}

impl Owners {
    pub fn user(&mut self, uid: Option<u32>) -> String {
        let Some(uid) = uid else {
            return UNKNOWN.to_owned();
        };
        self.users.entry(uid).or_insert_with(|| user_name(uid).unwrap_or_else(|| uid.to_string())).clone()
    }

    /// The account and partition of `job`, looking into the environment of its processes when
    /// not cached.
    pub fn account(&mut self, job: &str, lookup: impl FnOnce() -> Option<(String, String)>) -> (String, String) {
        if let Some(a) = self.accounts.get(job) {
            return a.clone();
        }
        match lookup() {
            Some(a) => {
                self.accounts.insert(job.to_owned(), a.clone());
                a
            }
            None => (UNKNOWN.to_owned(), UNKNOWN.to_owned()),
        }
    }

    /// Forgets jobs that are gone.
    pub fn retain_jobs(&mut self, alive: impl Fn(&str) -> bool) {
        self.accounts.retain(|j, _| alive(j));
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
        assert_eq!(o.account("1", || None), unknown);
        let physics = ("physics".to_owned(), "cpu".to_owned());
        assert_eq!(o.account("1", || Some(physics.clone())), physics);
        assert_eq!(o.account("1", || panic!("cached")), physics);
        o.retain_jobs(|j| j != "1");
        assert_eq!(o.account("1", || None), unknown);
    }
}
