//! The OTLP sink against real receivers: the bench's VictoriaMetrics (Debian trixie's 1.112.0,
//! always; scripts/bench/victoria-metrics.sh) and a Prometheus 2.x with
//! `--enable-feature=otlp-write-receiver` where the bench has one (Debian's builds lack it, see
//! scripts/bench/prometheus.sh): what PromQL reads back is what was sent.
//!
//! What both do to names (Prometheus 2.x's storage/remote/otlptranslator/prometheus/
//! normalize_name.go; VictoriaMetrics with `-opentelemetry.usePrometheusNaming`): split the name
//! into words and append the unit's word (`By` -> `bytes`, `%` -> `percent`, `s` -> `seconds`,
//! `1/s` and `By/s` -> `per_second`) unless the name holds that word already, append `ratio` to
//! a gauge whose unit is exactly `1`, and ignore `{...}` annotations. The catalog's names
//! already end with their unit and counts go as `{count}`, so the name stored is exactly
//! `series::name`, asserted here for every unit the catalog uses. Prometheus makes
//! `service.name` the `job` label and `service.instance.id` `instance`; VictoriaMetrics keeps
//! every resource attribute as a label (`service_name`, `service_instance_id`).

use super::common;

use slurm_cw_catalog::{Unit, series};
use slurm_cw_shipper::aggregate::Aggregate;
use slurm_cw_shipper::sinks::otlp::{OtlpSink, Settings, SigV4, resource};
use slurm_cw_sink::datum::{DatumValue, Stats};
use slurm_cw_sink::retry::Backoff;
use std::time::{Duration, SystemTime};

const DEADLINE: Duration = Duration::from_secs(30);

fn settings(endpoint: &str) -> Settings {
    Settings {
        endpoint: endpoint.to_owned(),
        region: None,
        sigv4: SigV4::Auto,
        resource: resource("otlptest", "node-a"),
        backoff: Backoff { base: Duration::from_millis(50), cap: Duration::from_secs(1), max_retries: 3 },
        attempt_timeout: Duration::from_secs(10),
        max_request_bytes: slurm_cw_shipper::sinks::otlp::client::DEFAULT_MAX_REQUEST_BYTES,
    }
}

/// A job id no earlier run against the same Prometheus used.
fn fresh_job_id() -> String {
    let nanos = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
    format!("{}", 30_000_000 + (nanos / 1000 % 10_000_000) as u64)
}

fn job_datum(metric: &'static slurm_cw_catalog::Metric, job: &str, value: DatumValue) -> Aggregate {
    let dims = [("JobId", job), ("User", "alice"), ("Account", "physics"), ("Partition", "batch")]
        .map(|(n, v)| (n.to_owned(), v.to_owned()));
    common::aggregate(slurm_cw_sink::cloudwatch::datum("otlptest", metric, dims, SystemTime::now(), value))
}

#[tokio::test]
#[ignore = "needs VictoriaMetrics: scripts/test.sh runs it"]
async fn a_jobs_memory_reads_back_with_promql() {
    for r in common::otlp_receivers() {
        eprintln!("receiver: {}", r.name);
        a_jobs_memory_reads_back_from(&r).await;
    }
}

async fn a_jobs_memory_reads_back_from(r: &common::OtlpReceiver) {
    let (base, otlp) = (&r.query, &r.otlp);
    let job = fresh_job_id();
    let rss = &slurm_cw_catalog::metrics::MEMORY_RSS;
    let mut sink = OtlpSink::new(settings(otlp)).await.expect("the sink builds");
    assert!(!sink.signs(), "a loopback receiver is not signed for");
    let outcome = sink.put(vec![job_datum(rss, &job, DatumValue::Value { value: 314572800.0 })]).await;
    assert_eq!(
        (outcome.sent, outcome.undelivered.len(), outcome.rejected.len()),
        (1, 0, 0),
        "{:?}",
        outcome.last_error
    );

    let promql = format!("slurm_memory_rss_bytes{{job_id=\"{job}\"}}");
    let samples = common::query_until_answered(base, &promql, DEADLINE).await;
    assert_eq!(samples.len(), 1, "{}: {promql}: {samples:?}", r.name);
    let (labels, value) = &samples[0];
    assert_eq!(value, "314572800");
    let label = |n: &str| labels.get(n).and_then(|v| v.as_str()).unwrap_or("(missing)").to_owned();
    assert_eq!(label("__name__"), "slurm_memory_rss_bytes");
    assert_eq!(
        ["cluster_name", "user", "account", "partition", r.service_label, r.instance_label].map(label),
        ["otlptest", "alice", "physics", "batch", "slurm-cw-shipper", "node-a"]
    );
}

#[tokio::test]
#[ignore = "needs VictoriaMetrics: scripts/test.sh runs it"]
async fn receivers_name_each_unit_as_the_catalog_does_and_store_means() {
    for r in common::otlp_receivers() {
        eprintln!("receiver: {}", r.name);
        names_and_means(&r).await;
    }
}

async fn names_and_means(r: &common::OtlpReceiver) {
    let (base, otlp) = (&r.query, &r.otlp);
    let job = fresh_job_id();
    // One metric of each unit the catalog uses, each with its own value.
    let mut units: Vec<Unit> = Vec::new();
    let mut sent = Vec::new();
    for m in slurm_cw_catalog::ALL.iter().copied() {
        if !units.contains(&m.unit) {
            units.push(m.unit);
            let value = 1000.0 + sent.len() as f64 + 0.25;
            sent.push((m, value));
        }
    }
    assert!(units.len() >= 8, "every unit: {units:?}");
    let mut datums: Vec<Aggregate> =
        sent.iter().map(|(m, v)| job_datum(m, &job, DatumValue::Value { value: *v })).collect();
    // A statistic set arrives as its mean; values with counts as their weighted mean.
    let stats = Stats { min: 1.0, max: 9.0, sum: 12.0, count: 4.0 };
    let cache = &slurm_cw_catalog::metrics::MEMORY_CACHE;
    datums.push(job_datum(cache, &job, DatumValue::Stats { stats }));
    let swap = &slurm_cw_catalog::metrics::MEMORY_SWAP;
    datums.push(job_datum(
        swap,
        &job,
        DatumValue::Values { values: vec![10.0, 40.0], counts: vec![3.0, 1.0] },
    ));
    let mut sink = OtlpSink::new(settings(otlp)).await.expect("the sink builds");
    let outcome = sink.put(datums).await;
    assert_eq!(outcome.sent, sent.len() + 2, "{:?}", outcome.last_error);

    let mut expected: Vec<(String, String)> =
        sent.iter().map(|(m, v)| (series::name(m), v.to_string())).collect();
    expected.push((series::name(cache), "3".into()));
    expected.push((series::name(swap), "17.5".into()));
    for (name, value) in expected {
        let promql = format!("{name}{{job_id=\"{job}\"}}");
        let samples = common::query_until_answered(base, &promql, DEADLINE).await;
        let values: Vec<&str> = samples.iter().map(|(_, v)| v.as_str()).collect();
        assert_eq!(values, vec![value.as_str()], "{}: {promql}", r.name);
    }
}
