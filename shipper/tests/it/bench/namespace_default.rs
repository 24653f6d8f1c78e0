//! One cluster, one namespace: with no `namespace` configured the shipper sends to
//! `Slurm/<cluster>` (IAM can confine a cluster's nodes to a namespace, never to a
//! `ClusterName`), an explicit one wins, and a cluster name that makes no valid namespace stops
//! it with exit status 2 and the key's name.

use crate::common;

use common::*;
use slurm_cw_catalog::metrics::JOBS_ON_NODE;
use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, SystemTime};

/// `--once` as a compute node running one job (the golden test's cgroup v2 and /proc
/// fixtures), no Slurm commands (`empty_bin`), no GPU, no job records.
fn node_once(empty_bin: &Path) -> Command {
    node("--once", empty_bin)
}

/// The shipper as that node, in `mode` (`--once`, `--check`).
fn node(mode: &str, empty_bin: &Path) -> Command {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let mut c = shipper();
    c.args([mode, "--role", "node"])
        .env("SLURM_CW_NODE__CGROUP_ROOT", fixtures.join("cgroup/v2-kernel-docs"))
        .env("SLURM_CW_NODE__PROC_ROOT", fixtures.join("proc/slurm-job-1001"))
        .env("SLURM_CW_SLURM__BIN_DIR", empty_bin)
        .env("SLURM_CW_NODE__JOB_METRICS", "metrics")
        .env("SLURM_CW_GPU__ENABLED", "off");
    c
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The namespaces of the datums printed by `--sink stdout`.
fn printed_namespaces(out: &Output) -> Vec<String> {
    let mut seen: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|v| v.get("namespace").and_then(|n| n.as_str()).map(str::to_owned))
        .collect();
    seen.sort();
    seen.dedup();
    seen
}

#[ignore = "needs LocalStack: scripts/test.sh runs it"]
#[tokio::test(flavor = "multi_thread")]
async fn with_no_namespace_set_the_figures_go_to_the_clusters_own() {
    let Some(url) = localstack() else { return };
    let nanos = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap().as_nanos();
    let cluster = format!("nsdefault-{}-{nanos}", std::process::id());
    let dir = tempfile::tempdir().unwrap();
    let out = node_once(dir.path())
        .envs(shipper_env(&url, "unused"))
        .env_remove("SLURM_CW_NAMESPACE")
        .env("SLURM_CW_CLUSTER_NAME", &cluster)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));

    // Read back from CloudWatch: the node's job count (the fixture's one job) in the cluster's
    // own namespace...
    let cw = cloudwatch(&url).await;
    let own = format!("Slurm/{cluster}");
    let dims = [("ClusterName", cluster.as_str())];
    let jobs = statistic(&cw, &own, JOBS_ON_NODE.name, &dims, "Maximum", Duration::from_secs(300)).await;
    assert_eq!(jobs, Some(1.0), "JobsOnNode in {own}");
    // ...and nothing of this cluster in the namespace every cluster used to share.
    let filter =
        aws_sdk_cloudwatch::types::DimensionFilter::builder().name("ClusterName").value(&cluster).build();
    let shared = cw.list_metrics().namespace("Slurm").dimensions(filter).send().await.expect("ListMetrics");
    assert!(shared.metrics().is_empty(), "sent to the shared namespace too: {:?}", shared.metrics());
}

#[test]
fn the_default_namespace_follows_the_cluster_name_and_an_explicit_one_wins() {
    let dir = tempfile::tempdir().unwrap();
    let out = node_once(dir.path())
        .args(["--sink", "stdout"])
        .env("SLURM_CW_CLUSTER_NAME", "hpc-a")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(printed_namespaces(&out), ["Slurm/hpc-a"]);

    // Read from slurm.conf's ClusterName just the same.
    let conf = dir.path().join("slurm.conf");
    std::fs::write(&conf, "ClusterName=hpc-b\n").unwrap();
    let out =
        node_once(dir.path()).args(["--sink", "stdout"]).env("SLURM_CW_SLURM__CONF", &conf).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(printed_namespaces(&out), ["Slurm/hpc-b"]);

    // A cluster that keeps the namespace older versions shared.
    let out = node_once(dir.path())
        .args(["--sink", "stdout"])
        .env("SLURM_CW_CLUSTER_NAME", "hpc-a")
        .env("SLURM_CW_NAMESPACE", "Slurm")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(printed_namespaces(&out), ["Slurm"]);
}

#[test]
fn a_cluster_name_that_makes_no_valid_namespace_exits_2_and_names_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let too_long = "c".repeat(250); // "Slurm/" + 250 is one past CloudWatch's 255
    for name in ["hpc*", "prod@eu", too_long.as_str()] {
        let out = node_once(dir.path())
            .args(["--sink", "stdout"])
            .env("SLURM_CW_CLUSTER_NAME", name)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{name}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("cluster_name") && stderr(&out).contains("namespace"),
            "{}",
            stderr(&out)
        );
        assert!(out.stdout.is_empty(), "{name}: nothing is collected or sent");
    }
    // The same name read from slurm.conf: refused once it is read.
    let conf = dir.path().join("slurm.conf");
    std::fs::write(&conf, "ClusterName=hpc*\n").unwrap();
    let out =
        node_once(dir.path()).args(["--sink", "stdout"]).env("SLURM_CW_SLURM__CONF", &conf).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("cluster_name"), "{}", stderr(&out));
    // A bad namespace given outright names `namespace`.
    let out = node_once(dir.path())
        .args(["--sink", "stdout"])
        .env("SLURM_CW_CLUSTER_NAME", "hpc-a")
        .env("SLURM_CW_NAMESPACE", "AWS/EC2")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("namespace"), "{}", stderr(&out));
    // With a namespace of its own the same cluster name is fine.
    let out = node_once(dir.path())
        .args(["--sink", "stdout"])
        .env("SLURM_CW_CLUSTER_NAME", "hpc*")
        .env("SLURM_CW_NAMESPACE", "Hpc")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(printed_namespaces(&out), ["Hpc"]);
}

#[test]
fn check_shows_the_namespace_and_fails_a_cluster_name_that_makes_none() {
    let dir = tempfile::tempdir().unwrap();
    let row = |out: &Output| {
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let line = stdout.lines().find(|l| l.starts_with("namespace ")).map(str::to_owned);
        line.unwrap_or_else(|| panic!("no namespace row:\n{stdout}{}", stderr(out)))
    };
    let check = || {
        let mut c = node("--check", dir.path());
        c.args(["--sink", "stdout"]);
        c
    };
    let out = check().env("SLURM_CW_CLUSTER_NAME", "hpc-a").output().unwrap();
    let line = row(&out);
    assert!(line.contains(" ok ") && line.ends_with("Slurm/hpc-a"), "{line}");
    // A cluster name from slurm.conf is only known here: its row fails, as configuration.
    let conf = dir.path().join("slurm.conf");
    std::fs::write(&conf, "ClusterName=hpc*\n").unwrap();
    let out = check().env("SLURM_CW_SLURM__CONF", &conf).output().unwrap();
    let line = row(&out);
    assert!(line.contains(" FAIL ") && line.contains("cluster_name"), "{line}");
    assert_eq!(out.status.code(), Some(2), "a configuration that cannot work: {}", stderr(&out));
}
