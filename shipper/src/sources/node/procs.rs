//! What /proc says about one process of a job: CPU time, threads by state, open files, I/O,
//! owner. Files are read into one reused buffer, each up to a bound, and parsed by the procfs
//! crate. A process that exits mid-read is skipped, never an error.

use super::kv::Io;
use procfs::FromRead;
use procfs::process::Stat;
use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

/// Thread states as shipped in the `ThreadState` dimension.
pub const THREAD_STATES: &[&str] =
    &["running", "sleeping", "disk_sleep", "stopped", "zombie", "idle", "other"];

/// Threads in each of [`THREAD_STATES`].
pub type ThreadCounts = [u64; THREAD_STATES.len()];

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
    /// Resident set size, bytes.
    pub rss_bytes: u64,
    pub threads: ThreadCounts,
    /// Its other threads' ids, as read.
    pub tids: Vec<u32>,
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

/// `T` parsed from the file at `path`, read into `buf`; None when unreadable, malformed or
/// larger than any such file of the kernel's.
fn parse<T: FromRead>(path: &Path, buf: &mut Vec<u8>) -> Option<T> {
    match read_capped(path, PROC_FILE_MAX, buf)? {
        false => T::from_read(buf.as_slice()).ok(),
        true => None,
    }
}

/// The other threads of each process (pid, start time) as last listed.
pub type KnownThreads = HashMap<(u32, u64), Vec<u32>>;

/// At most this many processes of one job are read a cycle, in pid order, and at most
/// [`JOB_THREADS_MAX`] of their other threads: a job's user can start 100,000 threads, and
/// every one read is a file opened as root on the collection thread. Past the bound the
/// process count stays whole; states of threads not read count as `other`.
pub const JOB_PROCS_MAX: usize = 4096;
/// See [`JOB_PROCS_MAX`].
pub const JOB_THREADS_MAX: usize = 16_384;

/// Reads process `pid` under `proc_root`, using `buf` for file contents; None when it is gone
/// (or unreadable). Its threads are those in `known` while their number is the one the process
/// reports and each is still there; listed again otherwise. At most `threads_left` of its
/// other threads are read, and `threads_left` goes down by those read.
pub fn read(
    proc_root: &Path,
    pid: u32,
    want: Want,
    known: &KnownThreads,
    buf: &mut Vec<u8>,
    threads_left: &mut usize,
) -> Option<Proc> {
    let dir = proc_root.join(pid.to_string());
    let stat: Stat = parse(&dir.join("stat"), buf)?;
    let tasks = dir.join("task");
    // The leader's state is the one /proc/<pid>/stat gave: not read twice.
    let mut threads = ThreadCounts::default();
    threads[thread_state_index(stat.state)] += 1;
    let others = usize::try_from(stat.num_threads.max(1) - 1).unwrap_or(0);
    let mut tids = Vec::new();
    let budget = *threads_left;
    let same = known
        .get(&(pid, stat.starttime))
        .filter(|k| k.len() == others && k.len() <= budget)
        .is_some_and(|k| {
            let mut counts = threads;
            for &tid in k {
                let Some(ts) = parse::<Stat>(&tasks.join(tid.to_string()).join("stat"), buf) else {
                    return false;
                };
                counts[thread_state_index(ts.state)] += 1;
            }
            threads = counts;
            tids.clone_from(k);
            true
        });
    if !same && others > 0 && budget > 0 {
        let _ = super::dir::entries(&tasks, |name, _| {
            let Some(tid) = name.to_str().and_then(|n| n.parse::<u32>().ok()).filter(|t| *t != pid) else {
                return;
            };
            if tids.len() >= budget {
                return;
            }
            if let Some(ts) = parse::<Stat>(&tasks.join(name).join("stat"), buf) {
                threads[thread_state_index(ts.state)] += 1;
                tids.push(tid);
            }
        });
    }
    if tids.len() >= budget {
        threads[thread_state_index('?')] += others.saturating_sub(tids.len()) as u64;
    }
    *threads_left = budget - tids.len();
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
        tids,
        comm: stat.comm,
        cpu_ticks: stat.utime + stat.stime,
        rss_bytes: stat.rss.saturating_mul(procfs::page_size()),
        threads,
        open_files: open_files(&dir, want.fd_by_size),
        io,
    })
}

/// Descriptors a process's count stops at where they are listed (kernels before 6.2, where
/// /proc/<pid>/fd's size is 0): a job's user can hold a million, a listing of 1,500 reads a
/// process each collection its processes are read.
pub const MAX_FDS_LISTED: u64 = 65_536;

/// Entries of <dir>/fd: its size where the kernel gives it (6.2 and later), else a listing of
/// at most [`MAX_FDS_LISTED`].
fn open_files(dir: &Path, by_size: bool) -> Option<u64> {
    let fd = dir.join("fd");
    if by_size
        && let Ok(m) = std::fs::metadata(&fd)
        && m.len() > 0
    {
        return Some(m.len());
    }
    super::dir::count_at_most(&fd, MAX_FDS_LISTED).ok()
}

/// (name, real uid) of process `pid`, from /proc/<pid>/status. Its real uid, not the owner of
/// /proc/<pid>, which a process that makes itself non-dumpable turns to root.
pub fn name_and_uid(proc_root: &Path, pid: u32, buf: &mut String) -> Option<(String, u32)> {
    // As bytes: the kernel escapes whitespace and backslashes in `Name:` but passes other
    // bytes through, and a process whose name is not UTF-8 must still say whose it is.
    let mut bytes = std::mem::take(buf).into_bytes();
    bytes.clear();
    let read = super::read_bytes(&proc_root.join(pid.to_string()).join("status"), &mut bytes);
    let found = if read { status_name_and_uid(&bytes) } else { None };
    bytes.clear();
    *buf = String::from_utf8(bytes).unwrap_or_default();
    found
}

