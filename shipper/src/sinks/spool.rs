//! The disk spool: every flush is written here before it is sent (write-ahead), and removed once
//! CloudWatch accepted it. Each destination has its own spool directory: datums for
//! PutMetricData in `spool.dir`, job records for CloudWatch Logs in `spool.dir/logs`. While CloudWatch cannot be reached the files pile up, bounded in
//! bytes (the oldest go first, counted); on recovery they are replayed oldest first. A crash or
//! `kill -9` loses at most the batch being written; a batch in flight is sent again after a
//! restart, never anything older.
//!
//! Files are written to a temporary name and renamed, so a file with a final name is whole
//! whatever happens to the process. A fresh flush is not synced to the disk: it is usually
//! delivered and removed within a second, before the kernel would write it at all, and a
//! power loss then costs what it costs the batch being aggregated in memory anyway. A file
//! kept after a failed send (rewritten with what is left) is synced, file and directory, as it
//! may wait out an outage; a torn one (power loss) fails its checksum and is counted.

use slurm_cw_formats::spool::{self, Item, SpoolError};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

const SUFFIX: &str = ".spool";
const TMP_SUFFIX: &str = ".tmp";

/// A batch the spool did not take: why, and the items it deleted to make room before the write
/// failed (gone all the same, to count).
#[derive(Debug)]
pub struct NotTaken {
    pub error: std::io::Error,
    pub evicted: u64,
}

/// What making room or opening the spool cost.
#[derive(Debug, Default, PartialEq)]
pub struct Dropped {
    /// Datums in the oldest files deleted to stay under the size limit.
    pub full: u64,
    /// Files that failed their checks (and the datums their header still names).
    pub corrupt_files: u64,
    pub corrupt_datums: u64,
}

/// Why a spool file was not read back.
#[derive(Debug)]
pub enum ReadError {
    /// It failed its checks (a torn write): removed, with the items its header names (0 when
    /// the header itself is gone).
    Corrupt(SpoolError, u64),
    /// The file system would not give its bytes (an I/O error, permissions, a directory where
    /// a file should be): nothing says it is corrupt, so it is moved to `aside/` for a person
    /// to look at, and the files behind it are sent. One that vanished is forgotten.
    Unreadable(String),
}

impl std::fmt::Display for ReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReadError::Corrupt(e, _) => e.fmt(f),
            ReadError::Unreadable(why) => f.write_str(why),
        }
    }
}

/// One spooled batch read back.
#[derive(Debug)]
pub struct Entry<T> {
    /// The namespace of datums, the log group of records.
    pub label: String,
    pub items: Vec<T>,
    /// Items this version has no use for (a metric it no longer has): dropped.
    pub skipped: usize,
}

pub struct Spool<T> {
    /// Held while the spool is open: one process per spool directory.
    _lock: std::fs::File,
    dir: PathBuf,
    max_bytes: u64,
    /// file name -> size; names sort oldest first.
    files: BTreeMap<String, u64>,
    seq: u64,
    /// The newest file's batch as it was written (name, label, items): its sender takes it
    /// from here instead of reading back and decoding what was just encoded.
    fresh: Option<(String, String, Vec<T>)>,
    encoder: spool::Encoder,
    /// The file read for a send not yet done (removed or rewritten after it): room is never
    /// made by deleting it, or its items would count as dropped and then be sent, or be
    /// written back and deleted and counted again.
    sending: Option<String>,
    #[cfg(test)]
    fail_writes: bool,
}

fn is_spool_file(name: &str) -> bool {
    name.ends_with(SUFFIX)
}

