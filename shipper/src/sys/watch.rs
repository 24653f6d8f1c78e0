//! inotify: whether entries were added to or removed from directories since last asked, so
//! that the job cgroups are listed again only when a job's directory came or went. cgroupfs
//! (v1 and v2) reports mkdir and rmdir to inotify like any filesystem (mkdir(2) and rmdir(2) go
//! through the VFS, which notifies); a directory is watched before it is listed, so nothing
//! made in between is missed.

use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// Reads of pending events a check makes at most: more left over is one more change next time.
const READS: usize = 4;

/// The events that say a directory's entries changed (and the directory itself went).
const MASK: u32 = libc::IN_CREATE
    | libc::IN_DELETE
    | libc::IN_MOVED_FROM
    | libc::IN_MOVED_TO
    | libc::IN_DELETE_SELF
    | libc::IN_MOVE_SELF
    | libc::IN_ONLYDIR;

/// An inotify instance: directories watched, events read without blocking.
#[derive(Debug)]
pub struct Watch {
    fd: File,
    buf: Vec<u8>,
}

impl Watch {
    pub fn new() -> io::Result<Watch> {
        // SAFETY: inotify_init1 takes flags only and returns a new descriptor or -1.
        let fd = unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` was just opened and is owned by nothing else.
        Ok(Watch { fd: unsafe { File::from_raw_fd(fd) }, buf: vec![0; 16 * 1024] })
    }

    /// Watches directory `dir` (again: a directory watched already keeps its watch). `NotFound`
    /// when it is not there.
    pub fn dir(&self, dir: &Path) -> io::Result<()> {
        let mut path = Vec::with_capacity(dir.as_os_str().len() + 1);
        path.extend_from_slice(dir.as_os_str().as_bytes());
        path.push(0);
        // SAFETY: `path` is NUL-terminated and outlives the call.
        let wd = unsafe { libc::inotify_add_watch(self.fd.as_raw_fd(), path.as_ptr().cast(), MASK) };
        if wd < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Whether any watched directory changed since the last call (the queue overflowing
    /// counts); takes what is pending, [`READS`] reads at most.
    pub fn changed(&mut self) -> io::Result<bool> {
        let mut any = false;
        for _ in 0..READS {
            match self.fd.read(&mut self.buf) {
                Ok(0) => break,
                Ok(_) => any = true,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(any),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
        Ok(any)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_made_or_removed_in_a_watched_one_is_a_change_and_nothing_else_is() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = Watch::new().unwrap();
        w.dir(dir.path()).unwrap();
        assert!(!w.changed().unwrap());
        std::fs::create_dir(dir.path().join("job_7")).unwrap();
        assert!(w.changed().unwrap());
        assert!(!w.changed().unwrap(), "taken once");
        // Inside a directory that is not watched: no change.
        std::fs::create_dir(dir.path().join("job_7").join("step_0")).unwrap();
        assert!(!w.changed().unwrap());
        std::fs::remove_dir(dir.path().join("job_7").join("step_0")).unwrap();
        std::fs::remove_dir(dir.path().join("job_7")).unwrap();
        assert!(w.changed().unwrap());
        assert_eq!(w.dir(&dir.path().join("gone")).unwrap_err().kind(), io::ErrorKind::NotFound);
    }

    #[test]
    fn more_events_than_a_check_reads_are_changes_next_time_too() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = Watch::new().unwrap();
        w.dir(dir.path()).unwrap();
        // Each event is 16 bytes and its name: far more than READS reads of 16 KiB.
        for i in 0..8000 {
            std::fs::create_dir(dir.path().join(format!("d{i:05}"))).unwrap();
        }
        assert!(w.changed().unwrap());
        assert!(w.changed().unwrap(), "what was left over");
    }
}
