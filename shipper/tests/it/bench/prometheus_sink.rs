//! The `prometheus` destination: a real Prometheus (the bench's, Debian trixie's 2.53.3)
//! scrapes the node role's pull endpoint, and a real job's figures read back with PromQL equal
//! what the job did; and the endpoint holds up when a local user floods it.

use crate::common;

use common::{
    MIB, PROMETHEUS_SCRAPES, Running, SLURM_LOCK, SlurmCleanup, job_memory_read_back, prometheus, promql,
    scrape, shipper, slurm, wait_until,
};
use slurm_cw_shipper::sinks::prometheus;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Stdio;
use std::time::Duration;

#[ignore = "needs the Slurm bench and Prometheus: scripts/test.sh runs it"]
#[test]
fn prometheus_scrapes_a_real_jobs_memory_with_its_labels() {
    let (Some(conf), Some(prom)) = (slurm(), prometheus()) else {
        return;
    };
    let _lock = SLURM_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let mut cleanup = SlurmCleanup { jobs: Vec::new(), nodes: Vec::new() };
    // Prometheus alone: no AWS at all on this path.
    let env = [("SLURM_CW_PROMETHEUS__ADDRESS", std::ffi::OsStr::new(PROMETHEUS_SCRAPES))];
    let mut got = job_memory_read_back(&conf, "prometheus", &env, &prom, &mut cleanup);
    let job = got.job.clone();
    // What the endpoint serves of the job, for when the figure is not the truth.
    let served = || {
        let text = scrape(PROMETHEUS_SCRAPES).unwrap_or_default();
        let mine = format!("job_id=\"{job}\"");
        text.lines()
            .filter(|l| l.starts_with("slurm_memory") && l.contains(&mine))
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert_eq!(got.series.len(), 1, "one series of the job: {:?}\nserved:\n{}", got.series, served());
    let ((labels, value), truth, c1) = (got.series.remove(0), got.truth, got.node.clone());
    assert!(
        (300.0 * MIB..=340.0 * MIB).contains(&value) && (value - truth).abs() <= truth * 0.05,
        "{value} against {truth}: {labels}\nserved:\n{}",
        served()
    );
    // Who the job is, as Slurm says: labels per job cost bytes here, not custom metrics.
    assert_eq!(labels["account"], "physics", "{labels}");
    assert_eq!(labels["partition"], "batch", "{labels}");
    assert_eq!(labels["user"], "root", "{labels}");
    assert_eq!(labels["node_name"], c1.as_str(), "{labels}");
    assert_eq!(labels["cluster_name"], "prometheustest", "{labels}");
    // The catalog's help and type, as served.
    let text = scrape(PROMETHEUS_SCRAPES).unwrap_or_default();
    assert!(text.contains("# TYPE slurm_memory_rss_bytes gauge\n"), "{text}");
    assert!(text.contains("# HELP slurm_memory_rss_bytes "), "{text}");
    drop(cleanup);
}

/// Open files of process `pid`.
fn fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count())
}

#[test]
fn a_flood_of_connections_neither_stalls_collection_nor_keeps_the_endpoint_down() {
    let dir = tempfile::tempdir().unwrap();
    // A free loopback port for the daemon.
    let addr = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().to_string();
    let mut daemon = shipper()
        .args(["--role", "node", "--sink", "prometheus"])
        .env("SLURM_CW_CLUSTER_NAME", "flood")
        .env("SLURM_CW_COLLECT_INTERVAL", "1s")
        .env("SLURM_CW_FLUSH_INTERVAL", "1s")
        .env("SLURM_CW_DELIVERY__FLUSH_JITTER", "false")
        .env("SLURM_CW_PROMETHEUS__ADDRESS", &addr)
        .env("SLURM_CW_NODE__CGROUP_ROOT", dir.path())
        .env("SLURM_CW_NODE__HOOK_SOCKET", dir.path().join("hook.sock"))
        .env("SLURM_CW_LOG__LEVEL", "slurm_cw_shipper::pipeline=debug")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map(Running::new)
        .unwrap();
    let pid = daemon.pid();
    let (collected, _log) = collections(daemon.child().stderr.take().unwrap());
    wait_until("the endpoint to serve the shipper's own figures", Duration::from_secs(30), || {
        scrape(&addr).is_some_and(|t| t.contains("slurm_shipper_memory_rss_bytes"))
    });
    let before = fds(pid);
    // A user opens far more connections than the endpoint serves, sends nothing and holds
    // them; another trickles half a request.
    let held: Vec<TcpStream> = (0..300).filter_map(|_| TcpStream::connect(&addr).ok()).collect();
    let mut slow = TcpStream::connect(&addr).unwrap();
    slow.write_all(b"GET /metr").unwrap();
    assert!(held.len() >= 200, "the kernel took the connections: {}", held.len());
    // Collection goes on: collections logged after the flood began.
    while collected.try_recv().is_ok() {}
    for n in 0..3 {
        collected
            .recv_timeout(Duration::from_secs(10))
            .unwrap_or_else(|_| panic!("collection {n} during the flood"));
    }
    // Connections past the limit are closed at once, the rest at the deadline: the daemon
    // does not hold hundreds of sockets.
    let limit = before + prometheus::server::MAX_CONNECTIONS + 4;
    let mut most = 0;
    wait_until("every flood connection to be served or closed", Duration::from_secs(15), || {
        most = most.max(fds(pid));
        held.iter().all(|s| {
            let mut b = [0u8; 1];
            s.set_read_timeout(Some(Duration::from_millis(1))).is_ok()
                && matches!((&*s).read(&mut b), Ok(0) | Ok(_))
        })
    });
    eprintln!("daemon fds: {before} before the flood, at most {most} during it (limit {limit})");
    assert!(most <= limit, "{most} file descriptors during the flood, limit {limit}");
    // A scrape gets through while the flood still holds its sockets open.
    let mut text = None;
    wait_until("a scrape to be answered", Duration::from_secs(15), || {
        text = scrape(&addr);
        text.is_some()
    });
    assert!(text.unwrap().contains("# TYPE slurm_shipper_memory_rss_bytes gauge"));
    drop((held, slow));
    daemon.stop();
}

