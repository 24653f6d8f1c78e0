//! What /proc says about one process of a job (through the procfs crate): CPU time, threads by
//! state, open files, I/O, owner. A process that exits mid-read is skipped, never an error.

use super::kv::Io;
use std::path::Path;

/// Thread states as shipped in the `ThreadState` dimension.
pub const THREAD_STATES: &[&str] =
    &["running", "sleeping", "disk_sleep", "stopped", "zombie", "idle", "other"];

fn thread_state_index(c: char) -> usize {
    match c {
        'R' => 0,
        'S' => 1,
        'D' => 2,
        'T' | 't' => 3,
        'Z' => 4,
        'I' => 5,
        _ => 6,
    }
}

/// One process, read once.
#[derive(Debug, Clone, PartialEq)]
pub struct Proc {
    /// (pid, start time in ticks): a pid reused by a new process is a new key.
    pub key: (u32, u64),
    /// The command name (comm), which ships as the `Executable` dimension.
    pub comm: String,
    /// User + system CPU, in clock ticks.
    pub cpu_ticks: u64,
    /// Threads in each of [`THREAD_STATES`].
    pub threads: [u64; 7],
    pub open_files: Option<u64>,
    pub io: Option<Io>,
}

/// What to read beyond the essentials; each is a file or directory per process per cycle.
#[derive(Debug, Clone, Copy)]
pub struct Want {
    /// /proc/<pid>/io: only when the cgroup gives no I/O figures.
    pub io: bool,
    /// Count open files by the size of /proc/<pid>/fd (true on a real procfs of Linux 6.2 and
    /// later, where it is the count); otherwise list the directory.
    pub fd_by_size: bool,
}

/// Reads process `pid` under `proc_root`; None when it is gone (or unreadable).
pub fn read(proc_root: &Path, pid: u32, want: Want) -> Option<Proc> {
    let dir = proc_root.join(pid.to_string());
    let p = procfs::process::Process::new_with_root(dir.clone()).ok()?;
    let stat = p.stat().ok()?;
    let mut threads = [0u64; 7];
    if stat.num_threads <= 1 {
        threads[thread_state_index(stat.state)] += 1;
    } else if let Ok(tasks) = p.tasks() {
        for t in tasks.flatten() {
            if let Ok(ts) = t.stat() {
                threads[thread_state_index(ts.state)] += 1;
            }
        }
    }
    let io = if want.io {
        p.io().ok().map(|io| Io {
            read_bytes: io.read_bytes,
            write_bytes: io.write_bytes,
            read_ops: io.syscr,
            write_ops: io.syscw,
        })
    } else {
        None
    };
    Some(Proc {
        key: (pid, stat.starttime),
        comm: stat.comm,
        cpu_ticks: stat.utime + stat.stime,
        threads,
        open_files: open_files(&dir, want.fd_by_size),
        io,
    })
}

/// Entries of <dir>/fd.
fn open_files(dir: &Path, by_size: bool) -> Option<u64> {
    let fd = dir.join("fd");
    if by_size
        && let Ok(m) = std::fs::metadata(&fd)
        && m.len() > 0
    {
        return Some(m.len());
    }
    Some(std::fs::read_dir(fd).ok()?.count() as u64)
}

/// The owner of process `pid` (v2 job paths carry no uid).
pub fn uid(proc_root: &Path, pid: u32) -> Option<u32> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(proc_root.join(pid.to_string())).ok().map(|m| m.uid())
}

/// True when `path` is a procfs mount (so /proc/<pid>/fd sizes are fd counts on new kernels).
pub fn is_procfs(path: &Path) -> bool {
    const PROC_SUPER_MAGIC: i64 = 0x9fa0;
    let Ok(c) = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()) else {
        return false;
    };
    // SAFETY: statfs fills the struct we pass; `c` is a valid C string.
    let mut s: libc::statfs = unsafe { std::mem::zeroed() };
    unsafe { libc::statfs(c.as_ptr(), &mut s) == 0 && s.f_type as i64 == PROC_SUPER_MAGIC }
}

/// The value of `var` in the environment of process `pid` (the job's SLURM_* variables).
pub fn environ_var(proc_root: &Path, pid: u32, var: &str) -> Option<String> {
    let p = procfs::process::Process::new_with_root(proc_root.join(pid.to_string())).ok()?;
    let env = p.environ().ok()?;
    env.get(std::ffi::OsStr::new(var)).and_then(|v| v.to_str()).map(str::to_owned).filter(|v| !v.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_this_process() {
        let me = std::process::id();
        let want = Want { io: true, fd_by_size: is_procfs(Path::new("/proc")) };
        let p = read(Path::new("/proc"), me, want).expect("our own process");
        assert_eq!(p.key.0, me);
        assert!(p.threads.iter().sum::<u64>() >= 1);
        assert!(p.open_files.unwrap_or(0) >= 3, "stdin, stdout, stderr at least");
        assert!(!p.comm.is_empty());
        assert!(p.io.is_some());
        assert!(read(Path::new("/proc"), u32::MAX - 1, want).is_none(), "no such process");
        assert!(is_procfs(Path::new("/proc")));
        assert!(!is_procfs(Path::new("/")));
    }

    #[test]
    fn thread_states() {
        assert_eq!(THREAD_STATES[thread_state_index('R')], "running");
        assert_eq!(THREAD_STATES[thread_state_index('D')], "disk_sleep");
        assert_eq!(THREAD_STATES[thread_state_index('t')], "stopped");
        assert_eq!(THREAD_STATES[thread_state_index('?')], "other");
    }
}
