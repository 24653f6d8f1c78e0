//! The node collector on real Slurm jobs (cgroup v1 here), shipped to LocalStack and read back:
//! jobs that hold a known amount of memory, burn a known number of cores, start many threads,
//! open many files and write a known number of bytes. Also the TaskEpilog hook: a job shorter
//! than the collection interval still gets its final values.

mod common;

use common::*;
use slurm_cw_catalog::metrics::*;
use slurm_cw_shipper::datum::{Datum, DatumValue};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

const MIB: f64 = 1024.0 * 1024.0;

fn workload() -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../scripts/bench/workload.py").display().to_string()
}

fn bench_dir(conf: &Path) -> PathBuf {
    conf.parent().and_then(Path::parent).expect("bench dir").to_owned()
}

/// Points the bench's TaskEpilog at the binary under test.
fn install_hook(conf: &Path) {
    let link = bench_dir(conf).join("shipper");
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_slurm-cw-shipper"), &link).unwrap();
}

#[allow(clippy::await_holding_lock)]
#[tokio::test]
async fn per_job_figures_equal_what_the_jobs_did() {
    let (Some(url), Some(conf)) = (localstack(), slurm()) else {
        return;
    };
    let _lock = SLURM_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    install_hook(&conf);
    let mut cleanup = SlurmCleanup { jobs: Vec::new(), nodes: Vec::new() };
    let w = workload();
    let out_file = format!("/var/tmp/slurm-cw-write-test-{}", std::process::id());
    let mem = sbatch(&[
        "-p",
        "batch",
        "-w",
        "c1",
        "-A",
        "physics",
        "--mem=600M",
        "--wrap",
        &format!("python3 {w} memory 300 90"),
    ]);
    let burn = sbatch(&[
        "-p",
        "batch",
        "-w",
        "c2",
        "-A",
        "chemistry",
        "-c",
        "1",
        "--wrap",
        &format!("python3 {w} burn 1 90"),
    ]);
    let threads = sbatch(&[
        "-p",
        "debug",
        "-w",
        "c3",
        "-A",
        "biology",
        "--wrap",
        &format!("python3 {w} threads 50 90"),
    ]);
    let files =
        sbatch(&["-p", "debug", "-w", "c3", "-A", "biology", "--wrap", &format!("python3 {w} files 200 90")]);
    let write = sbatch(&[
        "-p",
        "debug",
        "-w",
        "c4",
        "-A",
        "physics",
        "--mem=400M",
        "--wrap",
        &format!("python3 {w} write 41943040 {out_file} 9 6 90"),
    ]);
    cleanup.jobs.extend([mem.clone(), burn.clone(), threads.clone(), files.clone(), write.clone()]);
    wait_until("five running jobs", Duration::from_secs(60), || {
        [&mem, &burn, &threads, &files, &write].iter().all(|j| job_state(j) == "RUNNING")
    });
    // Python may start late on a busy machine; Slurm's list of a job's processes must hold it
    // before it is the truth.
    let runs_python = |job: &str, node: &str| {
        job_pids(job, node)
            .iter()
            .any(|p| std::fs::read_to_string(format!("/proc/{p}/comm")).is_ok_and(|c| c.trim() == "python3"))
    };
    wait_until("python in every job Slurm lists the processes of", Duration::from_secs(60), || {
        runs_python(&burn, "c2") && runs_python(&threads, "c3") && runs_python(&files, "c3")
    });
    // Let the workloads settle (memory touched, threads and files open).
    std::thread::sleep(Duration::from_secs(3));

    // The truth, from Slurm's own list of each job's processes and their /proc entries.
    let burn_pids = job_pids(&burn, "c2");
    let cpu_at = |pids: &[u32]| pids.iter().map(|p| proc_cpu_seconds(*p)).sum::<f64>();
    let threads_truth: u64 = job_pids(&threads, "c3").iter().map(|p| proc_status(*p, "Threads")).sum();
    let files_truth: usize = job_pids(&files, "c3")
        .iter()
        .map(|p| std::fs::read_dir(format!("/proc/{p}/fd")).map_or(0, |d| d.count()))
        .sum();

    let ns = unique_namespace("node_slurm");
    let child = shipper()
        .args(["--role", "node"])
        .envs(shipper_env(&url, &ns))
        .env("SLURM_CW_CLUSTER_NAME", "nodetest")
        .env("SLURM_CW_COLLECT_INTERVAL", "2s")
        .env("SLURM_CW_FLUSH_INTERVAL", "4s")
        .env("SLURM_CW_NODE__PROCESS_EVERY", "2")
        .env("SLURM_CW_CLOUDWATCH__FLUSH_JITTER", "false")
        .env("SLURM_CW_NODE__HOOK_SOCKET", bench_dir(&conf).join("hook-node-test.sock"))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map(Running::new)
        .unwrap();
    let (cpu0, t0) = (cpu_at(&burn_pids), std::time::Instant::now());
    // The writer starts 9 s after its job (after the shipper first saw it) and writes for 6 s;
    // sampling 16 s from here covers it.
    std::thread::sleep(Duration::from_secs(16));
    let burn_truth = (cpu_at(&burn_pids) - cpu0) / t0.elapsed().as_secs_f64();
    child.stop();
    let _ = std::fs::remove_file(&out_file);

    let cw = cloudwatch(&url).await;
    let window = Duration::from_secs(600);
    let job = |id: &str, user: &'static str, account: &'static str| -> Vec<(&'static str, String)> {
        vec![
            ("ClusterName", "nodetest".into()),
            ("JobId", id.to_owned()),
            ("User", user.into()),
            ("Account", account.into()),
        ]
    };
    let get = |dims: Vec<(&'static str, String)>,
               metric: &'static str,
               stat: &'static str,
               extra: Option<(&'static str, &'static str)>| {
        let cw = cw.clone();
        let ns = ns.clone();
        async move {
            let mut d: Vec<(&str, &str)> = dims.iter().map(|(k, v)| (*k, v.as_str())).collect();
            if let Some(e) = extra {
                d.push(e);
            }
            statistic(&cw, &ns, metric, &d, stat, window)
                .await
                .unwrap_or_else(|| panic!("{metric} {d:?} not shipped"))
        }
    };
    let report = |what: &str, got: f64, lo: f64, hi: f64| {
        eprintln!("{what}: {got:.3} (expected {lo:.3} to {hi:.3})");
        assert!(got >= lo && got <= hi, "{what}: {got} not in [{lo}, {hi}]");
    };

    // 300 MiB touched by python: RSS between that and that plus the interpreter (~30 MiB).
    let m = job(&mem, "root", "physics");
    report(
        "memory job MemoryRss max (MiB)",
        get(m.clone(), MEMORY_RSS.name, "Maximum", None).await / MIB,
        300.0,
        340.0,
    );
    report(
        "memory job MemoryMax (MiB)",
        get(m.clone(), MEMORY_MAX.name, "Maximum", None).await / MIB,
        300.0,
        360.0,
    );
    report(
        "memory job MemoryLimit (MiB)",
        get(m.clone(), MEMORY_LIMIT.name, "Maximum", None).await / MIB,
        600.0,
        600.0,
    );

    // One core burning: the job's processes (as Slurm lists them) used `burn_truth` cores in
    // the window; on this shared 2-core machine that is a little under 1.
    let b = job(&burn, "root", "chemistry");
    report("burn job true cores (from /proc of scontrol listpids)", burn_truth, 0.5, 1.05);
    let usage = get(b.clone(), CPU_USAGE.name, "Average", None).await;
    report("burn job CpuUsage average (cores)", usage, burn_truth * 0.85, burn_truth * 1.15);
    report("burn job CpusAllocated", get(b.clone(), CPUS_ALLOCATED.name, "Maximum", None).await, 1.0, 1.0);
    let util = get(b.clone(), CPU_UTILIZATION.name, "Average", None).await;
    report("burn job CpuUtilization average (%)", util, usage * 100.0 * 0.99, usage * 100.0 * 1.01);
    let exe = get(b.clone(), PROCESS_CPU_USAGE.name, "Average", Some(("Executable", "python3"))).await;
    report("burn job ProcessCpuUsage python3 (cores)", exe, burn_truth * 0.85, burn_truth * 1.15);

    // 50 threads started by the job, plus its interpreter's and shell's own.
    let t = job(&threads, "root", "biology");
    let n = threads_truth as f64;
    assert!(n >= 52.0, "the job runs 50 threads, python's main thread and the shell: {n}");
    report(
        "threads job ThreadCount sleeping",
        get(t, THREAD_COUNT.name, "Maximum", Some(("ThreadState", "sleeping"))).await,
        n,
        n,
    );

    // 200 files held, plus the standard descriptors of python and the shell.
    let f = job(&files, "root", "biology");
    let n = files_truth as f64;
    assert!(n >= 200.0, "{n}");
    report("files job OpenFiles", get(f, OPEN_FILES.name, "Maximum", None).await, n, n);

    // 40 MiB written over 6 s: the per-second rates add up to it. Slurm here puts jobs in no
    // blkio cgroup, so I/O comes from /proc/<pid>/io, read every other 2 s cycle: each rate
    // covers 4 s.
    let wr = job(&write, "root", "physics");
    let samples = get(wr.clone(), WRITE_BYTES.name, "SampleCount", None).await;
    let sum = get(wr.clone(), WRITE_BYTES.name, "Sum", None).await;
    eprintln!("write job: {samples} WriteBytes samples");
    report("write job bytes written (MiB, sum of rates x 4 s)", sum * 4.0 / MIB, 40.0 * 0.85, 40.0 * 1.15);
    report("write job WriteOps max (per s)", get(wr, WRITE_OPS.name, "Maximum", None).await, 0.4, 1e6);

    let on_c1 = statistic(
        &cw,
        &ns,
        JOBS_ON_NODE.name,
        &[("ClusterName", "nodetest"), ("NodeName", "c1")],
        "Maximum",
        window,
    )
    .await;
    assert!(on_c1.is_some_and(|n| n >= 1.0), "JobsOnNode c1: {on_c1:?}");
}

#[test]
fn a_job_shorter_than_the_interval_gets_its_final_values_from_the_task_epilog() {
    let Some(conf) = slurm() else { return };
    let _lock = SLURM_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    install_hook(&conf);
    let dir = tempfile::tempdir().unwrap();
    // The bench's TaskEpilog talks to $bench/hook.sock.
    let socket = bench_dir(&conf).join("hook.sock");
    let child = shipper()
        .args(["--role", "node", "--sink", "stdout"])
        .env("SLURM_CW_CLUSTER_NAME", "hooktest")
        .env("SLURM_CW_COLLECT_INTERVAL", "1h")
        .env("SLURM_CW_FLUSH_INTERVAL", "1h")
        .env("SLURM_CW_CLOUDWATCH__FLUSH_JITTER", "false")
        .env("SLURM_CW_NODE__HOOK_SOCKET", &socket)
        .env("SLURM_CW_LOG__LEVEL", "slurm_cw_shipper=debug")
        .current_dir(dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map(Running::new)
        .unwrap();
    wait_until("the hook socket", Duration::from_secs(20), || socket.exists());
    std::thread::sleep(Duration::from_secs(1));
    // The one regular collection has happened; this job lives ~3 s, between two collections.
    let w = workload();
    let job =
        sbatch(&["-p", "batch", "-w", "c1", "--mem=400M", "--wrap", &format!("python3 {w} memory 150 2")]);
    let _cleanup = SlurmCleanup { jobs: vec![job.clone()], nodes: Vec::new() };
    wait_until("the short job to complete", Duration::from_secs(60), || job_state(&job) == "COMPLETED");
    let out = child.stop();

    let stdout = String::from_utf8_lossy(&out.stdout);
    let peak = stdout
        .lines()
        .filter_map(|l| Datum::from_json_line(l).ok().map(|(_, d)| d))
        .find(|d| d.metric == MEMORY_MAX.name && d.dimension("JobId") == Some(job.as_str()))
        .unwrap_or_else(|| {
            panic!("no MemoryMax of job {job}; stderr: {}", String::from_utf8_lossy(&out.stderr))
        });
    let v = match peak.value {
        DatumValue::Value { value } => value,
        DatumValue::Stats { stats } => stats.max,
        DatumValue::Values { .. } => panic!("not a distribution"),
    };
    eprintln!("short job {job}: final MemoryMax {:.1} MiB", v / MIB);
    assert!((150.0 * MIB..220.0 * MIB).contains(&v), "{v}");
}
