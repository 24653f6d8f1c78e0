//! The CloudWatch sink and delivery against LocalStack: split on 400 so only the bad datum is
//! lost; flushes kept in the spool while the endpoint is down, sent once when it is back.

use crate::common;

use common::proxy::{Fault, Proxy};
use common::*;
use slurm_cw_catalog::Metric;
use slurm_cw_catalog::dims::{CLUSTER_NAME, JOB_ID};
use slurm_cw_catalog::metrics::{CPU_USAGE, JOB_ALLOCATIONS, MEMORY_USAGE, NODE_COUNT, PROCESS_COUNT};
use slurm_cw_shipper::aggregate::{Aggregate, Summary};
use slurm_cw_shipper::sample::Dims;
use slurm_cw_shipper::sinks::MetricSink;
use slurm_cw_shipper::sinks::cloudwatch::PutMetricDataRules;
use slurm_cw_shipper::sinks::cloudwatch::retry::Backoff;
use slurm_cw_shipper::sinks::cloudwatch::{CloudWatchSink, Settings};
use slurm_cw_shipper::sinks::delivery::{Delivery, Intake, SET_ASIDE_AFTER, StatsHandle, Step};
use slurm_cw_shipper::sinks::spool::Spool;
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

// Catalog metrics in the roles the tests give them (each test has a namespace of its own).
const GOOD: &Metric = &CPU_USAGE;
const BAD: &Metric = &MEMORY_USAGE;
const OLD: &Metric = &NODE_COUNT;
const NEW: &Metric = &JOB_ALLOCATIONS;
const M: &Metric = &PROCESS_COUNT;

fn datum(metric: &'static Metric, job: &str, value: f64) -> Aggregate {
    Aggregate {
        metric,
        dims: Dims::new().with(CLUSTER_NAME, "t").with(JOB_ID, job),
        time: SystemTime::now(),
        value: Summary::Value { value },
    }
}

fn no_spool(sink: CloudWatchSink, stats: &StatsHandle) -> (Intake<Aggregate>, Delivery<MetricSink>) {
    (
        Intake::new("unused", None, stats.clone(), rules()),
        Delivery::new(Box::new(sink) as MetricSink, None, 100_000, stats.clone()),
    )
}

#[ignore = "needs LocalStack: scripts/test.sh runs it"]
#[tokio::test]
async fn a_request_rejected_as_invalid_is_split_until_only_the_bad_datum_is_dropped() {
    let Some(url) = localstack() else { return };
    let ns = unique_namespace("split");
    let sink = CloudWatchSink::new(settings(&url, &ns)).await.unwrap();
    let stats = StatsHandle::default();
    // Without local validation, Values and Counts of different lengths reach CloudWatch, which
    // refuses the whole request (HTTP 400 InvalidParameterValue).
    let (intake, delivery) = no_spool(sink, &stats);
    let (mut intake, mut delivery) = (intake.without_validation(), delivery.without_validation());
    let mut datums: Vec<Aggregate> = (0..10).map(|i| datum(GOOD, &format!("j{i}"), i as f64)).collect();
    let mut bad = datum(BAD, "j6", 0.0);
    bad.value = Summary::Values { values: vec![1.0, 2.0], counts: vec![1.0] };
    datums.insert(6, bad);
    delivery.hold(intake.take(datums));
    assert_eq!(delivery.drain().await, Step::Empty);
    let s = stats.take();
    assert_eq!(s.sent, 10);
    assert_eq!(s.dropped.get(&DropReason::Rejected), Some(&1));
    assert!(s.requests >= 5, "1 request, then halves down to the bad datum: {}", s.requests);

    let cw = cloudwatch(&url).await;
    for i in 0..10 {
        let job = format!("j{i}");
        let v = statistic(
            &cw,
            &ns,
            GOOD.name,
            &[("ClusterName", "t"), ("JobId", &job)],
            "Maximum",
            Duration::from_secs(600),
        )
        .await;
        assert_eq!(v, Some(i as f64), "datum {job}");
    }
}

