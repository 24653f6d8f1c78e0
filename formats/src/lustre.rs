//! The Lustre client's per-mount statistics, `llite.<fsname>-<instance>.stats`
//! (`/proc/fs/lustre/llite/*/stats` up to Lustre 2.11, `/sys/kernel/debug/lustre/llite/*/stats`
//! from 2.12), as lprocfs prints them:
//!
//! ```text
//! snapshot_time             1700000000.123456789 secs.nsecs
//! start_time                1699990000.000000000 secs.nsecs      (2.15 on)
//! elapsed_time              10000.123456789 secs.nsecs           (2.15 on)
//! read_bytes                1024 samples [bytes] 4096 1048576 536870912 [sumsq]
//! open                      37 samples [regs]                    (2.15: [usec] min max sum sumsq)
//! ```
//!
//! A counter with no samples is not printed at all, so a missing line means zero.

/// One counter line: `name count samples [unit]`, then `min max sum` and `sumsq` for counters
/// that keep them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Counter {
    pub name: String,
    pub samples: u64,
    pub unit: String,
    pub sum: Option<u64>,
}

/// A parsed stats file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stats {
    pub counters: Vec<Counter>,
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum StatsError {
    #[error("not an lprocfs stats file: no snapshot_time line")]
    NoSnapshot,
    #[error("line {line}: {what}")]
    Line { line: usize, what: String },
}

/// Operations counted as metadata: everything but data I/O, seeks, ioctls, mmap and the
/// permission checks and xattr cache hits that never reach a server.
pub const METADATA_OPS: &[&str] = &[
    "open",
    "close",
    "getattr",
    "setattr",
    "truncate",
    "create",
    "link",
    "unlink",
    "symlink",
    "mkdir",
    "rmdir",
    "mknod",
    "rename",
    "readdir",
    "statfs",
    "setxattr",
    "getxattr",
    "listxattr",
    "removexattr",
];

/// Parses a stats file. Header lines (`snapshot_time`, `start_time`, `elapsed_time` and any
/// other without `samples`) are skipped; a line with `samples` must be a well-formed counter.
pub fn parse(text: &str) -> Result<Stats, StatsError> {
    let mut stats = Stats::default();
    let mut snapshot = false;
    for (i, line) in text.lines().enumerate() {
        let line_no = i + 1;
        let mut f = line.split_whitespace();
        let Some(name) = f.next() else { continue };
        if name.trim_end_matches(':') == "snapshot_time" {
            snapshot = true;
            continue;
        }
        let rest: Vec<&str> = f.collect();
        if rest.get(1) != Some(&"samples") {
            continue;
        }
        let bad = |what: String| StatsError::Line { line: line_no, what };
        let samples: u64 = rest[0]
            .parse()
            .map_err(|_| bad(format!("{name}: sample count {:?} is not a number", rest[0])))?;
        let unit = rest
            .get(2)
            .and_then(|u| u.strip_prefix('[')?.strip_suffix(']'))
            .ok_or_else(|| bad(format!("{name}: no [unit] after the sample count")))?;
        let sum = match rest.get(5) {
            Some(s) => Some(s.parse().map_err(|_| bad(format!("{name}: sum {s:?} is not a number")))?),
            None => None,
        };
        stats.counters.push(Counter { name: name.to_owned(), samples, unit: unit.to_owned(), sum });
    }
    if !snapshot {
        return Err(StatsError::NoSnapshot);
    }
    Ok(stats)
}

/// What the shipper takes of one mount: totals since the mount (or since its stats were
/// cleared).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Totals {
    pub read_bytes: u64,
    pub write_bytes: u64,
    /// Read and write calls (the samples of read_bytes and write_bytes).
    pub reads: u64,
    pub writes: u64,
    pub opens: u64,
    /// [`METADATA_OPS`] added up, opens included.
    pub metadata_ops: u64,
}

impl Stats {
    pub fn get(&self, name: &str) -> Option<&Counter> {
        self.counters.iter().find(|c| c.name == name)
    }

    pub fn totals(&self) -> Totals {
        let samples = |n: &str| self.get(n).map_or(0, |c| c.samples);
        let sum = |n: &str| self.get(n).and_then(|c| c.sum).unwrap_or(0);
        Totals {
            read_bytes: sum("read_bytes"),
            write_bytes: sum("write_bytes"),
            reads: samples("read_bytes"),
            writes: samples("write_bytes"),
            opens: samples("open"),
            metadata_ops: METADATA_OPS.iter().map(|n| samples(n)).fold(0, u64::saturating_add),
        }
    }
}

