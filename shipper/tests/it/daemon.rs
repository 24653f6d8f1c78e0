//! The daemon loop: samples between flushes are aggregated, and SIGTERM flushes what is
//! buffered before a clean exit.

use crate::common::{Running, shipper, wait_until};
use slurm_cw_catalog::metrics::{SHIPPER_COLLECTION_DURATION, SHIPPER_MEMORY_RSS};
use slurm_cw_shipper::app::SHUTDOWN_GRACE;
use slurm_cw_shipper::datum::{Datum, DatumValue};
use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::sync::mpsc;
use std::time::{Duration, Instant};

#[test]
fn a_closed_standard_output_stops_the_daemon_instead_of_piling_up() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = shipper()
        .args(["--role", "node", "--sink", "stdout"])
        .env("SLURM_CW_CLUSTER_NAME", "pipe-test")
        .env("SLURM_CW_COLLECT_INTERVAL", "1s")
        .env("SLURM_CW_FLUSH_INTERVAL", "1s")
        .env("SLURM_CW_CLOUDWATCH__FLUSH_JITTER", "false")
        .env("SLURM_CW_NODE__CGROUP_ROOT", dir.path())
        .env("SLURM_CW_NODE__HOOK_SOCKET", dir.path().join("hook.sock"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map(Running::new)
        .unwrap();
    drop(child.child().stdout.take());
    let mut status = None;
    wait_until("the daemon to stop with nowhere to write", Duration::from_secs(60), || {
        status = child.child().try_wait().unwrap();
        status.is_some()
    });
    assert_eq!(status.and_then(|s| s.code()), Some(0), "a closed pipe ends it quietly, as Unix tools do");
}

/// Collections the daemon logged (`collected`, at debug level) on `stderr`, sent one by one as
/// they happen, then the whole of stderr once it closes.
fn collections(stderr: std::process::ChildStderr) -> (mpsc::Receiver<()>, std::thread::JoinHandle<String>) {
    let (tx, rx) = mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut all = String::new();
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if line.contains("slurm_cw_shipper::pipeline") && line.contains("collected") {
                let _ = tx.send(());
            }
            all.push_str(&line);
            all.push('\n');
        }
        all
    });
    (rx, reader)
}

#[test]
fn sigterm_flushes_aggregated_samples_then_exits_0() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = shipper()
        .args(["--role", "node", "--sink", "stdout"])
        .env("SLURM_CW_CLUSTER_NAME", "daemon-test")
        .env("SLURM_CW_COLLECT_INTERVAL", "1s")
        .env("SLURM_CW_FLUSH_INTERVAL", "10m")
        .env("SLURM_CW_CLOUDWATCH__FLUSH_JITTER", "false")
        .env("SLURM_CW_NODE__CGROUP_ROOT", dir.path())
        .env("SLURM_CW_NODE__HOOK_SOCKET", dir.path().join("hook.sock"))
        .env("RUST_LOG", "warn,slurm_cw_shipper::pipeline=debug")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map(Running::new)
        .unwrap();
    // Four collections, however long this machine takes for them; none flushed (10 min).
    let (seen, reader) = collections(child.child().stderr.take().unwrap());
    for n in 1..=4 {
        seen.recv_timeout(Duration::from_secs(60)).unwrap_or_else(|e| panic!("collection {n}: {e}"));
    }
    assert!(child.child().try_wait().unwrap().is_none(), "still running");
    let started = Instant::now();
    let out = child.stop();
    assert!(started.elapsed() < SHUTDOWN_GRACE + Duration::from_secs(10), "stops promptly");
    let stderr = reader.join().unwrap();
    let collected = stderr.lines().filter(|l| l.contains("collected")).count();

    let datums: Vec<Datum> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| Datum::from_json_line(l).expect("a datum line").1)
        .collect();
    // One sample a collection, every one of them in what SIGTERM flushed: one datum a minute
    // (two when the collections straddle a minute's end).
    let rss: Vec<&Datum> = datums.iter().filter(|d| d.metric == SHIPPER_MEMORY_RSS.name).collect();
    assert!(!rss.is_empty() && rss.len() <= 2, "ShipperMemoryRss: {rss:?}");
    let mut count = 0.0;
    for d in &rss {
        let (n, lo, hi) = match &d.value {
            DatumValue::Stats { stats } => (stats.count, stats.min, stats.max),
            DatumValue::Value { value } => (1.0, *value, *value),
            other => panic!("expected statistic values, got {other:?}"),
        };
        assert!(lo > 1e6 && hi < 500e6, "a plausible RSS: {d:?}");
        count += n;
        assert_eq!(d.dimension("ClusterName"), Some("daemon-test"));
        assert_eq!(d.dimension("NodeName"), None, "across the cluster unless self_metrics_per_node");
    }
    assert!(collected >= 4 && count == collected as f64, "{collected} collections: {rss:?}");
    assert!(datums.iter().any(|d| d.metric == SHIPPER_COLLECTION_DURATION.name));
}

#[test]
fn once_beside_the_daemon_leaves_its_spool_alone() {
    let dir = tempfile::tempdir().unwrap();
    let spool = dir.path().join("spool");
    let env = |c: &mut std::process::Command| {
        c.args(["--role", "node"])
            .env("SLURM_CW_CLUSTER_NAME", "lock-test")
            .env("SLURM_CW_SPOOL__DIR", &spool)
            .env("SLURM_CW_NODE__CGROUP_ROOT", dir.path())
            .env("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
            .env("AWS_ACCESS_KEY_ID", "test")
            .env("AWS_SECRET_ACCESS_KEY", "test")
            .env("AWS_REGION", "us-east-1")
            .env("AWS_EC2_METADATA_DISABLED", "true")
            .env("SLURM_CW_CLOUDWATCH__MAX_RETRIES", "0");
    };
    let mut daemon = shipper();
    env(&mut daemon);
    let mut daemon = daemon
        .env("SLURM_CW_COLLECT_INTERVAL", "1s")
        .env("SLURM_CW_FLUSH_INTERVAL", "1s")
        .env("SLURM_CW_CLOUDWATCH__FLUSH_JITTER", "false")
        .env("SLURM_CW_NODE__HOOK_SOCKET", dir.path().join("hook.sock"))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map(Running::new)
        .unwrap();
    let spooled = || {
        std::fs::read_dir(&spool).map_or(0, |d| {
            d.flatten().filter(|e| e.file_name().to_string_lossy().ends_with(".spool")).count()
        })
    };
    wait_until("the daemon to spool what it cannot send", Duration::from_secs(60), || spooled() >= 2);
    let mut once = shipper();
    env(&mut once);
    let out = once.arg("--once").output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(&format!("in use by process {}", daemon.pid())), "{stderr}");
    assert_eq!(out.status.code(), Some(1), "nothing delivered, nothing kept: {stderr}");
    assert!(spooled() >= 2, "the daemon's flushes are still there");
    assert!(daemon.child().try_wait().unwrap().is_none(), "the daemon runs on");
    let _ = daemon.stop();
}
