//! The `emf` destination against LocalStack: the real binary's node figures for the golden
//! fixture node, sent as embedded-metric-format events with PutLogEvents, read back with
//! FilterLogEvents, checked against AWS's specification (common/emf.rs) and turned into
//! metrics as CloudWatch would: the same series and values as the golden file
//! (tests/fixtures/golden/node.txt, what `--sink stdout` prints). LocalStack does not extract
//! metrics from EMF events; this reading is the test's, the format's rules AWS's.

use crate::common;

use common::emf::{Extracted, metrics};
use common::*;
use serde_json::Value;
use slurm_cw_shipper::sources::node::owner::user_name;
use std::collections::BTreeMap;
use std::path::PathBuf;

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// Figures the host measures (the golden file masks them): their series, not their values.
const HOST_DEPENDENT: &[&str] = &["ShipperCollectionDuration", "ShipperCpuUsage", "ShipperMemoryRss"];

type Series = (String, Vec<(String, String)>);

/// (Sum, SampleCount, Minimum, Maximum) of values, as CloudWatch keeps them.
fn statistics(values: &[f64]) -> [f64; 4] {
    let min = values.iter().copied().fold(f64::INFINITY, f64::min);
    let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    [values.iter().sum(), values.len() as f64, min, max]
}

/// The golden file's datums: series -> values (None where masked).
fn golden_datums(user: &str) -> BTreeMap<Series, Option<Vec<f64>>> {
    let text = std::fs::read_to_string(fixtures().join("golden/node.txt")).unwrap();
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let v: Value = serde_json::from_str(line).unwrap();
        let Some(metric) = v.get("metric").and_then(Value::as_str) else { continue };
        let mut dims: Vec<(String, String)> = v["dimensions"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, x)| {
                let x = x.as_str().unwrap();
                let x = if k == "User" && x == "<uid 1000>" { user } else { x };
                (k.clone(), x.to_owned())
            })
            .collect();
        dims.sort();
        let values = match (v.get("value"), v.get("values")) {
            (Some(Value::Number(x)), _) => Some(vec![x.as_f64().unwrap()]),
            (_, Some(Value::Array(xs))) => {
                let counts = v["counts"].as_array().unwrap();
                let mut out = Vec::new();
                for (x, c) in xs.iter().zip(counts) {
                    out.extend(std::iter::repeat_n(x.as_f64().unwrap(), c.as_f64().unwrap() as usize));
                }
                Some(out)
            }
            _ => None,
        };
        out.insert((metric.to_owned(), dims), values);
    }
    out
}

#[ignore = "needs LocalStack: scripts/test.sh runs it"]
#[tokio::test]
async fn the_golden_nodes_figures_arrive_as_emf_events_that_read_back_as_the_same_metrics() {
    let Some(url) = localstack() else { return };
    let logs = logs(&url).await;
    let group = format!("/slurm-cw/{}/metrics", unique_namespace("emf").replace('/', "-"));
    logs.create_log_group().log_group_name(&group).send().await.expect("CreateLogGroup");
    let jobs = job_log_group(&logs, "emf").await;
    let tmp = tempfile::tempdir().unwrap();
    let sys = golden_sys_root(tmp.path());
    let bin = tmp.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let out = shipper()
        .args(["--once", "--sink", "emf", "--role", "node"])
        .envs(shipper_env(&url, "Slurm/golden"))
        .env("SLURM_CW_CLUSTER_NAME", "golden")
        .env("SLURM_CW_NODE_NAME", "c3")
        .env("SLURM_CW_GPU__ENABLED", "off")
        .env("SLURM_CW_SLURM__BIN_DIR", &bin)
        .env("SLURM_CW_NODE__CGROUP_ROOT", fixtures().join("cgroup/v2-kernel-docs"))
        .env("SLURM_CW_NODE__PROC_ROOT", fixtures().join("proc/slurm-job-1001"))
        .env("SLURM_CW_NODE__SYS_ROOT", &sys)
        .env("SLURM_CW_SPOOL__DIR", tmp.path().join("spool"))
        .env("SLURM_CW_EMF__LOG_GROUP", &group)
        .env("SLURM_CW_LOGS__GROUP", &jobs)
        .output()
        .unwrap();
    assert!(out.status.success(), "shipper failed: {}", String::from_utf8_lossy(&out.stderr));

    let user = user_name(1000).unwrap_or_else(|| "1000".into());
    // Standard output has no spool; `emf` has one, yet says nothing of it: its backlog and file
    // count, at zero since the start, are not sent.
    let want = golden_datums(&user);
    let mut got: BTreeMap<Series, Vec<f64>> = BTreeMap::new();
    for Extracted { namespace, name, dims, values, unit, resolution, .. } in metrics(&logs, &group).await {
        assert_eq!((namespace.as_str(), resolution), ("Slurm/golden", 60));
        let catalog =
            slurm_cw_catalog::by_name(&name).unwrap_or_else(|| panic!("{name} is not in the catalog"));
        assert_eq!(unit, catalog.unit.as_str(), "{name}'s unit");
        got.entry((name, dims)).or_default().extend(values);
    }
    let want_series: Vec<&Series> = want.keys().collect();
    let got_series: Vec<&Series> = got.keys().collect();
    assert_eq!(got_series, want_series, "the same series as the golden file");
    for (series, values) in &want {
        let Some(values) = values.as_ref().filter(|_| !HOST_DEPENDENT.contains(&series.0.as_str())) else {
            continue;
        };
        let want = statistics(values);
        assert_eq!(statistics(&got[series]), want, "{series:?}");
    }
    // The job records went to the job log group, as with `cloudwatch`.
    assert!(!records(&logs, &jobs, &[("JobId", "1001")]).await.is_empty(), "the job's records");
}
