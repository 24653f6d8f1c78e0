//! The process's open-file limit.

/// Raises the open-file soft limit to its hard limit, at most `cap`; returns the soft limit
/// now in force (0 when it cannot be read).
pub fn raise_open_files(cap: u64) -> u64 {
    // SAFETY: rlimit is plain data; getrlimit overwrites it.
    let mut l: libc::rlimit = unsafe { std::mem::zeroed() };
    // SAFETY: getrlimit writes the struct we pass.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut l) } != 0 {
        return 0;
    }
    let want = l.rlim_max.min(cap);
    if l.rlim_cur < want {
        let raised = libc::rlimit { rlim_cur: want, rlim_max: l.rlim_max };
        // SAFETY: setrlimit reads the struct we pass.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            l.rlim_cur = want;
        }
    }
    l.rlim_cur
}