/// `Name:` (lossily) and the real uid of `Uid:` from /proc/<pid>/status.
fn status_name_and_uid(status: &[u8]) -> Option<(String, u32)> {
    let field = |key: &[u8]| status.split(|&b| b == b'\n').find_map(|l| l.strip_prefix(key));
    let name = String::from_utf8_lossy(field(b"Name:")?).trim().to_owned();
    let uid = std::str::from_utf8(field(b"Uid:")?).ok()?.split_whitespace().next()?.parse().ok()?;
    Some((name, uid))
}

/// Whether a process named `comm` is Slurm's own step daemon, which shares some job cgroups:
/// named slurmstepd and run by root. A job's process that names itself slurmstepd (any user
/// can) stays the job's, so that it cannot hide from the job's figures.
pub fn is_slurmstepd(proc_root: &Path, pid: u32, comm: &str, buf: &mut String) -> bool {
    comm == "slurmstepd" && name_and_uid(proc_root, pid, buf).is_some_and(|(_, uid)| uid == 0)
}

/// True when `path` is a procfs mount (so /proc/<pid>/fd sizes are fd counts on new kernels).
pub fn is_procfs(path: &Path) -> bool {
    const PROC_SUPER_MAGIC: i64 = 0x9fa0;
    crate::sys::fs::filesystem_type(path) == Some(PROC_SUPER_MAGIC)
}

/// At most this much of a process's environment is read: a job can make its own as large as
/// its stack limit allows, and it is read as root every time a job's owner is looked up.
pub const ENVIRON_MAX: usize = 1 << 20;

/// At most this much of any other /proc file (stat, io: a few hundred bytes).
const PROC_FILE_MAX: usize = 64 << 10;

/// Environments cut at [`ENVIRON_MAX`] since the start.
static ENVIRON_CUTS: AtomicU64 = AtomicU64::new(0);

/// How many environments were cut at [`ENVIRON_MAX`] since the start.
pub fn environ_cuts() -> u64 {
    ENVIRON_CUTS.load(Ordering::Relaxed)
}

/// Reads at most `max` bytes of the file at `path` into `buf` (replacing it); Some(true) when
/// there was more, None when it cannot be read.
fn read_capped(path: &Path, max: usize, buf: &mut Vec<u8>) -> Option<bool> {
    buf.clear();
    let f = std::fs::File::open(path).ok()?;
    // One byte more than allowed tells a file of exactly `max` from a longer one.
    super::read_end(&f, buf, max.saturating_add(1)).ok()?;
    let cut = buf.len() > max;
    buf.truncate(max);
    Some(cut)
}

/// The value of `var` in the environment of process `pid` (the job's SLURM_* variables).
pub fn environ_var(proc_root: &Path, pid: u32, var: &str) -> Option<String> {
    environ_vars(proc_root, pid, &[var]).pop().flatten()
}

/// Several variables of one process's environment, read once (at most [`ENVIRON_MAX`] bytes
/// of it); None where unset, empty, not UTF-8 or past the cut.
pub fn environ_vars(proc_root: &Path, pid: u32, vars: &[&str]) -> Vec<Option<String>> {
    let (found, _, cut) = environ_read(proc_root, pid, vars, ENVIRON_MAX);
    if cut {
        note_cut(pid);
    }
    found
}

/// [`environ_vars`] out of a budget of bytes shared by several processes (a job's): reads at
/// most what is left of it and takes off what was read. Nothing is read once it is spent.
pub fn environ_vars_within(
    proc_root: &Path,
    pid: u32,
    vars: &[&str],
    budget: &mut usize,
) -> Vec<Option<String>> {
    let max = ENVIRON_MAX.min(*budget);
    if max == 0 {
        return vec![None; vars.len()];
    }
    let (found, read, cut) = environ_read(proc_root, pid, vars, max);
    *budget = budget.saturating_sub(read);
    if cut && max == ENVIRON_MAX {
        note_cut(pid);
    }
    found
}

fn note_cut(pid: u32) {
    if ENVIRON_CUTS.fetch_add(1, Ordering::Relaxed) == 0 {
        tracing::warn!(
            pid,
            limit = ENVIRON_MAX,
            "a job process's environment is larger than the limit; read up to it"
        );
    }
}

/// The variables found in the first `max` bytes of the environment of `pid`, the bytes read,
/// and whether there was more.
fn environ_read(proc_root: &Path, pid: u32, vars: &[&str], max: usize) -> (Vec<Option<String>>, usize, bool) {
    let mut found = vec![None; vars.len()];
    let mut buf = Vec::new();
    let Some(cut) = read_capped(&proc_root.join(pid.to_string()).join("environ"), max, &mut buf) else {
        return (found, 0, false);
    };
    let mut env = buf.as_slice();
    if cut {
        // The entry at the cut is incomplete: only whole entries count.
        env = env.iter().rposition(|&b| b == 0).map_or(&[][..], |end| &env[..end]);
    }
    for entry in env.split(|&b| b == 0) {
        let Some(eq) = entry.iter().position(|&b| b == b'=') else { continue };
        let (name, value) = (&entry[..eq], &entry[eq + 1..]);
        // The first of a name wins, as getenv finds it.
        if let Some(i) = vars.iter().position(|v| v.as_bytes() == name)
            && found[i].is_none()
            && let Ok(v) = std::str::from_utf8(value)
            && !v.is_empty()
        {
            found[i] = Some(v.to_owned());
        }
    }
    (found, buf.len(), cut)
}

#[cfg(test)]
#[path = "procs_tests.rs"]
mod tests;
