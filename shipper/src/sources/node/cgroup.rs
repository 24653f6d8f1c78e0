//! One read of a job's cgroup files, v1 or v2, into the same raw figures. A file that is
//! missing (a controller Slurm does not use, a kernel without it, a job that just ended) leaves
//! its figure out; it never fails the read.

use super::discover::{JobDirs, JobRef};
use super::kv::{self, Io};
use super::read_into;
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
}

/// What does not change while a job runs: read once, then kept.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Fixed {
    pub memory_limit: Option<u64>,
    pub cpus: Option<Vec<usize>>,
}

/// Reads every figure of `job`, reusing `buf` for file contents; the memory limit and the
/// cpuset only while `fixed` has none, and into it.
pub fn read(job: &JobRef, buf: &mut String, fixed: &mut Fixed) -> CgroupStats {
    let mut s = match &job.dirs {
        JobDirs::V1(_) => read_v1(job, buf, fixed),
        JobDirs::V2(dir) => read_v2(dir, buf, fixed),
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

/// The text of `dir/name` in `buf`, or None.
fn text<'b>(dir: Option<&Path>, name: &str, buf: &'b mut String) -> Option<&'b str> {
    let dir = dir?;
    buf.clear();
    read_into(&dir.join(name), buf).then_some(buf.as_str())
}

// One shared buffer is read into file by file, so the fields are set one by one.
#[allow(clippy::field_reassign_with_default)]
fn read_v1(job: &JobRef, buf: &mut String, fixed: &Fixed) -> CgroupStats {
    let mut s = CgroupStats::default();
    let mem = job.dir("memory");
    s.memory_usage = text(mem, "memory.usage_in_bytes", buf).and_then(kv::single);
    s.memory_max = text(mem, "memory.max_usage_in_bytes", buf).and_then(kv::single);
    if fixed.memory_limit.is_none() {
        s.memory_limit = text(mem, "memory.limit_in_bytes", buf).and_then(kv::single);
    }
    if let Some(stat) = text(mem, "memory.stat", buf) {
        s.memory_cache = kv::flat_key(stat, "total_cache");
        s.memory_rss = kv::flat_key(stat, "total_rss");
        s.memory_rss_huge = kv::flat_key(stat, "total_rss_huge");
        s.memory_mapped_file = kv::flat_key(stat, "total_mapped_file");
        s.memory_active_file = kv::flat_key(stat, "total_active_file");
        s.memory_inactive_file = kv::flat_key(stat, "total_inactive_file");
        s.memory_unevictable = kv::flat_key(stat, "total_unevictable");
        s.memory_swap = kv::flat_key(stat, "total_swap");
    }
    s.oom_kills = text(mem, "memory.oom_control", buf).and_then(|t| kv::flat_key(t, "oom_kill"));
    let acct = job.dir("cpuacct");
    s.cpu_ns = text(acct, "cpuacct.usage", buf).and_then(kv::single);
    s.percpu_ns = text(acct, "cpuacct.usage_percpu", buf).map(kv::numbers).filter(|v| !v.is_empty());
    // The cpu controller has throttling figures only where Slurm made a job directory in it.
    s.throttled_ns = text(job.dir("cpu"), "cpu.stat", buf).and_then(|t| kv::flat_key(t, "throttled_time"));
    if fixed.cpus.is_none() {
        s.cpus = text(job.dir("cpuset"), "cpuset.cpus", buf).and_then(kv::cpu_list);
    }
    let blk = job.dir("blkio");
    let bytes = text(blk, "blkio.throttle.io_service_bytes", buf).and_then(kv::blkio);
    let ops = text(blk, "blkio.throttle.io_serviced", buf).and_then(kv::blkio);
    if let Some((rb, wb)) = bytes {
        let (ro, wo) = ops.unwrap_or((0, 0));
        s.io = Some(Io { read_bytes: rb, write_bytes: wb, read_ops: ro, write_ops: wo });
    }
    s
}

#[allow(clippy::field_reassign_with_default)]
fn read_v2(dir: &Path, buf: &mut String, fixed: &Fixed) -> CgroupStats {
    let d = Some(dir);
    let mut s = CgroupStats::default();
    s.memory_usage = text(d, "memory.current", buf).and_then(kv::single);
    s.memory_max = text(d, "memory.peak", buf).and_then(kv::single);
    if fixed.memory_limit.is_none() {
        s.memory_limit = text(d, "memory.max", buf).and_then(kv::single);
    }
    if let Some(stat) = text(d, "memory.stat", buf) {
        s.memory_cache = kv::flat_key(stat, "file");
        s.memory_rss = kv::flat_key(stat, "anon");
        s.memory_rss_huge = kv::flat_key(stat, "anon_thp");
        s.memory_mapped_file = kv::flat_key(stat, "file_mapped");
        s.memory_active_file = kv::flat_key(stat, "active_file");
        s.memory_inactive_file = kv::flat_key(stat, "inactive_file");
        s.memory_unevictable = kv::flat_key(stat, "unevictable");
    }
    s.memory_swap = text(d, "memory.swap.current", buf).and_then(kv::single);
    s.oom_kills = text(d, "memory.events", buf).and_then(|t| kv::flat_key(t, "oom_kill"));
    if let Some(stat) = text(d, "cpu.stat", buf) {
        s.cpu_ns = kv::flat_key(stat, "usage_usec").map(|us| us * 1000);
        s.throttled_ns = kv::flat_key(stat, "throttled_usec").map(|us| us * 1000);
    }
    if fixed.cpus.is_none() {
        s.cpus = text(d, "cpuset.cpus.effective", buf).and_then(kv::cpu_list);
    }
    s.io = text(d, "io.stat", buf).and_then(kv::io_stat);
    s
}
