//! Cost of one node collection cycle over synthetic cgroup v2 trees of 1, 64 and 512 jobs with
//! 8 processes each (a fake /proc beside them), against a floor measured in the same run: reading
//! the same files and listing every directory each cycle with the standard library, without
//! parsing anything. The collector lists fewer (see the syscall table), so it can cost less than
//! the floor.
//!
//! `cargo bench -p slurm-cw-shipper --bench node_cycle`
//! `cargo bench -p slurm-cw-shipper --bench node_cycle -- --syscalls` (needs strace)
//!
//! `cargo bench -p slurm-cw-shipper --bench node_cycle -- --tree <dir> v1|v2 <jobs>` builds a
//! tree and leaves it, to trace one cycle by hand (`strace -f <bench> --syscall-child ...`).
//!
//! `cargo bench -p slurm-cw-shipper --bench node_cycle -- --versus <exporter.py> <python>
//! <user> [jobs]`: beside slurm-job-exporter on real jobs of the Slurm bench, the collector
//! alone and the whole node-role daemon (see `versus.rs` and `whole.rs`; docs/testing.md has
//! the figures).
//!
//! Syscalls per job per cycle (`--syscalls`) on the same trees, whose fake /proc has each
//! process's `status` as a real one does. Files read every cycle are held open and read with
//! one pread each; a job's processes are read in /proc every `process_every`th cycle and
//! whenever its process set changed, which one stat of its directory (steps begun or ended)
//! and one pread of each known directory's cgroup.procs tell (v1 opens cgroup.procs each
//! time: its held file would read stale; only where the last walk found a process, the
//! others are looked for with one stat). "On change" is `process_every` past any cycle
//! count: what the floor costs, about one syscall a file.
//!
//! | tree | /proc every 2nd, before (0b16a17 / d7f287b) | every 2nd, now | on change, now |
//! |---|---|---|---|
//! | v2, 2 jobs | 145.5 / 68 | 48.5 | 12.5 |
//! | v2, 64 jobs | 140.7 / 65.1 | 48.0 | 12.1 |
//! | v2, 512 jobs | | 48.0 | 12.0 |
//! | v1, 2 jobs | 190 / 79 | 59.8 | 11.8 |
//! | v1, 64 jobs | 153.7 / 74.4 | 59.3 | 11.3 |
//! | v1, 512 jobs | | 59.3 | 11.3 |
//!
//! v1's empty directories only looked for (the fifteenth session): 66.8 / 18.8 a job before
//! at 2 jobs, 66.3 / 18.3 at 64 and 512.
//!
//! v1 now: cpuacct.usage is the sum of usage_percpu (one pread a job fewer). Since 1499c45 a
//! cycle in which no job directory came or went lists nothing: one read of an inotify watch
//! (the `read 1` a cycle) instead of the job trees' listings (2 jobs: v2 51.0 / 15.0 and v1
//! 73.8 / 25.8 before; at 64 and 512 jobs the listings were already a small part).
//!
//! On tmpfs, which these trees are, /proc/<pid>/fd is listed; a real procfs (Linux 6.2+)
//! gives the count in one stat.
//!
//! `--versus`, three runs on a 2-core VM (Slurm 22.05 bench, cgroup v1, two jobs of four
//! threads): slurm-job-exporter 0.4.12 took 2.24-2.26 ms of CPU and 448 syscalls a job a
//! scrape (26 MB RSS); the collector 0.106-0.115 ms and 20.8 syscalls a job on change only
//! (19.6-21.1x less CPU, 21.6x fewer syscalls), 0.160-0.174 ms and 33.8 with processes every
//! 2nd cycle (12.8-14.1x, 13.3x), 0.217-0.228 ms and 46.8 every cycle (9.9-10.3x, 9.6x). With
//! the default every 10th cycle and the jobs' series made as an open destination makes them
//! (`cycle`), one run: exporter 2.68 ms; collector 0.131 ms and 22.9 syscalls (20.4x less CPU,
//! 19.5x fewer syscalls), 0.105 ms on change only (25.4x), 0.238 ms every cycle (11.3x).
//!
//! For processes read every cycle (`node.process_every = 1`) and every other cycle, prints the mean CPU time (user + system) per cycle for the collector and for the
//! floor, their ratio, the CPU share of one core at a 30 s interval, and the process's resident
//! memory. Targets: under 2x the floor, under 20 MB RSS, under 0.1% of one core with 64 jobs.
//! On a 2-core VM with files held open: 0.56-0.68x the floor, 0.020% of a core with 64 jobs
//! (0.033% reading processes every cycle).

