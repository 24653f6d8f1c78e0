//! The OTLP sink: metrics as OTLP/HTTP protobuf, gzip, to CloudWatch's OTLP endpoint
//! (`https://monitoring.<region>.amazonaws.com/v1/metrics`, SigV4 with service `monitoring`),
//! Amazon Managed Prometheus (`aps-workspaces.<region>.amazonaws.com`, SigV4 with service
//! `aps`), a collector or Prometheus' own receiver (`/api/v1/otlp/v1/metrics`).
//!
//! What an aggregate becomes: one point of a Gauge, whatever the catalog's kind (Increase, Total
//! or Gauge). An aggregate already sums up a period, and Prometheus 2.53's OTLP receiver drops
//! delta sums, so a cumulative or delta sum would not arrive there. The point's value is the
//! summary's mean: a statistic set's sum over its count, values weighted by their counts
//! ([`encode::mean`]); the minimum and maximum CloudWatch keeps for a statistic set are not sent.
//! Names, labels, units and descriptions come from the aggregate's catalog metric
//! ([`slurm_cw_catalog::series`]): `MemoryRss` with `JobId` is
//! `slurm_memory_rss_bytes{job_id=...}`, unit `By`.
//!
//! The resource ([`resource`]) names the service (`service.name`, Prometheus' `job` label), the
//! node (`service.instance.id`, Prometheus' `instance` label: two nodes' points of one series
//! stay two series) and the cluster.
//!
//! Retries as the CloudWatch sink: 429, 408, 5xx, timeouts and connection errors after a
//! full-jitter backoff; a request refused as invalid (400, 413) is split until the datum it
//! refuses alone is dropped; 401, 403, 404 keep the aggregates for later (`undelivered`).

use super::encode;
use super::endpoint;
use crate::aggregate::Aggregate;
use crate::http_client::{self as http, sign};
use aws_credential_types::provider::SharedCredentialsProvider;
use bytes::Bytes;
use http_body_util::Full;
use rand::SeedableRng;
use rand::rngs::StdRng;
use slurm_cw_catalog::Metric;
use slurm_cw_sink::aws::NoCaCertificates;
use slurm_cw_sink::failure::Failure;
use slurm_cw_sink::log_once::LogOnce;
use slurm_cw_sink::outcome::Outcome;
use slurm_cw_sink::retry::Backoff;
use std::time::Duration;

/// What a request body (before gzip) stays under by default.
pub const DEFAULT_MAX_REQUEST_BYTES: usize = 1_000_000;
/// `service.name` of the resource.
pub const SERVICE_NAME: &str = "slurm-cw-shipper";

/// When requests are signed with SigV4.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SigV4 {
    /// When the endpoint's host is CloudWatch's (`monitoring.<region>.amazonaws.com[.cn]`).
    #[default]
    Auto,
    On,
    Off,
}

#[derive(Debug, Clone)]
pub struct Settings {
    /// The metrics URL, path included (`https://monitoring.us-east-1.amazonaws.com/v1/metrics`).
    pub endpoint: String,
    /// The signing region; else the endpoint host's, else aws-config's.
    pub region: Option<String>,
    pub sigv4: SigV4,
    /// Attributes of the resource every point belongs to ([`resource`] makes the usual ones).
    pub resource: Vec<(String, String)>,
    pub backoff: Backoff,
    /// Limit for one HTTP attempt, connection and answer included.
    pub attempt_timeout: Duration,
    /// A request's body before gzip stays under this (one datum alone may exceed it).
    pub max_request_bytes: usize,
}

/// The resource of a shipper on `node` in `cluster`.
pub fn resource(cluster: &str, node: &str) -> Vec<(String, String)> {
    [
        ("service.name", SERVICE_NAME),
        ("service.instance.id", node),
        ("host.name", node),
        ("slurm.cluster.name", cluster),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect()
}

/// Why the sink cannot be built: configuration a person fixes.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    #[error("otlp endpoint {0:?}: {1}")]
    Endpoint(String, String),
    #[error(transparent)]
    NoCaCertificates(#[from] NoCaCertificates),
    #[error(
        "SigV4 signing of {0} needs a region: set the OTLP region, AWS_REGION, or use an endpoint named monitoring.<region>.amazonaws.com"
    )]
    NoRegion(String),
    #[error("SigV4 signing of {0} needs AWS credentials, and aws-config's default chain has no provider")]
    NoCredentials(String),
}

pub struct OtlpSink {
    settings: Settings,
    uri: ::http::Uri,
    host: String,
    http: http::Http,
    signer: Option<sign::Signer>,
    rng: StdRng,
    logged: LogOnce<String>,
    gzip: slurm_cw_formats::gzip::Gzip,
}

