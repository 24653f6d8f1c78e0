//! Directory listings of cgroupfs and procfs with as few syscalls as they allow.
//!
//! `std::fs::read_dir` costs five calls a directory: open, fstat (for its buffer size), two
//! getdents64 (the second to see the end) and close. Here it is open, one getdents64, close:
//! these filesystems (kernfs for cgroups, procfs, and tmpfs in tests) fill a getdents64
//! buffer until it is full or the directory has no more entries, so a reply that leaves room
//! for the longest entry is the last. Only for those filesystems: others (NFS) may answer in
//! short pieces.

use std::ffi::OsStr;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// What a directory entry is, as getdents64 says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Dir,
    Other,
    /// The filesystem does not say (DT_UNKNOWN): ask with a stat.
    Unknown,
}

/// Buffer for one getdents64 call.
const BUF_BYTES: usize = 16 * 1024;

/// The longest record: 19 bytes of header, a 255-byte name and its NUL, rounded up to 8.
const MAX_RECORD: usize = 280;

/// Calls `each(name, kind)` for every entry of `dir` but `.` and `..`.
pub fn entries(dir: &Path, mut each: impl FnMut(&OsStr, Kind)) -> io::Result<()> {
    entries_while(dir, |name, kind| {
        each(name, kind);
        true
    })
}

/// [`entries`] until `each` returns false: a directory a job's user made wide is read no
/// further than its reader needs.
pub fn entries_while(dir: &Path, mut each: impl FnMut(&OsStr, Kind) -> bool) -> io::Result<()> {
    let f = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_DIRECTORY).open(dir)?;
    // The thread's buffer, zero-filled once: a fresh 16 KiB a listing was cleared (and pulled
    // into the cache) each time for a reply of a few hundred bytes. A listing inside another's
    // callback finds it taken and makes its own.
    let mut buf = BUF.take();
    buf.resize(BUF_BYTES, 0);
    let r = (|| loop {
        let bytes = crate::sys::fs::getdents64(&f, &mut buf)?;
        let n = bytes.len();
        if !records(bytes, &mut each) || n == 0 || BUF_BYTES - n >= MAX_RECORD {
            return Ok(());
        }
    })();
    BUF.set(buf);
    r
}

thread_local! {
    static BUF: std::cell::Cell<Vec<u8>> = const { std::cell::Cell::new(Vec::new()) };
}

/// Walks linux_dirent64 records: d_ino (8), d_off (8), d_reclen (2), d_type (1), d_name.
/// False when `each` asked to stop.
fn records(mut bytes: &[u8], each: &mut impl FnMut(&OsStr, Kind) -> bool) -> bool {
    while bytes.len() >= 19 {
        let len = usize::from(u16::from_ne_bytes([bytes[16], bytes[17]]));
        if len < 19 || len > bytes.len() {
            return true;
        }
        let name = &bytes[19..len];
        let name = &name[..name.iter().position(|&b| b == 0).unwrap_or(name.len())];
        if name != b"." && name != b".." {
            let kind = match bytes[18] {
                libc::DT_DIR => Kind::Dir,
                libc::DT_UNKNOWN => Kind::Unknown,
                _ => Kind::Other,
            };
            if !each(OsStr::from_bytes(name), kind) {
                return false;
            }
        }
        bytes = &bytes[len..];
    }
    true
}

/// How many entries `dir` has, `.` and `..` left out.
pub fn count(dir: &Path) -> io::Result<u64> {
    count_at_most(dir, u64::MAX)
}

/// [`count`], read no further than `max` entries: a directory a user made huge (a process's
/// million descriptors) costs a listing of `max`.
pub fn count_at_most(dir: &Path, max: u64) -> io::Result<u64> {
    let mut n = 0;
    entries_while(dir, |_, _| {
        n += 1;
        n < max
    })?;
    Ok(n)
}

