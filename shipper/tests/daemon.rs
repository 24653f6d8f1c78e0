//! The daemon loop: samples between flushes are aggregated, and SIGTERM flushes what is
//! buffered before a clean exit.

mod common;

use common::shipper;
use slurm_cw_catalog::metrics::{SHIPPER_DATUMS_SENT, SHIPPER_MEMORY_RSS};
use slurm_cw_shipper::datum::{Datum, DatumValue};
use std::process::Stdio;
use std::time::{Duration, Instant};

#[test]
fn sigterm_flushes_aggregated_samples_then_exits_0() {
    let dir = tempfile::tempdir().unwrap();
    let child = shipper()
        .args(["--role", "node", "--sink", "stdout"])
        .env("SLURM_CW_CLUSTER_NAME", "daemon-test")
        .env("SLURM_CW_COLLECT_INTERVAL", "1s")
        .env("SLURM_CW_FLUSH_INTERVAL", "10m")
        .env("SLURM_CW_CLOUDWATCH__FLUSH_JITTER", "false")
        .env("SLURM_CW_NODE__CGROUP_ROOT", dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(3500));
    let started = Instant::now();
    // SAFETY: kill(2) on our own child's pid.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
    let out = child.wait_with_output().unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "stops promptly"
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let datums: Vec<Datum> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| Datum::from_json_line(l).expect("a datum line").1)
        .collect();
    let rss = datums
        .iter()
        .find(|d| d.metric == SHIPPER_MEMORY_RSS.name)
        .expect("ShipperMemoryRss");
    match &rss.value {
        // Collections at 0, 1, 2 and 3 s: four samples in one datum.
        DatumValue::Stats { stats } => {
            assert!((4.0..=5.0).contains(&stats.count), "{stats:?}");
            assert!(
                stats.min > 1e6 && stats.max < 500e6,
                "a plausible RSS: {stats:?}"
            );
        }
        other => panic!("expected statistic values, got {other:?}"),
    }
    assert_eq!(rss.dimension("ClusterName"), Some("daemon-test"));
    assert!(rss.dimension("NodeName").is_some());
    assert!(datums.iter().any(|d| d.metric == SHIPPER_DATUMS_SENT.name));
}
