//! The process's open-file limit, and the CPU it has used.

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

/// CPU time (user and system) every thread of this process has used: one getrusage, where
/// /proc/self/stat costs four calls and a parse.
pub fn cpu_time() -> std::time::Duration {
    // SAFETY: rusage is plain data; getrusage overwrites it.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage writes the struct we pass.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) } != 0 {
        return std::time::Duration::ZERO;
    }
    let tv = |t: libc::timeval| {
        std::time::Duration::new(t.tv_sec.max(0) as u64, (t.tv_usec.clamp(0, 999_999) as u32) * 1000)
    };
    tv(u.ru_utime) + tv(u.ru_stime)
}
