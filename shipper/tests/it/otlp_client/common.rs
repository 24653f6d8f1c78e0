//! What the sink's integration tests share: the real OTLP receivers of the benches
//! (`scripts/bench/victoria-metrics.sh`, and `prometheus.sh` where its build has a receiver), a
//! PromQL query, and a loopback HTTP receiver that records every request and answers with the
//! status a test picks.
//!
//! A test that needs a bench is `#[ignore = "needs ...: scripts/test.sh runs it"]`; run without
//! it, it says why and passes outside CI; with CI=true it fails.
#![allow(dead_code)]

use http_body_util::{BodyExt, Empty};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpListener;

fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

/// Prometheus' URL (for PromQL), or None (outside CI) when it is not running.
pub fn prometheus() -> Option<String> {
    bench_var("BENCH_PROMETHEUS_URL", "Prometheus", "run `eval \"$(scripts/bench/prometheus.sh start)\"`")
}

/// A real OTLP receiver with a PromQL API, and what it calls the resource's service name and
/// instance.
pub struct OtlpReceiver {
    pub name: &'static str,
    pub otlp: String,
    /// Its query API's base (`/api/v1/query` below it).
    pub query: String,
    pub service_label: &'static str,
    pub instance_label: &'static str,
}

/// The OTLP receivers this run has: the bench's VictoriaMetrics (Debian trixie's, started by
/// scripts/bench/victoria-metrics.sh; required with CI=true), and a Prometheus with its OTLP
/// receiver where the bench found one (Debian's builds disable it: said, not failed).
pub fn otlp_receivers() -> Vec<OtlpReceiver> {
    let mut out = Vec::new();
    if let (Some(otlp), Some(query)) = (
        bench_var(
            "BENCH_OTLP_URL",
            "VictoriaMetrics (OTLP)",
            "run `eval \"$(scripts/bench/victoria-metrics.sh start)\"`",
        ),
        bench_var(
            "BENCH_OTLP_QUERY_URL",
            "VictoriaMetrics (PromQL)",
            "scripts/bench/victoria-metrics.sh prints it",
        ),
    ) {
        // Resource attributes become labels, named as Prometheus would (dots to underscores).
        out.push(OtlpReceiver {
            name: "VictoriaMetrics",
            otlp,
            query,
            service_label: "service_name",
            instance_label: "service_instance_id",
        });
    }
    if std::env::var("BENCH_PROMETHEUS_OTLP").is_ok_and(|v| v == "missing") {
        // Not silent, and not a pass of what it checks: the bench looked and found no receiver.
        eprintln!(
            "NOT RUN (blocked) against Prometheus: the bench Prometheus has no OTLP receiver (Debian's builds \
             disable it, #1080354); a build with one, named by PROMETHEUS_BINARY, runs it"
        );
    } else if let (Ok(otlp), Some(query)) = (std::env::var("BENCH_PROMETHEUS_OTLP_URL"), prometheus()) {
        // Prometheus keeps service.name and service.instance.id as `job` and `instance`.
        out.push(OtlpReceiver {
            name: "Prometheus",
            otlp,
            query,
            service_label: "job",
            instance_label: "instance",
        });
    }
    out
}

fn bench_var(var: &str, what: &str, how: &str) -> Option<String> {
    match std::env::var(var) {
        Ok(v) if !v.is_empty() => Some(v),
        _ => {
            assert!(!in_ci(), "{what} is not available (${var}) and CI=true requires it: {how}");
            eprintln!("SKIPPED: {what} is not available (${var}; {how})");
            None
        }
    }
}

/// A GET of `url`'s answer body as JSON.
pub async fn get_json(url: &str) -> serde_json::Value {
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build_http::<Empty<bytes::Bytes>>();
    let response = client.get(url.parse().expect("a URL")).await.expect("Prometheus answers");
    let body = response.into_body().collect().await.expect("an answer body").to_bytes();
    serde_json::from_slice(&body).expect("JSON")
}

/// The samples of an instant PromQL query: (labels, value as Prometheus prints it).
pub async fn query(base: &str, promql: &str) -> Vec<(serde_json::Map<String, serde_json::Value>, String)> {
    let mut url = format!("{base}/api/v1/query?query=");
    for b in promql.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            url.push(b as char);
        } else {
            url.push_str(&format!("%{b:02X}"));
        }
    }
    let answer = get_json(&url).await;
    assert_eq!(answer["status"], "success", "{promql}: {answer}");
    let result = answer["data"]["result"].as_array().cloned().unwrap_or_default();
    result
        .into_iter()
        .map(|s| {
            let labels = s["metric"].as_object().cloned().unwrap_or_default();
            (labels, s["value"][1].as_str().unwrap_or_default().to_owned())
        })
        .collect()
}

