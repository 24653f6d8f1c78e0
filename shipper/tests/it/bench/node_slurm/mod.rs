//! The node collector on real Slurm jobs (cgroup v1 here), shipped to LocalStack and read back:
//! jobs that hold a known amount of memory, burn a known number of cores, start many threads,
//! open many files and write a known number of bytes. Also the TaskEpilog hook: a job shorter
//! than the collection interval still gets its final values. Whose a job is, whatever its user
//! writes: `attribution`.

mod attribution;

use crate::common;

use common::*;
use slurm_cw_catalog::metrics::*;
use slurm_cw_formats::record::Record;
use std::process::Stdio;
use std::time::Duration;

const MIB: f64 = 1024.0 * 1024.0;

/// One `--once` of the node role, printed (`--sink stdout`).
fn once_node(cluster: &str) -> String {
    String::from_utf8_lossy(&once_node_run(cluster).stdout).into_owned()
}

/// The same, with its standard error.
pub(super) fn once_node_run(cluster: &str) -> std::process::Output {
    let run = shipper()
        .args(["--once", "--role", "node", "--sink", "stdout"])
        .env("SLURM_CW_CLUSTER_NAME", cluster)
        // Every figure per account (by default only those a view reads so), to see whose it is.
        .env("SLURM_CW_NODE__PER_ACCOUNT", "on")
        .output()
        .unwrap();
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    run
}

/// A process of `job` on `node` (as Slurm lists them) whose command is `comm`.
fn job_process(job: &str, node: &str, comm: &str) -> Option<u32> {
    job_pids(job, node)
        .into_iter()
        .find(|p| std::fs::read_to_string(format!("/proc/{p}/comm")).is_ok_and(|c| c.trim() == comm))
}

/// The job_sample record of `job` in what the stdout sink printed.
pub(super) fn sample_of(stdout: &str, job: &str) -> serde_json::Value {
    stdout
        .lines()
        .filter_map(|l| Record::from_json_line(l).ok())
        .filter_map(|r| serde_json::from_str::<serde_json::Value>(&r.message).ok())
        .find(|v| v["JobId"] == job && v["Type"] == "job_sample")
        .unwrap_or_else(|| panic!("no record of job {job}: {stdout}"))
}

