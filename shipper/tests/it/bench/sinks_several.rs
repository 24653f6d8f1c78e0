//! Several destinations at once: CloudWatch (LocalStack) and an OTLP receiver that is down.
//! Each has its own spool directory and its own failure counts, and one failing never holds
//! the other back.

use crate::common;

use common::{Running, cloudwatch, localstack, shipper, shipper_env, statistic, unique_namespace};
use slurm_cw_catalog::metrics::{SHIPPER_MEMORY_RSS, SHIPPER_SPOOL_BYTES};
use std::process::Stdio;
use std::time::{Duration, Instant};

/// Spool files (flushes) waiting in `dir`: neither its subdirectories nor its `.lock`.
fn spooled(dir: &std::path::Path) -> usize {
    std::fs::read_dir(dir).map_or(0, |d| {
        d.filter_map(Result::ok)
            .filter(|e| e.path().is_file() && !e.file_name().to_string_lossy().starts_with('.'))
            .count()
    })
}

#[ignore = "needs LocalStack: scripts/test.sh runs it"]
#[tokio::test]
async fn an_otlp_receiver_down_keeps_its_own_spool_while_cloudwatch_gets_everything() {
    let Some(url) = localstack() else {
        return;
    };
    let ns = unique_namespace("sinks_several");
    let dir = tempfile::tempdir().unwrap();
    let spool = dir.path().join("spool");
    // Nothing listens there.
    let down = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let otlp = format!("http://{down}/v1/metrics");
    let run = |once: bool| {
        let mut c = shipper();
        c.args(["--role", "node", "--sink", "cloudwatch,otlp"])
            .envs(shipper_env(&url, &ns))
            .env("SLURM_CW_CLUSTER_NAME", "several")
            .env("SLURM_CW_OTLP__ENDPOINT", &otlp)
            .env("SLURM_CW_SPOOL__DIR", &spool)
            .env("SLURM_CW_NODE__CGROUP_ROOT", dir.path())
            .env("SLURM_CW_NODE__HOOK_SOCKET", dir.path().join("hook.sock"))
            .env("SLURM_CW_NODE__JOB_METRICS", "metrics");
        if once {
            c.arg("--once");
        } else {
            c.env("SLURM_CW_COLLECT_INTERVAL", "1s")
                .env("SLURM_CW_FLUSH_INTERVAL", "2s")
                .env("SLURM_CW_DELIVERY__FLUSH_JITTER", "false");
        }
        c
    };
    // One collection: CloudWatch takes it, the OTLP flush waits in the OTLP spool, and the
    // exit status says which destination failed.
    let out = run(true).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains(&otlp) && stderr.contains("kept in the spool"), "{stderr}");
    assert!(!stderr.contains("metrics to Slurm/"), "CloudWatch delivered: {stderr}");
    assert_eq!(spooled(&spool.join("otlp")), 1, "the OTLP flush is in its own directory");
    assert_eq!(spooled(&spool), 0, "nothing waits for CloudWatch");
    let cw = cloudwatch(&url).await;
    let rss = statistic(
        &cw,
        &ns,
        SHIPPER_MEMORY_RSS.name,
        &[("ClusterName", "several")],
        "SampleCount",
        Duration::from_secs(600),
    )
    .await;
    assert_eq!(rss, Some(1.0), "CloudWatch got the collection");

    // The daemon: the OTLP backlog is counted as that destination's, in CloudWatch.
    let daemon = run(false).stdout(Stdio::null()).stderr(Stdio::null()).spawn().map(Running::new).unwrap();
    let dims = [("ClusterName", "several"), ("Sink", "otlp")];
    let started = Instant::now();
    // (The backlog in bytes: a view reads it; the file count goes only with self_metrics = "all".)
    let mut bytes = None;
    while started.elapsed() < Duration::from_secs(60) {
        bytes =
            statistic(&cw, &ns, SHIPPER_SPOOL_BYTES.name, &dims, "Maximum", Duration::from_secs(600)).await;
        if bytes.is_some_and(|b| b > 0.0) && spooled(&spool.join("otlp")) >= 2 {
            break;
        }
    }
    daemon.stop();
    assert!(bytes.is_some_and(|b| b > 0.0), "ShipperSpoolBytes{{Sink=otlp}}: {bytes:?}");
    // (LocalStack matches a subset of dimensions, so CloudWatch's own series without `Sink`
    // cannot be told apart there: its spool directory says it.)
    assert_eq!(spooled(&spool), 0, "CloudWatch's own spool stays empty");
    assert!(spooled(&spool.join("otlp")) >= 2, "the daemon kept every OTLP flush");
}
