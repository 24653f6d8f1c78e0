//! Users of the node flooding the Prometheus endpoint (loopback, the default address) with
//! connections that behave as a scraper's do: each asks at once and reads its answer as fast as
//! it comes, from many threads, again and again. Before slots were taken by peer, each newcomer
//! took the slot that had gone longest without moving, and against readers as quick as the
//! scraper that was the scraper's as often as anyone's: 25 of 30 scrapes came back whole. Now a
//! newcomer takes a slot of the user holding the most, so the flood displaces its own: every
//! scrape of the honest scraper, another uid (root here, as the CloudWatch agent or a
//! Prometheus agent on the node), comes back whole.
//!
//! The flooders are this test binary run again as other users (`flood_child`).

use crate::common::shipper;
use slurm_cw_shipper::sinks::prometheus::server::{MAX_CONNECTIONS, serve};
use std::io::{BufRead, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::process::CommandExt;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The flooding users: any uid works with setuid, none need exist.
const FLOODERS: [u32; 4] = [2101, 2102, 2103, 2104];
/// Connections each flooder keeps going at once, each asking again as soon as it is answered.
const THREADS: usize = 8;
/// The answer's size: large enough that a scrape takes a while, and newcomers come meanwhile.
const BODY: usize = 1 << 20;
const SCRAPES: usize = 30;
const REQUEST: &[u8] = b"GET /metrics HTTP/1.1\r\nHost: node\r\n\r\n";

/// One scrape: whether the whole answer came.
fn scrape(addr: SocketAddr) -> bool {
    let Ok(mut s) = TcpStream::connect(addr) else { return false };
    let _ = s.set_read_timeout(Some(Duration::from_secs(10)));
    if s.write_all(REQUEST).is_err() {
        return false;
    }
    let mut got = Vec::with_capacity(BODY + 256);
    let _ = s.read_to_end(&mut got);
    let head = got.windows(4).position(|w| w == b"\r\n\r\n");
    got.starts_with(b"HTTP/1.1 200 OK") && head.is_some_and(|h| got.len() - h - 4 == BODY)
}

/// Not a test of its own: one user's flood, when the test below runs this binary as that user
/// (PROMETHEUS_FLOOD = the address). Says `UP` once its first ask ended (after libtest's
/// `test ... ` on its line), floods until its standard input closes (a minute at most), then
/// prints its whole answers and its cut ones.
#[test]
fn flood_child() {
    let Ok(addr) = std::env::var("PROMETHEUS_FLOOD") else { return };
    let addr: SocketAddr = addr.parse().unwrap();
    static STOP: AtomicBool = AtomicBool::new(false);
    std::thread::spawn(|| {
        let _ = std::io::stdin().read_to_end(&mut Vec::new());
        STOP.store(true, Ordering::Relaxed);
    });
    let (whole, cut) = (AtomicUsize::new(0), AtomicUsize::new(0));
    let up = std::sync::Once::new();
    let until = Instant::now() + Duration::from_secs(60);
    std::thread::scope(|s| {
        for _ in 0..THREADS {
            s.spawn(|| {
                while !STOP.load(Ordering::Relaxed) && Instant::now() < until {
                    let ok = scrape(addr);
                    (if ok { &whole } else { &cut }).fetch_add(1, Ordering::Relaxed);
                    up.call_once(|| {
                        println!("UP");
                        let _ = std::io::stdout().flush();
                    });
                }
            });
        }
    });
    println!("FLOOD {} {}", whole.load(Ordering::Relaxed), cut.load(Ordering::Relaxed));
}

#[test]
fn users_flooding_the_endpoint_as_fast_as_a_scraper_never_cut_its_scrapes() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        assert!(std::env::var("CI").is_err(), "needs root (to flood as other users)");
        eprintln!("SKIPPED: needs root (to flood as other users)");
        return;
    }
    assert!(THREADS * FLOODERS.len() > MAX_CONNECTIONS, "the flooders together fill the endpoint");
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let listener = rt.block_on(tokio::net::TcpListener::bind("127.0.0.1:0")).unwrap();
    let addr = listener.local_addr().unwrap();
    rt.spawn(serve(listener, Arc::new(Mutex::new(Arc::new("x".repeat(BODY)))), None));
    assert!(scrape(addr), "a scrape before the flood");

    let tmp = tempfile::tempdir().unwrap();
    let me = crate::common::exe_for_others(tmp.path());
    let mut floods: Vec<(
        std::process::Child,
        std::io::Lines<std::io::BufReader<std::process::ChildStdout>>,
    )> = FLOODERS
        .iter()
        .map(|uid| {
            let mut child = std::process::Command::new(&me)
                .args(["prometheus_abuse::flood_child", "--exact", "--nocapture", "--test-threads=1"])
                .env("PROMETHEUS_FLOOD", addr.to_string())
                .uid(*uid)
                .gid(*uid)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .unwrap();
            let lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
            (child, lines)
        })
        .collect();
    // Every flooder under way: each has asked and been answered or cut.
    for (_, lines) in &mut floods {
        assert!(lines.any(|l| l.is_ok_and(|l| l.ends_with("UP"))), "a flooder never got through an ask");
    }
    let started = Instant::now();
    let mut whole = 0;
    for _ in 0..SCRAPES {
        whole += usize::from(scrape(addr));
    }
    let scraped_in = started.elapsed();
    let mut flood = Vec::new();
    for (mut child, mut lines) in floods {
        drop(child.stdin.take());
        let line = lines
            .find_map(|l| l.ok().and_then(|l| l.split_once("FLOOD ").map(|(_, n)| n.to_owned())))
            .expect("a flooder's count");
        let _ = child.wait();
        let (w, c) = line.split_once(' ').unwrap();
        flood.push((w.parse::<usize>().unwrap(), c.parse::<usize>().unwrap()));
    }
    eprintln!(
        "{whole} of {SCRAPES} scrapes whole in {scraped_in:?}; each flooder's answers (whole, cut): {flood:?}"
    );
    assert!(
        flood.iter().map(|(_, c)| c).sum::<usize>() > 0,
        "the flood was cut, so the endpoint was contended: {flood:?}"
    );
    assert_eq!(whole, SCRAPES, "every scrape whole during the flood");
}

