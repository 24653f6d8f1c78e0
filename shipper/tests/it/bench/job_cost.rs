//! What jobs cost: real Slurm jobs with known allocations on nodes of known size (the bench's
//! nodes: 2 CPUs and 2000 MB each) at a configured price, their `CostUsd` checked against
//! price x share x hours held, computed here by hand (a job whose user filled its name and
//! environment with sizes and prices included); a Spot price through LocalStack's EC2
//! (`DescribeSpotPriceHistory`) and a loopback IMDSv2; bad prices refused with the key named.

use crate::common;

use common::*;
use serde_json::Value;
use slurm_cw_formats::record::Record;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::process::Command;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

const PRICE: f64 = 3.6;

fn now() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs_f64()
}

/// When Slurm says `job` started, in seconds since the epoch (squeue prints local time).
fn slurm_start(job: &str) -> f64 {
    let text = cmd("squeue", &["-h", "-j", job, "-o", "%S"]);
    let out = Command::new("date").args(["-d", text.trim(), "+%s"]).output().unwrap();
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
}

/// The shares below are of the default bench's nodes (2 CPUs, 2000 MB each, memory constrained);
/// `--profile dense` gives the first node 40 CPUs, `pcluster` constrains no memory.
fn assert_default_nodes() {
    let profile = std::env::var("BENCH_SLURM_PROFILE").unwrap_or_default();
    assert!(
        profile.is_empty() || profile == "default",
        "the bench runs the {profile:?} profile: these shares are of the default profile's nodes (2 CPUs, 2000 MB); restart it with `scripts/bench/slurm.sh start`"
    );
}

/// The records of one `--once` of the node role at the configured price.
fn once_records(cluster: &str) -> Vec<Value> {
    let run = shipper()
        .args(["--once", "--role", "node", "--sink", "stdout"])
        .env("SLURM_CW_CLUSTER_NAME", cluster)
        .env("SLURM_CW_COST__HOURLY_PRICE", PRICE.to_string())
        .output()
        .unwrap();
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    String::from_utf8_lossy(&run.stdout)
        .lines()
        .filter_map(|l| Record::from_json_line(l).ok())
        .filter_map(|r| serde_json::from_str(&r.message).ok())
        .collect()
}

/// The node role's daemon at the configured price, a collection and a flush a second, its job
/// records on its standard output (piped), run in `dir` (its hook socket there).
fn costing_daemon(cluster: &str, dir: &std::path::Path) -> Running {
    shipper()
        .args(["--role", "node", "--sink", "stdout"])
        .env("SLURM_CW_CLUSTER_NAME", cluster)
        .env("SLURM_CW_COLLECT_INTERVAL", "1s")
        .env("SLURM_CW_FLUSH_INTERVAL", "1s")
        .env("SLURM_CW_DELIVERY__FLUSH_JITTER", "false")
        .env("SLURM_CW_COST__HOURLY_PRICE", PRICE.to_string())
        .env("SLURM_CW_NODE__HOOK_SOCKET", dir.join("hook.sock"))
        .current_dir(dir)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .map(Running::new)
        .unwrap()
}

