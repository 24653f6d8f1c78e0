//! Up to when this node's cost metrics have counted its running jobs, kept in the spool
//! directory. A daemon restarted (upgraded, crashed, stopped a while) counts on from there, so
//! `JobCost` misses none of the time jobs ran while it was down; without it a restart lost the
//! time from the last collection to the new daemon's start. The records need none of this: they
//! count each job from its Slurm start.
//!
//! The file holds one line: seconds since the epoch, twice, at a fixed width. It is written in
//! place at each flush through a file held open (one `pwrite`, where a temporary file and a
//! rename cost an inode each flush), and a write torn by a crash leaves two different times.
//! Anything but two equal times (or one, as a daemon before this wrote it), or a time after now
//! (a clock set back), is not believed: the daemon counts from its own start, as it did before.
//! An old time is harmless: it only moves the count back for jobs that started before it.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The file's name in the spool directory.
pub const FILE: &str = "cost-counted-to";
/// The most of the file read: one line.
const MAX_BYTES: u64 = 64;

#[derive(Debug)]
pub struct Counted {
    path: PathBuf,
    /// Opened (and emptied) at the first write, then written in place.
    file: Option<File>,
    /// The time last written, so that a flush with no newer collection writes nothing.
    written: Option<SystemTime>,
    /// Whether a failed write has been logged.
    warned: bool,
}

impl Counted {
    pub fn in_dir(dir: &Path) -> Self {
        Counted { path: dir.join(FILE), file: None, written: None, warned: false }
    }

    /// The time the last daemon counted to, where it is believable at `now`.
    pub fn read(&self, now: SystemTime) -> Option<SystemTime> {
        use std::io::Read;
        let mut text = String::new();
        std::fs::File::open(&self.path).ok()?.take(MAX_BYTES).read_to_string(&mut text).ok()?;
        let mut times = text.split_whitespace();
        let first = times.next()?;
        if times.next().is_some_and(|second| second != first) || times.next().is_some() {
            return None;
        }
        let t = UNIX_EPOCH.checked_add(parse_secs(first)?)?;
        (t <= now).then_some(t)
    }

    /// Keeps `t` (a torn write is not believed: see the module's comment).
    pub fn write(&mut self, t: SystemTime) {
        if self.written.is_some_and(|w| w >= t) {
            return;
        }
        // Whole milliseconds, cut down, never rounded up: a mark after the time counted would
        // lose that sliver of every job's cost after a restart. Fixed width, so each write
        // covers the last whole.
        let ms = t.duration_since(UNIX_EPOCH).unwrap_or_default().as_millis();
        let secs = format!("{:016}.{:03}", ms / 1000, ms % 1000);
        let line = format!("{secs} {secs}\n");
        let done = self.open().and_then(|f| f.write_all_at(line.as_bytes(), 0));
        match done {
            Ok(()) => self.written = Some(t),
            Err(e) if !self.warned => {
                self.warned = true;
                tracing::warn!(file = %self.path.display(), error = %e,
                    "cannot keep up to when job costs were counted: after a restart, JobCost misses the time the daemon was down");
            }
            Err(_) => {}
        }
    }

    fn open(&mut self) -> std::io::Result<&File> {
        let f = match self.file.take() {
            Some(f) => f,
            None => std::fs::OpenOptions::new().write(true).create(true).truncate(true).open(&self.path)?,
        };
        Ok(self.file.insert(f))
    }
}

/// `seconds[.fraction]` since the epoch, exactly (no float on the way, so the time read back is
/// never after the time written).
fn parse_secs(text: &str) -> Option<Duration> {
    let (whole, fraction) = text.split_once('.').unwrap_or((text, ""));
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !digits(whole) || !(fraction.is_empty() || digits(fraction)) || fraction.len() > 9 {
        return None;
    }
    let nanos = if fraction.is_empty() { 0 } else { format!("{fraction:0<9}").parse().ok()? };
    Some(Duration::new(whole.parse().ok()?, nanos))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: f64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs_f64(1_800_000_000.0 + s)
    }

    #[test]
    fn a_written_time_is_read_back_and_a_bad_or_future_one_is_not_believed() {
        let d = tempfile::tempdir().unwrap();
        let mut c = Counted::in_dir(d.path());
        assert_eq!(c.read(t(0.0)), None, "no file: the daemon's own start");
        c.write(t(10.25));
        assert_eq!(c.read(t(60.0)), Some(t(10.25)));
        let line = "0000001800000010.250 0000001800000010.250\n";
        assert_eq!(std::fs::read_to_string(d.path().join(FILE)).unwrap(), line);
        c.write(t(20.5));
        assert_eq!(c.read(t(60.0)), Some(t(20.5)), "written in place");
        std::fs::write(d.path().join(FILE), "1800000010.250\n").unwrap();
        assert_eq!(c.read(t(60.0)), Some(t(10.25)), "one time: the file a daemon before this wrote");
        c.write(t(5.0));
        assert_eq!(c.read(t(60.0)), Some(t(10.25)), "never moved back");
        c.write(t(30.0009));
        assert_eq!(c.read(t(60.0)), Some(t(30.0)), "cut to the millisecond, never rounded up past it");
        assert_eq!(c.read(t(10.0)), None, "a time after now: a clock set back");
        let torn = "0000001800000020.500 0000001800000010.250\n";
        for bad in [
            torn,
            "1 1 1",
            "",
            "yesterday",
            "-5",
            "NaN",
            "inf",
            "1e300",
            "+5",
            ".5",
            "1.2.3",
            "1.0000000001",
            &"9".repeat(200),
        ] {
            std::fs::write(d.path().join(FILE), bad).unwrap();
            assert_eq!(c.read(t(60.0)), None, "{bad:?}");
        }
    }

    #[test]
    fn a_directory_it_cannot_write_loses_the_mark_not_the_daemon() {
        let d = tempfile::tempdir().unwrap();
        let mut c = Counted::in_dir(&d.path().join("missing"));
        c.write(t(1.0));
        c.write(t(2.0));
        assert_eq!(c.read(t(60.0)), None);
    }
}
