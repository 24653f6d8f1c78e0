//! LocalStack for the Lambda's tests (see shipper/tests/common for the bench's rules: outside CI
//! a missing LocalStack skips with a reason, with CI=true it fails).
#![allow(dead_code)]

pub mod runtime;

use aws_sdk_cloudwatch::types::{Dimension, Metric, MetricDataQuery, MetricStat};
use slurm_cw_catalog::Metric as CatalogMetric;
use slurm_cw_lambda::config::Config;
use slurm_cw_lambda::cw::datum;
use slurm_cw_lambda::handler::Clients;
use slurm_cw_sink::cloudwatch::retry::Backoff;
use slurm_cw_sink::cloudwatch::{CloudWatchSink, Settings};
use slurm_cw_sink::datum::Datum;
use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

pub fn localstack() -> Option<String> {
    match std::env::var("BENCH_LOCALSTACK_URL") {
        Ok(u) if !u.is_empty() => Some(u),
        _ => {
            if std::env::var("CI").is_ok_and(|v| v == "true" || v == "1") {
                panic!(
                    "LocalStack is not available and CI=true requires it: run `eval \"$(scripts/bench/localstack.sh start)\"`"
                );
            }
            eprintln!("SKIPPED: LocalStack is not available");
            None
        }
    }
}

pub async fn sdk(url: &str) -> aws_config::SdkConfig {
    aws_config::defaults(aws_config::BehaviorVersion::latest())
        .endpoint_url(url)
        .region(aws_config::Region::new("us-east-1"))
        .credentials_provider(aws_sdk_cloudwatch::config::Credentials::new(
            "test", "test", None, None, "bench",
        ))
        .load()
        .await
}

pub async fn clients(url: &str) -> Clients {
    let sdk = sdk(url).await;
    Clients {
        cloudwatch: aws_sdk_cloudwatch::Client::new(&sdk),
        sns: aws_sdk_sns::Client::new(&sdk),
        eventbridge: aws_sdk_eventbridge::Client::new(&sdk),
    }
}

/// A name no other test (or earlier run) uses.
pub fn unique(what: &str) -> String {
    let n = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default().as_nanos();
    format!("{what}-{}-{}", std::process::id(), n % 1_000_000_000)
}

pub fn config(namespace: &str, cluster: &str) -> Config {
    Config::from_json(&format!(r#"{{"namespace": "{namespace}", "cluster_name": "{cluster}"}}"#)).unwrap()
}

/// The start of the minute `minutes_ago` minutes before now, in epoch seconds.
pub fn minute_ago(minutes_ago: i64) -> i64 {
    let now = slurm_cw_lambda::cw::epoch(SystemTime::now());
    now - now.rem_euclid(60) - minutes_ago * 60
}

/// What a shipper would have sent: `metric` with `dims` at the middle of each given minute.
pub fn series(
    cluster: &str,
    metric: &CatalogMetric,
    dims: &[(&str, &str)],
    points: &[(i64, f64)],
) -> Vec<Datum> {
    let dims: Vec<(String, String)> = dims.iter().map(|(k, v)| ((*k).into(), (*v).into())).collect();
    points.iter().map(|(minute, v)| datum(cluster, metric, &dims, minute + 30, *v)).collect()
}

pub async fn put(url: &str, namespace: &str, datums: Vec<Datum>) {
    let sdk = sdk(url).await;
    let settings = Settings {
        namespace: namespace.into(),
        region: None,
        endpoint: None,
        backoff: Backoff { base: Duration::from_millis(50), cap: Duration::from_secs(1), max_retries: 3 },
        attempt_timeout: Duration::from_secs(30),
        storage_resolution: 60,
    };
    let n = datums.len();
    let out = CloudWatchSink::from_client(aws_sdk_cloudwatch::Client::new(&sdk), settings).put(datums).await;
    assert_eq!(out.sent, n, "seeding LocalStack: {:?}", out.last_error);
}

/// Per-minute values of a metric (Maximum) between two minutes, inclusive.
pub async fn read(
    cw: &aws_sdk_cloudwatch::Client,
    namespace: &str,
    cluster: &str,
    metric: &CatalogMetric,
    dims: &[(&str, &str)],
    from: i64,
    to: i64,
) -> BTreeMap<i64, f64> {
    let mut d = vec![Dimension::builder().name("ClusterName").value(cluster).build()];
    d.extend(dims.iter().map(|(k, v)| Dimension::builder().name(*k).value(*v).build()));
    let q = MetricDataQuery::builder()
        .id("q")
        .metric_stat(
            MetricStat::builder()
                .metric(
                    Metric::builder()
                        .namespace(namespace)
                        .metric_name(metric.name)
                        .set_dimensions(Some(d))
                        .build(),
                )
                .period(60)
                .stat("Maximum")
                .build(),
        )
        .build();
    let resp = cw
        .get_metric_data()
        .metric_data_queries(q)
        .start_time(aws_smithy_types::DateTime::from_secs(from))
        .end_time(aws_smithy_types::DateTime::from_secs(to + 60))
        .send()
        .await
        .expect("GetMetricData");
    let mut out = BTreeMap::new();
    for r in resp.metric_data_results() {
        for (t, v) in r.timestamps().iter().zip(r.values()) {
            out.insert(t.secs(), *v);
        }
    }
    out
}

/// The time at which an invocation derives `minute`.
pub fn invocation_for(minute: i64) -> SystemTime {
    slurm_cw_lambda::cw::at_epoch(minute + slurm_cw_lambda::handler::DELAY_MINUTES * 60 + 7)
}