/// A user who keeps every slot taken by connections that send nothing, opening a new one as
/// fast as the endpoint closes one, does not keep a scraper out: a full endpoint closes the
/// connection that has waited longest for its request, not the newcomer (before, nearly every
/// scrape during such a flood was refused).
#[test]
fn a_user_who_keeps_every_slot_waiting_does_not_keep_a_scraper_out() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    let dir = tempfile::tempdir().unwrap();
    let addr = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().to_string();
    let daemon = shipper()
        .args(["--role", "node", "--sink", "prometheus"])
        .env("SLURM_CW_CLUSTER_NAME", "squat")
        .env("SLURM_CW_COLLECT_INTERVAL", "1s")
        .env("SLURM_CW_PROMETHEUS__ADDRESS", &addr)
        .env("SLURM_CW_NODE__CGROUP_ROOT", dir.path())
        .env("SLURM_CW_NODE__HOOK_SOCKET", dir.path().join("hook.sock"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map(Running::new)
        .unwrap();
    wait_until("the endpoint to serve", Duration::from_secs(30), || scrape(&addr).is_some());
    let (stop, opened) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicU64::new(0)));
    let (flooding, count, at) = (stop.clone(), opened.clone(), addr.clone());
    let flood = std::thread::spawn(move || {
        // Its connections the endpoint has not closed, kept; one more at once for each closed.
        let open = |s: &TcpStream| {
            let mut b = [0u8; 1];
            matches!((&*s).read(&mut b), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
        };
        let mut held: Vec<TcpStream> = Vec::new();
        while !flooding.load(Ordering::Relaxed) {
            if let Ok(s) = TcpStream::connect(&at)
                && s.set_nonblocking(true).is_ok()
            {
                held.push(s);
                count.fetch_add(1, Ordering::Relaxed);
            }
            if held.len() > 4 * prometheus::server::MAX_CONNECTIONS {
                held.retain(open);
            }
        }
    });
    let full = 8 * prometheus::server::MAX_CONNECTIONS as u64;
    wait_until("the flood to fill the endpoint", Duration::from_secs(30), || {
        opened.load(Ordering::Relaxed) > full
    });
    // Each scrape in its turn, the flood going on. Before, none was answered; now a scrape
    // loses only when its client cannot send its request before sixteen of the user's
    // connections come in after it (a machine this busy running the other tests may be).
    let answered = (0..10).filter(|_| scrape(&addr).is_some()).count();
    stop.store(true, Ordering::Relaxed);
    flood.join().unwrap();
    eprintln!(
        "{answered} of 10 scrapes answered while the user opened {} connections",
        opened.load(Ordering::Relaxed)
    );
    assert!(answered >= 5, "{answered} of 10 scrapes answered");
    daemon.stop();
}

