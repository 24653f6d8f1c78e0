//! `slurm-cw-shipper report <jobid>`: real jobs shipped to LocalStack and read back; records
//! written by hand (`written`) and the report in a terminal (`terminal`).

mod terminal;
mod written;

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
