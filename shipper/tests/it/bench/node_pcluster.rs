//! The node role under AWS ParallelCluster's default Slurm settings (the Slurm bench's
//! `--profile pcluster`: no ConstrainRAMSpace, no JobAcctGatherType): Slurm gives jobs no memory
//! or cpuacct cgroup, and the shipper still reports a job's memory and CPU, from its processes.
//! scripts/test.sh runs this file on a bench started with that profile; on the default bench it
//! says so and does nothing.

use crate::common;

use common::*;
use slurm_cw_catalog::metrics::{CPU_TIME, CPU_USAGE, MEMORY_RSS, MEMORY_USAGE};
use slurm_cw_catalog::records;
use std::process::Stdio;
use std::time::{Duration, Instant};

const MIB: f64 = 1024.0 * 1024.0;

/// A figure of job `id`'s `job_sample` records on a stdout line.
fn sample_figure(line: &str, id: &str, field: &str) -> Option<f64> {
    let v: serde_json::Value = serde_json::from_str(line).ok()?;
    let r = v.get("record")?;
    if r[records::TYPE.name] != records::kinds::JOB_SAMPLE || r[records::JOB_ID.name] != id {
        return None;
    }
    r.get(field)?.as_f64()
}

#[ignore = "needs the Slurm bench started with --profile pcluster: scripts/test.sh runs it"]
#[test]
fn memory_and_cpu_of_a_job_without_memory_and_cpuacct_cgroups() {
    let Some(conf) = slurm() else { return };
    if std::env::var("BENCH_SLURM_PROFILE").as_deref() != Ok("pcluster") {
        eprintln!(
            "SKIPPED: needs the bench with ParallelCluster's defaults: scripts/bench/slurm.sh start --profile pcluster"
        );
        return;
    }
    let _lock = SLURM_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let mut cleanup = SlurmCleanup { jobs: Vec::new(), nodes: Vec::new() };
    let w = workload(&conf);
    let n = nodes();
    let mem = sbatch(&["-p", "batch", "-w", &n[0], "--wrap", &format!("python3 {w} memory 300 120")]);
    let burn = sbatch(&["-p", "batch", "-w", &n[1], "-c", "1", "--wrap", &format!("python3 {w} burn 1 120")]);
    cleanup.jobs.extend([mem.clone(), burn.clone()]);
    wait_until("two running jobs", Duration::from_secs(60), || {
        job_state(&mem) == "RUNNING" && job_state(&burn) == "RUNNING"
    });
    // The truth first: python holds its 300 MiB (VmRSS of the job's processes, as Slurm lists them).
    let held = || job_pids(&mem, &n[0]).iter().map(|p| proc_status(*p, "VmRSS")).sum::<u64>() as f64 / 1024.0;
    wait_until("the memory job holding 300 MiB", Duration::from_secs(60), || held() >= 300.0);
    // The profile is what it says: no memory cgroup for the job.
    let memory_tree = std::path::Path::new("/sys/fs/cgroup/memory");
    let has_memory_cgroup = std::fs::read_dir(memory_tree)
        .into_iter()
        .flatten()
        .flatten()
        .any(|d| d.path().join(format!("uid_0/job_{mem}")).exists());
    assert!(!has_memory_cgroup, "ParallelCluster's defaults give the job no memory cgroup");

    let burnt = || job_pids(&burn, &n[1]).iter().map(|p| proc_cpu_seconds(*p)).sum::<f64>();
    let burnt_before = burnt();
    let tmp = tempfile::tempdir().unwrap();
    let mut child = shipper()
        .args(["--role", "node", "--sink", "stdout"])
        .env("SLURM_CW_CLUSTER_NAME", "pcluster-defaults")
        .env("SLURM_CW_COLLECT_INTERVAL", "2s")
        .env("SLURM_CW_FLUSH_INTERVAL", "4s")
        .env("SLURM_CW_DELIVERY__FLUSH_JITTER", "false")
        .env("SLURM_CW_NODE__HOOK_SOCKET", tmp.path().join("hook.sock"))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map(Running::new)
        .unwrap();
    let rx = child.stdout_lines();
    let (mut rss, mut usage, mut cpu_time) = (None, None, None);
    let started = Instant::now();
    while (rss.is_none() || usage.is_none()) && started.elapsed() < Duration::from_secs(60) {
        let Ok(line) = rx.recv_timeout(Duration::from_millis(500)) else { continue };
        if let Some(v) = sample_figure(&line, &mem, MEMORY_RSS.name) {
            rss = Some(v);
            assert_eq!(sample_figure(&line, &mem, MEMORY_USAGE.name), Some(v), "MemoryUsage is the RSS here");
        }
        usage = usage.or(sample_figure(&line, &burn, CPU_USAGE.name));
        cpu_time = cpu_time.or(sample_figure(&line, &burn, CPU_TIME.name));
    }
    let truth = held();
    let burnt_after = burnt();
    let rss = rss.expect("MemoryRss of the memory job") / MIB;
    eprintln!("memory job: {rss:.1} MiB in its record, {truth:.1} MiB in /proc; burn job {usage:?} cores");
    // python's 300 MiB plus the interpreter and the batch shell.
    assert!((300.0..=360.0).contains(&rss), "MemoryRss {rss:.1} MiB for 300 MiB held");
    let cores = usage.expect("CpuUsage of the burn job");
    assert!((0.3..=1.1).contains(&cores), "CpuUsage {cores} for one core burnt (2 shared cores here)");
    // CPU time of the job's processes, read between the two readings of the truth.
    let secs = cpu_time.expect("CpuTime of the burn job");
    assert!(
        secs >= burnt_before - 0.5 && secs <= burnt_after + 0.5,
        "CpuTime {secs} s outside what /proc said before ({burnt_before}) and after ({burnt_after})"
    );
}