#[ignore = "needs the Slurm bench: scripts/test.sh runs it"]
#[test]
fn a_jobs_cost_is_price_times_share_times_the_time_it_held_the_node() {
    let Some(conf) = slurm() else { return };
    let _lock = SLURM_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    assert_default_nodes();
    let n = nodes();
    // One CPU of two and a quarter of the memory: half the node. All of a node. One CPU on
    // each of two nodes: half of each.
    // Its user names it and fills its environment with what a naive reader would take for its
    // size: no figure moves (Slurm's allocation and the node's size decide).
    let shared = sbatch(&[
        "-p",
        "batch",
        "-w",
        &n[0],
        "-c",
        "1",
        "--mem=500M",
        "--job-name",
        "w CPUTot=1 RealMemory=1 Share=1 CostUsd=0",
        "--export",
        "ALL,SLURM_CPUS_ON_NODE=2,SLURM_JOB_CPUS_PER_NODE=2,SLURM_MEM_PER_NODE=2000,SLURM_CW_COST__HOURLY_PRICE=0",
        "--wrap",
        "sleep 300",
    ]);
    let exclusive = sbatch(&["-p", "batch", "-w", &n[1], "--exclusive", "--mem=100M", "--wrap", "sleep 300"]);
    let two = sbatch(&["-p", "debug", "-N", "2", "-c", "1", "--mem=200M", "--wrap", "srun sleep 300"]);
    let _cleanup =
        SlurmCleanup { jobs: vec![shared.clone(), exclusive.clone(), two.clone()], nodes: Vec::new() };
    let jobs = [&shared, &exclusive, &two];
    wait_until("the jobs to run", Duration::from_secs(60), || jobs.iter().all(|j| job_state(j) == "RUNNING"));
    // Some time held, so that a cent is well above rounding.
    let started: Vec<f64> = jobs.iter().map(|j| slurm_start(j)).collect();
    wait_until("10 s held", Duration::from_secs(30), || started.iter().all(|s| now() - s >= 10.0));
    let before = now();
    let records = once_records("costtest");
    let after = now();
    let _ = conf;
    for (job, start, share, nodes) in
        [(&shared, started[0], 0.5, 1), (&exclusive, started[1], 1.0, 1), (&two, started[2], 0.5, 2)]
    {
        let samples: Vec<&Value> =
            records.iter().filter(|r| r["JobId"] == job.as_str() && r["Type"] == "job_sample").collect();
        assert_eq!(samples.len(), nodes, "a sample per node of job {job}: {records:?}");
        for s in samples {
            assert_eq!(
                (s["HourlyPrice"].as_f64(), s["CostBasis"].as_str()),
                (Some(PRICE), Some("configured")),
                "{s}"
            );
            assert_eq!(s["Share"].as_f64(), Some(share), "job {job}: {s}");
            // Held from Slurm's start to the collection, which came between `before` and `after`.
            let cost = s["CostUsd"].as_f64().unwrap_or(-1.0);
            let (low, high) =
                (PRICE * share * (before - start) / 3600.0, PRICE * share * (after - start) / 3600.0);
            eprintln!("job {job} on {}: ${cost:.6}, expected ${low:.6} to ${high:.6}", s["NodeName"]);
            assert!(cost >= low * 0.99 && cost <= high * 1.01, "job {job}: {cost} not in {low}..{high}: {s}");
        }
    }
}

#[test]
fn bad_prices_are_refused_with_the_key_named() {
    for (var, value, key) in [
        ("SLURM_CW_COST__HOURLY_PRICE", "-1.5", "cost.hourly_price"),
        ("SLURM_CW_COST__HOURLY_PRICE", "nan", "cost.hourly_price"),
        ("SLURM_CW_COST__HOURLY_PRICE", "cheap", "hourly_price"),
    ] {
        let out = shipper().args(["--once", "--sink", "stdout"]).env(var, value).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{value}: {err}");
        assert!(err.contains(key), "{value}: {err}");
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("config.toml");
    std::fs::write(&file, "[cost]\nprices = { \"c5.xlarge\" = -0.17 }\n").unwrap();
    let out = shipper().args(["--once", "--sink", "stdout", "--config"]).arg(&file).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("cost.prices.c5.xlarge"), "{err}");
}

