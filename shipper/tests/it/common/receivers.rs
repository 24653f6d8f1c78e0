//! The bench's Prometheus and VictoriaMetrics: found, scraped and asked in PromQL.

use super::*;

/// The bench Prometheus' URL (scripts/bench/prometheus.sh: it scrapes 127.0.0.1:29100 every
/// second), or None (outside CI) when it is not running.
#[allow(dead_code)]
pub fn prometheus() -> Option<String> {
    match std::env::var("BENCH_PROMETHEUS_URL") {
        Ok(url) if !url.is_empty() => Some(url),
        _ => {
            missing("the bench Prometheus", "run `eval \"$(scripts/bench/prometheus.sh start)\"` as root");
            None
        }
    }
}

/// Where the bench Prometheus scrapes a shipper's pull endpoint.
#[allow(dead_code)]
pub const PROMETHEUS_SCRAPES: &str = "127.0.0.1:29100";

/// Where it scrapes a pull endpoint guarded by a token: with the token in
/// `BENCH_PROMETHEUS_TOKEN_FILE` (job `slurm-cw-shipper-token`) and without (`-no-token`).
#[allow(dead_code)]
pub const PROMETHEUS_SCRAPES_GUARDED: &str = "127.0.0.1:29101";

/// GET /metrics from a pull endpoint at `addr`: the body of a 200, None otherwise.
pub fn scrape(addr: &str) -> Option<String> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    let (head, body) = out.split_once("\r\n\r\n")?;
    head.starts_with("HTTP/1.1 200").then(|| body.to_owned())
}

/// The series a PromQL instant query answers: (labels, value); none when it does not answer.
#[allow(dead_code)]
pub fn promql(url: &str, query: &str) -> Vec<(serde_json::Value, f64)> {
    let (ok, out, _) = try_cmd(
        "curl",
        &[
            "-fsS",
            "-m",
            "5",
            "-G",
            &format!("{url}/api/v1/query"),
            "--data-urlencode",
            &format!("query={query}"),
        ],
    );
    let v: serde_json::Value =
        if ok { serde_json::from_str(&out).unwrap_or_default() } else { Default::default() };
    let result = v["data"]["result"].as_array().cloned().unwrap_or_default();
    result
        .into_iter()
        .filter_map(|s| Some((s["metric"].clone(), s["value"][1].as_str()?.parse().ok()?)))
        .collect()
}

/// The bench's OTLP receiver (VictoriaMetrics, scripts/bench/victoria-metrics.sh): its OTLP
/// endpoint and its PromQL base, or None (outside CI) when it is not running.
#[allow(dead_code)]
pub fn otlp_receiver() -> Option<(String, String)> {
    match (std::env::var("BENCH_OTLP_URL"), std::env::var("BENCH_OTLP_QUERY_URL")) {
        (Ok(otlp), Ok(query)) if !otlp.is_empty() && !query.is_empty() => Some((otlp, query)),
        _ => {
            missing(
                "the bench OTLP receiver",
                "run `eval \"$(scripts/bench/victoria-metrics.sh start)\"` as root",
            );
            None
        }
    }
}