impl<T: Item> Spool<T> {
    /// Opens (creating) the spool directory and takes stock of what an earlier run left. Torn
    /// temporary files of a crash are removed and counted as corrupt.
    pub fn open(dir: &Path, max_bytes: u64) -> std::io::Result<(Spool<T>, Dropped)> {
        std::fs::create_dir_all(dir)?;
        set_private(dir);
        // Before anything else: a second process must not take the first one's temporary file
        // for a torn write, nor send its backlog a second time.
        let lock = lock(dir)?;
        let mut files = BTreeMap::new();
        let mut dropped = Dropped::default();
        for e in std::fs::read_dir(dir)?.flatten() {
            let Ok(name) = e.file_name().into_string() else { continue };
            if is_spool_file(&name) {
                let len = e.metadata().map(|m| m.len()).unwrap_or(0);
                files.insert(name, len);
            } else if let Some(base) = name.strip_suffix(TMP_SUFFIX) {
                // A rewrite that never finished: the file it was to replace is still whole.
                if dir.join(base).exists() {
                    let _ = std::fs::remove_file(e.path());
                    continue;
                }
                // A write that never finished: the batch being written when the process died.
                if let Ok(bytes) = std::fs::read(e.path()) {
                    dropped.corrupt_datums += spool::header_count(&bytes).unwrap_or(0) as u64;
                }
                dropped.corrupt_files += 1;
                let _ = std::fs::remove_file(e.path());
            }
        }
        let seq = files.len() as u64;
        Ok((
            Spool {
                _lock: lock,
                dir: dir.to_owned(),
                max_bytes,
                files,
                seq,
                fresh: None,
                encoder: spool::Encoder::default(),
                sending: None,
                #[cfg(test)]
                fail_writes: false,
            },
            dropped,
        ))
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn files(&self) -> usize {
        self.files.len()
    }

    pub fn bytes(&self) -> u64 {
        self.files.values().sum()
    }

    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    /// Writes a batch as the newest file, first deleting the oldest files while the spool would
    /// exceed its size. Returns the file and what was dropped to make room.
    pub fn push(&mut self, label: &str, items: &[T]) -> Result<(String, Dropped), NotTaken> {
        let bytes = self.encoder.encode(label, items);
        if bytes.len() as u64 > self.max_bytes {
            // Larger than the whole spool: the caller keeps it in memory instead.
            let error =
                std::io::Error::new(std::io::ErrorKind::StorageFull, "batch larger than spool.max_bytes");
            return Err(NotTaken { error, evicted: 0 });
        }
        let mut dropped = Dropped::default();
        while self.bytes() + bytes.len() as u64 > self.max_bytes {
            let sending = self.sending.as_deref();
            let Some(oldest) = self.files.keys().find(|n| Some(n.as_str()) != sending).cloned() else {
                break;
            };
            self.files.remove(&oldest);
            let path = self.dir.join(&oldest);
            if let Ok(old) = std::fs::read(&path) {
                dropped.full += spool::header_count(&old).unwrap_or(0) as u64;
            }
            let _ = std::fs::remove_file(&path);
        }
        let millis =
            SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map(|d| d.as_millis()).unwrap_or(0);
        self.seq += 1;
        let name = format!("{millis:020}-{:08}{SUFFIX}", self.seq % 100_000_000);
        if let Err(error) = self.write_atomically(&name, &bytes, false) {
            return Err(NotTaken { error, evicted: dropped.full });
        }
        self.files.insert(name.clone(), bytes.len() as u64);
        self.fresh = None;
        Ok((name, dropped))
    }

    /// Keeps the batch just pushed as `name` in memory for [`Spool::read`]: the file stays the
    /// record of it until it is removed.
    pub fn keep_fresh(&mut self, name: String, label: &str, items: Vec<T>) {
        if self.files.contains_key(&name) {
            self.fresh = Some((name, label.to_owned(), items));
        }
    }

    /// The (label, items) kept in memory for `name`, taken; None when another batch is kept.
    fn take_fresh(&mut self, name: &str) -> Option<(String, Vec<T>)> {
        match &self.fresh {
            Some((n, _, _)) if n == name => self.fresh.take().map(|(_, label, items)| (label, items)),
            _ => None,
        }
    }

    fn forget_fresh(&mut self, name: &str) {
        self.take_fresh(name);
    }

    /// Writes `name` whole or not at all; `durable`: synced to the disk, file and directory.
    fn write_atomically(&self, name: &str, bytes: &[u8], durable: bool) -> std::io::Result<()> {
        #[cfg(test)]
        if self.fail_writes {
            return Err(std::io::Error::new(std::io::ErrorKind::StorageFull, "a full disk (test)"));
        }
        let tmp = self.dir.join(format!("{name}{TMP_SUFFIX}"));
        let result = (|| {
            let mut f = std::fs::File::create(&tmp)?;
            f.write_all(bytes)?;
            if durable {
                f.sync_all()?;
            }
            std::fs::rename(&tmp, self.dir.join(name))?;
            if durable {
                std::fs::File::open(&self.dir)?.sync_all()?;
            }
            Ok(())
        })();
        if result.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        result
    }

    /// The oldest file's name.
    pub fn oldest(&self) -> Option<String> {
        self.files.keys().next().cloned()
    }

    /// The oldest file that `skip` does not pass over, else the oldest.
    pub fn oldest_but(&self, skip: impl Fn(&str) -> bool) -> Option<String> {
        self.files.keys().find(|n| !skip(n)).or(self.files.keys().next()).cloned()
    }

    /// Moves a file out of the way (into `aside/`, kept for a person to look at); returns the
    /// items its header names.
    pub fn set_aside(&mut self, name: &str) -> u64 {
        let from = self.dir.join(name);
        let count = std::fs::read(&from).ok().and_then(|b| spool::header_count(&b)).unwrap_or(0) as u64;
        if let Err(e) = self.move_aside(name) {
            tracing::warn!(file = %from.display(), error = %e, "cannot move a refused spool file aside; removing it");
            let _ = std::fs::remove_file(&from);
        }
        self.files.remove(name);
        self.forget_fresh(name);
        self.sent(name);
        count
    }

    fn move_aside(&self, name: &str) -> std::io::Result<()> {
        let aside = self.dir.join(ASIDE);
        std::fs::create_dir_all(&aside).and_then(|()| std::fs::rename(self.dir.join(name), aside.join(name)))
    }

    /// Reads a file; see [`ReadError`] for what happens to one that cannot be read back.
    pub fn read(&mut self, name: &str) -> Result<Entry<T>, ReadError> {
        if let Some((label, items)) = self.take_fresh(name) {
            self.sending = Some(name.to_owned());
            return Ok(Entry { label, items, skipped: 0 });
        }
        let path = self.dir.join(name);
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) => {
                self.files.remove(name);
                let what = format!("cannot read spool file {}: {e}", path.display());
                let done = match e.kind() {
                    std::io::ErrorKind::NotFound => "it is gone".to_owned(),
                    _ => match self.move_aside(name) {
                        Ok(()) => format!("moved to {ASIDE}/"),
                        // Left where it is: the next start tries it again.
                        Err(e) => format!("left in place (cannot move it to {ASIDE}/: {e})"),
                    },
                };
                return Err(ReadError::Unreadable(format!("{what}; {done}")));
            }
        };
        match spool::decode(&bytes) {
            Ok(b) => {
                self.sending = Some(name.to_owned());
                Ok(Entry { label: b.label, items: b.items, skipped: b.skipped })
            }
            Err(e) => {
                let named = spool::header_count(&bytes).unwrap_or(0) as u64;
                self.remove(name);
                Err(ReadError::Corrupt(e, named))
            }
        }
    }

    /// Replaces a file with what is left of its batch after a send that did not deliver all of
    /// it, synced: it may wait out an outage.
    pub fn rewrite(&mut self, name: &str, label: &str, items: &[T]) -> std::io::Result<()> {
        self.forget_fresh(name);
        self.sent(name);
        let bytes = self.encoder.encode(label, items);
        self.write_atomically(name, &bytes, true)?;
        self.files.insert(name.to_owned(), bytes.len() as u64);
        Ok(())
    }

    /// Deletes a delivered (or unreadable) file.
    pub fn remove(&mut self, name: &str) {
        self.forget_fresh(name);
        self.sent(name);
        self.files.remove(name);
        let _ = std::fs::remove_file(self.dir.join(name));
    }
}

