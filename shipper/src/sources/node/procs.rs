//! What /proc says about one process of a job: CPU time, threads by state, open files, I/O,
//! owner. Files are read with [`read_bytes`] into one reused buffer and parsed by the procfs
//! crate. A process that exits mid-read is skipped, never an error.

use super::kv::Io;
use super::read_bytes;
use procfs::FromRead;
use procfs::process::Stat;
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

/// `T` parsed from the file at `path`, read into `buf`; None when unreadable or malformed.
fn parse<T: FromRead>(path: &Path, buf: &mut Vec<u8>) -> Option<T> {
    buf.clear();
    read_bytes(path, buf).then(|| T::from_read(buf.as_slice()).ok()).flatten()
}

/// Reads process `pid` under `proc_root`, using `buf` for file contents; None when it is gone
/// (or unreadable).
pub fn read(proc_root: &Path, pid: u32, want: Want, buf: &mut Vec<u8>) -> Option<Proc> {
    let dir = proc_root.join(pid.to_string());
    let stat: Stat = parse(&dir.join("stat"), buf)?;
    let mut threads = [0u64; 7];
    if stat.num_threads <= 1 {
        threads[thread_state_index(stat.state)] += 1;
    } else if let Ok(tasks) = std::fs::read_dir(dir.join("task")) {
        for t in tasks.flatten() {
            if let Some(ts) = parse::<Stat>(&t.path().join("stat"), buf) {
                threads[thread_state_index(ts.state)] += 1;
            }
        }
    }
    let io = if want.io {
        parse::<procfs::process::Io>(&dir.join("io"), buf).map(|io| Io {
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
    environ_vars(proc_root, pid, &[var]).pop().flatten()
}

/// Several variables of one process's environment, read once; None where unset or empty.
pub fn environ_vars(proc_root: &Path, pid: u32, vars: &[&str]) -> Vec<Option<String>> {
    let env = procfs::process::Process::new_with_root(proc_root.join(pid.to_string())).and_then(|p| p.environ());
    let Ok(env) = env else { return vec![None; vars.len()] };
    vars.iter()
        .map(|var| {
            env.get(std::ffi::OsStr::new(var)).and_then(|v| v.to_str()).map(str::to_owned).filter(|v| !v.is_empty())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_this_process() {
        let me = std::process::id();
        let want = Want { io: true, fd_by_size: is_procfs(Path::new("/proc")) };
        let mut buf = Vec::new();
        let p = read(Path::new("/proc"), me, want, &mut buf).expect("our own process");
        assert_eq!(p.key.0, me);
        assert!(p.threads.iter().sum::<u64>() >= 1);
        assert!(p.open_files.unwrap_or(0) >= 3, "stdin, stdout, stderr at least");
        assert!(!p.comm.is_empty());
        assert!(p.io.is_some());
        assert!(read(Path::new("/proc"), u32::MAX - 1, want, &mut buf).is_none(), "no such process");
        assert!(is_procfs(Path::new("/proc")));
        assert!(!is_procfs(Path::new("/")));
    }

    #[test]
    fn a_command_name_of_any_bytes_is_read() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("77");
        std::fs::create_dir_all(dir.join("fd")).unwrap();
        let mut stat = b"77 (a\xff) b) S 1 77 77 0 -1 4194304 100 0 0 0 5000 200 ".to_vec();
        stat.extend_from_slice(b"0 0 20 0 1 0 1000 123456789 2048 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n");
        std::fs::write(dir.join("stat"), stat).unwrap();
        let want = Want { io: false, fd_by_size: false };
        let p = read(root.path(), 77, want, &mut Vec::new()).expect("read despite the name");
        assert_eq!(p.cpu_ticks, 5200);
        assert_eq!(p.threads[1], 1, "one sleeping thread");
        assert!(p.comm.starts_with('a') && p.comm.ends_with(" b"), "{:?}", p.comm);
    }

    #[test]
    fn thread_states() {
        assert_eq!(THREAD_STATES[thread_state_index('R')], "running");
        assert_eq!(THREAD_STATES[thread_state_index('D')], "disk_sleep");
        assert_eq!(THREAD_STATES[thread_state_index('t')], "stopped");
        assert_eq!(THREAD_STATES[thread_state_index('?')], "other");
    }
}
