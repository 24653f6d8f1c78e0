//! The `otlp` destination end to end: the node role sends a real job's figures over OTLP to a
//! real receiver (the bench's VictoriaMetrics, Debian trixie's: Debian's Prometheus builds have
//! no OTLP receiver, see scripts/bench/prometheus.sh), and PromQL reads back what the job did,
//! labelled by job, user, account, partition and node.

use crate::common;

use common::{MIB, SLURM_LOCK, SlurmCleanup, job_memory_read_back, otlp_receiver, shipper, slurm};
use std::ffi::OsStr;

#[ignore = "needs the Slurm bench and the OTLP receiver: scripts/test.sh runs it"]
#[test]
fn an_otlp_receiver_gets_a_real_jobs_memory_with_its_labels() {
    let (Some(conf), Some((otlp, query_url))) = (slurm(), otlp_receiver()) else {
        return;
    };
    let _lock = SLURM_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let mut cleanup = SlurmCleanup { jobs: Vec::new(), nodes: Vec::new() };
    // OTLP alone, unsigned (a loopback receiver): no AWS at all on this path.
    let spool = tempfile::tempdir().unwrap();
    let env =
        [("SLURM_CW_OTLP__ENDPOINT", OsStr::new(&otlp)), ("SLURM_CW_SPOOL__DIR", spool.path().as_os_str())];
    let mut got = job_memory_read_back(&conf, "otlp", &env, &query_url, &mut cleanup);
    assert_eq!(got.series.len(), 1, "one series of the job: {:?}", got.series);
    let ((labels, value), truth, c1) = (got.series.remove(0), got.truth, got.node);
    assert!((300.0 * MIB..=340.0 * MIB).contains(&value), "{value}: {labels}");
    assert!((value - truth).abs() <= truth * 0.05, "{value} against {truth}");
    // Who the job is, as Slurm says: per-job labels cost bytes over OTLP, not custom metrics.
    let label = |n: &str| labels[n].as_str().unwrap_or("(missing)").to_owned();
    assert_eq!(
        ["account", "partition", "user", "node_name", "cluster_name"].map(label),
        ["physics", "batch", "root", c1.as_str(), "otlptest"],
        "{labels}"
    );
    // The resource: which daemon sent it (this host's; its slurmd are the bench's nodes).
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    assert_eq!(label("service_name"), "slurm-cw-shipper", "{labels}");
    assert_eq!(label("service_instance_id"), host.trim(), "{labels}");
    drop(cleanup);
}

/// Issue 31: SigV4 over http:// would send the instance role's session token and a replayable
/// signature in clear text. The configuration is refused before anything runs: exit 2, naming
/// the key.
#[test]
fn sigv4_over_http_exits_2_naming_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.toml");
    for (endpoint, sigv4) in [
        ("http://127.0.0.1:9/v1/metrics", "on"),
        ("http://monitoring.eu-west-1.amazonaws.com/v1/metrics", "auto"),
    ] {
        std::fs::write(
            &config,
            format!("sink = \"otlp\"\n[otlp]\nendpoint = \"{endpoint}\"\nsigv4 = \"{sigv4}\"\n"),
        )
        .unwrap();
        let out = shipper().args(["--once", "--role", "node", "--config"]).arg(&config).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{endpoint} {sigv4}: {err}");
        assert!(err.contains("bad configuration: otlp.sigv4: signing over http://"), "{err}");
        assert!(out.stdout.is_empty(), "nothing collected or sent");
    }
}