/// A loopback IMDSv2 (there is none off EC2): a token for a PUT, then the metadata asked for
/// with it, of a Spot c5.xlarge in us-east-1a. Answers `requests` requests, then stops.
fn imds(requests: usize) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for stream in listener.incoming().take(requests) {
            let Ok(mut s) = stream else { continue };
            let mut buf = [0u8; 4096];
            let n = s.read(&mut buf).unwrap_or(0);
            let req = String::from_utf8_lossy(&buf[..n]).to_ascii_lowercase();
            let path = req.split_whitespace().nth(1).unwrap_or("").to_owned();
            let token_ok = req.contains("x-aws-ec2-metadata-token: t0ken");
            let body = match path.as_str() {
                "/latest/api/token" if req.starts_with("put") => Some("t0ken"),
                _ if !token_ok => None,
                "/latest/meta-data/instance-type" => Some("c5.xlarge"),
                "/latest/meta-data/placement/availability-zone" => Some("us-east-1a"),
                "/latest/meta-data/placement/region" => Some("us-east-1"),
                "/latest/meta-data/instance-life-cycle" => Some("spot"),
                _ => None,
            };
            let reply = match body {
                Some(b) => {
                    format!("HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{b}", b.len())
                }
                None => "HTTP/1.1 401 Unauthorized\r\ncontent-length: 0\r\nconnection: close\r\n\r\n".into(),
            };
            let _ = s.write_all(reply.as_bytes());
        }
    });
    url
}

/// LocalStack's EC2 answers DescribeSpotPriceHistory with one made-up price for every known
/// instance type (0.00001 dollars, dated 2006): the path (IMDSv2, the signed EC2 query, the XML
/// read) and the arithmetic are what this shows, not a real price. It has no Price List API:
/// the On-Demand answer is read from a fixture built from AWS's documentation (formats).
#[ignore = "needs LocalStack and the Slurm bench: scripts/test.sh runs it"]
#[test]
fn a_spot_instance_is_priced_by_ec2s_spot_price() {
    let Some(url) = localstack() else { return };
    let Some(_conf) = slurm() else { return };
    let _lock = SLURM_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let n = nodes();
    let job = sbatch(&["-p", "batch", "-w", &n[0], "--exclusive", "--mem=100M", "--wrap", "sleep 300"]);
    let _cleanup = SlurmCleanup { jobs: vec![job.clone()], nodes: Vec::new() };
    wait_until("the job to run", Duration::from_secs(60), || job_state(&job) == "RUNNING");
    let start = slurm_start(&job);
    wait_until("5 s held", Duration::from_secs(30), || now() - start >= 5.0);
    let before = now();
    let run = shipper()
        .args(["--once", "--role", "node", "--sink", "stdout"])
        .env("SLURM_CW_CLUSTER_NAME", "spottest")
        .env("AWS_EC2_METADATA_SERVICE_ENDPOINT", imds(16))
        .env("AWS_EC2_METADATA_DISABLED", "false")
        .env("AWS_ENDPOINT_URL_EC2", &url)
        .env("AWS_ACCESS_KEY_ID", "test")
        .env("AWS_SECRET_ACCESS_KEY", "test")
        .env("AWS_REGION", "us-east-1")
        .output()
        .unwrap();
    let after = now();
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    let sample: Value = String::from_utf8_lossy(&run.stdout)
        .lines()
        .filter_map(|l| Record::from_json_line(l).ok())
        .filter_map(|r| serde_json::from_str::<Value>(&r.message).ok())
        .find(|v| v["JobId"] == job.as_str() && v["Type"] == "job_sample")
        .unwrap_or_else(|| panic!("no sample: {}", String::from_utf8_lossy(&run.stderr)));
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(sample["CostBasis"], "spot", "{sample}\n{stderr}");
    assert_eq!((sample["HourlyPrice"].as_f64(), sample["Share"].as_f64()), (Some(0.00001), Some(1.0)));
    let cost = sample["CostUsd"].as_f64().unwrap();
    let (low, high) = (0.00001 * (before - start) / 3600.0, 0.00001 * (after - start) / 3600.0);
    assert!(cost >= low * 0.99 && cost <= high * 1.01, "{cost} not in {low}..{high}");
}