use slurm_cw_shipper::sample::Batch;
use slurm_cw_shipper::settings::NodeConfig;
use slurm_cw_shipper::sources::Errors;
use slurm_cw_shipper::sources::node::{NodeCollector, read_into};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

const PROCS_PER_JOB: u32 = 8;

#[path = "node_cycle/floor.rs"]
mod floor;
#[path = "node_cycle/versus.rs"]
mod versus;
#[path = "node_cycle/whole.rs"]
mod whole;

fn rusage(who: i32) -> Duration {
    // SAFETY: getrusage fills the struct we pass.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(who, &mut u) };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(u.ru_utime) + tv(u.ru_stime)
}

fn cpu_time() -> Duration {
    rusage(libc::RUSAGE_SELF)
}

/// This thread's CPU time alone.
fn cpu_time_thread() -> Duration {
    rusage(libc::RUSAGE_THREAD)
}

fn rss_mb(field: &str) -> f64 {
    rss_mb_of(std::process::id(), field)
}

fn rss_mb_of(pid: u32, field: &str) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let kb: f64 = status
        .lines()
        .find_map(|l| {
            l.strip_prefix(field).map(|v| v.trim().trim_end_matches(" kB").trim().parse().unwrap_or(0.0))
        })
        .unwrap_or(0.0);
    kb / 1024.0
}

fn write(p: &Path, s: &str) {
    std::fs::write(p, s).unwrap();
}

/// A v2 tree of `jobs` jobs, each with PROCS_PER_JOB processes (two threads each) under `root`.
fn build(root: &Path, jobs: u32) -> (PathBuf, PathBuf) {
    let cg = root.join("cg");
    let proc = root.join("proc");
    std::fs::create_dir_all(&proc).unwrap();
    std::fs::create_dir_all(&cg).unwrap();
    write(&cg.join("cgroup.controllers"), "cpuset cpu io memory pids\n");
    let stat_tail = "0 0 20 0 2 0 1000 123456789 2048 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n";
    for j in 0..jobs {
        let job = cg.join(format!("system.slice/slurmstepd.scope/job_{}", 1000 + j));
        let task = job.join("step_0/user/task_0");
        std::fs::create_dir_all(&task).unwrap();
        write(&job.join("memory.current"), "2147483648\n");
        write(&job.join("memory.peak"), "3221225472\n");
        write(&job.join("memory.max"), "4294967296\n");
        write(&job.join("memory.stat"), &"anon 1879048192\nfile 251658240\nkernel 16777216\nanon_thp 0\nfile_mapped 33554432\nactive_file 83886080\ninactive_file 167772160\nunevictable 0\nslab 3145728\npgfault 524288\n".repeat(4));
        write(&job.join("memory.events"), "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\noom_group_kill 0\n");
        write(&job.join("memory.swap.current"), "0\n");
        write(
            &job.join("cpu.stat"),
            "usage_usec 7200000000\nuser_usec 7000000000\nsystem_usec 200000000\nnr_periods 0\nnr_throttled 0\nthrottled_usec 0\n",
        );
        write(&job.join("cpuset.cpus.effective"), "0-7\n");
        write(
            &job.join("io.stat"),
            "259:0 rbytes=1048576 wbytes=4194304 rios=256 wios=1024 dbytes=0 dios=0\n",
        );
        for d in [job.clone(), job.join("step_0"), job.join("step_0/user")] {
            write(&d.join("cgroup.procs"), "");
        }
        let pids: Vec<u32> = (0..PROCS_PER_JOB).map(|i| 100_000 + j * 100 + i).collect();
        write(&task.join("cgroup.procs"), &pids.iter().map(|p| format!("{p}\n")).collect::<String>());
        for pid in pids {
            let d = proc.join(pid.to_string());
            std::fs::create_dir_all(d.join("fd")).unwrap();
            std::fs::create_dir_all(d.join(format!("task/{pid}"))).unwrap();
            std::fs::create_dir_all(d.join(format!("task/{}", pid + 50))).unwrap();
            let stat = format!("{pid} (solver) R 1 {pid} {pid} 0 -1 4194304 100 0 0 0 5000 200 {stat_tail}");
            write(&d.join("stat"), &stat);
            write(&d.join(format!("task/{pid}/stat")), &stat);
            write(&d.join(format!("task/{}/stat", pid + 50)), &stat.replace(" R 1 ", " S 1 "));
            write(
                &d.join("io"),
                "rchar: 1\nwchar: 2\nsyscr: 3\nsyscw: 4\nread_bytes: 5\nwrite_bytes: 6\ncancelled_write_bytes: 0\n",
            );
            write(&d.join("environ"), "SLURM_JOB_ACCOUNT=physics\0");
            write(&d.join("status"), "Name:\tsolver\nState:\tR (running)\nUid:\t1000\t1000\t1000\t1000\n");
            for fd in 0..8 {
                std::os::unix::fs::symlink("/dev/null", d.join(format!("fd/{fd}"))).unwrap();
            }
        }
    }
    (cg, proc)
}

