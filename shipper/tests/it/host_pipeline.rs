//! The node role's whole pipeline with and without EFA, Lustre and RAPL: a node without them
//! ships exactly the series and records it would without the host collector, and a node with
//! them adds only the catalog's NodeHardware metrics across the cluster, the host collector's
//! own duration and error series, and one node_sample record.

use crate::common::copy_tree;
use slurm_cw_catalog::{Group, by_name};
use slurm_cw_shipper::pipeline::{Flushed, Parts, Pipeline};
use slurm_cw_shipper::role::Role;
use slurm_cw_shipper::settings::{Settings, Toggle};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// A node running the cgroup v2 fixture job, with `sys` and `proc` fixture trees added for
/// the host sources; two collections and a flush.
async fn run(dir: &Path, sys: &[&str], proc: &[&str], per_node: bool) -> Flushed {
    let (cg, procfs, sysfs, bin) = (dir.join("cg"), dir.join("proc"), dir.join("sys"), dir.join("bin"));
    copy_tree(&fixtures().join("cgroup/v2-kernel-docs"), &cg);
    copy_tree(&fixtures().join("proc/slurm-job-1001"), &procfs);
    std::fs::create_dir_all(&sysfs).unwrap();
    std::fs::create_dir_all(&bin).unwrap();
    for s in sys {
        copy_tree(&fixtures().join("sys").join(s), &sysfs);
    }
    for p in proc {
        copy_tree(&fixtures().join("proc").join(p), &procfs);
    }
    let mut config = Settings::default();
    config.node.cgroup_root = cg;
    config.node.proc_root = procfs;
    config.node.sys_root = sysfs;
    // No Slurm commands and no GPUs here: the same for both runs.
    config.slurm.bin_dir = Some(bin);
    config.gpu.enabled = Toggle::Off;
    config.self_metrics_per_node = per_node;
    let mut p = Pipeline::new(
        &config.pipeline(),
        Role::Node,
        slurm_cw_shipper::sources::table::build(&config, Role::Node, "n1", Default::default()),
        Parts::cloudwatch("c", "n1"),
    );
    p.collect().await;
    p.collect().await;
    p.flush()
}

/// Every series as `Metric Dim=value,...`, and every record's Type.
fn series(f: &Flushed) -> (BTreeSet<String>, Vec<String>) {
    let names = f.aggregates[0]
        .iter()
        .map(|d| {
            let dims: Vec<String> = d.dims.iter().map(|(k, v)| format!("{k}={v}")).collect();
            format!("{} {}", d.metric.name, dims.join(","))
        })
        .collect();
    let types = f
        .records
        .iter()
        .map(|r| {
            serde_json::from_str::<serde_json::Value>(&r.message).unwrap()["Type"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    (names, types)
}

#[tokio::test]
async fn without_the_sources_nothing_changes_and_with_them_only_the_new_series() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (without, without_records) = series(&run(a.path(), &[], &[], false).await);
    for s in &without {
        let metric = s.split(' ').next().unwrap();
        assert_ne!(by_name(metric).map(|m| m.group), Some(Group::NodeHardware), "{s}");
        for c in ["host", "fabric", "lustre", "rapl"] {
            assert!(!s.contains(&format!("Collector={c}")), "{s}");
        }
    }
    assert_eq!(without_records, vec!["job_sample"], "no node_sample record");

    let sys = ["efa-2.17", "lustre-2.15", "rapl-2-socket"];
    let (with, with_records) = series(&run(b.path(), &sys, &[], false).await);
    let added: Vec<&String> = with.difference(&without).collect();
    let removed: Vec<&String> = without.difference(&with).collect();
    assert!(removed.is_empty(), "{removed:?}");
    assert_eq!(
        added,
        vec![
            "CpuPackagePower ClusterName=c",
            "FabricErrors ClusterName=c",
            "FabricRxBytes ClusterName=c",
            "FabricTxBytes ClusterName=c",
            "LustreMetadataOps ClusterName=c",
            "LustreReadBytes ClusterName=c",
            "LustreWriteBytes ClusterName=c",
            "ShipperCollectionDuration ClusterName=c,Collector=host",
        ],
        "8 series: 7 metrics and the collector's time, across the cluster (its errors, never above zero, are not sent)"
    );
    assert_eq!(with_records, vec!["job_sample", "node_sample"]);
}

#[tokio::test]
async fn per_node_series_only_with_self_metrics_per_node() {
    let dir = tempfile::tempdir().unwrap();
    let (with, _) = series(&run(dir.path(), &["efa-2.17"], &[], true).await);
    let fabric: Vec<&String> = with.iter().filter(|s| s.starts_with("FabricRxBytes")).collect();
    assert_eq!(fabric, vec!["FabricRxBytes ClusterName=c", "FabricRxBytes ClusterName=c,NodeName=n1"]);
}
