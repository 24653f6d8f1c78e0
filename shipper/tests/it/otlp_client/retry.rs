//! How the OTLP sink meets a receiver's answers, against a loopback receiver that answers as
//! each test scripts: retried (503), split until the bad datum is dropped (400), kept for later
//! (unreachable, 403).

use super::common;

use slurm_cw_shipper::aggregate::Aggregate;
use slurm_cw_shipper::sinks::otlp::{OtlpSink, Settings, SigV4, resource};
use slurm_cw_sink::datum::DatumValue;
use slurm_cw_sink::retry::Backoff;
use std::time::{Duration, SystemTime};

fn settings(endpoint: &str, max_retries: u32) -> Settings {
    Settings {
        endpoint: endpoint.to_owned(),
        region: None,
        sigv4: SigV4::Auto,
        resource: resource("c1", "n1"),
        backoff: Backoff { base: Duration::from_millis(5), cap: Duration::from_millis(20), max_retries },
        attempt_timeout: Duration::from_secs(5),
        max_request_bytes: slurm_cw_shipper::sinks::otlp::client::DEFAULT_MAX_REQUEST_BYTES,
    }
}

fn datums(jobs: &[&str]) -> Vec<Aggregate> {
    jobs.iter()
        .map(|job| {
            common::aggregate(slurm_cw_sink::cloudwatch::datum(
                "c1",
                &slurm_cw_catalog::metrics::MEMORY_RSS,
                [("JobId".to_owned(), (*job).to_owned())],
                SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000),
                DatumValue::Value { value: 1.0 },
            ))
        })
        .collect()
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle.as_bytes())
}

#[tokio::test]
async fn a_503_is_retried_and_then_sent() {
    let receiver = common::receiver(|_, n| if n == 0 { 503 } else { 200 }).await;
    let mut sink = OtlpSink::new(settings(&receiver.url, 3)).await.expect("builds");
    let outcome = sink.put(datums(&["1", "2"])).await;
    assert_eq!((outcome.sent, outcome.requests, outcome.retries), (2, 2, 1));
    assert!(outcome.undelivered.is_empty() && outcome.rejected.is_empty());
    let requests = receiver.requests();
    assert_eq!(requests[0].body, requests[1].body, "the same request again");
}

#[tokio::test]
async fn a_request_refused_as_invalid_is_split_until_the_bad_datum_is_dropped() {
    // The receiver refuses any request holding job "bad".
    let receiver = common::receiver(|r, _| if contains(&r.plain_body(), "bad") { 400 } else { 200 }).await;
    let mut sink = OtlpSink::new(settings(&receiver.url, 3)).await.expect("builds");
    let outcome = sink.put(datums(&["1", "2", "bad", "4"])).await;
    assert_eq!(outcome.sent, 3);
    let rejected: Vec<&str> = outcome.rejected.iter().filter_map(|d| d.dimension("JobId")).collect();
    assert_eq!(rejected, vec!["bad"]);
    assert!(outcome.undelivered.is_empty());
    assert_eq!(outcome.retries, 0, "an invalid request is not retried as it was");
    assert!(outcome.last_error.is_some_and(|e| e.contains("HTTP 400")));
}

#[tokio::test]
async fn an_unreachable_receiver_gives_every_datum_back() {
    // A port just freed: connections are refused.
    let port =
        std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a port").port();
    let mut sink =
        OtlpSink::new(settings(&format!("http://127.0.0.1:{port}/v1/metrics"), 2)).await.expect("builds");
    let sent = datums(&["1", "2", "3"]);
    let outcome = sink.put(sent.clone()).await;
    assert_eq!(outcome.sent, 0);
    assert_eq!(outcome.undelivered, sent, "kept, in order, for the spool");
    assert_eq!((outcome.requests, outcome.retries), (3, 2));
    assert!(!outcome.persistent);
    assert!(outcome.last_error.is_some_and(|e| e.contains("OTLP export")));
}

#[tokio::test]
async fn a_refusal_for_good_keeps_the_datums_and_says_so() {
    let receiver = common::receiver(|_, _| 403).await;
    let mut sink = OtlpSink::new(settings(&receiver.url, 3)).await.expect("builds");
    let outcome = sink.put(datums(&["1"])).await;
    assert_eq!((outcome.undelivered.len(), outcome.requests), (1, 1), "not retried");
    assert!(outcome.persistent);
}

#[tokio::test]
async fn points_the_receiver_says_it_refused_are_counted_rejected_not_sent() {
    // ExportMetricsServiceResponse{partial_success{rejected_data_points: 2, error_message}}: a
    // 200 that refused 2 of the request's points (OTLP's answer for points a receiver will not
    // take, too old say): they were counted as sent.
    let message = b"2 points too old";
    let mut inner = vec![0x08, 2, 0x12, message.len() as u8];
    inner.extend_from_slice(message);
    let mut body = vec![0x0a, inner.len() as u8];
    body.extend_from_slice(&inner);
    let receiver = common::receiver_answering(move |_, _| {
        (200, vec![("content-type".into(), "application/x-protobuf".into())], body.clone())
    })
    .await;
    let mut sink = OtlpSink::new(settings(&receiver.url, 3)).await.expect("builds");
    let outcome = sink.put(datums(&["1", "2", "3", "4"])).await;
    assert_eq!((outcome.sent, outcome.rejected.len()), (2, 2));
    assert!(outcome.undelivered.is_empty(), "not sent again");
    assert_eq!(outcome.requests, 1);
}
