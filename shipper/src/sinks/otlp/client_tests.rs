use super::*;
use crate::datum::{Datum, DatumValue};
use std::time::SystemTime;

fn datum(metric: &str, job: &str) -> Aggregate {
    let d = Datum {
        metric: metric.into(),
        unit: String::new(),
        dimensions: vec![("ClusterName".into(), "c".into()), ("JobId".into(), job.into())],
        timestamp: SystemTime::UNIX_EPOCH,
        value: DatumValue::Value { value: 1.0 },
    };
    Aggregate::from_datum(d).expect("a catalog metric")
}

#[test]
fn statuses_classify_as_the_retry_needs() {
    assert!(classify("e", 200, b"").is_ok() && classify("e", 204, b"").is_ok());
    assert!(matches!(classify("e", 400, b"bad"), Err(Failure::Invalid(m)) if m.contains("HTTP 400: bad")));
    assert!(matches!(classify("e", 413, b""), Err(Failure::Invalid(_))));
    for s in [408, 429, 500, 502, 503, 504] {
        assert!(matches!(classify("e", s, b""), Err(Failure::Transient(_))), "{s}");
    }
    for s in [401, 403, 404] {
        assert!(matches!(classify("e", s, b""), Err(Failure::Persistent(_))), "{s}");
    }
    // CloudWatch's refusal names the grant it needs; another receiver's does not.
    let cw = "https://monitoring.us-east-1.amazonaws.com/v1/metrics";
    let Err(Failure::Persistent(m)) = classify(cw, 403, b"denied") else { panic!("a 403 is persistent") };
    assert!(m.contains("otlp_metrics = true"), "{m}");
    let Err(Failure::Persistent(m)) = classify("http://127.0.0.1:4318/v1/metrics", 403, b"") else {
        panic!()
    };
    assert!(!m.contains("otlp_metrics"), "{m}");
}

#[test]
fn requests_stay_under_the_byte_limit_in_order() {
    let datums: Vec<Aggregate> = (0..1000).map(|i| datum("MemoryRss", &format!("{i}"))).collect();
    let parts = chunks(datums.clone(), 8_000);
    assert!(parts.len() > 1);
    assert_eq!(parts.concat(), datums, "nothing lost or reordered");
    for p in &parts {
        let body = encode::request(&resource("c", "n1"), p);
        assert!(body.len() <= 8_000, "{}", body.len());
    }
    assert_eq!(chunks(vec![datum("MemoryRss", "1")], 10).len(), 1, "one datum alone still goes");
}

#[test]
fn settings_decide_signing_and_region() {
    let s = |endpoint: &str, sigv4, region: Option<&str>| Settings {
        endpoint: endpoint.into(),
        region: region.map(str::to_owned),
        sigv4,
        resource: Vec::new(),
        backoff: Backoff { base: Duration::from_millis(1), cap: Duration::from_millis(1), max_retries: 0 },
        attempt_timeout: Duration::from_secs(1),
        max_request_bytes: DEFAULT_MAX_REQUEST_BYTES,
    };
    let cw = s("https://monitoring.eu-west-1.amazonaws.com/v1/metrics", SigV4::Auto, None);
    let (uri, host, region) = parse(&cw).unwrap();
    assert!(signs(&cw, &uri));
    assert_eq!((host.as_str(), region.as_deref()), ("monitoring.eu-west-1.amazonaws.com", Some("eu-west-1")));
    let prom = s("http://127.0.0.1:29090/api/v1/otlp/v1/metrics", SigV4::Auto, None);
    let (uri, host, _) = parse(&prom).unwrap();
    assert!(!signs(&prom, &uri));
    assert_eq!(host, "127.0.0.1:29090");
    assert!(signs(&s("http://127.0.0.1:1/v1/metrics", SigV4::On, None), &uri));
    assert!(!signs(&s(&cw.endpoint, SigV4::Off, None), &uri));
    let (_, _, r) = parse(&s(&cw.endpoint, SigV4::Auto, Some("us-east-2"))).unwrap();
    assert_eq!(r.as_deref(), Some("us-east-2"), "the configured region wins");
    for bad in ["ftp://x/v1/metrics", "/v1/metrics", "http://u:p@h/v1/metrics", "not a url"] {
        assert!(parse(&s(bad, SigV4::Auto, None)).is_err(), "{bad}");
    }
}
