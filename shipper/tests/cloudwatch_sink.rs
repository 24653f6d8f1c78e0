//! The CloudWatch sink against LocalStack: split on 400 so only the bad datum is lost.

mod common;

use common::*;
use slurm_cw_shipper::datum::{Datum, DatumValue};
use slurm_cw_shipper::sinks::Sink;
use slurm_cw_shipper::sinks::cloudwatch::retry::Backoff;
use slurm_cw_shipper::sinks::cloudwatch::{CloudWatchSink, Settings};
use slurm_cw_shipper::sinks::delivery::{Delivery, StatsHandle};
use slurm_cw_shipper::sinks::validate::DropReason;
use std::time::{Duration, SystemTime};

fn settings(url: &str, ns: &str) -> Settings {
    Settings {
        namespace: ns.into(),
        region: Some("us-east-1".into()),
        endpoint: Some(url.into()),
        backoff: Backoff { base: Duration::from_millis(50), cap: Duration::from_millis(200), max_retries: 2 },
        attempt_timeout: Duration::from_secs(10),
        storage_resolution: 60,
    }
}

fn datum(metric: &str, job: &str, value: f64) -> Datum {
    Datum {
        metric: metric.into(),
        unit: "Count".into(),
        dimensions: vec![("ClusterName".into(), "t".into()), ("JobId".into(), job.into())],
        timestamp: SystemTime::now(),
        value: DatumValue::Value { value },
    }
}

#[tokio::test]
async fn a_request_rejected_as_invalid_is_split_until_only_the_bad_datum_is_dropped() {
    let Some(url) = localstack() else { return };
    let ns = unique_namespace("split");
    let sink = CloudWatchSink::new(settings(&url, &ns)).await;
    let stats = StatsHandle::default();
    // Without local validation, Values and Counts of different lengths reach CloudWatch, which
    // refuses the whole request (HTTP 400 InvalidParameterValue).
    let mut delivery = Delivery::new(Sink::CloudWatch(sink), 1000, stats.clone()).without_validation();
    let mut datums: Vec<Datum> = (0..10).map(|i| datum("Good", &format!("j{i}"), i as f64)).collect();
    let mut bad = datum("Bad", "j6", 0.0);
    bad.value = DatumValue::Values { values: vec![1.0, 2.0], counts: vec![1.0] };
    datums.insert(6, bad);
    let report = delivery.deliver(datums).await;
    assert_eq!(report.sent, 10, "{report:?}");
    assert_eq!(report.dropped, 1);
    assert_eq!(report.pending, 0);
    let s = stats.take();
    assert_eq!(s.dropped.get(&DropReason::Rejected), Some(&1));
    assert!(s.requests >= 5, "1 request, then halves down to the bad datum: {}", s.requests);

    let cw = cloudwatch(&url).await;
    for i in 0..10 {
        let job = format!("j{i}");
        let v = statistic(
            &cw,
            &ns,
            "Good",
            &[("ClusterName", "t"), ("JobId", &job)],
            "Maximum",
            Duration::from_secs(600),
        )
        .await;
        assert_eq!(v, Some(i as f64), "datum {job}");
    }
}

#[tokio::test]
async fn with_validation_the_bad_datum_never_reaches_cloudwatch() {
    let Some(url) = localstack() else { return };
    let ns = unique_namespace("validated");
    let sink = CloudWatchSink::new(settings(&url, &ns)).await;
    let stats = StatsHandle::default();
    let mut delivery = Delivery::new(Sink::CloudWatch(sink), 1000, stats.clone());
    let datums = vec![datum("Good", "a", 1.0), datum("Bad", "b", f64::INFINITY), datum("Good", "c", 3.0)];
    let report = delivery.deliver(datums).await;
    assert_eq!((report.sent, report.dropped, report.pending), (2, 1, 0));
    let s = stats.take();
    assert_eq!(s.requests, 1, "one request: nothing to split");
    assert_eq!(s.dropped.get(&DropReason::NonFinite), Some(&1));
}

#[tokio::test]
async fn an_unreachable_endpoint_keeps_the_data_for_later_and_counts_retries() {
    let ns = "SlurmTest/unreachable";
    let sink = CloudWatchSink::new(settings("http://127.0.0.1:9", ns)).await;
    let stats = StatsHandle::default();
    let mut delivery = Delivery::new(Sink::CloudWatch(sink), 1000, stats.clone());
    let report = delivery.deliver(vec![datum("Good", "a", 1.0)]).await;
    assert_eq!((report.sent, report.pending), (0, 1));
    assert!(report.error.as_deref().unwrap_or("").contains("cannot reach"), "{report:?}");
    let s = stats.take();
    assert_eq!((s.requests, s.retries), (3, 2), "max_retries = 2");
    // The backlog goes out first next time; with the endpoint still down it stays queued.
    let report = delivery.deliver(vec![datum("Good", "b", 2.0)]).await;
    assert_eq!(report.pending, 2);
}
