//! SigV4 as CloudWatch's OTLP endpoint checks it. No receiver here speaks CloudWatch's SigV4,
//! so a loopback receiver records the exact request the sink sends (SigV4 forced on, region and
//! credentials fixed), and the test signs the recorded method, URL, headers and body again
//! with the AWS SDK's own signer (aws-sigv4) at the recorded `x-amz-date`: the Authorization
//! header must be that signature, and a body changed after signing must not verify.

use super::common;

use aws_credential_types::Credentials;
use aws_credential_types::provider::SharedCredentialsProvider;
use aws_sigv4::http_request::{SignableBody, SignableRequest, SigningSettings, sign};
use aws_sigv4::sign::v4;
use slurm_cw_shipper::sinks::otlp::{OtlpSink, Settings, SigV4, resource};
use slurm_cw_sink::datum::DatumValue;
use slurm_cw_sink::retry::Backoff;
use std::time::{Duration, SystemTime};

const KEY_ID: &str = "AKIDOTLPTEST";
const SECRET: &str = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY";
const TOKEN: &str = "session-token-of-an-instance-profile";

fn settings(endpoint: &str) -> Settings {
    Settings {
        endpoint: endpoint.to_owned(),
        region: Some("eu-west-1".into()),
        sigv4: SigV4::On,
        resource: resource("c1", "n1"),
        backoff: Backoff { base: Duration::from_millis(1), cap: Duration::from_millis(1), max_retries: 0 },
        attempt_timeout: Duration::from_secs(5),
        max_request_bytes: slurm_cw_shipper::sinks::otlp::client::DEFAULT_MAX_REQUEST_BYTES,
    }
}

/// The Authorization header aws-sigv4 computes for `request`, signed at `time`, with `body`.
fn expected_authorization(request: &common::Captured, url: &str, time: SystemTime, body: &[u8]) -> String {
    let identity = Credentials::new(KEY_ID, SECRET, Some(TOKEN.into()), None, "test").into();
    let params = v4::SigningParams::builder()
        .identity(&identity)
        .region("eu-west-1")
        .name("monitoring")
        .time(time)
        .settings(SigningSettings::default())
        .build()
        .expect("signing parameters")
        .into();
    // The headers as they arrived, except those the signer adds itself.
    let headers: Vec<(&str, &str)> = request
        .headers
        .iter()
        .filter(|(n, _)| ["host", "content-type", "content-encoding"].contains(&n.as_str()))
        .map(|(n, v)| (n.as_str(), v.as_str()))
        .collect();
    let signable = SignableRequest::new(&request.method, url, headers.into_iter(), SignableBody::Bytes(body))
        .expect("a signable request");
    let (instructions, _) = sign(signable, &params).expect("signed").into_parts();
    instructions
        .headers()
        .find(|(n, _)| *n == "authorization")
        .map(|(_, v)| v.to_owned())
        .expect("an authorization")
}

fn amz_date(value: &str) -> SystemTime {
    let format = time::macros::format_description!("[year][month][day]T[hour][minute][second]Z");
    time::PrimitiveDateTime::parse(value, format).expect("an x-amz-date").assume_utc().into()
}