/// A cgroup v1 tree shaped like Slurm 22.05's here (see tests/fixtures/cgroup/v1-slurm-22.05):
/// `memory`, `cpuacct`, `cpuset` and `freezer` hold `slurm/uid_1000/job_<id>/step_extern` and
/// `step_batch/task_0`; `blkio`, `cpu`, `devices` and `pids` hold no Slurm directory. The
/// processes are the v2 tree's, in cpuacct's task_0.
fn build_v1(root: &Path, jobs: u32) -> (PathBuf, PathBuf) {
    let (v2, proc) = build(root, jobs);
    let cg = root.join("cg1");
    for c in ["blkio", "cpu", "devices", "pids"] {
        std::fs::create_dir_all(cg.join(c)).unwrap();
    }
    for j in 0..jobs {
        let id = 1000 + j;
        let from = v2.join(format!("system.slice/slurmstepd.scope/job_{id}/step_0/user/task_0/cgroup.procs"));
        let pids = std::fs::read_to_string(from).unwrap();
        for c in ["memory", "cpuacct", "cpuset", "freezer"] {
            let job = cg.join(format!("{c}/slurm/uid_1000/job_{id}"));
            std::fs::create_dir_all(job.join("step_extern")).unwrap();
            std::fs::create_dir_all(job.join("step_batch/task_0")).unwrap();
            for d in ["", "step_extern", "step_batch"] {
                write(&job.join(d).join("cgroup.procs"), "");
            }
            write(&job.join("step_batch/task_0/cgroup.procs"), if c == "cpuacct" { &pids } else { "" });
            let files: &[(&str, &str)] = match c {
                "memory" => &[
                    ("memory.usage_in_bytes", "2147483648\n"),
                    ("memory.max_usage_in_bytes", "3221225472\n"),
                    ("memory.limit_in_bytes", "4294967296\n"),
                    ("memory.oom_control", "oom_kill_disable 0\nunder_oom 0\noom_kill 0\n"),
                    (
                        "memory.stat",
                        "cache 251658240\nrss 1879048192\nrss_huge 0\nmapped_file 33554432\nswap 0\nactive_file 83886080\ninactive_file 167772160\nunevictable 0\ntotal_cache 251658240\ntotal_rss 1879048192\ntotal_rss_huge 0\ntotal_mapped_file 33554432\ntotal_swap 0\ntotal_active_file 83886080\ntotal_inactive_file 167772160\ntotal_unevictable 0\n",
                    ),
                ],
                "cpuacct" => &[
                    ("cpuacct.usage", "7200000000000\n"),
                    (
                        "cpuacct.usage_percpu",
                        "900000000000 900000000000 900000000000 900000000000 900000000000 900000000000 900000000000 900000000000 \n",
                    ),
                ],
                "cpuset" => &[("cpuset.cpus", "0-7\n")],
                _ => &[],
            };
            for (name, text) in files {
                write(&job.join(name), text);
            }
        }
    }
    (cg, proc)
}

