//! One read of a job's cgroup files, v1 or v2, into the same raw figures. A file that is
//! missing (a controller Slurm does not use, a kernel without it, a job that just ended) leaves
//! its figure out; it never fails the read. Files read every cycle are held open (see
//! [`super::held`]); the memory limit and the cpuset, read once, are not.

use super::discover::{JobDirs, JobRef};
use super::held::Files;
use super::kv::{self, Io};
use std::path::Path;

/// Raw figures of one job: levels as they are, counters as cumulative totals.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct CgroupStats {
    pub memory_usage: Option<u64>,
    pub memory_max: Option<u64>,
    pub memory_limit: Option<u64>,
    pub memory_cache: Option<u64>,
    pub memory_rss: Option<u64>,
    pub memory_rss_huge: Option<u64>,
    pub memory_mapped_file: Option<u64>,
    pub memory_active_file: Option<u64>,
    pub memory_inactive_file: Option<u64>,
    pub memory_unevictable: Option<u64>,
    pub memory_swap: Option<u64>,
    pub oom_kills: Option<u64>,
    /// CPU time used, nanoseconds.
    pub cpu_ns: Option<u64>,
    /// CPU time per CPU number, nanoseconds (v1 only).
    pub percpu_ns: Option<Vec<u64>>,
    pub throttled_ns: Option<u64>,
    /// The CPUs of the job's cpuset.
    pub cpus: Option<Vec<usize>>,
    /// I/O from the cgroup, where the kernel and Slurm provide it.
    pub io: Option<Io>,
    /// Slurm froze its steps ([`frozen`]); read only while its CPU time stands still.
    pub frozen: bool,
}

/// What does not change while a job runs: read once, then kept.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Fixed {
    pub memory_limit: Option<u64>,
    pub cpus: Option<Vec<usize>>,
}

/// Reads every figure of `job`, reusing `buf` for file contents; the memory limit and the
/// cpuset only while `fixed` has none, and into it. `files` holds the job's files open.
pub fn read(job: &JobRef, buf: &mut String, fixed: &mut Fixed, files: &mut Files) -> CgroupStats {
    let mut s = match &job.dirs {
        JobDirs::V1(_) => read_v1(job, &mut Reader { files, buf }, fixed),
        JobDirs::V2(dir) => read_v2(dir, &mut Reader { files, buf }, fixed),
    };
    if fixed.memory_limit.is_none() {
        fixed.memory_limit = s.memory_limit;
    }
    if fixed.cpus.is_none() {
        fixed.cpus = s.cpus.clone();
    }
    s.memory_limit = s.memory_limit.or(fixed.memory_limit);
    s.cpus = s.cpus.take().or_else(|| fixed.cpus.clone());
    s
}

/// Step directories looked at for a frozen step, at most: a job has a few.
const STEPS_MAX: usize = 64;
/// Entries of a job's directory looked through for its steps at most.
const ENTRIES_MAX: usize = 4096;

/// Whether Slurm suspended the job (`scontrol suspend`, `PreemptMode=SUSPEND`): with
/// proctrack/cgroup it freezes each step, v1 writing FROZEN to the step's `freezer.state`, v2
/// `1` to `cgroup.freeze` of the step or of its `user` part (slurmstepd sits beside it), which
/// `cgroup.events` reports as `frozen 1`. Only a step whose freezing file root (or this
/// daemon's user) owns and alone may write counts: a job's user cannot pass a job of theirs
/// for suspended, unbilled for its CPUs, by freezing a cgroup of their own.
pub fn frozen(job: &JobRef, buf: &mut String) -> bool {
    let (dir, files): (&Path, &[(&str, &str)]) = match &job.dirs {
        JobDirs::V1(_) => match job.dir("freezer") {
            Some(d) => (d, &[("freezer.state", "freezer.state")]),
            None => return false,
        },
        JobDirs::V2(d) => {
            (d, &[("cgroup.events", "cgroup.freeze"), ("user/cgroup.events", "user/cgroup.freeze")])
        }
    };
    let Ok(entries) = std::fs::read_dir(dir) else { return false };
    // Entries looked at, not only steps: on v1 the job's directory is its user's, who could
    // fill it with a million names (then its steps may go unseen: the job pays for its CPUs,
    // only its own loss).
    let entries = entries.take(ENTRIES_MAX).flatten();
    entries.filter(|e| e.file_name().as_encoded_bytes().starts_with(b"step_")).take(STEPS_MAX).any(|step| {
        let step = step.path();
        files.iter().any(|(state, control)| {
            buf.clear();
            root_alone_writes(&step.join(control))
                && super::read_into(&step.join(state), buf)
                && (buf.trim() == "FROZEN" || kv::flat_key(buf, "frozen") == Some(1))
        })
    })
}

/// `path` is root's (or this daemon's user's) and no one else may write it.
fn root_alone_writes(path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path)
        .is_ok_and(|m| (m.uid() == 0 || m.uid() == crate::sys::user::euid()) && m.mode() & 0o022 == 0)
}

/// A job's held files and the buffer their text is read into.
struct Reader<'a> {
    files: &'a mut Files,
    buf: &'a mut String,
}

