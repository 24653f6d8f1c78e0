//! slurmctld's OpenMetrics endpoint (Slurm 25.11+) as the head role's node source, against the
//! real Slurm 26.05 bench (`scripts/bench/slurm.sh start --version 26.05`): with a node drained,
//! one down and jobs running and pending, the endpoint gives the same samples as sinfo, value by
//! value; and one `--once` costs slurmctld fewer RPCs with it than with the commands.

use crate::common;

use common::*;
use slurm_cw_catalog::metrics::*;
use slurm_cw_shipper::sample::Batch;
use slurm_cw_shipper::settings::Settings;
use slurm_cw_shipper::sources::head::HeadCollector;
use slurm_cw_shipper::sources::head::command::SlurmCommands;
use slurm_cw_shipper::sources::head::config::HeadSource;
use slurm_cw_shipper::sources::head::openmetrics::{Endpoint, TokenFrom, resolve};
use slurm_cw_shipper::sources::{Collector, Errors};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The bench's Slurm has the endpoint (25.11+); other benches skip these tests.
fn endpoint_bench() -> Option<PathBuf> {
    let conf = slurm()?;
    if slurm_version() < (25, 11) {
        eprintln!("skipped: the bench runs Slurm {:?}, which has no OpenMetrics endpoint", slurm_version());
        return None;
    }
    Some(conf)
}

fn config(conf: &Path, source: HeadSource) -> Settings {
    let mut c = Settings::default();
    c.slurm.conf = Some(conf.to_owned());
    c.slurm.bin_dir = std::env::var("BENCH_SLURM_BIN_DIR").ok().map(PathBuf::from);
    c.head.source = source;
    c
}

/// One head collection through the library, as the daemon runs it.
async fn collect(conf: &Path, source: HeadSource) -> (Batch, &'static str) {
    let c = config(conf, source);
    let cmds = SlurmCommands::new(c.slurm.bin_dir.clone(), Duration::from_secs(20));
    let ep = Endpoint::new(
        source,
        resolve(&c.head, c.slurm.conf.as_deref()),
        TokenFrom::Nowhere,
        Duration::from_secs(10),
    );
    let mut head = HeadCollector::new(cmds, c.head.clone()).with_endpoint(ep);
    let mut b = Batch::new(std::time::SystemTime::now());
    let mut errors = Errors::new();
    head.collect(&mut b, &mut errors).await;
    (b, head.node_source())
}

/// The node and job samples (sdiag's and the response time change between two calls).
fn figures(b: &Batch) -> BTreeMap<String, f64> {
    let node_and_job = [
        &NODE_COUNT,
        &NODE_FLAG_COUNT,
        &CPUS_TOTAL,
        &CPUS_ALLOCATED,
        &CPUS_IDLE,
        &CPUS_OTHER,
        &MEMORY_TOTAL,
        &MEMORY_ALLOCATED,
        &NODES_DOWN_UNPLANNED,
        &JOB_COUNT,
        &JOB_FLAG_COUNT,
        &PENDING_JOB_COUNT,
        &PENDING_CPUS,
        &PENDING_NODES,
        &RUNNING_CPUS,
    ];
    b.samples
        .iter()
        .filter(|s| node_and_job.iter().any(|m| m.name == s.metric.name))
        .map(|s| (format!("{} {:?}", s.metric.name, s.dims), s.scalar().unwrap()))
        .collect()
}

fn sinfo_states() -> String {
    cmd("sinfo", &["-h", "-N", "-o", "%N %P %T %C"])
}

/// Sets the scene: node 1 drained, node 2 down, two jobs running on debug, one pending on batch.
fn scene() -> SlurmCleanup {
    let n = nodes();
    let mut cleanup = SlurmCleanup { jobs: Vec::new(), nodes: vec![n[0].clone(), n[1].clone()] };
    cmd("scontrol", &["update", &format!("nodename={}", n[0]), "state=drain", "reason=head_openmetrics"]);
    cmd("scontrol", &["update", &format!("nodename={}", n[1]), "state=down", "reason=head_openmetrics"]);
    for args in [
        &["-p", "debug", "-n", "1", "--wrap", "sleep 300"][..],
        &["-p", "debug", "-N", "2", "-n", "3", "--wrap", "sleep 300"][..],
        &["-p", "batch", "-n", "4", "--wrap", "sleep 300"][..],
    ] {
        cleanup.jobs.push(sbatch(args));
    }
    let jobs = cleanup.jobs.clone();
    wait_until("two jobs running and one pending", Duration::from_secs(60), || {
        let states: Vec<String> = jobs.iter().map(|j| job_state(j)).collect();
        states == ["RUNNING", "RUNNING", "PENDING"]
    });
    cleanup
}

