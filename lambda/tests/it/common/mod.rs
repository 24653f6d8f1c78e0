//! LocalStack for the Lambda's tests (see shipper/tests/it/common for the bench's rules: outside CI
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
use std::time::{Duration, Instant, SystemTime};

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
        logs: aws_sdk_cloudwatchlogs::Client::new(&sdk),
        sns: aws_sdk_sns::Client::new(&sdk),
        eventbridge: aws_sdk_eventbridge::Client::new(&sdk),
    }
}

/// A name no other test (or earlier run) uses.
pub fn unique(what: &str) -> String {
    // The count: two tests that start together can read the same clock (two once made one log
    // group, and the second failed).
    static COUNT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let k = COUNT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let n = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default().as_nanos();
    format!("{what}-{}-{}-{k}", std::process::id(), n % 1_000_000_000)
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
    read_stat(cw, namespace, cluster, metric, dims, (from, to), "Maximum").await
}

/// Per-minute `stat` of a metric between two minutes (`from`, `to`), inclusive.
pub async fn read_stat(
    cw: &aws_sdk_cloudwatch::Client,
    namespace: &str,
    cluster: &str,
    metric: &CatalogMetric,
    dims: &[(&str, &str)],
    (from, to): (i64, i64),
    stat: &str,
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
                .stat(stat)
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

/// An SQS queue: (client, URL, ARN).
pub async fn queue(url: &str, name: &str) -> (aws_sdk_sqs::Client, String, String) {
    let sqs = aws_sdk_sqs::Client::new(&sdk(url).await);
    let q = sqs.create_queue().queue_name(name).send().await.unwrap();
    let q_url = q.queue_url().unwrap().to_owned();
    let attrs = sqs
        .get_queue_attributes()
        .queue_url(&q_url)
        .attribute_names(aws_sdk_sqs::types::QueueAttributeName::QueueArn)
        .send()
        .await
        .unwrap();
    let arn = attrs.attributes().unwrap()[&aws_sdk_sqs::types::QueueAttributeName::QueueArn].clone();
    (sqs, q_url, arn)
}

/// Messages on queue `q` within `wait` (returns as soon as some came).
pub async fn messages(sqs: &aws_sdk_sqs::Client, q: &str, wait: Duration) -> Vec<String> {
    let start = Instant::now();
    let mut out = Vec::new();
    while start.elapsed() < wait {
        let r = sqs
            .receive_message()
            .queue_url(q)
            .max_number_of_messages(10)
            .wait_time_seconds(1)
            .send()
            .await
            .unwrap();
        for m in r.messages() {
            out.push(m.body().unwrap_or("").to_owned());
            if let Some(h) = m.receipt_handle() {
                sqs.delete_message().queue_url(q).receipt_handle(h).send().await.unwrap();
            }
        }
        if !out.is_empty() {
            break;
        }
    }
    out
}

/// A new SNS topic's ARN.
pub async fn topic(clients: &Clients, name: &str) -> String {
    let out = clients.sns.create_topic().name(unique(name)).send().await.unwrap();
    out.topic_arn().unwrap().to_owned()
}

/// A new topic with a queue subscribed to it: (topic ARN, SQS client, queue URL).
pub async fn subscribed_topic(
    url: &str,
    clients: &Clients,
    name: &str,
) -> (String, aws_sdk_sqs::Client, String) {
    let topic = topic(clients, name).await;
    let (sqs, q_url, q_arn) = queue(url, &unique(name)).await;
    clients.sns.subscribe().topic_arn(&topic).protocol("sqs").endpoint(&q_arn).send().await.unwrap();
    (topic, sqs, q_url)
}

/// Every message body on queue `q`: those that came within `wait`, then whatever follows within
/// 2 s of the last.
pub async fn drained(sqs: &aws_sdk_sqs::Client, q: &str, wait: Duration) -> Vec<String> {
    let mut out = Vec::new();
    let mut wait = wait;
    loop {
        let got = messages(sqs, q, wait).await;
        if got.is_empty() {
            return out;
        }
        out.extend(got);
        // Whatever else is on its way.
        wait = Duration::from_secs(2);
    }
}

/// The notice texts (SNS `Message`) on a subscribed queue, waiting up to `wait` for the first.
pub async fn notices(sqs: &aws_sdk_sqs::Client, q: &str, wait: Duration) -> Vec<String> {
    drained(sqs, q, wait)
        .await
        .into_iter()
        .map(|body| {
            let v: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
            v["Message"].as_str().map_or(body.clone(), str::to_owned)
        })
        .collect()
}

/// A new queue that an EventBridge rule on `bus` (the default bus when None) fills with the
/// events `pattern` matches: (SQS client, queue URL).
pub async fn rule_to_queue(
    url: &str,
    clients: &Clients,
    bus: Option<&str>,
    name: &str,
    pattern: &str,
) -> (aws_sdk_sqs::Client, String) {
    let (sqs, q_url, q_arn) = queue(url, &unique(name)).await;
    let rule = unique(name);
    let target = aws_sdk_eventbridge::types::Target::builder().id("q").arn(&q_arn).build().unwrap();
    let eb = &clients.eventbridge;
    eb.put_rule()
        .name(&rule)
        .set_event_bus_name(bus.map(str::to_owned))
        .event_pattern(pattern)
        .send()
        .await
        .unwrap();
    eb.put_targets()
        .rule(&rule)
        .set_event_bus_name(bus.map(str::to_owned))
        .targets(target)
        .send()
        .await
        .unwrap();
    (sqs, q_url)
}

/// The default job log group of `cluster`, created (as the deployment does) so that the
/// findings stage has somewhere to read.
pub async fn job_group(clients: &Clients, cluster: &str) -> String {
    let group = format!("/slurm-cw/{cluster}/jobs");
    log_group(&clients.logs, &group).await;
    group
}

/// Creates a log group (and nothing else).
pub async fn log_group(logs: &aws_sdk_cloudwatchlogs::Client, group: &str) {
    logs.create_log_group().log_group_name(group).send().await.expect("CreateLogGroup");
}

/// What a node's shipper writes: `records` (event time ms, JSON) to stream `node`, created if
/// missing; in batches, each within a day and in time order as PutLogEvents requires.
pub async fn put_records(
    logs: &aws_sdk_cloudwatchlogs::Client,
    group: &str,
    node: &str,
    records: &[(i64, String)],
) {
    match logs.create_log_stream().log_group_name(group).log_stream_name(node).send().await {
        Ok(_) => {}
        Err(e) if e.as_service_error().is_some_and(|s| s.is_resource_already_exists_exception()) => {}
        Err(e) => panic!("CreateLogStream {group} {node}: {e:?}"),
    }
    let mut records = records.to_vec();
    records.sort_by_key(|(t, _)| *t);
    let mut batch: Vec<aws_sdk_cloudwatchlogs::types::InputLogEvent> = Vec::new();
    let mut first = 0;
    for (t, msg) in &records {
        if !batch.is_empty() && (batch.len() == 5_000 || *t - first > 20 * 3_600_000) {
            put_batch(logs, group, node, std::mem::take(&mut batch)).await;
        }
        if batch.is_empty() {
            first = *t;
        }
        batch.push(
            aws_sdk_cloudwatchlogs::types::InputLogEvent::builder()
                .timestamp(*t)
                .message(msg)
                .build()
                .unwrap(),
        );
    }
    if !batch.is_empty() {
        put_batch(logs, group, node, batch).await;
    }
}

async fn put_batch(
    logs: &aws_sdk_cloudwatchlogs::Client,
    group: &str,
    node: &str,
    batch: Vec<aws_sdk_cloudwatchlogs::types::InputLogEvent>,
) {
    let r = logs
        .put_log_events()
        .log_group_name(group)
        .log_stream_name(node)
        .set_log_events(Some(batch))
        .send()
        .await
        .expect("PutLogEvents");
    assert!(r.rejected_log_events_info().is_none(), "{:?}", r.rejected_log_events_info());
}

/// A `job_finding` record as a node writes it.
pub fn finding(record_id: &str, job: &str, node: &str, kind: &str, ms: i64) -> (i64, String) {
    use slurm_cw_catalog::records as r;
    let v = serde_json::json!({
        r::TYPE.name: r::kinds::JOB_FINDING,
        r::RECORD_ID.name: record_id,
        r::TIME.name: slurm_cw_sink::datum::format_timestamp(slurm_cw_lambda::cw::at_epoch(ms / 1000)),
        r::JOB_ID.name: job,
        r::USER.name: "alice",
        r::ACCOUNT.name: "physics",
        r::PARTITION.name: "gpu",
        r::NODE_NAME.name: node,
        r::FINDING.name: kind,
        r::DETAIL.name: format!("{kind} on {node}"),
    });
    (ms, v.to_string())
}

/// A `job_sample` record (not a finding).
pub fn sample(record_id: &str, job: &str, node: &str, ms: i64) -> (i64, String) {
    use slurm_cw_catalog::records as r;
    let v = serde_json::json!({
        r::TYPE.name: r::kinds::JOB_SAMPLE,
        r::RECORD_ID.name: record_id,
        r::JOB_ID.name: job,
        r::USER.name: "alice",
        r::ACCOUNT.name: "physics",
        r::PARTITION.name: "gpu",
        r::NODE_NAME.name: node,
        "CpuUtilization": 3.5,
        "MemoryRss": 1_000_000,
    });
    (ms, v.to_string())
}