/// What a mount counted between two readings, and whether its counters went back (someone
/// wrote to the stats file, which clears it): then the figures are what it counted since the
/// clear, never negative.
pub fn since(before: &Totals, now: &Totals) -> (Totals, bool) {
    let d = [
        now.read_bytes.checked_sub(before.read_bytes),
        now.write_bytes.checked_sub(before.write_bytes),
        now.reads.checked_sub(before.reads),
        now.writes.checked_sub(before.writes),
        now.opens.checked_sub(before.opens),
        now.metadata_ops.checked_sub(before.metadata_ops),
    ];
    match d {
        [Some(read_bytes), Some(write_bytes), Some(reads), Some(writes), Some(opens), Some(metadata_ops)] => {
            (Totals { read_bytes, write_bytes, reads, writes, opens, metadata_ops }, false)
        }
        _ => (*now, true),
    }
}

/// The file system name of an llite instance directory (`<fsname>-<16 hex digits>`, or the
/// `%p` pointer of older clients); the whole name when it has no such suffix.
pub fn fs_name(instance: &str) -> &str {
    match instance.rsplit_once('-') {
        Some((fs, id)) if !fs.is_empty() && !id.is_empty() && id.bytes().all(|b| b.is_ascii_hexdigit()) => fs,
        _ => instance,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const V2_15: &str = "snapshot_time             3605.021367562 secs.nsecs
start_time                12.003040154 secs.nsecs
elapsed_time              3593.018327408 secs.nsecs
read_bytes                4 samples [bytes] 4096 1048576 1060864 1101021184
write_bytes               2 samples [bytes] 65536 65536 131072 8589934592
ioctl                     3 samples [reqs]
open                      5 samples [usec] 11 240 390 62000
close                     5 samples [usec] 4 30 70 1300
getattr                   9 samples [usec] 2 50 120 4100
inode_permission          40 samples [usec] 0 3 20 40
";

    #[test]
    fn counters_of_a_2_15_client() {
        let s = parse(V2_15).unwrap();
        assert_eq!(s.counters.len(), 7);
        let t = s.totals();
        assert_eq!(
            t,
            Totals {
                read_bytes: 1060864,
                write_bytes: 131072,
                reads: 4,
                writes: 2,
                opens: 5,
                metadata_ops: 19
            }
        );
        assert_eq!(s.get("ioctl").map(|c| (c.samples, c.unit.as_str(), c.sum)), Some((3, "reqs", None)));
    }

    #[test]
    fn bad_lines_name_the_line_and_field() {
        let e = parse("snapshot_time 1.2 secs.usecs\nread_bytes x samples [bytes] 1 2 3\n").unwrap_err();
        assert_eq!(e.to_string(), "line 2: read_bytes: sample count \"x\" is not a number");
        let e = parse("snapshot_time 1.2 secs.usecs\nopen 3 samples regs\n").unwrap_err();
        assert!(e.to_string().starts_with("line 2: open: no [unit]"), "{e}");
        assert_eq!(parse("read_bytes 1 samples [bytes] 1 1 1\n"), Err(StatsError::NoSnapshot));
        assert_eq!(parse("snapshot_time 1.5 secs.nsecs\n").unwrap().totals(), Totals::default());
    }

    #[test]
    fn a_cleared_file_is_a_reset() {
        let a = Totals { read_bytes: 100, reads: 2, ..Default::default() };
        let b = Totals { read_bytes: 300, reads: 3, ..Default::default() };
        assert_eq!(since(&a, &b), (Totals { read_bytes: 200, reads: 1, ..Default::default() }, false));
        let cleared = Totals { read_bytes: 10, reads: 1, ..Default::default() };
        assert_eq!(since(&b, &cleared), (cleared, true));
    }

    #[test]
    fn file_system_names() {
        assert_eq!(fs_name("abcdefgh-ffff9a3b4c5d6000"), "abcdefgh");
        assert_eq!(fs_name("scratch-fs-ffff880037b0c000"), "scratch-fs");
        assert_eq!(fs_name("plain"), "plain");
        assert_eq!(fs_name("-ffff"), "-ffff");
        assert_eq!(fs_name("fs-notahex"), "fs-notahex");
    }
}
