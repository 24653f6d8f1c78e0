//! The daemon on a node with EFA ports and RAPL zones (fixture /sys trees), against
//! LocalStack: the fabric and power metrics arrive as one series for the cluster, and the
//! node's per-port and per-zone figures arrive as a node_sample record in the job log group.

use crate::common;

use common::*;
use slurm_cw_catalog::metrics::{CPU_PACKAGE_POWER, FABRIC_RX_BYTES};
use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Raises a counter the way the kernel does, all at once: `fs::write` truncates first, and a
/// read between the truncate and the write would see an empty counter, which sysfs never shows.
fn bump(path: &Path, by: u64) {
    let now: u64 = std::fs::read_to_string(path).unwrap().trim().parse().unwrap();
    let next = path.with_file_name(".bump");
    std::fs::write(&next, format!("{}\n", now + by)).unwrap();
    std::fs::rename(&next, path).unwrap();
}

#[ignore = "needs LocalStack: scripts/test.sh runs it"]
#[tokio::test(flavor = "multi_thread")]
async fn fabric_and_power_metrics_and_the_node_sample_record_arrive() {
    let Some(url) = localstack() else { return };
    let namespace = unique_namespace("host_sources");
    let logs = logs(&url).await;
    let group = job_log_group(&logs, "host_sources").await;
    let dir = tempfile::tempdir().unwrap();
    let (sys, cg) = (dir.path().join("sys"), dir.path().join("cg"));
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/sys");
    copy_tree(&fixtures.join("efa-2.17"), &sys);
    copy_tree(&fixtures.join("rapl-2-socket"), &sys);
    std::fs::create_dir_all(&cg).unwrap();

    // Traffic on one port and power on both packages while the daemon runs.
    let stop = Arc::new(AtomicBool::new(false));
    let traffic = {
        let (stop, sys) = (stop.clone(), sys.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                bump(&sys.join("class/infiniband/rdmap16s27/ports/1/hw_counters/rx_bytes"), 50_000_000);
                bump(&sys.join("class/powercap/intel-rapl:0/energy_uj"), 20_000_000);
                bump(&sys.join("class/powercap/intel-rapl:1/energy_uj"), 20_000_000);
                std::thread::sleep(Duration::from_millis(100));
            }
        })
    };
    let daemon = shipper()
        .args(["--role", "node"])
        .envs(shipper_env(&url, &namespace))
        .env("SLURM_CW_CLUSTER_NAME", "hpc-test")
        .env("SLURM_CW_NODE_NAME", "hpc-n1")
        .env("SLURM_CW_COLLECT_INTERVAL", "1s")
        .env("SLURM_CW_FLUSH_INTERVAL", "2s")
        .env("SLURM_CW_CLOUDWATCH__FLUSH_JITTER", "false")
        .env("SLURM_CW_LOGS__GROUP", &group)
        .env("SLURM_CW_GPU__ENABLED", "off")
        .env("SLURM_CW_NODE__CGROUP_ROOT", &cg)
        .env("SLURM_CW_NODE__SYS_ROOT", &sys)
        .env("SLURM_CW_NODE__HOOK_SOCKET", dir.path().join("hook.sock"))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map(Running::new)
        .unwrap();
    let records = {
        let mut found = Vec::new();
        for _ in 0..10 {
            found = records(&logs, &group, &[("Type", "node_sample"), ("NodeName", "hpc-n1")]).await;
            if !found.is_empty() {
                break;
            }
        }
        found
    };
    stop.store(true, Ordering::Relaxed);
    traffic.join().unwrap();
    let out = daemon.stop();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));

    let r = records.first().unwrap_or_else(|| panic!("no node_sample record in {group}"));
    let fabric = r["Fabric"].as_object().expect("a Fabric object");
    assert_eq!(fabric.keys().collect::<Vec<_>>(), vec!["rdmap16s27/1", "rdmap32s27/1"]);
    assert!(r["Fabric"]["rdmap16s27/1"]["RxBytesPerSecond"].as_f64().unwrap() > 0.0, "{r}");
    assert_eq!(r["Fabric"]["rdmap32s27/1"]["RxBytesPerSecond"], 0.0, "{r}");
    assert!(r["Rapl"]["package-0"]["Watts"].as_f64().unwrap() > 0.0, "{r}");
    assert!(r.get("Lustre").is_none());

    let cw = cloudwatch(&url).await;
    let cluster = [("ClusterName", "hpc-test")];
    let window = Duration::from_secs(300);
    let rx = statistic(&cw, &namespace, FABRIC_RX_BYTES.name, &cluster, "Maximum", window).await;
    assert!(rx.is_some_and(|v| v > 0.0), "FabricRxBytes across the cluster: {rx:?}");
    let watts = statistic(&cw, &namespace, CPU_PACKAGE_POWER.name, &cluster, "Maximum", window).await;
    assert!(watts.is_some_and(|v| v > 0.0), "CpuPackagePower: {watts:?}");
    let per_node = [("ClusterName", "hpc-test"), ("NodeName", "hpc-n1")];
    let none = statistic(&cw, &namespace, FABRIC_RX_BYTES.name, &per_node, "Maximum", window).await;
    assert_eq!(none, None, "no per-node series without self_metrics_per_node");
}
