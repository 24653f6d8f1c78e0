//! A job's cgroup files kept open between cycles and read with pread at offset 0: one syscall
//! a file a cycle instead of open, read and close. cgroupfs regenerates a file's text on every
//! read from offset 0, so a held file reads as fresh as a new open.
//!
//! - Closed when the job leaves the job table (its [`Files`] and subtree are dropped), when a
//!   read fails (a removed cgroup's files answer ENODEV: the path is opened again, which fails
//!   when it is gone), and when the job's directory is another one under the same path (a
//!   requeued job: the node collector compares its inode each cycle).
//! - Bounded: [`PER_JOB`] cgroup files a job and a process-wide budget of half the open-file
//!   limit; past either, files are opened, read and closed each time as before.
//! - Opened with O_NOFOLLOW (and O_CLOEXEC, as the standard library always does): a job's user
//!   may make directories in its subtree, never a link the collector would follow.

use std::fs::File;
use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Cgroup files (not counting the subtree's cgroup.procs) one job holds open at most: v1
/// reads eleven across five controllers.
pub const PER_JOB: usize = 16;

/// Directories of one job's subtree whose cgroup.procs is held open at most; Slurm's own tree
/// is a few a step. The rest of a subtree a user filled is read by open, read, close.
pub const PER_JOB_DIRS: usize = 32;

/// Files held open now, by every job.
static OPEN: AtomicUsize = AtomicUsize::new(0);

/// Files held open now, by every job of every collector in this process.
pub fn open_now() -> usize {
    OPEN.load(Ordering::Relaxed)
}

/// How many files may be held at once: half the open-file limit, once that limit is raised to
/// its hard limit (at most 65,536), so that sockets and spool files always have the other half.
pub fn budget() -> usize {
    static BUDGET: OnceLock<usize> = OnceLock::new();
    *BUDGET.get_or_init(|| {
        let limit = crate::sys::limits::raise_open_files(65_536);
        usize::try_from(limit / 2).unwrap_or(usize::MAX)
    })
}

/// One file held open, counted against the budget while it is.
#[derive(Debug)]
pub struct Held(File);

impl Held {
    /// Holds `f` when the budget has room; gives it back otherwise.
    fn hold(f: File) -> Result<Held, File> {
        let room = budget();
        match OPEN.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| (n < room).then_some(n + 1)) {
            Ok(_) => Ok(Held(f)),
            Err(_) => Err(f),
        }
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        OPEN.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Opens `path` for reading, never through a symbolic link.
fn open(path: &Path) -> io::Result<File> {
    std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW).open(path)
}

/// The whole text of `f` from offset 0 in `buf` (replacing it).
fn pread_text(f: &File, buf: &mut String) -> io::Result<()> {
    let mut bytes = std::mem::take(buf).into_bytes();
    bytes.clear();
    let r = super::read_end(f, &mut bytes, usize::MAX);
    match String::from_utf8(bytes) {
        Ok(s) => {
            *buf = s;
            r
        }
        Err(e) => {
            let mut bytes = e.into_bytes();
            bytes.clear();
            *buf = String::from_utf8(bytes).unwrap_or_default();
            Err(io::ErrorKind::InvalidData.into())
        }
    }
}

/// The text of the file `dir/name` in `buf` (replacing it), through `slot`: a pread of the
/// file held there, else an open that is kept in `slot` when `keep` and the budget allow. A
/// held file that fails to read (its cgroup removed) is closed and the path opened again.
/// False when it cannot be read.
pub fn read_via(slot: &mut Option<Held>, dir: &Path, name: &str, keep: bool, buf: &mut String) -> bool {
    if let Some(h) = slot {
        if pread_text(&h.0, buf).is_ok() {
            return true;
        }
        *slot = None;
    }
    let Ok(f) = open(&dir.join(name)) else {
        buf.clear();
        return false;
    };
    let ok = pread_text(&f, buf).is_ok();
    if ok && keep {
        *slot = Held::hold(f).ok();
    }
    ok
}

/// A job's cgroup files held open, by (the directory's name for the job: a v1 controller, or
/// "" for v2; the file's name).
#[derive(Debug, Default)]
pub struct Files(Vec<(&'static str, &'static str, Option<Held>)>);

impl Files {
    /// The text of `dir/name` in `buf`, or None; `dir` is the job's directory `slot` names.
    /// Held open when `keep` (a file read every cycle) and [`PER_JOB`] is not reached.
    pub fn text<'b>(
        &mut self,
        slot: &'static str,
        dir: &Path,
        name: &'static str,
        keep: bool,
        buf: &'b mut String,
    ) -> Option<&'b str> {
        let i = self.0.iter().position(|(s, n, _)| *s == slot && *n == name);
        let mut none = None;
        let (held, keep) = match i {
            Some(i) => (&mut self.0[i].2, keep),
            None if keep && self.0.len() < PER_JOB => {
                self.0.push((slot, name, None));
                let last = self.0.len() - 1;
                (&mut self.0[last].2, true)
            }
            None => (&mut none, false),
        };
        read_via(held, dir, name, keep, buf).then_some(buf.as_str())
    }

    /// Files held open now.
    pub fn held(&self) -> usize {
        self.0.iter().filter(|(_, _, h)| h.is_some()).count()
    }

    /// Closes them all.
    pub fn clear(&mut self) {
        self.0.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_held_file_reads_fresh_and_is_closed_and_reopened_when_it_fails() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("memory.current");
        std::fs::write(&p, "100\n").unwrap();
        let mut buf = String::new();
        let mut files = Files::default();
        assert_eq!(files.text("", d.path(), "memory.current", true, &mut buf), Some("100\n"));
        assert_eq!(files.held(), 1);
        std::fs::write(&p, "2000000\n").unwrap();
        assert_eq!(files.text("", d.path(), "memory.current", true, &mut buf), Some("2000000\n"), "fresh");
        // Not kept: read, not held.
        assert_eq!(files.text("", d.path(), "memory.max", false, &mut buf), None);
        std::fs::write(d.path().join("memory.max"), "max\n").unwrap();
        assert_eq!(files.text("", d.path(), "memory.max", false, &mut buf), Some("max\n"));
        assert_eq!(files.held(), 1);
        // A symbolic link is never followed.
        std::os::unix::fs::symlink(&p, d.path().join("cpu.stat")).unwrap();
        assert_eq!(files.text("", d.path(), "cpu.stat", true, &mut buf), None);
        // A held file that fails is closed and its path opened again (here: a directory now).
        let mut slot = None;
        let (dir, name) = (d.path(), "memory.current");
        assert!(read_via(&mut slot, dir, name, true, &mut buf));
        assert!(slot.is_some());
        let dir_fd = open(d.path()).unwrap();
        slot = Held::hold(dir_fd).ok();
        std::fs::write(&p, "7\n").unwrap();
        assert!(read_via(&mut slot, dir, name, true, &mut buf), "reopened by path");
        assert_eq!(buf, "7\n");
        std::fs::remove_file(&p).unwrap();
        slot = Held::hold(open(d.path()).unwrap()).ok();
        assert!(!read_via(&mut slot, dir, name, true, &mut buf), "gone");
        assert!(slot.is_none(), "closed");
        files.clear();
        assert_eq!(files.held(), 0);
    }

    #[test]
    fn a_job_holds_at_most_its_share() {
        let d = tempfile::tempdir().unwrap();
        const NAMES: [&str; 20] = [
            "f0", "f1", "f2", "f3", "f4", "f5", "f6", "f7", "f8", "f9", "f10", "f11", "f12", "f13", "f14",
            "f15", "f16", "f17", "f18", "f19",
        ];
        let mut files = Files::default();
        let mut buf = String::new();
        for n in NAMES {
            std::fs::write(d.path().join(n), n).unwrap();
            assert_eq!(files.text("", d.path(), n, true, &mut buf), Some(n));
        }
        assert_eq!(files.held(), PER_JOB);
        assert!(budget() > 0);
    }
}