/// The endpoint serves each collection as it comes: with a flush ten minutes away, the first
/// collection's figures are there at once (once, it served an empty page until the first flush).
#[test]
fn a_scrape_after_the_first_collection_shows_its_figures_long_before_a_flush() {
    let dir = tempfile::tempdir().unwrap();
    let addr = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().to_string();
    let mut daemon = shipper()
        .args(["--role", "node", "--sink", "prometheus"])
        .env("SLURM_CW_CLUSTER_NAME", "live")
        .env("SLURM_CW_COLLECT_INTERVAL", "1s")
        .env("SLURM_CW_FLUSH_INTERVAL", "10m")
        .env("SLURM_CW_DELIVERY__FLUSH_JITTER", "false")
        .env("SLURM_CW_PROMETHEUS__ADDRESS", &addr)
        .env("SLURM_CW_NODE__CGROUP_ROOT", dir.path())
        .env("SLURM_CW_NODE__HOOK_SOCKET", dir.path().join("hook.sock"))
        .env("SLURM_CW_LOG__LEVEL", "slurm_cw_shipper::daemon=debug")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map(Running::new)
        .unwrap();
    let log = daemon.child().stderr.take().unwrap();
    let flushed = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let seen = flushed.clone();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(log).lines().map_while(Result::ok) {
            if line.contains("flushed") {
                seen.store(true, std::sync::atomic::Ordering::SeqCst);
            }
        }
    });
    let mut text = String::new();
    wait_until("the endpoint to serve the first collection", Duration::from_secs(30), || {
        text = scrape(&addr).unwrap_or_default();
        text.contains("slurm_shipper_memory_rss_bytes{cluster_name=\"live\"")
    });
    assert!(text.contains("# TYPE slurm_shipper_memory_rss_bytes gauge\n"), "{text}");
    assert!(!flushed.load(std::sync::atomic::Ordering::SeqCst), "served before any flush");
    daemon.stop();
}

/// slurm.conf's `PrivateData=jobs`: a local user's scrape shows no series of a job or a user
/// (alice's), the aggregate ones only; without it, or with `prometheus.job_series = "on"`,
/// they are there.
#[test]
fn private_data_jobs_keeps_job_and_user_series_off_the_endpoint() {
    use slurm_cw_catalog::dims::{ACCOUNT, JOB_ID, NODE_NAME, USER};
    use slurm_cw_catalog::metrics::{MEMORY_RSS, SHIPPER_MEMORY_RSS};
    use slurm_cw_shipper::aggregate::{Aggregate, Summary};
    use slurm_cw_shipper::sample::Dims;
    use slurm_cw_shipper::settings::{PrometheusConfig, Settings, Toggle};
    use slurm_cw_shipper::sinks::MetricDestination;
    let dir = tempfile::tempdir().unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let datum = |metric: &'static slurm_cw_catalog::Metric, dims: &[(&'static str, &str)]| Aggregate {
        metric,
        dims: dims.iter().fold(Dims::new(), |d, (n, v)| d.with(n, *v)),
        time: std::time::SystemTime::now(),
        value: Summary::Value { value: 42.0 },
    };
    // What the endpoint serves of alice's job and of the node, as a local user scrapes it.
    let serve = |slurm_conf: &str, job_series: Toggle| -> String {
        let conf = dir.path().join("slurm.conf");
        std::fs::write(&conf, slurm_conf).unwrap();
        let settings = Settings::default();
        let cfg = PrometheusConfig { address: "127.0.0.1:0".into(), job_series, bearer_token_file: None };
        let cx = settings.sink_context("c", "Slurm/c", "n1", Some(&conf));
        let mut sink = rt.block_on(prometheus::build(&cfg, &cx)).unwrap();
        let job = [(ACCOUNT, "physics"), (JOB_ID, "42"), (NODE_NAME, "n1"), (USER, "alice")];
        let datums = vec![datum(&MEMORY_RSS, &job), datum(&SHIPPER_MEMORY_RSS, &[(NODE_NAME, "n1")])];
        let outcome = rt.block_on(sink.put_in("c", datums));
        assert!(outcome.rejected.is_empty());
        scrape(sink.address()).unwrap()
    };
    let hidden = serve("ClusterName=c\nPrivateData=jobs\n", Toggle::Auto);
    assert!(!hidden.contains("user=\"alice\"") && !hidden.contains("job_id="), "{hidden}");
    assert!(hidden.contains("slurm_shipper_memory_rss_bytes{node_name=\"n1\"} 42"), "{hidden}");
    for (conf, toggle) in [("ClusterName=c\n", Toggle::Auto), ("PrivateData=jobs\n", Toggle::On)] {
        let open = serve(conf, toggle);
        assert!(
            open.contains(
                "slurm_memory_rss_bytes{account=\"physics\",job_id=\"42\",node_name=\"n1\",user=\"alice\"} 42"
            ),
            "{conf} {toggle:?}: {open}"
        );
    }
}