/// Reads the files and lists the directories one steady-state cycle reads, parsing nothing:
/// the cgroup files, and the processes when `with_procs`.
fn floor(cg: &Path, proc: &Path, buf: &mut String, with_procs: bool) -> usize {
    let mut bytes = 0;
    let mut read = |p: PathBuf, buf: &mut String| {
        buf.clear();
        if read_into(&p, buf) {
            bytes += buf.len();
        }
    };
    let scope = cg.join("system.slice/slurmstepd.scope");
    let mut jobs = 0;
    for job in std::fs::read_dir(&scope).unwrap().flatten() {
        jobs += 1;
        let j = job.path();
        for f in [
            "memory.current",
            "memory.peak",
            "memory.max",
            "memory.stat",
            "memory.swap.current",
            "memory.events",
            "cpu.stat",
            "cpuset.cpus.effective",
            "io.stat",
        ] {
            read(j.join(f), buf);
        }
        if !with_procs {
            continue;
        }
        let mut pids = Vec::new();
        for d in [j.clone(), j.join("step_0"), j.join("step_0/user"), j.join("step_0/user/task_0")] {
            let _ = std::fs::read_dir(&d).map(|r| r.count());
            read(d.join("cgroup.procs"), buf);
            pids.extend(buf.lines().filter_map(|l| l.parse::<u32>().ok()));
        }
        for pid in pids {
            let d = proc.join(pid.to_string());
            read(d.join("stat"), buf);
            for t in std::fs::read_dir(d.join("task")).unwrap().flatten() {
                read(t.path().join("stat"), buf);
            }
            // No /proc/<pid>/io: the cgroup's io.stat gives the job's I/O.
            let _ = std::fs::read_dir(d.join("fd")).map(|r| r.count());
        }
    }
    let _ = jobs;
    bytes
}

/// Syscalls of one cycle, counted by strace: this bench runs itself under `strace -f -c` twice
/// over the same tree, with [`SYSCALL_CYCLES`] measured cycles and with none (both after the
/// same two warm-up cycles), and divides the difference. Unlike time, the count is the same on
/// every run.
const SYSCALL_CYCLES: u32 = 12;

/// One collection as the daemon makes it for an open destination (Prometheus, OTLP): the jobs
/// read, and their series made from the readings (`transforms::job_series`); returns the
/// samples and series made, and the jobs seen.
fn cycle(c: &mut NodeCollector) -> (usize, usize) {
    let mut b = Batch::new(SystemTime::now());
    let jobs = c.collect_jobs(None, &mut b, &mut Errors::new());
    let mut series = Vec::new();
    let shape = slurm_cw_shipper::transforms::shape::Shape::Open;
    slurm_cw_shipper::transforms::job_series::push(shape, &b.jobs, b.time, |_| true, &mut series);
    std::hint::black_box(&series);
    (b.samples.len() + series.len(), jobs)
}

/// `--syscall-child <cgroup root> <proc root> <v1 slurm dir> <process_every> <cycles>`: what
/// runs under strace.
fn syscall_child(args: &[String]) {
    let cfg = NodeConfig {
        cgroup_root: PathBuf::from(&args[0]),
        proc_root: PathBuf::from(&args[1]),
        v1_slurm_dir: args[2].clone(),
        process_every: args[3].parse().unwrap(),
        ..NodeConfig::default()
    };
    let cycles: u32 = args[4].parse().unwrap();
    let mut c = NodeCollector::new(cfg, "bench".into());
    for _ in 0..2 + cycles {
        cycle(&mut c);
    }
}

/// strace's `-c` table: syscall name -> calls.
fn parse_strace(text: &str) -> std::collections::BTreeMap<String, i64> {
    let mut counts = std::collections::BTreeMap::new();
    for line in text.lines() {
        // % time, seconds, usecs/call, calls, [errors,] syscall
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 5 || f[0].parse::<f64>().is_err() {
            continue;
        }
        let name = f[f.len() - 1];
        if name == "total" {
            continue;
        }
        if let Ok(calls) = f[3].parse::<i64>() {
            counts.insert(name.to_owned(), calls);
        }
    }
    counts
}

/// The syscalls of [`syscall_child`] over `args` (cgroup root, proc root, v1 slurm dir).
fn strace_counts_of(
    args: &[&std::ffi::OsStr],
    every: u32,
    cycles: u32,
    out: &Path,
) -> std::collections::BTreeMap<String, i64> {
    let me = std::env::current_exe().unwrap();
    let status = std::process::Command::new("strace")
        .args(["-f", "-c", "-o"])
        .arg(out)
        .arg(&me)
        .arg("--syscall-child")
        .args(args)
        .args([every.to_string(), cycles.to_string()])
        .status()
        .expect("strace (apt-get install strace)");
    assert!(status.success(), "strace run failed");
    parse_strace(&std::fs::read_to_string(out).unwrap())
}