/// Slurm requeues a job (as it does when a Spot node is reclaimed) and it runs again on the
/// same node: the same job id, a new start. The daemon, running through both, writes a summary
/// per run, each with its own RecordId and its own cost from its own Slurm start; before, the
/// second run's summary had the first's RecordId and replaced it wherever the latest wins.
#[ignore = "needs the Slurm bench: scripts/test.sh runs it"]
#[test]
fn a_job_requeued_onto_the_same_node_has_a_costed_summary_per_run() {
    use std::io::BufRead;
    use std::sync::{Arc, Mutex};
    let Some(_conf) = slurm() else { return };
    let _lock = SLURM_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let mut daemon = costing_daemon("requeuetest", dir.path());
    let seen: Arc<Mutex<Vec<Value>>> = Arc::default();
    let (out, keep) = (daemon.child().stdout.take().unwrap(), seen.clone());
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(out).lines().map_while(Result::ok) {
            if let Some(v) =
                Record::from_json_line(&line).ok().and_then(|r| serde_json::from_str(&r.message).ok())
            {
                keep.lock().unwrap_or_else(|e| e.into_inner()).push(v);
            }
        }
    });
    let job = sbatch(&[
        "-p",
        "batch",
        "-w",
        &nodes()[0],
        "--requeue",
        "-c",
        "1",
        "--mem=100M",
        "--wrap",
        "sleep 300",
    ]);
    let _cleanup = SlurmCleanup { jobs: vec![job.clone()], nodes: Vec::new() };
    let of_job = |kind: &str| -> Vec<Value> {
        let all = seen.lock().unwrap_or_else(|e| e.into_inner());
        all.iter().filter(|v| v["JobId"] == job.as_str() && v["Type"] == kind).cloned().collect()
    };
    wait_until("the job to run", Duration::from_secs(60), || job_state(&job) == "RUNNING");
    let first = slurm_start(&job) as u64;
    wait_until("a costed sample of the first run", Duration::from_secs(60), || {
        of_job("job_sample").iter().any(|s| s["CostUsd"].as_f64().is_some_and(|c| c > 0.0))
    });
    let first_start =
        of_job("job_sample").iter().rev().find_map(|s| s["SlurmStart"].as_str().map(str::to_owned));
    let first_start = first_start.expect("Slurm's start in the samples");
    cmd("scontrol", &["requeue", &job]);
    // Slurm holds a requeued job back (BeginTime) a while: let it start again now.
    wait_until("the job to be pending again", Duration::from_secs(60), || job_state(&job) == "PENDING");
    wait_until("the first run's summary", Duration::from_secs(60), || !of_job("job_summary").is_empty());
    cmd("scontrol", &["update", &format!("jobid={job}"), "starttime=now"]);
    wait_until("the job to run again", Duration::from_secs(120), || job_state(&job) == "RUNNING");
    let second = slurm_start(&job) as u64;
    assert_ne!(first, second, "a new start for the new run");
    wait_until("a costed sample of the second run", Duration::from_secs(60), || {
        of_job("job_sample").iter().any(|s| {
            s["SlurmStart"] != first_start.as_str() && s["CostUsd"].as_f64().is_some_and(|c| c > 0.0)
        })
    });
    cmd("scancel", &[&job]);
    wait_until("the second run's summary", Duration::from_secs(60), || {
        let ids: std::collections::BTreeSet<String> =
            of_job("job_summary").iter().filter_map(|s| s["RecordId"].as_str().map(str::to_owned)).collect();
        ids.len() >= 2
    });
    drop(daemon);
    let summaries = of_job("job_summary");
    let mut runs: Vec<(String, String, f64)> = summaries
        .iter()
        .map(|s| {
            let id = s["RecordId"].as_str().unwrap_or_default().to_owned();
            (
                id,
                s["SlurmStart"].as_str().unwrap_or_default().to_owned(),
                s["CostUsd"].as_f64().unwrap_or(0.0),
            )
        })
        .collect();
    runs.dedup_by(|a, b| a.0 == b.0);
    eprintln!("job {job}: runs {runs:?}");
    assert_eq!(runs.len(), 2, "{summaries:?}");
    assert_ne!(runs[0].1, runs[1].1, "each run's own Slurm start: {runs:?}");
    for ((id, start, usd), squeue) in runs.iter().zip([first, second]) {
        assert!(id.ends_with(&format!(":{job}:{squeue}:summary")), "{id} names its run's start {start}");
        assert!(*usd > 0.0, "each run is costed: {runs:?}");
    }
}