/// A token file other users could read is refused before anything is served: exit 2, the key
/// and the fix named, and `--check` fails its row the same way.
#[test]
fn a_token_file_others_can_read_is_a_configuration_error() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("token");
    std::fs::write(&token, "0123456789abcdef0123456789abcdef\n").unwrap();
    std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o644)).unwrap();
    let addr = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().to_string();
    let run = |args: &[&str]| {
        shipper()
            .args(args)
            .env("SLURM_CW_CLUSTER_NAME", "tokens")
            .env("SLURM_CW_SINK", "prometheus")
            .env("SLURM_CW_PROMETHEUS__ADDRESS", &addr)
            .env("SLURM_CW_PROMETHEUS__BEARER_TOKEN_FILE", &token)
            .env("SLURM_CW_NODE__CGROUP_ROOT", dir.path())
            .env("SLURM_CW_NODE__HOOK_SOCKET", dir.path().join("hook.sock"))
            .env("SLURM_CW_GPU__ENABLED", "off")
            .output()
            .unwrap()
    };
    let out = run(&["--role", "node"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("prometheus.bearer_token_file") && stderr.contains("chmod 600"), "{stderr}");
    assert!(crate::common::scrape(&addr).is_none(), "nothing served");
    let out = run(&["--check", "--role", "node"]);
    let table = String::from_utf8_lossy(&out.stdout);
    let row = table.lines().find(|l| l.starts_with("prometheus token")).unwrap_or_default();
    assert!(row.contains("FAIL") && row.contains("mode 644"), "{table}");
    assert_eq!(out.status.code(), Some(2), "{table}");
    std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o600)).unwrap();
    let out = run(&["--check", "--role", "node"]);
    let table = String::from_utf8_lossy(&out.stdout);
    let row = table.lines().find(|l| l.starts_with("prometheus token")).unwrap_or_default();
    assert!(row.contains(" ok ") && !row.contains("0123456789"), "the token never printed: {table}");
    // No slurm.conf here, so no PrivateData: per-job series, to the token's holder alone.
    let row = table.lines().find(|l| l.starts_with("prometheus job series")).unwrap_or_default();
    assert!(row.contains("token's holder alone"), "{table}");
}