/// Prints syscalls per cycle and per job for 2, 64 and 512 jobs, cgroup v2 and v1, with
/// processes read every other cycle (and on a change) and on a change only.
fn syscalls() {
    println!("syscalls per cycle (strace -f -c, {SYSCALL_CYCLES} cycles less none)");
    for (v1, jobs) in [(false, 2u32), (false, 64), (false, 512), (true, 2), (true, 64), (true, 512)] {
        let dir = tempfile::tempdir().unwrap();
        let (cg, proc) = if v1 { build_v1(dir.path(), jobs) } else { build(dir.path(), jobs) };
        let out = dir.path().join("strace.txt");
        for (every, label) in [(2, "/proc every 2nd"), (u32::MAX, "/proc on change")] {
            let args = [cg.as_os_str(), proc.as_os_str(), "slurm".as_ref()];
            let none = strace_counts_of(&args, every, 0, &out);
            let some = strace_counts_of(&args, every, SYSCALL_CYCLES, &out);
            let mut per: Vec<(String, f64)> = some
                .iter()
                .map(|(k, v)| {
                    (k.clone(), (v - none.get(k).copied().unwrap_or(0)) as f64 / SYSCALL_CYCLES as f64)
                })
                .filter(|(_, v)| *v >= 0.5)
                .collect();
            per.sort_by(|a, b| b.1.total_cmp(&a.1));
            let total: f64 = per.iter().map(|(_, v)| v).sum();
            let detail: Vec<String> = per.iter().map(|(k, v)| format!("{k} {v:.0}")).collect();
            println!(
                "{} {jobs:>3} jobs, {label}: {total:>6.0} a cycle, {:>5.1} a job ({})",
                if v1 { "v1" } else { "v2" },
                total / jobs as f64,
                detail.join(", ")
            );
        }
    }
}

fn main() {
    // `cargo bench` adds `--bench` after the arguments given.
    let args: Vec<String> = std::env::args().skip(1).filter(|a| a != "--bench").collect();
    if let Some(i) = args.iter().position(|a| a == "--syscall-child") {
        return syscall_child(&args[i + 1..]);
    }
    if args.iter().any(|a| a == "--syscalls") {
        return syscalls();
    }
    if let Some(i) = args.iter().position(|a| a == "--versus") {
        return versus::versus(&args[i + 1..]);
    }
    if let [flag, dir, version, jobs] = args.as_slice()
        && flag == "--tree"
    {
        // `--tree <dir> v1|v2 <jobs>`: builds a tree to read by hand (strace -f the child).
        let (cg, proc) = if version == "v1" {
            build_v1(Path::new(dir), jobs.parse().unwrap())
        } else {
            build(Path::new(dir), jobs.parse().unwrap())
        };
        return println!("{} {}", cg.display(), proc.display());
    }
    let cycles = 20;
    println!(
        "{:>5} jobs | /proc every | collector CPU/cycle | floor CPU/cycle | ratio | share of a core @30s | RSS now / peak",
        ""
    );
    for (jobs, every) in [(1u32, 1u32), (1, 2), (64, 1), (64, 2), (512, 1), (512, 2)] {
        let dir = tempfile::tempdir().unwrap();
        let (cg, proc) = build(dir.path(), jobs);
        let cfg = NodeConfig {
            cgroup_root: cg.clone(),
            proc_root: proc.clone(),
            process_every: every,
            ..NodeConfig::default()
        };
        let mut c = NodeCollector::new(cfg, "bench".into());
        let mut samples = 0;
        // Warm-up: the first cycle resolves users and accounts and has no rates.
        for _ in 0..2 {
            samples = cycle(&mut c).0;
        }
        let t = cpu_time();
        for _ in 0..cycles {
            cycle(&mut c);
        }
        let collector = (cpu_time() - t) / cycles;
        let mut buf = String::with_capacity(8192);
        floor(&cg, &proc, &mut buf, true);
        let t = cpu_time();
        // The jobs all started together, so every job reads its processes on the same cycles.
        for i in 0..cycles {
            std::hint::black_box(floor(&cg, &proc, &mut buf, i % every == 0));
        }
        let base = (cpu_time() - t) / cycles;
        println!(
            "{jobs:>5} jobs | {every:>11} | {:>15.2} ms | {:>12.2} ms | {:>4.2}x | {:>17.4}% | {:.1} / {:.1} MB ({samples} samples a cycle)",
            collector.as_secs_f64() * 1e3,
            base.as_secs_f64() * 1e3,
            collector.as_secs_f64() / base.as_secs_f64().max(1e-9),
            collector.as_secs_f64() / 30.0 * 100.0,
            rss_mb("VmRSS:"),
            rss_mb("VmHWM:"),
        );
    }
}