#[ignore = "needs the Slurm 26.05 bench: scripts/test.sh runs it"]
#[test]
fn endpoint_gives_the_samples_sinfo_gives() {
    let Some(conf) = endpoint_bench() else { return };
    let _turn = SLURM_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let _cleanup = scene();
    // Both sources read the same moment: again if a node or job changed in between.
    let mut tries = 0;
    let (commands, endpoint) = loop {
        let before = sinfo_states();
        let (commands, c_src) = rt.block_on(collect(&conf, HeadSource::Commands));
        let (endpoint, e_src) = rt.block_on(collect(&conf, HeadSource::Openmetrics));
        assert_eq!((c_src, e_src), ("commands", "openmetrics"));
        if before == sinfo_states() || tries == 5 {
            break (commands, endpoint);
        }
        tries += 1;
    };
    let (c, e) = (figures(&commands), figures(&endpoint));
    assert_eq!(c.keys().collect::<Vec<_>>(), e.keys().collect::<Vec<_>>(), "the same samples");
    for (k, v) in &c {
        assert_eq!(Some(v), e.get(k), "{k}");
    }
    // The bench has GPUs (GresTypes=gpu) that accounting does not track: auto keeps sinfo,
    // which counts them.
    assert_eq!(rt.block_on(collect(&conf, HeadSource::Auto)).1, "commands", "auto keeps sinfo");
    // Where GPUs are tracked (or there are none), auto takes the endpoint.
    let c = config(&conf, HeadSource::Auto);
    let mut resolved = resolve(&c.head, c.slurm.conf.as_deref());
    resolved.gpus_configured = false;
    let cmds = SlurmCommands::new(c.slurm.bin_dir.clone(), Duration::from_secs(20));
    let ep = Endpoint::new(HeadSource::Auto, resolved, TokenFrom::Nowhere, Duration::from_secs(10));
    let mut head = HeadCollector::new(cmds, c.head.clone()).with_endpoint(ep);
    rt.block_on(head.collect(&mut Batch::new(std::time::SystemTime::now()), &mut Errors::new()));
    assert_eq!(head.node_source(), "openmetrics", "auto takes the endpoint");
    // The scene is in them.
    assert_eq!(endpoint.value(&NODE_COUNT, &[("State", "drained")]), Some(1.0));
    assert_eq!(endpoint.value(&NODE_COUNT, &[("State", "down")]), Some(1.0));
    assert_eq!(endpoint.value(&NODES_DOWN_UNPLANNED, &[]), Some(1.0));
    assert_eq!(endpoint.value(&CPUS_OTHER, &[("Partition", "batch")]), Some(4.0));
    assert_eq!(endpoint.value(&CPUS_ALLOCATED, &[("Partition", "debug")]), Some(4.0));
    // The bench's GPUs are not tracked by accounting: the endpoint says 0, so none is shipped
    // from it, where sinfo counts two.
    assert_eq!(commands.value(&GPUS_TOTAL, &[]), Some(2.0));
    assert!(endpoint.of(&GPUS_TOTAL).next().is_none());
}

/// RPCs slurmctld served, by message type, from `sdiag --json`.
fn rpcs() -> BTreeMap<String, u64> {
    let v: serde_json::Value = serde_json::from_str(&cmd("sdiag", &["--json"])).unwrap();
    v["statistics"]["rpcs_by_message_type"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["message_type"].as_str().unwrap().to_owned(), r["count"].as_u64().unwrap()))
        .collect()
}

/// The RPCs one `--once --role head` costs: the sdiag before it counts itself once it is
/// served, so it is taken off; the daemons' own messages (registrations, job completions) are
/// left out.
fn rpcs_of_once(conf: &Path, source: &str, top_rpc_types: &str) -> (u64, BTreeMap<String, u64>) {
    let before = rpcs();
    let out = shipper()
        .args(["--once", "--role", "head"])
        .env("SLURM_CW_SINK", "stdout")
        .env("SLURM_CW_CLUSTER_NAME", "bench")
        .env("SLURM_CW_SLURM__CONF", conf)
        .env("SLURM_CW_HEAD__SOURCE", source)
        .env("SLURM_CW_HEAD__TOP_RPC_TYPES", top_rpc_types)
        .output()
        .unwrap();
    assert!(out.status.success(), "shipper failed: {}", String::from_utf8_lossy(&out.stderr));
    let after = rpcs();
    let mut diff = BTreeMap::new();
    for (t, n) in &after {
        let d = n - before.get(t).copied().unwrap_or(0);
        if d > 0 && t.starts_with("REQUEST_") && !t.contains("COMPLETE") {
            diff.insert(t.clone(), d);
        }
    }
    if let Some(s) = diff.get_mut("REQUEST_STATS_INFO") {
        *s -= 1;
    }
    diff.retain(|_, n| *n > 0);
    (diff.values().sum(), diff)
}