#[ignore = "needs the Slurm bench: scripts/test.sh runs it"]
#[test]
fn a_suspended_job_is_billed_for_its_memory_alone_while_slurm_lends_its_cpus() {
    let Some(_conf) = slurm() else { return };
    let _lock = SLURM_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    assert_default_nodes();
    let n = nodes();
    // One CPU of two (half the node) and 500 MB of 2000 (a quarter), burning its CPU.
    let job = sbatch(&["-p", "batch", "-w", &n[0], "-c", "1", "--mem=500M", "--wrap", "while :; do :; done"]);
    let _cleanup = SlurmCleanup { jobs: vec![job.clone()], nodes: Vec::new() };
    wait_until("the job to run", Duration::from_secs(60), || job_state(&job) == "RUNNING");
    let tmp = tempfile::tempdir().unwrap();
    let mut daemon = costing_daemon("suspendtest", tmp.path());
    let lines = daemon.stdout_lines();
    let sample = |line: String| {
        let v: Value = serde_json::from_str(&Record::from_json_line(&line).ok()?.message).ok()?;
        (v["JobId"] == job.as_str() && v["Type"] == "job_sample").then_some(v)
    };
    // The next sample that `want` accepts, within a minute.
    let next = |what: &str, want: &dyn Fn(&Value) -> bool| -> Value {
        let end = std::time::Instant::now() + Duration::from_secs(60);
        loop {
            let left = end.saturating_duration_since(std::time::Instant::now());
            match lines.recv_timeout(left).map(sample) {
                Ok(Some(v)) if want(&v) => return v,
                Ok(_) => {}
                Err(e) => panic!("no sample of job {job} {what}: {e}"),
            }
        }
    };
    let running = next("running", &|v| v["Share"].as_f64() == Some(0.5));
    assert!(running.get("SuspendedSeconds").is_none(), "{running}");
    cmd("scontrol", &["suspend", &job]);
    wait_until("Slurm to say suspended", Duration::from_secs(30), || job_state(&job) == "SUSPENDED");
    // Suspended: billed its memory's quarter; between two such samples the cost grew by exactly
    // the price x 0.25 x the seconds suspended between them.
    let first = next("suspended", &|v| v["Share"].as_f64() == Some(0.25));
    let second = next("suspended for longer", &|v| {
        v["Share"].as_f64() == Some(0.25)
            && v["SuspendedSeconds"].as_f64() > first["SuspendedSeconds"].as_f64()
    });
    let figure = |v: &Value, f: &str| v[f].as_f64().unwrap_or_else(|| panic!("{f} in {v}"));
    let seconds = figure(&second, "SuspendedSeconds") - figure(&first, "SuspendedSeconds");
    let grown = figure(&second, "CostUsd") - figure(&first, "CostUsd");
    let want = PRICE * 0.25 * seconds / 3600.0;
    eprintln!("suspended {seconds:.3} s more: ${grown:.6}, by hand ${want:.6}; {second}");
    assert!((grown - want).abs() <= 2e-6, "cost grew ${grown} in {seconds} s suspended, want ${want}");
    assert_eq!(second["CpuUsage"].as_f64(), Some(0.0), "its CPU time stood still: {second}");
    cmd("scontrol", &["resume", &job]);
    let resumed = next("resumed", &|v| v["Share"].as_f64() == Some(0.5));
    assert!(figure(&resumed, "SuspendedSeconds") >= figure(&second, "SuspendedSeconds"), "{resumed}");
    drop(daemon);
}