#[ignore = "needs LocalStack: scripts/test.sh runs it"]
#[tokio::test]
async fn with_validation_the_bad_datum_never_reaches_cloudwatch() {
    let Some(url) = localstack() else { return };
    let ns = unique_namespace("validated");
    let stats = StatsHandle::default();
    let (mut intake, mut delivery) =
        no_spool(CloudWatchSink::new(settings(&url, &ns)).await.unwrap(), &stats);
    let datums = vec![datum(GOOD, "a", 1.0), datum(BAD, "b", f64::INFINITY), datum(GOOD, "c", 3.0)];
    delivery.hold(intake.take(datums));
    assert_eq!(delivery.drain().await, Step::Empty);
    let s = stats.take();
    assert_eq!((s.sent, s.requests), (2, 1), "one request: nothing to split");
    assert_eq!(s.dropped.get(&DropReason::NonFinite), Some(&1));
}

#[ignore = "needs LocalStack: scripts/test.sh runs it"]
#[tokio::test]
async fn an_unreachable_endpoint_keeps_flushes_in_the_spool_until_it_answers() {
    let dir = tempfile::tempdir().unwrap();
    let (spool, _) = Spool::open(dir.path(), 1 << 20).unwrap();
    let spool = std::sync::Arc::new(std::sync::Mutex::new(spool));
    let ns = unique_namespace("spooled");
    let stats = StatsHandle::default();
    let mut intake = Intake::new(&ns, Some(spool.clone()), stats.clone(), rules());
    let down = CloudWatchSink::new(settings("http://127.0.0.1:9", &ns)).await.unwrap();
    let mut delivery = Delivery::new(Box::new(down) as MetricSink, Some(spool.clone()), 1000, stats.clone());
    delivery.hold(intake.take(vec![datum(GOOD, "a", 1.0)]));
    let step = delivery.drain().await;
    assert!(matches!(&step, Step::Failed(e) if e.contains("cannot reach")), "{step:?}");
    let s = stats.take();
    assert_eq!((s.requests, s.retries), (3, 2), "max_retries = 2");
    delivery.hold(intake.take(vec![datum(GOOD, "b", 2.0)]));
    assert_eq!(delivery.waiting(), (0, 2), "two flushes on disk, none in memory");

    // CloudWatch answers again (here: LocalStack): both flushes go, oldest first, and leave.
    let Some(url) = localstack() else { return };
    let up = CloudWatchSink::new(settings(&url, &ns)).await.unwrap();
    let mut delivery = Delivery::new(Box::new(up) as MetricSink, Some(spool.clone()), 1000, stats.clone());
    assert_eq!(delivery.drain().await, Step::Empty);
    assert_eq!(delivery.waiting(), (0, 0));
    assert_eq!(stats.take().sent, 2);
    let cw = cloudwatch(&url).await;
    for (job, v) in [("a", 1.0), ("b", 2.0)] {
        let got = statistic(
            &cw,
            &ns,
            GOOD.name,
            &[("ClusterName", "t"), ("JobId", job)],
            "SampleCount",
            Duration::from_secs(600),
        )
        .await;
        assert_eq!(got, Some(1.0), "{job} once");
        let got = statistic(
            &cw,
            &ns,
            GOOD.name,
            &[("ClusterName", "t"), ("JobId", job)],
            "Maximum",
            Duration::from_secs(600),
        )
        .await;
        assert_eq!(got, Some(v));
    }
}

