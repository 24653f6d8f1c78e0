//! The `otlp` destination end to end: the node role sends a real job's figures over OTLP to a
//! real receiver (the bench's VictoriaMetrics, Debian trixie's: Debian's Prometheus builds have
//! no OTLP receiver, see scripts/bench/prometheus.sh), and PromQL reads back what the job did,
//! labelled by job, user, account, partition and node.

mod common;

use common::{
    MIB, Running, SLURM_LOCK, SlurmCleanup, bench_dir, job_rss_bytes, memory_job, otlp_receiver, promql,
    shipper, slurm, wait_until,
};
use std::process::Stdio;
use std::time::Duration;

#[ignore = "needs the Slurm bench and the OTLP receiver: scripts/test.sh runs it"]
#[test]
fn an_otlp_receiver_gets_a_real_jobs_memory_with_its_labels() {
    let (Some(conf), Some((otlp, query_url))) = (slurm(), otlp_receiver()) else {
        return;
    };
    let _lock = SLURM_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let mut cleanup = SlurmCleanup { jobs: Vec::new(), nodes: Vec::new() };
    let (job, c1) = memory_job(&conf);
    cleanup.jobs.push(job.clone());
    // OTLP alone, unsigned (a loopback receiver): no AWS at all on this path.
    let spool = tempfile::tempdir().unwrap();
    // Kept after the test, and named if it fails.
    let log = bench_dir(&conf).join("otlp-sink-test.log");
    let _daemon = shipper()
        .args(["--role", "node", "--sink", "otlp"])
        .env("SLURM_CW_CLUSTER_NAME", "otlptest")
        .env("SLURM_CW_COLLECT_INTERVAL", "1s")
        .env("SLURM_CW_FLUSH_INTERVAL", "2s")
        .env("SLURM_CW_DELIVERY__FLUSH_JITTER", "false")
        .env("SLURM_CW_OTLP__ENDPOINT", &otlp)
        .env("SLURM_CW_SPOOL__DIR", spool.path())
        .env("SLURM_CW_NODE__HOOK_SOCKET", bench_dir(&conf).join("hook-otlp-test.sock"))
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .map(Running::new)
        .unwrap();
    let query = format!("slurm_memory_rss_bytes{{job_id=\"{job}\"}}");
    let mut got = Vec::new();
    wait_until(
        &format!("the receiver to have the job's memory (the daemon's log: {})", log.display()),
        Duration::from_secs(60),
        || {
            got = promql(&query_url, &query);
            !got.is_empty()
        },
    );
    let truth = job_rss_bytes(&job, &c1);
    assert_eq!(got.len(), 1, "one series of the job: {got:?}");
    let (labels, value) = got.remove(0);
    eprintln!("PromQL {query}: {:.1} MiB; the job's processes in /proc: {:.1} MiB", value / MIB, truth / MIB);
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