/// The names of the subdirectories of `dir`, as UTF-8 (others are not Slurm's); nothing when
/// it cannot be read (a job that just ended, a controller Slurm does not use).
pub fn subdirs(dir: &Path) -> Vec<String> {
    subdir_names(dir).into_iter().filter_map(|n| n.into_string().ok()).collect()
}

/// The names of the subdirectories of `dir`, whatever their bytes (a job's user names the
/// directories below its steps).
pub fn subdir_names(dir: &Path) -> Vec<std::ffi::OsString> {
    subdir_names_at_most(dir, usize::MAX).0
}

/// At most `max` names of the subdirectories of `dir`, and whether it has more: reading stops
/// there.
pub fn subdir_names_at_most(dir: &Path, max: usize) -> (Vec<std::ffi::OsString>, bool) {
    subdir_names_within(dir, max, usize::MAX)
}

/// [`subdir_names_at_most`] `max` names, whose paths under `dir` (`dir/name`) add up to at most
/// `max_bytes`.
pub fn subdir_names_within(dir: &Path, max: usize, max_bytes: usize) -> (Vec<std::ffi::OsString>, bool) {
    let mut out = Vec::new();
    let mut more = false;
    let mut bytes = 0usize;
    let _ = entries_while(dir, |name, kind| {
        let is_dir = match kind {
            Kind::Dir => true,
            Kind::Other => false,
            Kind::Unknown => std::fs::symlink_metadata(dir.join(name)).is_ok_and(|m| m.is_dir()),
        };
        if is_dir {
            let path = dir.as_os_str().len() + 1 + name.len();
            if out.len() == max || bytes + path > max_bytes {
                more = true;
                return false;
            }
            bytes += path;
            out.push(name.to_owned());
        }
        true
    });
    (out, more)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wide_directory_is_read_no_further_than_asked() {
        let d = tempfile::tempdir().unwrap();
        for i in 0..2000 {
            std::fs::create_dir(d.path().join(format!("d{i}"))).unwrap();
        }
        let (names, more) = subdir_names_at_most(d.path(), 100);
        assert_eq!((names.len(), more), (100, true));
        let mut seen = 0;
        entries_while(d.path(), |_, _| {
            seen += 1;
            seen < 10
        })
        .unwrap();
        assert_eq!(seen, 10, "no entry past the tenth is looked at");
        assert_eq!(subdir_names_at_most(d.path(), 5000), (subdir_names(d.path()), false));
    }

    #[test]
    fn lists_like_read_dir_in_one_call_or_many() {
        let d = tempfile::tempdir().unwrap();
        // Enough long names to need several getdents64 replies.
        let mut want: Vec<String> = (0..400).map(|i| format!("{i:0>200}")).collect();
        for n in &want {
            std::fs::create_dir(d.path().join(n)).unwrap();
        }
        std::fs::write(d.path().join("a-file"), "").unwrap();
        want.sort();
        let mut got = subdirs(d.path());
        got.sort();
        assert_eq!(got, want);
        assert_eq!(count(d.path()).unwrap(), 401);
        assert!(entries(&d.path().join("none"), |_, _| {}).is_err());
        assert!(subdirs(&d.path().join("a-file")).is_empty(), "not a directory");
    }

    #[test]
    fn lists_procfs() {
        let me = std::process::id();
        let tasks = Path::new("/proc").join(me.to_string()).join("task");
        let mut names = Vec::new();
        entries(&tasks, |n, k| names.push((n.to_owned(), k))).unwrap();
        let std_names = std::fs::read_dir(&tasks).unwrap().count();
        assert!(!names.is_empty() && names.len().abs_diff(std_names) <= 2, "{names:?}");
        assert!(names.iter().all(|(_, k)| *k == Kind::Dir));
        let fds = count(Path::new("/proc/self/fd")).unwrap();
        assert!(fds >= 3, "stdin, stdout, stderr at least: {fds}");
    }
}