/// Collections the daemon logged (`collected`, at debug level), one message each.
fn collections(
    stderr: std::process::ChildStderr,
) -> (std::sync::mpsc::Receiver<()>, std::thread::JoinHandle<()>) {
    use std::io::BufRead;
    let (tx, rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr).lines().map_while(Result::ok) {
            if line.contains("collected") {
                let _ = tx.send(());
            }
        }
    });
    (rx, reader)
}

/// `prometheus.bearer_token_file`: the bench's Prometheus scrapes the guarded endpoint with the
/// token (`authorization: credentials_file:`) and gets the node's series; its job without the
/// token is refused 401, as is a local user who asks without it or guesses it.
#[ignore = "needs Prometheus: scripts/test.sh runs it"]
#[test]
fn only_a_scraper_holding_the_token_reads_a_guarded_endpoint() {
    use std::os::unix::fs::PermissionsExt;
    let Some(prom) = prometheus() else {
        return;
    };
    let bench_token = std::env::var("BENCH_PROMETHEUS_TOKEN_FILE")
        .expect("BENCH_PROMETHEUS_TOKEN_FILE: a Prometheus bench that scrapes the guarded endpoint (stop and start it)");
    let dir = tempfile::tempdir().unwrap();
    // The daemon's own copy, as an admin would install it: root's, mode 0600.
    let token = dir.path().join("prometheus.token");
    std::fs::copy(&bench_token, &token).unwrap();
    std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o600)).unwrap();
    let secret = std::fs::read_to_string(&token).unwrap().trim().to_owned();
    let mut daemon = shipper()
        .args(["--role", "node"])
        .env("SLURM_CW_CLUSTER_NAME", "guarded")
        .env("SLURM_CW_SINK", "prometheus")
        .env("SLURM_CW_PROMETHEUS__ADDRESS", common::PROMETHEUS_SCRAPES_GUARDED)
        .env("SLURM_CW_PROMETHEUS__BEARER_TOKEN_FILE", &token)
        .env("SLURM_CW_COLLECT_INTERVAL", "1s")
        .env("SLURM_CW_FLUSH_INTERVAL", "2s")
        .env("SLURM_CW_NODE__CGROUP_ROOT", dir.path())
        .env("SLURM_CW_NODE__HOOK_SOCKET", dir.path().join("hook.sock"))
        .env("SLURM_CW_GPU__ENABLED", "off")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map(Running::new)
        .unwrap();
    let with_token = "slurm_shipper_memory_rss_bytes{job=\"slurm-cw-shipper-token\"}";
    let mut read = Vec::new();
    wait_until("Prometheus to read the guarded endpoint with its token", Duration::from_secs(60), || {
        read = promql(&prom, with_token);
        !read.is_empty()
    });
    assert!(read[0].1 > 1e6, "the daemon's resident memory: {read:?}");
    // Its job without the token: down, for a 401, every scrape since the endpoint came up.
    let mut targets = serde_json::Value::Null;
    wait_until("the scrape without the token to be refused", Duration::from_secs(30), || {
        let up = promql(&prom, "up{job=\"slurm-cw-shipper-no-token\"}");
        let (ok, out, _) = common::try_cmd("curl", &["-fsS", "-m", "5", &format!("{prom}/api/v1/targets")]);
        targets = if ok { serde_json::from_str(&out).unwrap_or_default() } else { Default::default() };
        let refused = targets["data"]["activeTargets"].as_array().into_iter().flatten().any(|t| {
            t["labels"]["job"] == "slurm-cw-shipper-no-token"
                && t["lastError"].as_str().is_some_and(|e| e.contains("401"))
        });
        refused && up.first().is_some_and(|(_, v)| *v == 0.0)
    });
    assert!(promql(&prom, "slurm_shipper_memory_rss_bytes{job=\"slurm-cw-shipper-no-token\"}").is_empty());
    // A local user: no series without the token or with a guess; the token's holder reads them.
    let ask = |auth: &str| {
        let mut s = TcpStream::connect(common::PROMETHEUS_SCRAPES_GUARDED).unwrap();
        s.write_all(format!("GET /metrics HTTP/1.1\r\nHost: x\r\n{auth}\r\n").as_bytes()).unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        out
    };
    let guess = format!("{}x", &secret[..secret.len() - 1]);
    for auth in [String::new(), format!("Authorization: Bearer {guess}\r\n")] {
        let got = ask(&auth);
        assert!(got.starts_with("HTTP/1.1 401") && !got.contains("slurm_shipper"), "{auth:?}: {got}");
    }
    let got = ask(&format!("Authorization: Bearer {secret}\r\n"));
    assert!(got.starts_with("HTTP/1.1 200") && got.contains("slurm_shipper_memory_rss_bytes"), "{got}");
    assert!(daemon.child().try_wait().unwrap().is_none(), "the daemon runs on");
}
