//! The whole node-role process a cycle, as `--versus` runs it beside the exporter: the built
//! `slurm-cw-shipper` daemon (collection, the transforms, aggregation, its lane, the
//! self-metrics, job records, and its `cloudwatch` destination sending to the bench's
//! LocalStack), at the default `process_every` and with the default four collections a flush
//! (`collect_interval = 1s`, `flush_interval = 4s`: the defaults' 30 s and 120 s, faster). CPU
//! is every thread's schedstat over [`CYCLES`] cycles; syscalls are strace's count over
//! [`TRACED`] cycles, the daemon's own threads and the commands it runs.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Cycles the CPU time is taken over (one a second).
const CYCLES: u32 = 60;
/// Cycles strace counts.
const TRACED: u32 = 20;
/// Cycles before measuring: the jobs found, users and accounts asked of Slurm, a flush sent.
const WARM_UP: u32 = 10;

pub struct Whole {
    pub cpu: Duration,
    /// Syscalls a cycle.
    pub syscalls: f64,
    pub rss_mb: f64,
    /// CPU a cycle of each thread by name, busiest first.
    pub threads: Vec<(String, Duration)>,
}

/// The log group the job records go to must exist, as the Terraform module makes it.
fn log_group(cluster: &str) {
    let group = format!("/slurm-cw/{cluster}/jobs");
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let sdk = aws_config::load_from_env().await;
        let logs = aws_sdk_cloudwatchlogs::Client::new(&sdk);
        let _ = logs.create_log_group().log_group_name(&group).send().await;
    });
}

/// Runs the daemon as a node of `node` (Slurm's v1 cgroup directory `slurm_dir`) and measures it.
pub fn measure(node: &str, slurm_dir: &str, dir: &Path) -> Whole {
    let conf = std::env::var("BENCH_SLURM_CONF").expect("a bench's env");
    let bin_dir = std::env::var("BENCH_SLURM_BIN_DIR").unwrap_or_else(|_| "/usr/bin".into());
    assert!(std::env::var("BENCH_LOCALSTACK_URL").is_ok(), "the whole process sends to LocalStack: start it");
    let cluster = "cycle-bench";
    log_group(cluster);
    let d = dir.display();
    let settings = format!(
        "cluster_name = \"{cluster}\"\nnode_name = \"{node}\"\nrole = \"node\"\n\
         collect_interval = \"1s\"\nflush_interval = \"4s\"\n\
         [delivery]\nflush_jitter = false\n[spool]\ndir = \"{d}/spool\"\n\
         [slurm]\nconf = \"{conf}\"\nbin_dir = \"{bin_dir}\"\n\
         [node]\ncgroup_root = \"/sys/fs/cgroup\"\nv1_slurm_dir = \"{slurm_dir}\"\nhook_socket = \"{d}/hook.sock\"\n\
         [cost]\nhourly_price = 1.0\n"
    );
    let file = dir.join("config.toml");
    std::fs::write(&file, settings).unwrap();
    let mut daemon = Command::new(env!("CARGO_BIN_EXE_slurm-cw-shipper"))
        .arg("--config")
        .arg(&file)
        .stdout(Stdio::null())
        .spawn()
        .expect("the daemon starts");
    let pid = daemon.id();
    std::thread::sleep(Duration::from_secs(WARM_UP.into()));
    assert!(daemon.try_wait().unwrap().is_none(), "the daemon runs (see its standard error above)");
    let (t0, w0) = (super::versus::thread_cpu(pid), Instant::now());
    std::thread::sleep(Duration::from_secs(CYCLES.into()));
    let (t1, w1) = (super::versus::thread_cpu(pid), Instant::now());
    // Cycles by the clock: one a second, give or take the last.
    let cycles = (w1 - w0).as_secs_f64();
    let mut threads: Vec<(String, Duration)> = t1
        .into_iter()
        .map(|(name, t)| {
            let before = t0.get(&name).copied().unwrap_or_default();
            (name, t.saturating_sub(before).div_f64(cycles))
        })
        .collect();
    threads.sort_by_key(|(_, cpu)| std::cmp::Reverse(*cpu));
    let cpu = threads.iter().map(|(_, t)| *t).sum();
    let syscalls = traced(pid, &dir.join("strace.txt")) / f64::from(TRACED);
    let rss_mb = super::rss_mb_of(pid, "VmRSS:");
    let _ = daemon.kill();
    let _ = daemon.wait();
    Whole { cpu, syscalls, rss_mb, threads }
}

/// strace's count of every syscall over [`TRACED`] seconds, the commands the daemon starts
/// included.
fn traced(pid: u32, out: &Path) -> f64 {
    let during = || std::thread::sleep(Duration::from_secs(TRACED.into()));
    super::versus::traced_while(pid, out, during).values().sum::<i64>() as f64
}