#[tokio::test]
async fn the_request_sent_is_the_request_signed() {
    let receiver = common::receiver(|_, _| 200).await;
    let credentials =
        SharedCredentialsProvider::new(Credentials::new(KEY_ID, SECRET, Some(TOKEN.into()), None, "test"));
    let mut sink = OtlpSink::with_credentials(settings(&receiver.url), credentials).expect("the sink builds");
    assert!(sink.signs());
    let datum = slurm_cw_sink::cloudwatch::datum(
        "c1",
        &slurm_cw_catalog::metrics::MEMORY_RSS,
        [("JobId".to_owned(), "42".to_owned())],
        SystemTime::now(),
        DatumValue::Value { value: 314572800.0 },
    );
    let outcome = sink.put(vec![common::aggregate(datum)]).await;
    assert_eq!(outcome.sent, 1, "{:?}", outcome.last_error);

    let requests = receiver.requests();
    assert_eq!(requests.len(), 1);
    let r = &requests[0];
    assert_eq!((r.method.as_str(), r.path.as_str()), ("POST", "/v1/metrics"));
    assert_eq!(r.header("content-type"), Some("application/x-protobuf"));
    assert_eq!(r.header("content-encoding"), Some("gzip"));
    assert_eq!(r.header("x-amz-security-token"), Some(TOKEN));
    assert!(
        r.plain_body().windows(22).any(|w| w == b"slurm_memory_rss_bytes"),
        "the body is the gzip request"
    );

    let authorization = r.header("authorization").expect("signed");
    let date = r.header("x-amz-date").expect("an x-amz-date");
    let time = amz_date(date);
    assert!(
        SystemTime::now().duration_since(time).unwrap_or_default() < Duration::from_secs(60),
        "signed now"
    );
    let scope = format!("Credential={KEY_ID}/{}/eu-west-1/monitoring/aws4_request", &date[..8]);
    assert!(authorization.starts_with(&format!("AWS4-HMAC-SHA256 {scope}, ")), "{authorization}");
    let signed = authorization.split("SignedHeaders=").nth(1).and_then(|s| s.split(',').next()).unwrap_or("");
    let signed: Vec<&str> = signed.split(';').collect();
    for h in ["content-encoding", "content-type", "host", "x-amz-date"] {
        assert!(signed.contains(&h), "{h} is signed: {signed:?}");
    }

    let host = r.header("host").expect("a host header");
    let url = format!("http://{host}{}", r.path);
    assert_eq!(authorization, expected_authorization(r, &url, time, &r.body), "the SDK's signer agrees");

    let mut changed = r.body.clone();
    let last = changed.len() - 1;
    changed[last] ^= 1;
    assert_ne!(
        authorization,
        expected_authorization(r, &url, time, &changed),
        "a changed body does not verify"
    );
}

#[tokio::test]
async fn cloudwatch_endpoints_are_signed_and_others_are_not() {
    let credentials = SharedCredentialsProvider::new(Credentials::new(KEY_ID, SECRET, None, None, "test"));
    let auto = |endpoint: &str| Settings { sigv4: SigV4::Auto, region: None, ..settings(endpoint) };
    let cw = OtlpSink::with_credentials(
        auto("https://monitoring.eu-west-1.amazonaws.com/v1/metrics"),
        credentials.clone(),
    )
    .expect("builds");
    assert!(cw.signs());
    let other =
        OtlpSink::with_credentials(auto("http://127.0.0.1:9/v1/metrics"), credentials).expect("builds");
    assert!(!other.signs());
}

fn epoch_s(t: SystemTime) -> i64 {
    t.duration_since(SystemTime::UNIX_EPOCH).expect("after 1970").as_secs() as i64
}

#[tokio::test]
async fn a_clock_ten_minutes_off_signs_again_with_the_endpoints_time() {
    // The endpoint's clock is 10 minutes ahead of this host's; like AWS it refuses a signature
    // more than 5 minutes off (403) and says its time in `Date`.
    let ahead = 600;
    let r = common::receiver_with(move |c, _| {
        let server = SystemTime::now() + Duration::from_secs(ahead);
        let server_s = epoch_s(server);
        let signed = c.header("x-amz-date").map_or(0, |d| epoch_s(amz_date(d)));
        let date = time::OffsetDateTime::from(server)
            .format(&time::format_description::well_known::Rfc2822)
            .expect("a date");
        let status = if (signed - server_s).abs() > 300 { 403 } else { 200 };
        (status, vec![("date".to_owned(), date)])
    })
    .await;
    let mut s = settings(&r.url);
    s.backoff = Backoff { base: Duration::from_millis(1), cap: Duration::from_millis(1), max_retries: 2 };
    let credentials =
        SharedCredentialsProvider::new(Credentials::new(KEY_ID, SECRET, Some(TOKEN.into()), None, "test"));
    let mut sink = OtlpSink::with_credentials(s, credentials).expect("a sink");
    let datum = slurm_cw_sink::cloudwatch::datum(
        "c1",
        &slurm_cw_catalog::metrics::MEMORY_RSS,
        [("JobId".to_owned(), "42".to_owned())],
        SystemTime::now(),
        DatumValue::Value { value: 1.0 },
    );
    let out = sink.put(vec![common::aggregate(datum)]).await;
    assert_eq!((out.sent, out.undelivered.len()), (1, 0), "{:?}", out.last_error);
    let dates: Vec<i64> =
        r.requests().iter().map(|c| c.header("x-amz-date").map_or(0, |d| epoch_s(amz_date(d)))).collect();
    let now = epoch_s(SystemTime::now());
    assert_eq!(dates.len(), 2, "refused once, then taken: {dates:?}");
    assert!((dates[0] - now).abs() < 60, "first signed with this host's clock: {dates:?}");
    assert!((dates[1] - (now + ahead as i64)).abs() < 60, "then with the endpoint's: {dates:?}");
}
