//! The node collector, the whole node-role daemon ([`super::whole`]) and the floor under both
//! ([`super::floor`]), beside slurm-job-exporter (github.com/guilbaults/slurm-job-exporter, not
//! in this repository: give the path of its `slurm-job-exporter.py` and a Python with psutil
//! and prometheus-client) on the same real jobs of the Slurm bench, measured in one run: CPU
//! per collection (every thread's schedstat for the exporter, its scrapes over HTTP, and for the
//! daemon; the measuring thread's rusage for the collector alone and the floor) and syscalls per
//! collection (strace -c).
//!
//! `cargo bench -p slurm-cw-shipper --bench node_cycle -- --versus <exporter.py> <python> <user>
//! [jobs]` after starting the Slurm bench and LocalStack and taking their env. The jobs (2 by
//! default) run as `<user>` (not root: the exporter skips root's processes), four sleeping
//! threads each, on the bench's first node; more than two need its `dense` profile
//! (`scripts/bench/slurm.sh start --profile dense`: 40 CPUs there). The exporter knows only
//! `/sys/fs/cgroup/<controller>/slurm/`, so it runs in a mount namespace of its own where the
//! node's `slurm_<node>` directories are bound there.

use super::{SYSCALL_CYCLES, cpu_time_thread, cycle, rss_mb, strace_counts_of};
use slurm_cw_shipper::settings::NodeConfig;
use slurm_cw_shipper::sources::node::NodeCollector;
use std::io::{BufRead, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const PORT: u16 = 19798;
const SCRAPES: u32 = 40;
/// Scrapes a second apart, the pace the whole daemon is measured at.
const PACED: u32 = 30;
const CYCLES: u32 = 200;

fn slurm(program: &str) -> PathBuf {
    let dir = std::env::var("BENCH_SLURM_BIN_DIR").unwrap_or_else(|_| "/usr/bin".into());
    Path::new(&dir).join(program)
}

fn wait_for(what: &str, limit: Duration, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(start.elapsed() < limit, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Cancels the jobs and stops the exporter however the bench ends.
struct Cleanup {
    jobs: Vec<String>,
    exporter: Option<std::process::Child>,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        if let Some(c) = &mut self.exporter {
            let _ = c.kill();
            let _ = c.wait();
        }
        if !self.jobs.is_empty() {
            let _ = Command::new(slurm("scancel")).args(&self.jobs).status();
        }
    }
}

fn scrape() -> usize {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", PORT)).expect("exporter answers");
    s.write_all(b"GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n").unwrap();
    let mut body = Vec::new();
    s.read_to_end(&mut body).unwrap();
    body.len()
}

/// CPU time of every thread of `pid`, from schedstat (nanoseconds).
pub(super) fn process_cpu(pid: u32) -> Duration {
    thread_cpu(pid).values().sum()
}

/// The CPU time of each of `pid`'s threads by name (threads of one name summed).
pub(super) fn thread_cpu(pid: u32) -> std::collections::BTreeMap<String, Duration> {
    let mut by_name = std::collections::BTreeMap::new();
    for t in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap().flatten() {
        let text = std::fs::read_to_string(t.path().join("schedstat")).unwrap_or_default();
        let ns = text.split_whitespace().next().and_then(|v| v.parse().ok()).unwrap_or(0);
        let name = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
        *by_name.entry(name.trim().to_owned()).or_default() += Duration::from_nanos(ns);
    }
    by_name
}

/// strace attached to `pid` while `scrapes` scrapes run: syscall name -> calls.
fn exporter_syscalls(pid: u32, scrapes: u32, out: &Path) -> std::collections::BTreeMap<String, i64> {
    traced_while(pid, out, || {
        for _ in 0..scrapes {
            scrape();
        }
    })
}

/// `strace -f -c` attached to `pid` (its threads and the children it starts) while `during`
/// runs: syscall name -> calls.
pub(super) fn traced_while(
    pid: u32,
    out: &Path,
    during: impl FnOnce(),
) -> std::collections::BTreeMap<String, i64> {
    let mut st = Command::new("strace")
        .args(["-f", "-c", "-o"])
        .arg(out)
        .args(["-p", &pid.to_string()])
        .stderr(Stdio::piped())
        .spawn()
        .expect("strace (apt-get install strace)");
    let mut err = std::io::BufReader::new(st.stderr.take().unwrap());
    let mut line = String::new();
    while err.read_line(&mut line).unwrap() > 0 && !line.contains("attached") {
        line.clear();
    }
    during();
    // SAFETY: signals the strace this function started.
    unsafe { libc::kill(st.id() as i32, libc::SIGINT) };
    st.wait().unwrap();
    super::parse_strace(&std::fs::read_to_string(out).unwrap())
}

pub fn versus(args: &[String]) {
    let (exporter, python, user, jobs) = match args {
        [e, p, u] => (e, p, u, 2),
        [e, p, u, n] => (e, p, u, n.parse::<usize>().expect("a number of jobs")),
        _ => panic!("--versus <slurm-job-exporter.py> <python> <user> [jobs]"),
    };
    let node = std::env::var("BENCH_SLURM_NODES")
        .ok()
        .and_then(|n| n.split_whitespace().next().map(str::to_owned))
        .unwrap_or_else(|| "c1".into());
    let conf = PathBuf::from(std::env::var("BENCH_SLURM_CONF").expect("source a bench's env first"));
    let bench = conf.parent().and_then(Path::parent).expect("bench dir").to_owned();
    let workload = bench.join("workload.py");
    // The tests leave a hard link to the checkout's file there: copying onto it would empty
    // the source, so the name goes first.
    let _ = std::fs::remove_file(&workload);
    std::fs::copy(Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/bench/workload.py"), &workload)
        .unwrap();
    let mut cleanup = Cleanup { jobs: Vec::new(), exporter: None };
    for _ in 0..jobs {
        let wrap = format!("/usr/bin/python3 {} threads 4 900", workload.display());
        let out = Command::new(slurm("sbatch"))
            .args(["--parsable", "--output=/dev/null", "-w", &node, "--time=15", "--mem=20M"])
            .arg(format!("--uid={user}"))
            .args(["--wrap", &wrap])
            .output()
            .unwrap();
        assert!(out.status.success(), "sbatch: {}", String::from_utf8_lossy(&out.stderr));
        cleanup
            .jobs
            .push(String::from_utf8_lossy(&out.stdout).trim().split(';').next().unwrap_or("").to_owned());
    }
    let root = Path::new("/sys/fs/cgroup");
    let slurm_dir = format!("slurm_{node}");
    let uid_dirs = root.join("cpuacct").join(&slurm_dir);
    wait_for("every job's processes", Duration::from_secs(120), || {
        cleanup.jobs.iter().all(|j| {
            std::fs::read_dir(&uid_dirs).into_iter().flatten().flatten().any(|u| {
                let task = u.path().join(format!("job_{j}/step_batch/task_0/cgroup.procs"));
                std::fs::read_to_string(task).is_ok_and(|t| !t.trim().is_empty())
            })
        })
    });

    // The collector, in this process.
    println!("{} jobs on {node} ({}), 4 sleeping threads each", cleanup.jobs.len(), cleanup.jobs.join(", "));
    let mut ours = Vec::new();
    for (label, every) in
        [("processes every cycle", 1), ("every 10th (default)", 10), ("on change only", u32::MAX)]
    {
        let cfg = NodeConfig {
            cgroup_root: root.to_owned(),
            proc_root: PathBuf::from("/proc"),
            v1_slurm_dir: slurm_dir.clone(),
            process_every: every,
            ..NodeConfig::default()
        };
        let mut c = NodeCollector::new(cfg, node.clone());
        let mut n = 0;
        for _ in 0..2 {
            n = cycle(&mut c).1;
        }
        assert_eq!(n, jobs, "the collector sees every job");
        let t = cpu_time_thread();
        for _ in 0..CYCLES {
            cycle(&mut c);
        }
        let cpu = (cpu_time_thread() - t) / CYCLES;
        let dir = tempfile::tempdir().unwrap();
        let calls = |cycles| {
            let args = [root.as_os_str(), "/proc".as_ref(), slurm_dir.as_ref()];
            strace_counts_of(&args, every, cycles, &dir.path().join("strace.txt"))
        };
        let (none, some) = (calls(0), calls(SYSCALL_CYCLES));
        let total: i64 = some.values().sum::<i64>() - none.values().sum::<i64>();
        let per_job = total as f64 / SYSCALL_CYCLES as f64 / jobs as f64;
        ours.push((label, cpu, per_job));
    }
    let our_rss = rss_mb("VmRSS:");

    // The exporter, in a mount namespace where slurm_<node> is slurm.
    let real = tempfile::tempdir().unwrap();
    let r = real.path().display();
    let mut script = format!(
        "set -e; mount --make-rprivate /; mount --rbind /sys/fs/cgroup {r}; mount -t tmpfs none /sys/fs/cgroup; "
    );
    for (theirs, here) in [("memory", "memory"), ("cpu,cpuacct", "cpuacct"), ("cpuset", "cpuset")] {
        script += &format!(
            "mkdir -p '/sys/fs/cgroup/{theirs}/slurm'; mount --bind {r}/{here}/{slurm_dir} '/sys/fs/cgroup/{theirs}/slurm'; "
        );
    }
    script += &format!("exec {python} {exporter} --port {PORT} --monitor none");
    let child =
        Command::new("unshare").args(["-m", "sh", "-c", &script]).stdout(Stdio::null()).spawn().unwrap();
    let pid = child.id();
    cleanup.exporter = Some(child);
    wait_for("the exporter", Duration::from_secs(30), || {
        std::net::TcpStream::connect(("127.0.0.1", PORT)).is_ok()
    });
    let body = std::iter::repeat_with(scrape).take(3).last().unwrap_or(0);
    let t = process_cpu(pid);
    for _ in 0..SCRAPES {
        scrape();
    }
    let theirs_cpu = (process_cpu(pid) - t) / SCRAPES;
    // At the daemon's pace too, one scrape a second: a process woken once a second finds its
    // caches cold, which back-to-back scrapes do not.
    let t = process_cpu(pid);
    for _ in 0..PACED {
        std::thread::sleep(Duration::from_secs(1));
        scrape();
    }
    let theirs_paced = (process_cpu(pid) - t) / PACED;
    let traced = tempfile::tempdir().unwrap();
    let counts = exporter_syscalls(pid, SYSCALL_CYCLES, &traced.path().join("strace.txt"));
    let theirs_scrape_calls = counts.values().sum::<i64>() as f64 / SYSCALL_CYCLES as f64;
    let theirs_calls = theirs_scrape_calls / jobs as f64;
    let theirs_rss = super::rss_mb_of(pid, "VmRSS:");
    println!(
        "slurm-job-exporter: {:.2} ms CPU a scrape back to back, {:.2} ms one a second ({body} bytes), {theirs_calls:.0} syscalls a job a scrape, {theirs_rss:.1} MB RSS",
        theirs_cpu.as_secs_f64() * 1e3,
        theirs_paced.as_secs_f64() * 1e3,
    );
    for (label, cpu, calls) in ours {
        println!(
            "node collector, {label:<22}: {:.3} ms CPU a cycle ({:.1}x less), {calls:.1} syscalls a job a cycle ({:.1}x fewer)",
            cpu.as_secs_f64() * 1e3,
            theirs_cpu.as_secs_f64() / cpu.as_secs_f64().max(1e-9),
            theirs_calls / calls.max(1e-9),
        );
    }
    println!("this bench process (a collector, no sinks): {our_rss:.1} MB RSS");
    let _ = cleanup.exporter.take().map(|mut c| {
        let _ = c.kill();
        c.wait()
    });
    let dir = tempfile::tempdir().unwrap();
    let whole = super::whole::measure(&node, &slurm_dir, dir.path());
    println!(
        "the whole node-role daemon (cloudwatch, records, self-metrics), a cycle a second: {:.3} ms CPU a cycle ({:.1}x less than a scrape a second), {:.0} syscalls a cycle ({:.1}x fewer), {:.1} MB RSS",
        whole.cpu.as_secs_f64() * 1e3,
        theirs_paced.as_secs_f64() / whole.cpu.as_secs_f64().max(1e-9),
        whole.syscalls,
        theirs_scrape_calls / whole.syscalls.max(1e-9),
        whole.rss_mb,
    );
    let threads: Vec<String> = whole
        .threads
        .iter()
        .filter(|(_, cpu)| !cpu.is_zero())
        .map(|(name, cpu)| format!("{name} {:.3} ms", cpu.as_secs_f64() * 1e3))
        .collect();
    // The main thread (named after the binary) flushes: aggregates to the spool and the sink.
    println!("  by thread, a cycle: {}", threads.join(", "));
    let floor = super::floor::measure(root, &slurm_dir, &cleanup.jobs);
    let ratio = |d: Duration| theirs_paced.as_secs_f64() / d.as_secs_f64().max(1e-9);
    println!(
        "the floor, a thread woken once a second: {:.3} ms CPU a cycle reading nothing ({:.1}x), {:.3} ms reading the collector's {} cgroup files and nothing else ({:.1}x less than a scrape a second: no daemon reading them beats it)",
        floor.wake.as_secs_f64() * 1e3,
        ratio(floor.wake),
        floor.reads.as_secs_f64() * 1e3,
        floor.files,
        ratio(floor.reads),
    );
}