impl OtlpSink {
    /// Builds the sink; SigV4 credentials (when signing) from aws-config's default chain.
    pub async fn new(settings: Settings) -> Result<Self, SetupError> {
        let (uri, host, region) = parse(&settings)?;
        let signer = if signs(&settings, &uri) {
            let sdk = slurm_cw_sink::aws::sdk_config(region.as_deref()).await?;
            let region = region
                .or_else(|| sdk.region().map(|r| r.to_string()))
                .ok_or_else(|| SetupError::NoRegion(settings.endpoint.clone()))?;
            let provider = sdk
                .credentials_provider()
                .ok_or_else(|| SetupError::NoCredentials(settings.endpoint.clone()))?;
            Some(sign::Signer::new(provider, region))
        } else {
            None
        };
        Self::build(settings, uri, host, signer)
    }

    /// Builds the sink with these credentials for SigV4 (tests; a caller with its own chain).
    pub fn with_credentials(
        settings: Settings,
        credentials: SharedCredentialsProvider,
    ) -> Result<Self, SetupError> {
        let (uri, host, region) = parse(&settings)?;
        let signer = if signs(&settings, &uri) {
            let region = region.ok_or_else(|| SetupError::NoRegion(settings.endpoint.clone()))?;
            Some(sign::Signer::new(credentials, region))
        } else {
            None
        };
        Self::build(settings, uri, host, signer)
    }

    fn build(
        settings: Settings,
        uri: ::http::Uri,
        host: String,
        signer: Option<sign::Signer>,
    ) -> Result<Self, SetupError> {
        let https = uri.scheme_str() == Some("https");
        let http = http::Http::new(https, settings.attempt_timeout.min(Duration::from_secs(5)))?;
        Ok(OtlpSink {
            settings,
            uri,
            host,
            http,
            signer,
            rng: StdRng::from_os_rng(),
            logged: LogOnce::default(),
            gzip: encode::gzip(),
        })
    }

    pub fn endpoint(&self) -> &str {
        &self.settings.endpoint
    }

    /// Whether requests are signed with SigV4.
    pub fn signs(&self) -> bool {
        self.signer.is_some()
    }

    /// Sends `items`, in as many requests as `max_request_bytes` needs. What could not be
    /// sent after the retries comes back in `undelivered`.
    pub async fn put(&mut self, items: Vec<Aggregate>) -> Outcome<Aggregate> {
        let chunks = chunks(items, self.settings.max_request_bytes);
        let endpoint = self.settings.endpoint.clone();
        slurm_cw_sink::send::send_all(self, &endpoint, chunks).await
    }

    /// One attempt: sign (a fresh date each time), post, read the answer.
    async fn attempt(&mut self, body: &Bytes) -> Result<Option<(i64, String)>, Failure> {
        use ::http::header::{CONTENT_ENCODING, CONTENT_TYPE, HOST};
        const PROTOBUF: &str = "application/x-protobuf";
        let mut request = ::http::Request::post(self.uri.clone())
            .header(HOST, &self.host)
            .header(CONTENT_TYPE, PROTOBUF)
            .header(CONTENT_ENCODING, "gzip");
        if let Some(signer) = &mut self.signer {
            let credentials = signer.credentials().await.map_err(Failure::Persistent)?;
            let signed =
                [("host", self.host.as_str()), ("content-type", PROTOBUF), ("content-encoding", "gzip")];
            let headers = sign::signature(
                &credentials,
                endpoint::service_for(&self.host),
                &signer.region,
                signer.now(),
                "POST",
                &self.settings.endpoint,
                &signed,
                body,
            )
            .map_err(Failure::Persistent)?;
            for (name, value) in headers {
                request = request.header(name, value);
            }
        }
        let request = request
            .body(Full::new(body.clone()))
            .map_err(|e| Failure::Persistent(format!("OTLP request to {}: {e}", self.settings.endpoint)))?;
        let answer = self
            .http
            .send(request, self.settings.attempt_timeout)
            .await
            .map_err(|e| Failure::Transient(format!("OTLP export to {}: {e}", self.settings.endpoint)))?;
        // A refused signature from a clock too far off: the next attempt signs with the
        // server's time, not never again (a permanent 403 would only grow the spool).
        let corrected = match (&mut self.signer, answer.date) {
            (Some(signer), Some(date)) => signer.server_time(date),
            _ => false,
        };
        if corrected && matches!(answer.status, 401 | 403) {
            return Err(Failure::Transient(format!(
                "OTLP export to {}: HTTP {}: signed with a clock too far from the endpoint's; corrected",
                self.settings.endpoint, answer.status
            )));
        }
        classify(&self.settings.endpoint, answer.status, &answer.body)?;
        Ok(encode::partial_success(&answer.body))
    }
}

fn parse(settings: &Settings) -> Result<(::http::Uri, String, Option<String>), SetupError> {
    let bad = |why: &str| SetupError::Endpoint(settings.endpoint.clone(), why.to_owned());
    let uri: ::http::Uri = settings.endpoint.parse().map_err(|e| bad(&format!("not a URL: {e}")))?;
    if !matches!(uri.scheme_str(), Some("http" | "https")) {
        return Err(bad("must start with http:// or https://"));
    }
    let authority = uri.authority().ok_or_else(|| bad("has no host"))?;
    if authority.as_str().contains('@') {
        return Err(bad("must not hold credentials"));
    }
    let region = settings
        .region
        .clone()
        .or_else(|| endpoint::aws_endpoint(authority.host()).map(|(_, r)| r.to_owned()));
    Ok((uri.clone(), authority.as_str().to_owned(), region))
}

