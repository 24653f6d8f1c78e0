use super::*;
use crate::datum::Stats;
use slurm_cw_catalog::Metric;
use slurm_cw_catalog::metrics::{CPU_USAGE, JOBS_ON_NODE, MEMORY_USAGE};
use std::time::{Duration, SystemTime};

fn datum(
    metric: &'static Metric,
    dims: &[(&'static str, &str)],
    at: SystemTime,
    value: Summary,
) -> Aggregate {
    let dims = dims.iter().fold(Dims::new(), |d, (n, v)| d.with(n, *v));
    Aggregate { metric, dims, time: at, value }
}

fn stats(min: f64, max: f64, sum: f64, count: f64) -> Summary {
    Summary::Stats { stats: Stats { min, max, sum, count } }
}

/// (Sum, SampleCount, Minimum, Maximum) as CloudWatch computes them from the values.
fn read_back(values: &[f64]) -> (f64, f64, f64, f64) {
    let min = values.iter().copied().fold(f64::INFINITY, f64::min);
    let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    (values.iter().sum(), values.len() as f64, min, max)
}

#[test]
fn a_statistic_set_reads_back_as_itself() {
    for (min, max, sum, count) in
        [(1.0, 9.0, 25.0, 5.0), (2.0, 2.0, 2.0, 1.0), (3.0, 7.0, 10.0, 2.0), (0.0, 100.0, 150.0, 3.0)]
    {
        let v = values(&stats(min, max, sum, count));
        let (s, n, lo, hi) = read_back(&v);
        assert!((s - sum).abs() < 1e-9 && n == count && lo == min && hi == max, "{v:?}");
    }
    assert!(values(&stats(0.0, 0.0, 0.0, 0.0)).is_empty());
    let counted = values(&Summary::Values { values: vec![1.0, 5.0], counts: vec![2.0, 1.0] });
    assert_eq!(counted, [1.0, 1.0, 5.0]);
}

#[test]
fn one_event_per_dimension_set_and_minute_with_the_spec_s_directive() {
    let t = UNIX_EPOCH + Duration::from_secs(1_700_000_040);
    let cluster = [("ClusterName", "c1")];
    let job = [("ClusterName", "c1"), ("JobId", "42")];
    let datums = vec![
        datum(&JOBS_ON_NODE, &cluster, t, Summary::Value { value: 2.0 }),
        datum(&MEMORY_USAGE, &job, t, stats(100.0, 300.0, 600.0, 3.0)),
        datum(&CPU_USAGE, &job, t, Summary::Value { value: 50.0 }),
        datum(&JOBS_ON_NODE, &cluster, t + Duration::from_secs(60), Summary::Value { value: 1.0 }),
    ];
    let out = encode("Slurm/c1", 60, &datums);
    assert_eq!(out.records.len(), 3, "two dimension sets at t, one at t+60");
    let events: Vec<Value> = out.records.iter().map(|r| serde_json::from_str(&r.message).unwrap()).collect();
    let job_event = events.iter().find(|e| e.get("JobId").is_some()).unwrap();
    assert_eq!(job_event["_aws"]["Timestamp"], 1_700_000_040_000i64);
    let d = &job_event["_aws"]["CloudWatchMetrics"][0];
    assert_eq!(d["Namespace"], "Slurm/c1");
    assert_eq!(d["Dimensions"], json!([["ClusterName", "JobId"]]));
    assert_eq!(d["Metrics"][0], json!({"Name": "CpuUsage", "Unit": "Count"}), "60 s resolution, the default");
    assert_eq!(job_event["JobId"], "42");
    assert_eq!(job_event["MemoryUsage"], json!([100.0, 300.0, 200.0]));
    assert_eq!(job_event["CpuUsage"], json!(50.0));
    let at = out.records.iter().position(|r| r.message.contains("\"JobId\"")).unwrap();
    assert_eq!(out.sources[at], [2, 1], "the event carries both job datums");
}

#[test]
fn more_than_100_values_or_metrics_go_into_further_events() {
    let t = UNIX_EPOCH + Duration::from_secs(1_700_000_040);
    let dims = [("ClusterName", "c1")];
    let mut datums = vec![datum(&MEMORY_USAGE, &dims, t, stats(0.0, 10.0, 1250.0, 250.0))];
    let others = slurm_cw_catalog::ALL.iter().filter(|m| m.name != MEMORY_USAGE.name).take(150);
    for (i, m) in others.enumerate() {
        datums.push(datum(m, &dims, t, Summary::Value { value: i as f64 }));
    }
    assert_eq!(datums.len(), 151, "the catalog has 150 other metrics");
    let out = encode("ns", 1, &datums);
    assert!(out.records[0].message.contains(r#""StorageResolution":1"#), "high resolution said");
    let mut big = Vec::new();
    let mut metrics = 0;
    for r in &out.records {
        let e: Value = serde_json::from_str(&r.message).unwrap();
        let declared = e["_aws"]["CloudWatchMetrics"][0]["Metrics"].as_array().unwrap().len();
        assert!(declared <= MAX_METRICS);
        metrics += declared;
        if let Some(v) = e.get("MemoryUsage") {
            let v = v.as_array().unwrap();
            assert!(v.len() <= MAX_VALUES);
            big.extend(v.iter().map(|x| x.as_f64().unwrap()));
        }
    }
    assert_eq!(metrics, 151 + 2, "MemoryUsage in three events, the rest once");
    let (s, n, lo, hi) = read_back(&big);
    assert_eq!((s, n, lo, hi), (1250.0, 250.0, 0.0, 10.0));
}

#[test]
fn no_metric_of_the_catalog_is_named_as_a_dimension() {
    // A metric's values and a dimension's value share the event's members.
    let dims: std::collections::BTreeSet<&str> = slurm_cw_catalog::ALL
        .iter()
        .flat_map(|m| m.dimension_sets.iter().flat_map(|set| set.iter().copied()))
        .chain([slurm_cw_catalog::dims::CLUSTER_NAME])
        .collect();
    for m in slurm_cw_catalog::ALL {
        assert!(!dims.contains(m.name) && m.name != "_aws", "{}", m.name);
    }
}
