//! Whose jobs `report` shows. The job records carry each job's user, account and partition,
//! the names of the programs it ran (`ProcessCpuUsage` by `Executable`) and what it used. IAM
//! cannot tell one user of an instance from another (they share its role), so reading the log
//! group is for administrators (the Terraform module's reader policy); on a host where it is
//! granted anyway, `report` shows a caller other than root only the caller's own jobs, unless
//! `logs.report_all_users` is set. This is a courtesy, not a boundary: whoever holds the
//! credentials can call FilterLogEvents directly.

// The node collector's passwd lookup (NSS; a larger buffer on ERANGE).
use crate::sources::node::owner::user_name;

/// Who runs `report`: uid, and user name where the passwd database has one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    pub uid: u32,
    pub name: Option<String>,
}

impl Caller {
    /// The real uid of this process and its name.
    pub fn current() -> Caller {
        let uid = crate::sys::uid();
        Caller { uid, name: user_name(uid) }
    }

    /// Whether `user` (a job's user, as Slurm or the records name it) is this caller.
    fn is(&self, user: &str) -> bool {
        self.name.as_deref() == Some(user) || user == self.uid.to_string()
    }
}

/// Ok when `caller` may see a job of `owner` (None: no record or Slurm names its user); else
/// why not, in words.
pub fn check(caller: &Caller, owner: Option<&str>, all_users: bool) -> Result<(), String> {
    if caller.uid == 0 || all_users {
        return Ok(());
    }
    match owner {
        Some(o) if caller.is(o) => Ok(()),
        Some(o) => Err(format!(
            "the job is {o}'s; report shows a user only their own jobs (root sees all; \
             logs.report_all_users = true shows everyone's)"
        )),
        None => Err("neither Slurm nor the records name the job's user, so it cannot be shown as yours \
                     (root sees all; logs.report_all_users = true shows everyone's)"
            .to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_user_sees_their_own_jobs_root_and_the_setting_all() {
        let alice = Caller { uid: 1000, name: Some("alice".into()) };
        assert_eq!(check(&alice, Some("alice"), false), Ok(()));
        assert_eq!(check(&alice, Some("1000"), false), Ok(()), "a user the node could not name");
        let refused = check(&alice, Some("bob"), false).unwrap_err();
        assert!(refused.contains("bob's") && refused.contains("report_all_users"), "{refused}");
        assert!(check(&alice, None, false).is_err(), "no owner: not shown as hers");
        assert_eq!(check(&alice, Some("bob"), true), Ok(()));
        let root = Caller { uid: 0, name: Some("root".into()) };
        assert_eq!(check(&root, Some("bob"), false), Ok(()));
        assert_eq!(check(&root, None, false), Ok(()));
    }

    #[test]
    fn the_caller_is_named_from_the_passwd_database() {
        assert_eq!(user_name(0).as_deref(), Some("root"));
        let me = Caller::current();
        assert_eq!(me.uid, crate::sys::uid());
    }
}
