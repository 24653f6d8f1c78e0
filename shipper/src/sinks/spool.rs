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
            } else if name.ends_with(TMP_SUFFIX) {
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
    pub fn push(&mut self, label: &str, items: &[T]) -> std::io::Result<(String, Dropped)> {
        let bytes = self.encoder.encode(label, items);
        if bytes.len() as u64 > self.max_bytes {
            // Larger than the whole spool: the caller keeps it in memory instead.
            return Err(std::io::Error::new(
                std::io::ErrorKind::StorageFull,
                "batch larger than spool.max_bytes",
            ));
        }
        let mut dropped = Dropped::default();
        while !self.files.is_empty() && self.bytes() + bytes.len() as u64 > self.max_bytes {
            let Some((oldest, _)) = self.files.pop_first() else { break };
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
        self.write_atomically(&name, &bytes, false)?;
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
        count
    }

    fn move_aside(&self, name: &str) -> std::io::Result<()> {
        let aside = self.dir.join(ASIDE);
        std::fs::create_dir_all(&aside).and_then(|()| std::fs::rename(self.dir.join(name), aside.join(name)))
    }

    /// Reads a file; see [`ReadError`] for what happens to one that cannot be read back.
    pub fn read(&mut self, name: &str) -> Result<Entry<T>, ReadError> {
        if let Some((label, items)) = self.take_fresh(name) {
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
            Ok(b) => Ok(Entry { label: b.label, items: b.items, skipped: b.skipped }),
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
        let bytes = self.encoder.encode(label, items);
        self.write_atomically(name, &bytes, true)?;
        self.files.insert(name.to_owned(), bytes.len() as u64);
        Ok(())
    }

    /// Deletes a delivered (or unreadable) file.
    pub fn remove(&mut self, name: &str) {
        self.forget_fresh(name);
        self.files.remove(name);
        let _ = std::fs::remove_file(self.dir.join(name));
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
mod tests {
    use super::*;
    use crate::datum::{Datum, DatumValue};

    type Spool = super::Spool<Datum>;
    use std::time::Duration;

    fn batch(n: usize, tag: &str) -> Vec<Datum> {
        (0..n)
            .map(|i| Datum {
                metric: format!("M{tag}"),
                unit: "Count".into(),
                dimensions: vec![
                    ("ClusterName".into(), "c".into()),
                    ("I".into(), format!("{i}-{}", "x".repeat(40))),
                ],
                timestamp: SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000),
                value: DatumValue::Value { value: i as f64 },
            })
            .collect()
    }

    #[test]
    fn oldest_first_and_survives_a_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let (mut s, d) = Spool::open(dir.path(), 1 << 20).unwrap();
        assert_eq!(d, Dropped::default());
        let (a, _) = s.push("Slurm", &batch(3, "a")).unwrap();
        let (b, _) = s.push("Slurm", &batch(2, "b")).unwrap();
        assert!(a < b);
        drop(s); // the process ends
        let (mut s, _) = Spool::open(dir.path(), 1 << 20).unwrap();
        assert_eq!((s.files(), s.oldest()), (2, Some(a.clone())));
        let e = s.read(&a).unwrap();
        assert_eq!((e.label.as_str(), e.items.len(), e.items[0].metric.as_str()), ("Slurm", 3, "Ma"));
        s.remove(&a);
        assert_eq!(s.oldest(), Some(b));
    }

    #[test]
    fn the_batch_just_pushed_is_read_from_memory_until_its_file_changes() {
        let dir = tempfile::tempdir().unwrap();
        let (mut s, _) = Spool::open(dir.path(), 1 << 20).unwrap();
        let (a, _) = s.push("Slurm", &batch(3, "a")).unwrap();
        s.keep_fresh(a.clone(), "Slurm", batch(3, "a"));
        // Not read back: a file spoiled after the write does not matter to the sender.
        std::fs::write(dir.path().join(&a), b"spoiled").unwrap();
        let e = s.read(&a).unwrap();
        assert_eq!((e.label.as_str(), e.items), ("Slurm", batch(3, "a")));
        // Taken once: a second read (a retry after a failed send) reads the file.
        assert!(matches!(s.read(&a), Err(ReadError::Corrupt(..))));

        let (b, _) = s.push("Slurm", &batch(3, "b")).unwrap();
        s.keep_fresh(b.clone(), "Slurm", batch(3, "b"));
        s.rewrite(&b, "Slurm", &batch(1, "b")).unwrap();
        assert_eq!(s.read(&b).unwrap().items, batch(1, "b"), "what is left after a partial send");

        // A newer push replaces it; the older file is read from the disk.
        let (c, _) = s.push("Slurm", &batch(2, "c")).unwrap();
        s.keep_fresh(c.clone(), "Slurm", batch(2, "c"));
        let (d, _) = s.push("Slurm", &batch(2, "d")).unwrap();
        s.keep_fresh(d.clone(), "Slurm", batch(2, "d"));
        assert_eq!(s.read(&c).unwrap().items, batch(2, "c"));
        assert_eq!(s.read(&d).unwrap().items, batch(2, "d"));
    }

    #[test]
    fn a_full_spool_drops_the_oldest_and_counts_them() {
        let dir = tempfile::tempdir().unwrap();
        let one = spool::encode("Slurm", &batch(50, "a")).len() as u64;
        let (mut s, _) = Spool::open(dir.path(), one * 3 + 10).unwrap();
        for tag in ["a", "b", "c"] {
            assert_eq!(s.push("Slurm", &batch(50, tag)).unwrap().1, Dropped::default());
        }
        let (_, d) = s.push("Slurm", &batch(50, "d")).unwrap();
        assert_eq!(d.full, 50, "the oldest batch of 50 went");
        assert_eq!(s.files(), 3);
        let oldest = s.oldest().unwrap();
        assert_eq!(s.read(&oldest).unwrap().items[0].metric, "Mb");
        assert!(s.bytes() <= one * 3 + 10);
    }

    #[test]
    fn torn_and_corrupt_files_are_counted_and_removed() {
        let dir = tempfile::tempdir().unwrap();
        let (mut s, _) = Spool::open(dir.path(), 1 << 20).unwrap();
        let (a, _) = s.push("Slurm", &batch(7, "a")).unwrap();
        let (b, _) = s.push("Slurm", &batch(4, "b")).unwrap();
        // Power loss: a torn temporary file, and a final file cut short.
        let full = std::fs::read(dir.path().join(&a)).unwrap();
        std::fs::write(dir.path().join("99999999999999999999-00000009.spool.tmp"), &full[..full.len() / 2])
            .unwrap();
        std::fs::write(dir.path().join(&b), &std::fs::read(dir.path().join(&b)).unwrap()[..40]).unwrap();
        drop(s); // the process ends
        let (mut s, d) = Spool::open(dir.path(), 1 << 20).unwrap();
        assert_eq!((d.corrupt_files, d.corrupt_datums), (1, 7), "the torn write, by its header");
        assert_eq!(s.read(&a).unwrap().items.len(), 7);
        let Err(ReadError::Corrupt(err, named)) = s.read(&b) else { panic!("corrupt") };
        assert_eq!(named, 4);
        assert!(matches!(err, SpoolError::Length { .. }), "{err}");
        assert!(!dir.path().join(&b).exists(), "removed");
        assert_eq!(s.files(), 1);
    }

    #[test]
    fn an_unreadable_file_is_moved_aside_and_a_vanished_one_forgotten_neither_counted_corrupt() {
        let dir = tempfile::tempdir().unwrap();
        let (mut s, _) = Spool::open(dir.path(), 1 << 20).unwrap();
        let (a, _) = s.push("Slurm", &batch(3, "a")).unwrap();
        let (b, _) = s.push("Slurm", &batch(2, "b")).unwrap();
        let (c, _) = s.push("Slurm", &batch(1, "c")).unwrap();
        // A read that fails with an I/O error (EISDIR here: chmod does not stop root).
        std::fs::remove_file(dir.path().join(&a)).unwrap();
        std::fs::create_dir(dir.path().join(&a)).unwrap();
        let Err(ReadError::Unreadable(why)) = s.read(&a) else { panic!("unreadable") };
        assert!(why.starts_with("cannot read spool file") && why.ends_with("moved to aside/"), "{why}");
        assert!(dir.path().join(ASIDE).join(&a).is_dir() && !dir.path().join(&a).exists());
        std::fs::remove_file(dir.path().join(&b)).unwrap();
        let Err(ReadError::Unreadable(why)) = s.read(&b) else { panic!("gone") };
        assert!(why.ends_with("it is gone"), "{why}");
        assert_eq!((s.files(), s.oldest()), (1, Some(c.clone())), "the rest is next in line");
        assert_eq!(s.read(&c).unwrap().items.len(), 1);
        drop(s);
        let (s, d) = Spool::open(dir.path(), 1 << 20).unwrap();
        assert_eq!((s.files(), d), (1, Dropped::default()), "nothing came back, nothing counted");
    }

    #[test]
    fn a_second_process_cannot_open_a_spool_in_use() {
        let dir = tempfile::tempdir().unwrap();
        let (mut s, _) = Spool::open(dir.path(), 1 << 20).unwrap();
        s.push("Slurm", &batch(3, "a")).unwrap();
        // The daemon's write in progress.
        std::fs::write(dir.path().join("99999999999999999999-00000009.spool.tmp"), b"half").unwrap();
        // flock is per open file description: a second open here stands for a second process.
        let err = Spool::open(dir.path(), 1 << 20).map(|_| ()).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::WouldBlock);
        assert!(err.to_string().contains(&format!("in use by process {}", std::process::id())), "{err}");
        assert!(dir.path().join("99999999999999999999-00000009.spool.tmp").exists(), "left alone");
        drop(s);
        let (again, dropped) = Spool::open(dir.path(), 1 << 20).unwrap();
        assert_eq!((again.files(), dropped.corrupt_files), (1, 1), "free once the first is gone");
    }

    #[test]
    fn rewrite_keeps_what_is_left() {
        let dir = tempfile::tempdir().unwrap();
        let (mut s, _) = Spool::open(dir.path(), 1 << 20).unwrap();
        let (a, _) = s.push("Slurm", &batch(10, "a")).unwrap();
        s.rewrite(&a, "Slurm", &batch(3, "a")).unwrap();
        assert_eq!(s.read(&a).unwrap().items.len(), 3);
    }
}