impl<T> Spool<T> {
    /// The send of `name` is done: it may make room again.
    fn sent(&mut self, name: &str) {
        if self.sending.as_deref() == Some(name) {
            self.sending = None;
        }
    }
}

const LOCK: &str = ".lock";
/// Where refused files go (see [`Spool::set_aside`]).
pub const ASIDE: &str = "aside";

/// An exclusive lock on the spool directory, taken without waiting; the error names the
/// process that holds it.
fn lock(dir: &Path) -> std::io::Result<std::fs::File> {
    let path = dir.join(LOCK);
    let mut f =
        std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(false).open(&path)?;
    if let Err(err) = crate::sys::fs::lock_exclusive_now(&f) {
        if err.kind() == std::io::ErrorKind::WouldBlock {
            let holder = std::fs::read_to_string(&path).unwrap_or_default();
            return Err(std::io::Error::new(
                std::io::ErrorKind::WouldBlock,
                format!("{} is in use by process {} (the daemon?)", dir.display(), holder.trim()),
            ));
        }
        return Err(err);
    }
    // Only to name the holder in a second process's message: a full disk must not stop the
    // spool from opening (it takes data again when room comes back).
    let _ = f.set_len(0).and_then(|()| write!(f, "{}", std::process::id()));
    Ok(f)
}

fn set_private(dir: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700));
}

#[cfg(test)]
#[path = "spool_tests.rs"]
mod tests;