/// Polls `promql` until it answers a sample or `deadline` passes (then returns nothing).
pub async fn query_until_answered(
    base: &str,
    promql: &str,
    deadline: Duration,
) -> Vec<(serde_json::Map<String, serde_json::Value>, String)> {
    let start = Instant::now();
    loop {
        let samples = query(base, promql).await;
        if !samples.is_empty() || start.elapsed() > deadline {
            return samples;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// One request as it arrived: header names in lower case, the body as sent (gzip).
#[derive(Debug, Clone)]
pub struct Captured {
    pub method: String,
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Captured {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }

    /// The body gunzipped.
    pub fn plain_body(&self) -> Vec<u8> {
        let mut out = Vec::new();
        std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&self.body[..]), &mut out)
            .expect("a gzip body");
        out
    }
}

/// A loopback HTTP/1.1 receiver: `answer` picks each request's status from the request and
/// its number (0 first).
pub struct Receiver {
    pub url: String,
    pub requests: Arc<Mutex<Vec<Captured>>>,
}

impl Receiver {
    pub fn requests(&self) -> Vec<Captured> {
        self.requests.lock().expect("not poisoned").clone()
    }
}

pub async fn receiver(answer: impl Fn(&Captured, usize) -> u16 + Send + Sync + 'static) -> Receiver {
    receiver_with(move |c, n| (answer(c, n), Vec::new())).await
}

/// [`receiver`] whose answers carry headers too (a `Date`, say).
pub async fn receiver_with(
    answer: impl Fn(&Captured, usize) -> (u16, Vec<(String, String)>) + Send + Sync + 'static,
) -> Receiver {
    receiver_answering(move |c, n| {
        let (status, headers) = answer(c, n);
        (status, headers, Vec::new())
    })
    .await
}

/// [`receiver_with`] whose answers carry a body too (a protobuf partial success, say).
pub async fn receiver_answering(
    answer: impl Fn(&Captured, usize) -> (u16, Vec<(String, String)>, Vec<u8>) + Send + Sync + 'static,
) -> Receiver {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("a loopback port");
    let url = format!("http://{}/v1/metrics", listener.local_addr().expect("its address"));
    let requests = Arc::new(Mutex::new(Vec::new()));
    let answer = Arc::new(answer);
    let seen = requests.clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let (seen, answer) = (seen.clone(), answer.clone());
            tokio::spawn(async move {
                let mut stream = BufReader::new(stream);
                // Requests on one kept-alive connection, one after another.
                while let Some(captured) = read_request(&mut stream).await {
                    let n = {
                        let mut all = seen.lock().expect("not poisoned");
                        all.push(captured.clone());
                        all.len() - 1
                    };
                    let (status, headers, body) = answer(&captured, n);
                    let extra: String = headers.iter().map(|(k, v)| format!("{k}: {v}\r\n")).collect();
                    let head = format!(
                        "HTTP/1.1 {status} Scripted\r\n{extra}content-length: {}\r\n\r\n",
                        body.len()
                    );
                    let mut reply = head.into_bytes();
                    reply.extend_from_slice(&body);
                    if stream.get_mut().write_all(&reply).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    Receiver { url, requests }
}

async fn read_request(stream: &mut BufReader<tokio::net::TcpStream>) -> Option<Captured> {
    let mut line = String::new();
    stream.read_line(&mut line).await.ok().filter(|n| *n > 0)?;
    let mut parts = line.split_whitespace();
    let (method, path) = (parts.next()?.to_owned(), parts.next()?.to_owned());
    let mut headers = Vec::new();
    loop {
        let mut h = String::new();
        stream.read_line(&mut h).await.ok().filter(|n| *n > 0)?;
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        let (name, value) = h.split_once(':')?;
        headers.push((name.trim().to_ascii_lowercase(), value.trim().to_owned()));
    }
    let length: usize =
        headers.iter().find(|(n, _)| n == "content-length").and_then(|(_, v)| v.parse().ok()).unwrap_or(0);
    let mut body = vec![0; length];
    stream.read_exact(&mut body).await.ok()?;
    Some(Captured { method, path, headers, body })
}

/// A datum built the way the Lambda builds them, as the aggregate the sink takes.
pub fn aggregate(d: slurm_cw_sink::datum::Datum) -> slurm_cw_shipper::aggregate::Aggregate {
    slurm_cw_shipper::aggregate::Aggregate::from_datum(d).expect("a catalog metric and dimensions")
}