impl Reader<'_> {
    /// The text of `dir/name`, held open between cycles; None when unreadable. `slot` names
    /// the directory for the job (a v1 controller; "" for v2).
    fn text(&mut self, slot: &'static str, dir: Option<&Path>, name: &'static str) -> Option<&str> {
        self.files.text(slot, dir?, name, true, self.buf)
    }

    /// The text of a file read once (the limit, the cpuset): not held.
    fn once(&mut self, slot: &'static str, dir: Option<&Path>, name: &'static str) -> Option<&str> {
        self.files.text(slot, dir?, name, false, self.buf)
    }
}

/// memory.stat's breakdown, in the order both versions' keys are given: page cache, anonymous,
/// its huge pages, mapped files, active and inactive files, unevictable.
fn set_breakdown(s: &mut CgroupStats, found: [Option<u64>; 7]) {
    [
        s.memory_cache,
        s.memory_rss,
        s.memory_rss_huge,
        s.memory_mapped_file,
        s.memory_active_file,
        s.memory_inactive_file,
        s.memory_unevictable,
    ] = found;
}

// One shared buffer is read into file by file, so the fields are set one by one.
#[allow(clippy::field_reassign_with_default)]
fn read_v1(job: &JobRef, r: &mut Reader, fixed: &Fixed) -> CgroupStats {
    let mut s = CgroupStats::default();
    let mem = job.dir("memory");
    s.memory_usage = r.text("memory", mem, "memory.usage_in_bytes").and_then(kv::single);
    s.memory_max = r.text("memory", mem, "memory.max_usage_in_bytes").and_then(kv::single);
    if fixed.memory_limit.is_none() {
        s.memory_limit = r.once("memory", mem, "memory.limit_in_bytes").and_then(kv::single);
    }
    if let Some(stat) = r.text("memory", mem, "memory.stat") {
        let [breakdown @ .., swap] = kv::flat_keys(
            stat,
            [
                "total_cache",
                "total_rss",
                "total_rss_huge",
                "total_mapped_file",
                "total_active_file",
                "total_inactive_file",
                "total_unevictable",
                "total_swap",
            ],
        );
        set_breakdown(&mut s, breakdown);
        s.memory_swap = swap;
    }
    s.oom_kills = r.text("memory", mem, "memory.oom_control").and_then(|t| kv::flat_key(t, "oom_kill"));
    let acct = job.dir("cpuacct");
    s.percpu_ns = r.text("cpuacct", acct, "cpuacct.usage_percpu").map(kv::numbers).filter(|v| !v.is_empty());
    // cpuacct.usage is the sum of the per-CPU counters usage_percpu shows (the kernel adds the
    // same ones): read only where usage_percpu cannot be, one read a job a cycle fewer.
    s.cpu_ns = match &s.percpu_ns {
        Some(v) => Some(v.iter().fold(0u64, |a, n| a.saturating_add(*n))),
        None => r.text("cpuacct", acct, "cpuacct.usage").and_then(kv::single),
    };
    // The cpu controller has throttling figures only where Slurm made a job directory in it.
    s.throttled_ns =
        r.text("cpu", job.dir("cpu"), "cpu.stat").and_then(|t| kv::flat_key(t, "throttled_time"));
    if fixed.cpus.is_none() {
        s.cpus = r.once("cpuset", job.dir("cpuset"), "cpuset.cpus").and_then(kv::cpu_list);
    }
    let blk = job.dir("blkio");
    let bytes = r.text("blkio", blk, "blkio.throttle.io_service_bytes").and_then(kv::blkio);
    let ops = r.text("blkio", blk, "blkio.throttle.io_serviced").and_then(kv::blkio);
    if let Some((rb, wb)) = bytes {
        let (ro, wo) = ops.unwrap_or((0, 0));
        s.io = Some(Io { read_bytes: rb, write_bytes: wb, read_ops: ro, write_ops: wo });
    }
    s
}

#[allow(clippy::field_reassign_with_default)]
fn read_v2(dir: &Path, r: &mut Reader, fixed: &Fixed) -> CgroupStats {
    let d = Some(dir);
    let mut s = CgroupStats::default();
    s.memory_usage = r.text("", d, "memory.current").and_then(kv::single);
    s.memory_max = r.text("", d, "memory.peak").and_then(kv::single);
    if fixed.memory_limit.is_none() {
        s.memory_limit = r.once("", d, "memory.max").and_then(kv::single);
    }
    if let Some(stat) = r.text("", d, "memory.stat") {
        let keys = ["file", "anon", "anon_thp", "file_mapped", "active_file", "inactive_file", "unevictable"];
        set_breakdown(&mut s, kv::flat_keys(stat, keys));
    }
    s.memory_swap = r.text("", d, "memory.swap.current").and_then(kv::single);
    s.oom_kills = r.text("", d, "memory.events").and_then(|t| kv::flat_key(t, "oom_kill"));
    if let Some(stat) = r.text("", d, "cpu.stat") {
        s.cpu_ns = kv::flat_key(stat, "usage_usec").map(|us| us * 1000);
        s.throttled_ns = kv::flat_key(stat, "throttled_usec").map(|us| us * 1000);
    }
    if fixed.cpus.is_none() {
        s.cpus = r.once("", d, "cpuset.cpus.effective").and_then(kv::cpu_list);
    }
    s.io = r.text("", d, "io.stat").and_then(kv::io_stat);
    s
}
