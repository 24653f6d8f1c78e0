//! `slurm-cw-shipper report <jobid>`: real jobs shipped to LocalStack and read back, a
//! two-node job written by hand, and the answers when there is nothing to read.

use crate::common;

use common::*;
use serde_json::{Value, json};
use slurm_cw_catalog::records::{self as r, kinds};
use std::collections::HashMap;
use std::process::Stdio;
use std::time::{Duration, SystemTime};

const MIB: f64 = 1024.0 * 1024.0;
const GIB: f64 = 1024.0 * MIB;

/// `report ARGS` against LocalStack and `group`: (exit status, stdout, stderr).
fn report(url: &str, group: &str, args: &[&str]) -> (Option<i32>, String, String) {
    let out = shipper()
        .arg("report")
        .args(args)
        .envs(shipper_env(url, "SlurmTest/report"))
        .env("SLURM_CW_LOGS__GROUP", group)
        .env("SLURM_CW_CLUSTER_NAME", "reporttest")
        .output()
        .expect("run the shipper");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn json_report(url: &str, group: &str, job: &str) -> Value {
    let (code, out, err) = report(url, group, &[job, "--json"]);
    assert_eq!(code, Some(0), "report {job}: {err}");
    serde_json::from_str(&out).expect("--json prints one JSON object")
}

fn within(what: &str, got: f64, lo: f64, hi: f64) {
    eprintln!("{what}: {got:.3} (expected {lo:.3} to {hi:.3})");
    assert!(got >= lo && got <= hi, "{what}: {got} not in [{lo}, {hi}]");
}

const PRICE: f64 = 3.6;

/// Seconds `job` held its nodes, as Slurm says (StartTime to EndTime; local time both).
fn slurm_held_seconds(job: &str) -> f64 {
    let text = cmd("squeue", &["-h", "-j", job, "-t", "all", "-o", "%S %e"]);
    let secs = |t: &str| {
        let out = std::process::Command::new("date").args(["-d", t, "+%s"]).output().unwrap();
        String::from_utf8_lossy(&out.stdout).trim().parse::<f64>().unwrap()
    };
    let (start, end) = text.trim().split_once(' ').unwrap();
    secs(end) - secs(start)
}

fn now_rfc3339() -> String {
    slurm_cw_formats::datum::format_timestamp(SystemTime::now())
}

#[allow(clippy::await_holding_lock)]
#[ignore = "needs LocalStack and the Slurm bench: scripts/test.sh runs it"]
#[tokio::test]
async fn a_real_job_report_equals_what_the_jobs_did() {
    let (Some(url), Some(conf)) = (localstack(), slurm()) else {
        return;
    };
    let _lock = SLURM_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let bench = bench_dir(&conf);
    let n = nodes();
    let (c1, c2) = (n[0].as_str(), n[1].as_str());
    let logs = logs(&url).await;
    let group = job_log_group(&logs, "report").await;
    let interval = 2.0;
    let namespace = unique_namespace("report");
    let shipper_child = shipper()
        .args(["--role", "node"])
        .envs(shipper_env(&url, &namespace))
        .env("SLURM_CW_COST__HOURLY_PRICE", PRICE.to_string())
        .env("SLURM_CW_LOGS__GROUP", &group)
        .env("SLURM_CW_CLUSTER_NAME", "reporttest")
        .env("SLURM_CW_COLLECT_INTERVAL", "2s")
        .env("SLURM_CW_FLUSH_INTERVAL", "4s")
        .env("SLURM_CW_CLOUDWATCH__FLUSH_JITTER", "false")
        .env("SLURM_CW_NODE__HOOK_SOCKET", bench.join("hook-report-test.sock"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map(Running::new)
        .expect("start the shipper");
    let mut cleanup = SlurmCleanup { jobs: Vec::new(), nodes: Vec::new() };
    let w = workload(&conf);
    let mem = sbatch(&[
        "-p",
        "batch",
        "-w",
        c1,
        "-A",
        "physics",
        "--mem=600M",
        "--wrap",
        &format!("python3 {w} memory 300 30"),
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
        &format!("python3 {w} burn 1 30"),
    ]);
    // Two nodes, one CPU of two on each: half of each node.
    let two = sbatch(&[
        "-p",
        "debug",
        "-N",
        "2",
        "-c",
        "1",
        "--mem=200M",
        "-A",
        "physics",
        "--wrap",
        "srun sleep 20",
    ]);
    cleanup.jobs.extend([mem.clone(), burn.clone(), two.clone()]);

    // While it runs: a report from its samples alone, marked as still arriving. The truth first:
    // python holds its 300 MiB (on a busy machine touching them takes a while), then two more
    // flushes, so that a sample's mean covers only collections after it.
    wait_until("the memory job to hold its 300 MiB", Duration::from_secs(90), || {
        job_pids(&mem, c1).into_iter().any(|p| proc_status(p, "VmRSS") >= 300 * 1024)
    });
    let sample_of_mem = [(r::JOB_ID.name, mem.as_str()), (r::TYPE.name, kinds::JOB_SAMPLE)];
    let held = records(&logs, &group, &sample_of_mem).await.len();
    let mut samples = Vec::new();
    for _ in 0..60 {
        samples = records(&logs, &group, &sample_of_mem).await;
        if samples.len() >= held + 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert!(samples.len() >= held + 2, "no samples of job {mem} after it held its memory");
    let running = json_report(&url, &group, &mem);
    assert_eq!(
        (running["state"].as_str(), running["incomplete"].as_bool()),
        (Some("RUNNING"), Some(true)),
        "{running:#}"
    );
    assert_eq!(running["per_node"][0]["source"], json!(kinds::JOB_SAMPLE));
    within(
        "running memory job peak from samples (MiB)",
        running["memory_peak_bytes"].as_f64().unwrap_or(0.0) / MIB,
        300.0,
        360.0,
    );
    let (_, text, _) = report(&url, &group, &[&mem]);
    assert!(text.contains("records still arriving"), "{text}");

    // The truth: CPU time of the burn job's processes, as Slurm lists them, polled until the
    // job ends (each process's largest reading: the forked burner exits before the job).
    let mut cpu: HashMap<u32, f64> = HashMap::new();
    wait_until("both jobs to end", Duration::from_secs(120), || {
        for p in job_pids(&burn, c2) {
            let c = proc_cpu_seconds(p);
            let e = cpu.entry(p).or_default();
            *e = e.max(c);
        }
        let done = |j: &str| matches!(job_state(j).as_str(), "COMPLETED" | "FAILED" | "");
        done(&mem) && done(&burn) && done(&two)
    });
    let burn_truth: f64 = cpu.values().sum();
    // The summaries come at the first collection after the cgroups are gone.
    for job in [&mem, &burn, &two] {
        let mut got = Vec::new();
        for _ in 0..10 {
            got = records(&logs, &group, &[(r::JOB_ID.name, job), (r::TYPE.name, kinds::JOB_SUMMARY)]).await;
            if !got.is_empty() {
                break;
            }
        }
        assert!(!got.is_empty(), "no summary of job {job}");
    }
    shipper_child.stop();

    let m = json_report(&url, &group, &mem);
    assert_eq!(m["job_id"], json!(mem));
    assert_eq!(
        (m["account"].as_str(), m["partition"].as_str(), m["nodes"].as_str()),
        (Some("physics"), Some("batch"), Some(c1))
    );
    assert_eq!(m["state"], json!("COMPLETED"));
    assert_eq!(m["incomplete"], json!(false));
    assert_eq!(m["per_node"][0]["source"], json!(kinds::JOB_SUMMARY));
    // 300 MiB touched by python, plus the interpreter and the shell (under 60 MiB).
    within("memory job peak (MiB)", m["memory_peak_bytes"].as_f64().unwrap_or(0.0) / MIB, 300.0, 360.0);
    within(
        "memory job request (MiB)",
        m["memory_requested_bytes"].as_f64().unwrap_or(0.0) / MIB,
        600.0,
        600.0,
    );
    within("memory job elapsed (s)", m["elapsed_seconds"].as_f64().unwrap_or(0.0), 29.0, 40.0);

    let b = json_report(&url, &group, &burn);
    assert_eq!((b["account"].as_str(), b["nodes"].as_str()), (Some("chemistry"), Some(c2)));
    // The summary holds the job's CPU counter at its last collection: at most one interval
    // (one core busy) short of the truth, never more than it (plus the shell's few ms).
    let got = b["cpu_seconds"].as_f64().unwrap_or(0.0);
    within("burn job CPU-seconds", got, burn_truth - interval - 0.5, burn_truth + 0.5);
    within("burn job cores", b["cores_allocated"].as_f64().unwrap_or(0.0), 1.0, 1.0);
    eprintln!("burn job CPU-seconds truth {burn_truth:.2}, reported {got:.2}");

    // What they cost at $3.60 an hour: half a node each (one CPU of two; the memory job's
    // 600 MB of 2000 is less), from Slurm's start to the last collection that saw them (at most
    // one interval before their end).
    let cost_within = |what: &str, got: f64, job: &str| {
        let held = slurm_held_seconds(job);
        let per_s = PRICE * 0.5 / 3600.0;
        within(what, got, per_s * (held - interval - 1.5), per_s * (held + 1.5));
    };
    cost_within("memory job cost ($)", m["cost_usd"].as_f64().unwrap_or(-1.0), &mem);
    assert_eq!(m["per_node"][0]["cost"]["basis"], json!("configured"), "{m:#}");
    assert_eq!(m["per_node"][0]["cost"]["share"], json!(0.5));
    let t = json_report(&url, &group, &two);
    let nodes = t["per_node"].as_array().map_or(0, Vec::len);
    assert_eq!(nodes, 2, "a summary per node: {t:#}");
    let per_node: Vec<f64> =
        (0..2).map(|i| t["per_node"][i]["cost"]["usd"].as_f64().unwrap_or(-1.0)).collect();
    for (i, c) in per_node.iter().enumerate() {
        cost_within(&format!("two-node job's cost on its node {i} ($)"), *c, &two);
    }
    let total = t["cost_usd"].as_f64().unwrap_or(-1.0);
    assert!(
        (total - per_node.iter().sum::<f64>()).abs() < 1e-9,
        "report adds its nodes up: {total} vs {per_node:?}"
    );
    // Account physics's JobCost, as the nodes added it flush by flush (the jobs started after the
    // daemon): what its two jobs' summaries say, within rounding.
    let cw = cloudwatch(&url).await;
    let physics = [("ClusterName", "reporttest"), ("Account", "physics")];
    let spent = statistic(&cw, &namespace, "JobCost", &physics, "Sum", Duration::from_secs(600)).await;
    let want = m["cost_usd"].as_f64().unwrap_or(0.0) + total;
    within("account physics's JobCost ($)", spent.unwrap_or(-1.0), want * 0.99, want * 1.01);

    // The text form: not a terminal here, so no colour.
    let (code, text, err) = report(&url, &group, &[&mem]);
    assert_eq!(code, Some(0), "{err}");
    assert!(text.contains("Per node:") && text.contains(c1) && !text.contains('\u{1b}'), "{text}");
    drop(cleanup);
}

/// A summary as the shipper writes it (transforms/jobs.rs `summary`).
fn summary(job: &str, node: &str, cpu: f64, cores: f64, elapsed: f64, peak: f64, req: f64) -> Value {
    let mut m = serde_json::Map::new();
    let now = now_rfc3339();
    for (f, v) in [
        (&r::TYPE, json!(kinds::JOB_SUMMARY)),
        (&r::RECORD_ID, json!(format!("{node}:{job}:summary"))),
        (&r::TIME, json!(now)),
        (&r::NODE_NAME, json!(node)),
        (&r::JOB_ID, json!(job)),
        (&r::USER, json!("alice")),
        (&r::ACCOUNT, json!("physics")),
        (&r::PARTITION, json!("batch")),
        (&r::SAMPLES, json!(10)),
        (&r::ELAPSED_SECONDS, json!(elapsed)),
        (&r::CPU_SECONDS, json!(cpu)),
        (&r::CORES_ALLOCATED, json!(cores)),
        (&r::CPU_EFFICIENCY, json!(cpu / (cores * elapsed) * 100.0)),
        (&r::MEMORY_PEAK, json!(peak)),
        (&r::MEMORY_REQUESTED, json!(req)),
        (&r::MEMORY_PEAK_PERCENT, json!(peak / req * 100.0)),
        (&r::FIRST_SEEN, json!(now)),
        (&r::LAST_SEEN, json!(now)),
        (&r::ENDED_BY, json!("cgroup_gone")),
    ] {
        m.insert(f.name.into(), v);
    }
    Value::Object(m)
}

async fn put(logs: &aws_sdk_cloudwatchlogs::Client, group: &str, stream: &str, rec: &Value) {
    logs.create_log_stream()
        .log_group_name(group)
        .log_stream_name(stream)
        .send()
        .await
        .expect("CreateLogStream");
    let ms = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default().as_millis() as i64;
    let event = aws_sdk_cloudwatchlogs::types::InputLogEvent::builder()
        .timestamp(ms)
        .message(rec.to_string())
        .build()
        .expect("an event");
    logs.put_log_events()
        .log_group_name(group)
        .log_stream_name(stream)
        .log_events(event)
        .send()
        .await
        .expect("PutLogEvents");
}

#[ignore = "needs LocalStack: scripts/test.sh runs it"]
#[tokio::test]
async fn a_two_node_job_adds_up_and_json_reads_back_field_by_field() {
    let Some(url) = localstack() else {
        return;
    };
    let logs = logs(&url).await;
    let group = job_log_group(&logs, "report-two").await;
    // No Slurm job has this id (past Slurm's largest), so the records alone speak.
    let job = "99999999";
    let a = summary(job, "c1", 3000.0, 8.0, 1000.0, 3.1 * GIB, 64.0 * GIB);
    let b = summary(job, "c2", 1000.0, 8.0, 1000.0, 5.0 * GIB, 64.0 * GIB);
    put(&logs, &group, "c1", &a).await;
    put(&logs, &group, "c2", &b).await;
    // Another job's record in the same group stays out.
    put(&logs, &group, "c3", &summary("9999999", "c3", 1.0, 1.0, 1.0, 1.0, 2.0)).await;
    let mut rep = Value::Null;
    for _ in 0..20 {
        rep = json_report(&url, &group, job);
        if rep["records"] == json!(2) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    eprintln!("{rep:#}");
    assert_eq!(rep["job_id"], json!(job));
    assert_eq!(rep["log_group"], json!(group));
    assert_eq!(rep["cluster"], json!("reporttest"));
    assert_eq!(rep["records"], json!(2));
    assert_eq!(
        (rep["user"].as_str(), rep["account"].as_str(), rep["partition"].as_str()),
        (Some("alice"), Some("physics"), Some("batch"))
    );
    assert_eq!(rep["nodes"], json!("c1,c2"));
    assert_eq!(rep["incomplete"], json!(false));
    assert_eq!(rep["cpu_seconds"], json!(4000.0), "sum of CPU-seconds");
    assert_eq!(rep["cores_allocated"], json!(16.0));
    assert_eq!(rep["cpu_efficiency_percent"], json!(25.0), "4000 / (16 x 1000)");
    assert_eq!(rep["memory_peak_bytes"], json!(5.0 * GIB), "max of peaks");
    assert_eq!(rep["memory_requested_bytes"], json!(64.0 * GIB));
    assert_eq!(rep["elapsed_seconds"], json!(1000.0));
    let rows = rep["per_node"].as_array().expect("per_node");
    assert_eq!(rows.len(), 2);
    for (row, (node, cpu, peak)) in rows.iter().zip([("c1", 3000.0, 3.1 * GIB), ("c2", 1000.0, 5.0 * GIB)]) {
        assert_eq!(row["node"], json!(node));
        assert_eq!(row["source"], json!(kinds::JOB_SUMMARY));
        assert_eq!(row["samples"], json!(10.0));
        assert_eq!(row["elapsed_seconds"], json!(1000.0));
        assert_eq!(row["cpu_seconds"], json!(cpu));
        assert_eq!(row["cores_allocated"], json!(8.0));
        assert_eq!(row["cpu_efficiency_percent"], json!(cpu / 8000.0 * 100.0));
        assert_eq!(row["memory_peak_bytes"], json!(peak));
        assert_eq!(row["memory_requested_bytes"], json!(64.0 * GIB));
        assert_eq!((row["gpus"].clone(), row["gpu_idle_percent"].clone()), (Value::Null, Value::Null));
    }
    assert_eq!(rep["gpus"], json!([]));
    let advice: Vec<&str> =
        rep["advice"].as_array().expect("advice").iter().filter_map(Value::as_str).collect();
    assert_eq!(
        advice,
        [
            "peak memory 5.0 GiB of 64.0 GiB requested: `--mem=6G` would do",
            "CPU efficiency 25% of 8 cores: try `-c 2`"
        ]
    );
}

#[ignore = "needs LocalStack: scripts/test.sh runs it"]
#[tokio::test]
async fn no_records_missing_group_and_bad_arguments() {
    let Some(url) = localstack() else {
        return;
    };
    let logs = logs(&url).await;
    let group = job_log_group(&logs, "report-empty").await;
    let (code, out, err) = report(&url, &group, &["99999998"]);
    assert_eq!((code, out.as_str()), (Some(1), ""), "{err}");
    assert!(
        err.contains("no records of job 99999998")
            && err.contains("collection interval")
            && err.contains("--cluster"),
        "{err}"
    );

    let missing = format!("/slurm-cw/{}/jobs", unique_namespace("absent").replace('/', "-"));
    let (code, _, err) = report(&url, &missing, &["99999998", "--json"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("does not exist") && err.contains(&missing), "{err}");

    for bad in [&["abc"][..], &[][..], &["1", "--bogus"][..]] {
        let (code, _, err) = report(&url, &group, bad);
        assert_eq!(code, Some(2), "{bad:?}: {err}");
    }
}

/// `report ARGS` run as `uid` (a copy of the binary it can reach, its own HOME), with `env`.
fn report_as(
    uid: u32,
    url: &str,
    group: &str,
    args: &[&str],
    env: &[(&str, &str)],
) -> (Option<i32>, String, String) {
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::process::CommandExt;
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let bin = dir.path().join("slurm-cw-shipper");
    std::fs::copy(env!("CARGO_BIN_EXE_slurm-cw-shipper"), &bin).unwrap();
    let mut cmd = std::process::Command::new(&bin);
    cmd.arg("report")
        .args(args)
        .envs(shipper_env(url, "SlurmTest/report"))
        .envs(env.iter().copied())
        .env("HOME", dir.path())
        .env("SLURM_CW_LOGS__GROUP", group)
        .env("SLURM_CW_CLUSTER_NAME", "reporttest")
        .uid(uid)
        .gid(uid);
    let out = past_etxtbsy(|| cmd.output()).expect("run the shipper as another user");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A user of the passwd database with an ordinary uid: (uid, name).
fn some_user() -> Option<(u32, String)> {
    let out = std::process::Command::new("getent").arg("passwd").output().ok()?;
    String::from_utf8_lossy(&out.stdout).lines().find_map(|l| {
        let f: Vec<&str> = l.split(':').collect();
        let uid: u32 = f.get(2)?.parse().ok()?;
        (1000..65534).contains(&uid).then(|| (uid, f[0].to_owned()))
    })
}

#[ignore = "needs LocalStack: scripts/test.sh runs it"]
#[tokio::test]
async fn a_user_reads_their_own_jobs_only_unless_configured() {
    let Some(url) = localstack() else {
        return;
    };
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("SKIPPED: needs root (to run report as other users)");
        return;
    }
    // A user the host knows (the job's user is named), and one it does not (named by uid).
    let named = some_user();
    let logs = logs(&url).await;
    let group = job_log_group(&logs, "report-access").await;
    let mut alices = summary("99999990", "c1", 100.0, 1.0, 100.0, GIB, 2.0 * GIB);
    put(&logs, &group, "c1", &alices).await;
    let mut own = alices.clone();
    own[r::JOB_ID.name] = json!("99999991");
    own[r::USER.name] = json!("4242");
    put(&logs, &group, "c2", &own).await;
    if let Some((_, name)) = &named {
        alices[r::JOB_ID.name] = json!("99999992");
        alices[r::USER.name] = json!(name);
        put(&logs, &group, "c3", &alices).await;
    }
    // Records are searchable a little after they are put: root sees them all first.
    for job in ["99999990", "99999991"] {
        wait_until(&format!("job {job}'s record"), Duration::from_secs(20), || {
            report(&url, &group, &[job, "--json"]).0 == Some(0)
        });
    }

    // Another user's job: refused, saying whose and how to open it; no report printed.
    let (code, out, err) = report_as(4242, &url, &group, &["99999990"], &[]);
    assert_eq!((code, out.as_str()), (Some(1), ""), "{err}");
    assert!(err.contains("alice's") && err.contains("logs.report_all_users"), "{err}");
    // The caller's own (the records name it by uid): shown.
    let (code, out, err) = report_as(4242, &url, &group, &["99999991", "--json"], &[]);
    assert_eq!(code, Some(0), "{err}");
    let rep: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(rep["user"], json!("4242"));
    // Configured to show everyone's.
    let all = [("SLURM_CW_LOGS__REPORT_ALL_USERS", "true")];
    let (code, out, err) = report_as(4242, &url, &group, &["99999990", "--json"], &all);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(serde_json::from_str::<Value>(&out).unwrap()["user"], json!("alice"));
    // A named user's own job, by name.
    if let Some((uid, name)) = named {
        wait_until("the named user's record", Duration::from_secs(20), || {
            report(&url, &group, &["99999992", "--json"]).0 == Some(0)
        });
        let (code, out, err) = report_as(uid, &url, &group, &["99999992", "--json"], &[]);
        assert_eq!(code, Some(0), "{name}: {err}");
        assert_eq!(serde_json::from_str::<Value>(&out).unwrap()["user"], json!(name));
    }
}

/// An array task is found by the name users know (`<array job>_<task>`): while Slurm knows the
/// task, through its own job id; its records carry the name too (`ArrayTask`).
#[allow(clippy::await_holding_lock)]
#[ignore = "needs LocalStack and the Slurm bench: scripts/test.sh runs it"]
#[tokio::test]
async fn an_array_task_is_reported_by_its_name() {
    let (Some(url), Some(conf)) = (localstack(), slurm()) else {
        return;
    };
    let _lock = SLURM_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let node = nodes()[2].clone();
    let logs = logs(&url).await;
    let group = job_log_group(&logs, "report-array").await;
    let shipper_child = shipper()
        .args(["--role", "node"])
        .envs(shipper_env(&url, &unique_namespace("report-array")))
        .env("SLURM_CW_LOGS__GROUP", &group)
        .env("SLURM_CW_CLUSTER_NAME", "reportarray")
        .env("SLURM_CW_COLLECT_INTERVAL", "2s")
        .env("SLURM_CW_FLUSH_INTERVAL", "4s")
        .env("SLURM_CW_CLOUDWATCH__FLUSH_JITTER", "false")
        .env("SLURM_CW_NODE__HOOK_SOCKET", bench_dir(&conf).join("hook-report-array.sock"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map(Running::new)
        .expect("start the shipper");
    let array = sbatch(&["-p", "batch", "-w", &node, "-A", "physics", "--array=3-4", "--wrap", "sleep 60"]);
    let _cleanup = SlurmCleanup { jobs: vec![array.clone()], nodes: Vec::new() };
    let name = format!("{array}_4");
    // The task's own job id, as Slurm gives it.
    let mut raw = String::new();
    wait_until("the array task to run", Duration::from_secs(60), || {
        raw = cmd("squeue", &["-h", "-o", "%A %T", "-j", &name])
            .split_whitespace()
            .collect::<Vec<_>>()
            .chunks(2)
            .find(|w| w.get(1) == Some(&"RUNNING"))
            .map(|w| w[0].to_owned())
            .unwrap_or_default();
        !raw.is_empty()
    });
    let mut got = Vec::new();
    for _ in 0..120 {
        got = records(&logs, &group, &[(r::JOB_ID.name, raw.as_str()), (r::TYPE.name, kinds::JOB_SAMPLE)])
            .await;
        if !got.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert!(!got.is_empty(), "no samples of task {name} (job {raw})");
    assert_eq!(got[0][r::ARRAY_TASK.name], json!(name), "{:#}", got[0]);
    // Stopped (its last flush delivered): both reports read the same records.
    shipper_child.stop();
    let by_name = json_report(&url, &group, &name);
    let by_id = json_report(&url, &group, &raw);
    assert_eq!(by_name["per_node"][0]["node"], json!(node), "{by_name:#}");
    assert_eq!(by_name["records"], by_id["records"], "the same records either way");
    assert_eq!(by_name["account"], json!("physics"));
}

/// Records of one job into `group`, a stream per node, in one PutLogEvents a node.
async fn put_all(logs: &aws_sdk_cloudwatchlogs::Client, group: &str, recs: &[Value]) {
    let mut by_node: std::collections::BTreeMap<String, Vec<&Value>> = std::collections::BTreeMap::new();
    for r in recs {
        by_node.entry(r[r::NODE_NAME.name].as_str().unwrap_or("unknown").to_owned()).or_default().push(r);
    }
    let ms = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default().as_millis() as i64;
    for (node, recs) in by_node {
        logs.create_log_stream()
            .log_group_name(group)
            .log_stream_name(&node)
            .send()
            .await
            .expect("CreateLogStream");
        let events = recs.iter().enumerate().map(|(i, rec)| {
            aws_sdk_cloudwatchlogs::types::InputLogEvent::builder()
                .timestamp(ms + i as i64)
                .message(rec.to_string())
                .build()
                .expect("an event")
        });
        logs.put_log_events()
            .log_group_name(group)
            .log_stream_name(&node)
            .set_log_events(Some(events.collect()))
            .send()
            .await
            .expect("PutLogEvents");
    }
}

/// `tmux ARGS` on the test's own server, with only `env` in its environment.
fn tmux(socket: &str, args: &[&str]) -> std::process::Output {
    std::process::Command::new("tmux")
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("TERM", "xterm-256color")
        .args(["-u", "-L", socket, "-f", "/dev/null"])
        .args(args)
        .output()
        .expect("run tmux")
}

/// The "Over time" block of a report's text, line ends trimmed (tmux trims them).
fn over_time(text: &str) -> Vec<String> {
    text.lines()
        .skip_while(|l| !l.starts_with("Over time"))
        .take_while(|l| !l.trim().is_empty())
        .map(|l| l.trim_end().to_owned())
        .collect()
}

#[ignore = "needs LocalStack and tmux: scripts/test.sh runs it"]
#[tokio::test]
async fn in_a_60_column_terminal_the_sparklines_fit_as_rendered() {
    let Some(url) = localstack() else {
        return;
    };
    if std::process::Command::new("tmux").arg("-V").output().is_err() {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "tmux is not installed and CI=true requires it"
        );
        eprintln!("SKIPPED: tmux is not installed");
        return;
    }
    let logs = logs(&url).await;
    let group = job_log_group(&logs, "report-tmux").await;
    let job = "99999998";
    let mut recs = crate::report_render::records("two-nodes-gpus.jsonl");
    for rec in &mut recs {
        rec[r::JOB_ID.name] = json!(job);
    }
    put_all(&logs, &group, &recs).await;
    for _ in 0..40 {
        if json_report(&url, &group, job)["records"] == json!(recs.len()) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    // The report as a user at a 60-column terminal runs it.
    let mut cmd = shipper();
    cmd.envs(shipper_env(&url, "SlurmTest/report"))
        .env("SLURM_CW_LOGS__GROUP", &group)
        .env("SLURM_CW_CLUSTER_NAME", "reporttest");
    let env: Vec<String> =
        cmd.get_envs().filter_map(|(k, v)| Some(format!("{}={}", k.to_str()?, v?.to_str()?))).collect();
    let socket = format!("slurm-cw-report-{}", std::process::id());
    let program = env!("CARGO_BIN_EXE_slurm-cw-shipper");
    let mut args: Vec<&str> = vec!["new-session", "-d", "-s", "report", "-x", "60", "-y", "60"];
    for e in &env {
        args.extend(["-e", e.as_str()]);
    }
    args.extend([program, "report", job]);
    // The pane stays after the report exits, to be read.
    let started = tmux(&socket, &["new-session", "-d", "-s", "keep", "-x", "60", "-y", "10", "sleep", "60"]);
    assert!(started.status.success(), "tmux: {}", String::from_utf8_lossy(&started.stderr));
    let set = tmux(&socket, &["set-option", "-g", "remain-on-exit", "on"]);
    assert!(set.status.success(), "{}", String::from_utf8_lossy(&set.stderr));
    let out = tmux(&socket, &args);
    assert!(out.status.success(), "tmux new-session: {}", String::from_utf8_lossy(&out.stderr));
    let mut dead = false;
    for _ in 0..120 {
        let d = tmux(&socket, &["display-message", "-p", "-t", "report", "#{pane_dead}"]);
        if String::from_utf8_lossy(&d.stdout).trim() == "1" {
            dead = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let screen =
        String::from_utf8_lossy(&tmux(&socket, &["capture-pane", "-p", "-J", "-t", "report"]).stdout)
            .into_owned();
    let _ = tmux(&socket, &["kill-server"]);
    assert!(dead, "the report did not finish in 30 s:\n{screen}");
    eprintln!("{screen}");
    let mut want = slurm_cw_shipper::report::model::combine(job, &recs);
    want.advice = slurm_cw_shipper::report::model::advise(&want);
    let want = slurm_cw_shipper::report::render::text_width(&want, false, 60);
    let (got, want) = (over_time(&screen), over_time(&want));
    assert!(got.len() >= 9, "a header and 8 series:\n{screen}");
    assert_eq!(got, want, "tmux shows what the report renders at 60 columns");
    for line in &got {
        assert!(line.chars().count() <= 60, "{line:?}");
    }
}