/// A spooled flush for a namespace the role may not write (AccessDenied after a namespace
/// change) must not hold newer flushes back for 14 days: after a few refusals the newer ones
/// go, and the refused one is set aside, counted, and kept on disk.
#[ignore = "needs LocalStack: scripts/test.sh runs it"]
#[tokio::test]
async fn a_flush_refused_for_good_is_set_aside_and_newer_ones_are_delivered() {
    let Some(url) = localstack() else { return };
    let upstream: std::net::SocketAddr = url.trim_start_matches("http://").parse().unwrap();
    let proxy = Proxy::start(upstream, Box::new(|_| Fault::Forward));
    let denied = unique_namespace("denied");
    let allowed = unique_namespace("allowed");
    proxy.deny_body_containing(denied.as_bytes());
    let dir = tempfile::tempdir().unwrap();
    let (spool, _) = Spool::open(dir.path(), 1 << 20).unwrap();
    let spool = std::sync::Arc::new(std::sync::Mutex::new(spool));
    let stats = StatsHandle::default();
    // The first flush was spooled under the old namespace; the newer ones under the new.
    Intake::new(&denied, Some(spool.clone()), stats.clone(), rules()).take(vec![datum(OLD, "a", 1.0)]);
    let mut intake = Intake::new(&allowed, Some(spool.clone()), stats.clone(), rules());
    intake.take(vec![datum(NEW, "b", 2.0)]);
    intake.take(vec![datum(NEW, "c", 3.0)]);
    let sink = CloudWatchSink::new(settings(&proxy.url(), &allowed)).await.unwrap();
    let mut delivery = Delivery::new(Box::new(sink) as MetricSink, Some(spool.clone()), 1000, stats.clone());
    let mut steps = Vec::new();
    for _ in 0..10 {
        match delivery.send_oldest().await {
            Step::Empty => break,
            step => steps.push(step),
        }
    }
    let refusals =
        steps.iter().filter(|s| matches!(s, Step::Failed(e) if e.contains("AccessDenied"))).count();
    assert_eq!(refusals, SET_ASIDE_AFTER as usize, "{steps:?}");
    assert_eq!(delivery.waiting(), (0, 0), "nothing waits behind the refused flush");
    let s = stats.take();
    assert_eq!(s.dropped.get(&DropReason::SetAside), Some(&1), "counted with its reason");
    assert_eq!(s.sent, 2);
    let aside: Vec<_> = std::fs::read_dir(dir.path().join("aside")).unwrap().flatten().collect();
    assert_eq!(aside.len(), 1, "kept on disk for a person to look at");
    let cw = cloudwatch(&url).await;
    for (job, v) in [("b", 2.0), ("c", 3.0)] {
        let got = statistic(
            &cw,
            &allowed,
            NEW.name,
            &[("ClusterName", "t"), ("JobId", job)],
            "Maximum",
            Duration::from_secs(600),
        )
        .await;
        assert_eq!(got, Some(v), "{job}");
    }
}

/// Refused for good but nothing newer goes through either (credentials, say): nothing is set
/// aside, everything waits.
#[ignore = "needs LocalStack: scripts/test.sh runs it"]
#[tokio::test]
async fn when_everything_is_refused_nothing_is_set_aside() {
    let Some(url) = localstack() else { return };
    let upstream: std::net::SocketAddr = url.trim_start_matches("http://").parse().unwrap();
    let proxy = Proxy::start(upstream, Box::new(|_| Fault::Forward));
    let ns = unique_namespace("all-denied");
    proxy.deny_body_containing(ns.as_bytes());
    let dir = tempfile::tempdir().unwrap();
    let (spool, _) = Spool::open(dir.path(), 1 << 20).unwrap();
    let spool = std::sync::Arc::new(std::sync::Mutex::new(spool));
    let stats = StatsHandle::default();
    let mut intake = Intake::new(&ns, Some(spool.clone()), stats.clone(), rules());
    for job in ["a", "b", "c"] {
        intake.take(vec![datum(M, job, 1.0)]);
    }
    let sink = CloudWatchSink::new(settings(&proxy.url(), &ns)).await.unwrap();
    let mut delivery = Delivery::new(Box::new(sink) as MetricSink, Some(spool.clone()), 1000, stats.clone());
    for _ in 0..15 {
        assert!(matches!(delivery.send_oldest().await, Step::Failed(_)));
    }
    assert_eq!(delivery.waiting(), (0, 3), "all three still wait");
    assert_eq!(stats.take().dropped.get(&DropReason::SetAside), None);
    // The service takes it again: all three go, oldest first.
    proxy.allow_all();
    assert_eq!(delivery.drain().await, Step::Empty);
    assert_eq!(stats.take().sent, 3);
}

/// CloudWatch's own rules, as its route applies them.
fn rules() -> Box<PutMetricDataRules> {
    Box::new(PutMetricDataRules::default())
}