#[allow(clippy::await_holding_lock)]
#[ignore = "needs LocalStack and the Slurm bench: scripts/test.sh runs it"]
#[tokio::test]
async fn per_job_figures_equal_what_the_jobs_did() {
    let (Some(url), Some(conf)) = (localstack(), slurm()) else {
        return;
    };
    let _lock = SLURM_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    install_hook(&conf);
    let mut cleanup = SlurmCleanup { jobs: Vec::new(), nodes: Vec::new() };
    let w = workload(&conf);
    let n = nodes();
    let (c1, c2, c3, c4) = (n[0].as_str(), n[1].as_str(), n[2].as_str(), n[3].as_str());
    // In the bench directory: the 24.11 bench's jobs see it at the same path.
    let out_file = bench_dir(&conf).join(format!("write-test-{}", std::process::id())).display().to_string();
    let mem = sbatch(&[
        "-p",
        "batch",
        "-w",
        c1,
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
        c2,
        "-A",
        "chemistry",
        "-c",
        "1",
        "--wrap",
        &format!("python3 {w} burn 1 90"),
    ]);
    let threads =
        sbatch(&["-p", "debug", "-w", c3, "-A", "biology", "--wrap", &format!("python3 {w} threads 50 90")]);
    let files =
        sbatch(&["-p", "debug", "-w", c3, "-A", "biology", "--wrap", &format!("python3 {w} files 200 90")]);
    let write = sbatch(&[
        "-p",
        "debug",
        "-w",
        c4,
        "-A",
        "physics",
        "--mem=400M",
        "--wrap",
        &format!("python3 {w} write 41943040 {out_file} 9 6 5"),
    ]);
    cleanup.jobs.extend([mem.clone(), burn.clone(), threads.clone(), files.clone(), write.clone()]);
    wait_until("five running jobs", Duration::from_secs(60), || {
        [&mem, &burn, &threads, &files, &write].iter().all(|j| job_state(j) == "RUNNING")
    });
    // Python may start late on a busy machine; Slurm's list of a job's processes must hold it
    // before it is the truth.
    let runs_python = |job: &str, node: &str| job_process(job, node, "python3").is_some();
    wait_until("python in every job Slurm lists the processes of", Duration::from_secs(60), || {
        runs_python(&burn, c2) && runs_python(&threads, c3) && runs_python(&files, c3)
    });
    // The workloads settled: memory touched, threads started, files open.
    wait_until("the memory job to hold 300 MiB, 50 threads and 200 files", Duration::from_secs(90), || {
        job_pids(&mem, c1).iter().any(|p| proc_status(*p, "VmRSS") >= 300 * 1024)
            && job_pids(&threads, c3).iter().map(|p| proc_status(*p, "Threads")).sum::<u64>() >= 52
            && job_pids(&files, c3)
                .iter()
                .map(|p| std::fs::read_dir(format!("/proc/{p}/fd")).map_or(0, |d| d.count()))
                .sum::<usize>()
                >= 200
    });

    // The truth, from Slurm's own list of each job's processes and their /proc entries.
    let burn_pids = job_pids(&burn, c2);
    let cpu_at = |pids: &[u32]| pids.iter().map(|p| proc_cpu_seconds(*p)).sum::<f64>();
    let threads_truth: u64 = job_pids(&threads, c3).iter().map(|p| proc_status(*p, "Threads")).sum();
    let files_truth: usize = job_pids(&files, c3)
        .iter()
        .map(|p| std::fs::read_dir(format!("/proc/{p}/fd")).map_or(0, |d| d.count()))
        .sum();

    let ns = unique_namespace("node_slurm");
    let logs = logs(&url).await;
    let group = job_log_group(&logs, "node_slurm").await;
    // The default configuration: per-job figures as job records, no per-job metrics.
    let child = shipper()
        .args(["--role", "node"])
        .envs(shipper_env(&url, &ns))
        .env("SLURM_CW_LOGS__GROUP", &group)
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
    // The writer starts 9 s after its job, writes for 6 s and ends 5 s later; its cgroup then
    // goes and its summary carries the total: the test goes on once that summary is delivered.
    wait_until("the write job to end", Duration::from_secs(90), || job_state(&write) == "COMPLETED");
    let summary_of_write = [("JobId", write.as_str()), ("Type", "job_summary")];
    for _ in 0..240 {
        if !records(&logs, &group, &summary_of_write).await.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let burn_truth = (cpu_at(&burn_pids) - cpu0) / t0.elapsed().as_secs_f64();
    child.stop();
    let _ = std::fs::remove_file(&out_file);

    let samples = |job: String| {
        let (logs, group) = (logs.clone(), group.clone());
        async move {
            let got = records(&logs, &group, &[("JobId", &job), ("Type", "job_sample")]).await;
            assert!(!got.is_empty(), "no job_sample records of job {job}");
            got
        }
    };
    // A figure across a job's sample records (each the mean over its flush).
    let values = |recs: &[serde_json::Value], path: &[&str]| -> Vec<f64> {
        recs.iter()
            .filter_map(|r| path.iter().try_fold(r, |v, k| v.get(*k)).and_then(|v| v.as_f64()))
            .collect()
    };
    let max = |v: Vec<f64>| v.into_iter().fold(f64::NAN, f64::max);
    let mean = |v: Vec<f64>| v.iter().sum::<f64>() / v.len() as f64;
    let report = |what: &str, got: f64, lo: f64, hi: f64| {
        eprintln!("{what}: {got:.3} (expected {lo:.3} to {hi:.3})");
        assert!(got >= lo && got <= hi, "{what}: {got} not in [{lo}, {hi}]");
    };

    // 300 MiB touched by python: RSS between that and that plus the interpreter (~30 MiB).
    let m = samples(mem.clone()).await;
    assert!(
        m.iter().all(|r| r["User"] == "root" && r["Account"] == "physics" && r["NodeName"] == c1),
        "{m:?}"
    );
    report("memory job record MemoryRss max (MiB)", max(values(&m, &[MEMORY_RSS.name])) / MIB, 300.0, 340.0);
    report("memory job record MemoryMax (MiB)", max(values(&m, &[MEMORY_MAX.name])) / MIB, 300.0, 360.0);
    report("memory job record MemoryLimit (MiB)", max(values(&m, &[MEMORY_LIMIT.name])) / MIB, 600.0, 600.0);

    // One core burning: the job's processes (as Slurm lists them) used `burn_truth` cores in
    // the window; on this shared 2-core machine that is a little under 1.
    let b = samples(burn.clone()).await;
    report("burn job true cores (from /proc of scontrol listpids)", burn_truth, 0.5, 1.05);
    let usage = mean(values(&b, &[CPU_USAGE.name]));
    report("burn job record CpuUsage mean (cores)", usage, burn_truth * 0.85, burn_truth * 1.15);
    report("burn job record CpusAllocated", max(values(&b, &[CPUS_ALLOCATED.name])), 1.0, 1.0);
    let util = mean(values(&b, &[CPU_UTILIZATION.name]));
    report("burn job record CpuUtilization mean (%)", util, usage * 100.0 * 0.99, usage * 100.0 * 1.01);
    let exe = mean(values(&b, &[PROCESS_CPU_USAGE.name, "python3"]));
    report("burn job record ProcessCpuUsage python3 (cores)", exe, burn_truth * 0.85, burn_truth * 1.15);

    // 50 threads started by the job, plus its interpreter's and shell's own.
    let t = samples(threads.clone()).await;
    let n = threads_truth as f64;
    assert!(n >= 52.0, "the job runs 50 threads, python's main thread and the shell: {n}");
    report(
        "threads job record ThreadCount sleeping",
        max(values(&t, &[THREAD_COUNT.name, "sleeping"])),
        n,
        n,
    );

    // 200 files held, plus the standard descriptors of python and the shell.
    let f = samples(files.clone()).await;
    let n = files_truth as f64;
    assert!(n >= 200.0, "{n}");
    report("files job record OpenFiles", max(values(&f, &[OPEN_FILES.name])), n, n);

    // 40 MiB written, then the job ended: its summary has the total. Slurm here puts jobs in no
    // blkio cgroup, so I/O comes from /proc/<pid>/io, read every other 2 s cycle.
    let summary = records(&logs, &group, &[("JobId", &write), ("Type", "job_summary")]).await;
    assert_eq!(summary.len(), 1, "one summary of the write job: {summary:?}");
    assert_eq!(summary[0]["EndedBy"], "cgroup_gone");
    let written = summary[0]["WriteBytesTotal"].as_f64().unwrap_or(0.0);
    report("write job summary WriteBytesTotal (MiB)", written / MIB, 40.0 * 0.85, 40.0 * 1.15);

    // What CloudWatch bills: no metric carries a JobId; the population figures are there.
    let cw = cloudwatch(&url).await;
    let listed = cw.list_metrics().namespace(&ns).send().await.expect("ListMetrics");
    let with_job: Vec<_> = listed
        .metrics()
        .iter()
        .filter(|m| m.dimensions().iter().any(|d| d.name() == Some("JobId")))
        .map(|m| m.metric_name().unwrap_or("").to_owned())
        .collect();
    assert!(with_job.is_empty(), "metrics with a JobId dimension by default: {with_job:?}");
    assert!(listed.metrics().len() > 10, "the node's other metrics: {}", listed.metrics().len());
    let window = Duration::from_secs(600);
    // Per account by default only what a view reads so (CPU efficiency, spend, waste).
    let allocations = statistic(
        &cw,
        &ns,
        JOB_ALLOCATIONS.name,
        &[("ClusterName", "nodetest"), ("Account", "biology")],
        "Maximum",
        window,
    )
    .await;
    assert_eq!(allocations, None, "JobAllocations per account is not sent by default");
    let biology = statistic(
        &cw,
        &ns,
        JOB_CPU_EFFICIENCY.name,
        &[("ClusterName", "nodetest"), ("Account", "biology")],
        "SampleCount",
        window,
    )
    .await;
    assert!(biology.is_some_and(|n| n >= 2.0), "the two biology jobs on {c3}, each sample: {biology:?}");
    let efficiency = statistic(
        &cw,
        &ns,
        JOB_CPU_EFFICIENCY.name,
        &[("ClusterName", "nodetest"), ("Account", "chemistry")],
        "Maximum",
        window,
    )
    .await
    .expect("JobCpuEfficiency of the chemistry account");
    report("chemistry JobCpuEfficiency max (%)", efficiency, burn_truth * 85.0, 101.0);
}

#[ignore = "needs the Slurm bench: scripts/test.sh runs it"]
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
    // Collections are an hour apart: this job lives ~3 s, and whether or not the daemon's first
    // collection sees it, its summary comes from its TaskEpilog.
    let w = workload(&conf);
    let job = sbatch(&[
        "-p",
        "batch",
        "-w",
        &nodes()[0],
        "--mem=400M",
        "--wrap",
        &format!("python3 {w} memory 150 2"),
    ]);
    let _cleanup = SlurmCleanup { jobs: vec![job.clone()], nodes: Vec::new() };
    wait_until("the short job to complete", Duration::from_secs(60), || job_state(&job) == "COMPLETED");
    let out = child.stop();

    let stdout = String::from_utf8_lossy(&out.stdout);
    let summaries: Vec<Record> = stdout
        .lines()
        .filter_map(|l| Record::from_json_line(l).ok())
        .filter(|r| {
            r.message.contains(r#""Type":"job_summary""#)
                && r.message.contains(&format!(r#""JobId":"{job}""#))
        })
        .collect();
    assert_eq!(
        summaries.len(),
        1,
        "one summary of job {job}; stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let summary: serde_json::Value = serde_json::from_str(&summaries[0].message).unwrap();
    assert_eq!(summary["EndedBy"], "task_epilog");
    let v = summary["MemoryPeakBytes"].as_f64().unwrap_or(0.0);
    eprintln!("short job {job}: summary MemoryPeakBytes {:.1} MiB", v / MIB);
    assert!((150.0 * MIB..220.0 * MIB).contains(&v), "{v}");
    assert!(!stdout.contains(&format!(r#""JobId":"{job}"}}"#)), "no per-job datum by default");
}
