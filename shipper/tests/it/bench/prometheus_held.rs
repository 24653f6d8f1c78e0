//! A local user who holds the Prometheus port before the daemon starts: the daemon does not
//! exit, CloudWatch (LocalStack) still gets every collection, the missed flushes are counted
//! (`ShipperDatumsDropped{Sink=prometheus, Reason=not_listening}`), `--check` names the user,
//! and the endpoint comes up once the port is free.

use crate::common;

use common::{Running, cloudwatch, localstack, scrape, shipper, shipper_env, statistic, unique_namespace};
use slurm_cw_catalog::dims::{CLUSTER_NAME, REASON, SINK};
use slurm_cw_catalog::metrics::{SHIPPER_DATUMS_DROPPED, SHIPPER_MEMORY_RSS};
use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

/// The uid that holds the port: `nobody`.
const SQUATTER: u32 = 65534;

/// A process of uid [`SQUATTER`] listening on `addr` (as root; else this process's uid, said
/// on stderr), once it says it is listening.
fn squat(addr: &str) -> Child {
    let (host, port) = addr.rsplit_once(':').unwrap();
    let script = format!(
        "import socket, sys\ns = socket.socket()\ns.bind(('{host}', {port}))\ns.listen()\n\
         print('listening', flush=True)\nsys.stdin.read()\n"
    );
    let mut c = Command::new("python3");
    c.args(["-c", &script]).stdin(Stdio::piped()).stdout(Stdio::piped());
    // SAFETY: getuid has no preconditions.
    if unsafe { libc::getuid() } == 0 {
        c.uid(SQUATTER).gid(SQUATTER);
    } else {
        eprintln!("not root: the port is held by this test's own uid, not another user's");
    }
    let mut child = c.spawn().expect("python3 to hold the port");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "listening", "the squatter could not bind {addr}");
    child
}

/// Each line the daemon logs, as it comes.
fn lines(stderr: std::process::ChildStderr) -> Receiver<String> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// The first line logged that holds `what`, within `limit`.
fn logged(rx: &Receiver<String>, what: &str, limit: Duration) -> String {
    let end = Instant::now() + limit;
    while let Some(left) = end.checked_duration_since(Instant::now()) {
        match rx.recv_timeout(left) {
            Ok(l) if l.contains(what) => return l,
            Ok(_) => {}
            Err(_) => break,
        }
    }
    panic!("no log line with {what:?} within {limit:?}");
}

#[ignore = "needs LocalStack: scripts/test.sh runs it"]
#[tokio::test(flavor = "multi_thread")]
async fn a_user_holding_the_prometheus_port_stops_neither_the_daemon_nor_cloudwatch() {
    let Some(url) = localstack() else {
        return;
    };
    let ns = unique_namespace("prometheus_held");
    let dir = tempfile::tempdir().unwrap();
    let addr = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().to_string();
    let mut squatter = squat(&addr);
    let base = |c: &mut Command| {
        c.env("SLURM_CW_CLUSTER_NAME", "held")
            .env("SLURM_CW_PROMETHEUS__ADDRESS", &addr)
            .env("SLURM_CW_NODE__CGROUP_ROOT", dir.path())
            .env("SLURM_CW_NODE__HOOK_SOCKET", dir.path().join("hook.sock"))
            .env("SLURM_CW_NODE__JOB_METRICS", "metrics");
    };

    // `--check` names who holds it, and fails the row: scrapes read someone else's numbers.
    let mut check = shipper();
    base(&mut check);
    let out = check.args(["--check", "--role", "node", "--sink", "prometheus"]).output().unwrap();
    let table = String::from_utf8_lossy(&out.stdout);
    let row = table.lines().find(|l| l.starts_with("prometheus endpoint")).unwrap_or_default();
    assert!(row.contains("FAIL") && row.contains(&format!("uid {SQUATTER}")), "{table}");
    assert_ne!(out.status.code(), Some(0), "{table}");

    let mut c = shipper();
    base(&mut c);
    let mut daemon = c
        .args(["--role", "node", "--sink", "cloudwatch,prometheus"])
        .envs(shipper_env(&url, &ns))
        .env("SLURM_CW_COLLECT_INTERVAL", "1s")
        .env("SLURM_CW_FLUSH_INTERVAL", "2s")
        .env("SLURM_CW_DELIVERY__FLUSH_JITTER", "false")
        .env("SLURM_CW_LOG__LEVEL", "info")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map(Running::new)
        .unwrap();
    let log = lines(daemon.child().stderr.take().unwrap());
    let said = logged(&log, "cannot listen on prometheus.address", Duration::from_secs(30));
    assert!(said.contains(&format!("uid {SQUATTER}")), "the log names the holder: {said}");

    // CloudWatch gets the collections meanwhile, and the missed flushes are counted.
    let cw = cloudwatch(&url).await;
    let window = Duration::from_secs(600);
    let rss = [(CLUSTER_NAME, "held")];
    let missed = [(CLUSTER_NAME, "held"), (SINK, "prometheus"), (REASON, "not_listening")];
    let started = Instant::now();
    let (mut got, mut dropped) = (None, None);
    while started.elapsed() < Duration::from_secs(60) && (got.is_none() || dropped.is_none()) {
        got = statistic(&cw, &ns, SHIPPER_MEMORY_RSS.name, &rss, "SampleCount", window).await;
        dropped = statistic(&cw, &ns, SHIPPER_DATUMS_DROPPED.name, &missed, "Sum", window).await;
    }
    assert!(got.is_some_and(|n| n >= 1.0), "CloudWatch got the collection: {got:?}");
    assert!(dropped.is_some_and(|n| n > 0.0), "flushes no one could scrape are counted: {dropped:?}");
    assert!(daemon.child().try_wait().unwrap().is_none(), "the daemon still runs");

    // The port is freed: the endpoint comes up with the daemon's own figures.
    let _ = squatter.kill();
    let _ = squatter.wait();
    logged(&log, "the address is free now", Duration::from_secs(60));
    common::wait_until("the endpoint to serve the daemon's figures", Duration::from_secs(30), || {
        scrape(&addr).is_some_and(|t| t.contains("# TYPE slurm_shipper_memory_rss_bytes gauge"))
    });
    daemon.stop();
    drop(log);
}