#[ignore = "needs the Slurm 26.05 bench: scripts/test.sh runs it"]
#[test]
fn endpoint_costs_slurmctld_fewer_rpcs() {
    let Some(conf) = endpoint_bench() else { return };
    let _turn = SLURM_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let (commands, c_types) = rpcs_of_once(&conf, "commands", "10");
    let (endpoint, e_types) = rpcs_of_once(&conf, "openmetrics", "10");
    // No RPC statistics wanted: no sdiag either, the scheduler's figures from the endpoint.
    let (no_sdiag, n_types) = rpcs_of_once(&conf, "openmetrics", "0");
    eprintln!(
        "RPCs per head collection: commands {commands} {c_types:?}; openmetrics {endpoint} {e_types:?}; \
         openmetrics without RPC statistics {no_sdiag} {n_types:?}"
    );
    assert!(c_types.contains_key("REQUEST_NODE_INFO"), "{c_types:?}");
    assert!(!e_types.contains_key("REQUEST_NODE_INFO"), "sinfo ran: {e_types:?}");
    assert!(!n_types.contains_key("REQUEST_STATS_INFO"), "sdiag ran: {n_types:?}");
    assert!(no_sdiag < endpoint && endpoint < commands, "{commands} > {endpoint} > {no_sdiag}");
    // What the daemon ships then: the scheduler's figures from the endpoint.
    let mut c = config(&conf, HeadSource::Openmetrics);
    c.head.top_rpc_types = 0;
    let cmds = SlurmCommands::new(c.slurm.bin_dir.clone(), Duration::from_secs(20));
    let ep = Endpoint::new(
        HeadSource::Openmetrics,
        resolve(&c.head, c.slurm.conf.as_deref()),
        TokenFrom::Nowhere,
        Duration::from_secs(10),
    );
    let mut head = HeadCollector::new(cmds, c.head.clone()).with_endpoint(ep);
    let mut b = Batch::new(std::time::SystemTime::now());
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(head.collect(&mut b, &mut Errors::new()));
    let sdiag: serde_json::Value = serde_json::from_str(&cmd("sdiag", &["--json"])).unwrap();
    let submitted = sdiag["statistics"]["jobs_submitted"].as_f64().unwrap();
    assert_eq!(b.value(&JOBS_SUBMITTED, &[]), Some(submitted), "no job submitted in between");
    assert!(b.value(&MAIN_SCHED_TOTAL_CYCLES, &[]).is_some());
    assert!(b.of(&RPC_COUNT).next().is_none());
}

/// A one-shot HTTP server on 127.0.0.1 that answers every request with `answer`.
fn fake_endpoint(answer: &'static str) -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for mut s in l.incoming().flatten() {
            use std::io::{Read, Write};
            let mut buf = [0u8; 4096];
            let _ = s.read(&mut buf);
            let _ = s.write_all(answer.as_bytes());
        }
    });
    format!("http://{addr}")
}

#[ignore = "needs the Slurm 26.05 bench: scripts/test.sh runs it"]
#[test]
fn a_failing_endpoint_falls_back_to_sinfo_counted() {
    let Some(conf) = endpoint_bench() else { return };
    let _turn = SLURM_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", l.local_addr().unwrap())
    };
    let cases = [
        (HeadSource::Openmetrics, closed),
        (HeadSource::Openmetrics, fake_endpoint("HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\n\r\n")),
        (HeadSource::Openmetrics, fake_endpoint("HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\nhello world")),
        (HeadSource::Openmetrics, fake_endpoint("not http at all\r\n\r\n")),
    ];
    for (source, url) in cases {
        let mut c = config(&conf, source);
        c.head.metrics_url = Some(url.clone());
        let cmds = SlurmCommands::new(c.slurm.bin_dir.clone(), Duration::from_secs(20));
        let ep = Endpoint::new(
            source,
            resolve(&c.head, c.slurm.conf.as_deref()),
            TokenFrom::Nowhere,
            Duration::from_secs(5),
        );
        let mut head = HeadCollector::new(cmds, c.head.clone()).with_endpoint(ep);
        let mut b = Batch::new(std::time::SystemTime::now());
        let mut errors = Errors::new();
        rt.block_on(head.collect(&mut b, &mut errors));
        assert_eq!(head.node_source(), "commands", "{url}");
        let counted: BTreeMap<_, _> = errors.iter().collect();
        assert_eq!(counted.get("openmetrics"), Some(&1), "{url}: {counted:?}");
        assert_eq!(counted.get("sinfo"), Some(&0), "{url}");
        let nodes = nodes().len() as f64;
        let total: f64 =
            b.of(&NODE_COUNT).filter(|s| s.dims.get("Partition").is_none()).filter_map(|s| s.scalar()).sum();
        assert_eq!(total, nodes, "{url}: sinfo's node counts shipped");
    }
}
