//! Cost of one node collection cycle over synthetic cgroup v2 trees of 1, 64 and 512 jobs with
//! 8 processes each (a fake /proc beside them), against a floor measured in the same run: reading
//! exactly the same files and directories, the same way, without parsing anything.
//!
//! `cargo bench -p slurm-cw-shipper --bench node_cycle`
//!
//! For processes read every cycle (`node.process_every = 1`) and every other cycle (the
//! default, 2), prints the mean CPU time (user + system) per cycle for the collector and for the
//! floor, their ratio, the CPU share of one core at a 30 s interval, and the process's resident
//! memory. Targets: under 2x the floor, under 20 MB RSS, under 0.1% of one core with 64 jobs.

use slurm_cw_shipper::config::NodeConfig;
use slurm_cw_shipper::sample::Batch;
use slurm_cw_shipper::sources::Errors;
use slurm_cw_shipper::sources::node::{NodeCollector, read_into};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

const PROCS_PER_JOB: u32 = 8;

fn cpu_time() -> Duration {
    // SAFETY: getrusage fills the struct we pass.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(u.ru_utime) + tv(u.ru_stime)
}

fn rss_mb(field: &str) -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
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
            for fd in 0..8 {
                std::os::unix::fs::symlink("/dev/null", d.join(format!("fd/{fd}"))).unwrap();
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

fn main() {
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
            let mut b = Batch::new(SystemTime::now());
            c.collect_jobs(None, &mut b, &mut Errors::new());
            samples = b.samples.len();
        }
        let t = cpu_time();
        for _ in 0..cycles {
            let mut b = Batch::new(SystemTime::now());
            c.collect_jobs(None, &mut b, &mut Errors::new());
            std::hint::black_box(&b);
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