fn signs(settings: &Settings, uri: &::http::Uri) -> bool {
    match settings.sigv4 {
        SigV4::On => true,
        SigV4::Off => false,
        SigV4::Auto => uri.host().and_then(endpoint::aws_endpoint).is_some(),
    }
}

/// The failure an answer's status means, None for success.
pub fn classify(endpoint: &str, status: u16, body: &[u8]) -> Result<(), Failure> {
    if (200..300).contains(&status) {
        return Ok(());
    }
    let text = String::from_utf8_lossy(&body[..body.len().min(300)]);
    let mut msg = format!("OTLP export to {endpoint}: HTTP {status}: {}", text.trim());
    if status == 403 && ::http::Uri::try_from(endpoint).is_ok_and(|u| endpoint::is_cloudwatch(&u)) {
        // The module's instance policy confines PutMetricData to the cluster's namespace, which
        // refuses OTLP until its otlp_metrics statement is on.
        msg.push_str(" (CloudWatch checks cloudwatch:PutMetricData for OTLP: set otlp_metrics = true in the Terraform module, or grant it without a cloudwatch:namespace condition)");
    }
    Err(match status {
        400 | 413 => Failure::Invalid(msg),
        408 | 429 | 500..=599 => Failure::Transient(msg),
        _ => Failure::Persistent(msg),
    })
}

/// The requests [`OtlpSink::put`] would send for `items`, as (bytes before gzip, gzip body):
/// what the cost bench measures.
pub fn bodies(
    resource: &[(String, String)],
    items: Vec<Aggregate>,
    max_request_bytes: usize,
) -> Vec<(usize, Vec<u8>)> {
    let mut gzip = encode::gzip();
    chunks(items, max_request_bytes)
        .iter()
        .map(|chunk| {
            let plain = encode::request(resource, chunk);
            (plain.len(), gzip.member(&plain))
        })
        .collect()
}

/// The bytes of a metric's own fields (name, description, unit) in a request.
fn metric_overhead(m: &Metric) -> usize {
    m.help.len() + 2 * m.name.len() + 32
}

/// Cuts `items` into requests whose bodies stay under `max_bytes`, in order.
fn chunks(items: Vec<Aggregate>, max_bytes: usize) -> Vec<Vec<Aggregate>> {
    const ENVELOPE: usize = 512; // resource and scope
    let mut out = Vec::new();
    let mut current: Vec<Aggregate> = Vec::new();
    let mut metrics: Vec<&'static str> = Vec::new();
    let mut bytes = ENVELOPE;
    for a in items {
        let point = encode::point_size(&a);
        let mut new_metric = !metrics.contains(&a.metric.name);
        let size = |new_metric: bool| point + if new_metric { metric_overhead(a.metric) } else { 0 };
        if !current.is_empty() && bytes + size(new_metric) > max_bytes {
            out.push(std::mem::take(&mut current));
            metrics.clear();
            bytes = ENVELOPE;
            new_metric = true;
        }
        if new_metric {
            metrics.push(a.metric.name);
        }
        bytes += size(new_metric);
        current.push(a);
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

impl slurm_cw_sink::send::Requests<Aggregate> for OtlpSink {
    const SERVICE: &'static str = "OTLP";

    fn size(a: &Aggregate) -> usize {
        encode::point_size(a)
    }

    async fn request(
        &mut self,
        _endpoint: &str,
        chunk: &[Aggregate],
        outcome: &mut Outcome<Aggregate>,
    ) -> Result<Vec<usize>, Failure> {
        let body = Bytes::from(self.gzip.member(&encode::request(&self.settings.resource, chunk)));
        let mut attempt = 0;
        loop {
            outcome.requests += 1;
            match self.attempt(&body).await {
                Ok(partial) => {
                    let Some((rejected, message)) = partial else { return Ok(Vec::new()) };
                    if self.logged.first(&message) {
                        tracing::warn!(endpoint = %self.settings.endpoint, rejected, %message, "the OTLP receiver refused some points (logged once per message)");
                    }
                    // It says how many points it refused, not which: as many of the request's
                    // (one point a datum) count as rejected, not as sent, and are not sent again.
                    let n = usize::try_from(rejected.max(0)).unwrap_or(usize::MAX).min(chunk.len());
                    return Ok((0..n).collect());
                }
                Err(Failure::Transient(msg)) if attempt < self.settings.backoff.max_retries => {
                    let delay = self.settings.backoff.delay(attempt, &mut self.rng);
                    tracing::debug!(attempt, ?delay, error = %msg, "OTLP export failed; retrying");
                    outcome.retries += 1;
                    attempt += 1;
                    tokio::time::sleep(delay).await;
                }
                Err(other) => return Err(other),
            }
        }
    }
}

#[cfg(test)]
#[path = "client_tests.rs"]
mod tests;
