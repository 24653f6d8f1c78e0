//! `otlp`: OpenTelemetry metrics over HTTP (protobuf, gzip) to CloudWatch's OTLP endpoint
//! (signed with SigV4), Amazon Managed Prometheus, a collector or Prometheus' own receiver.
//! Here: its place among the destinations ([`Spec`]: the open shape, as per-job series labelled
//! by job, user, account and partition cost bytes there, not metrics; the open rules; a spool of
//! its own), its section of the configuration ([`config`]), the [`client`] and its protobuf
//! [`encode`]r, and which AWS service an endpoint is ([`endpoint`]).

pub mod client;
pub mod config;
pub mod encode;
pub mod endpoint;

use crate::aggregate::Aggregate;
use crate::check::{Row, Status, endpoint_row, row};
use crate::sinks::delivery::Checks;
use crate::sinks::open::OpenRules;
use crate::sinks::{BuildError, Context, MetricDestination, MetricSink, Spool};
pub use client::{OtlpSink, Settings, SigV4, resource};
use config::OtlpConfig;
use config::SigV4Setting;
use slurm_cw_sink::outcome::Outcome;

/// `otlp` in the registry.
pub struct Spec;

#[async_trait::async_trait]
impl crate::sinks::Component for Spec {
    type Section = OtlpConfig;

    fn name(&self) -> &'static str {
        "otlp"
    }

    fn keys(&self) -> &'static [crate::config::docs::Key] {
        config::KEYS
    }

    fn spool(&self) -> Spool {
        Spool::Own
    }

    fn uses_aws(&self) -> bool {
        true
    }

    async fn build(&self, otlp: &OtlpConfig, cx: &Context<'_>) -> Result<MetricSink, BuildError> {
        Ok(Box::new(build(otlp, cx).await.map_err(|e| BuildError::new(self.name(), e))?))
    }

    /// Whether the endpoint answers.
    async fn check(&self, otlp: &OtlpConfig, _: &Context<'_>) -> Vec<Row> {
        vec![match &otlp.endpoint {
            Some(url) => {
                let mut r = endpoint_row(url).await;
                r.check = "otlp endpoint";
                r
            }
            None => {
                row("otlp endpoint", Status::Ok, "CloudWatch's in the region (SigV4, the aws rows above)")
            }
        }]
    }
}

/// The client, to `otlp.endpoint` (CloudWatch's in the region when not set).
pub async fn build(otlp: &OtlpConfig, cx: &Context<'_>) -> Result<OtlpSink, String> {
    let region = otlp.region.clone().or_else(|| cx.aws.region.clone());
    let endpoint = match &otlp.endpoint {
        Some(e) => e.clone(),
        None => {
            let sdk = slurm_cw_sink::aws::sdk_config(region.as_deref()).await.map_err(|e| e.to_string())?;
            let r = region.clone().or_else(|| sdk.region().map(|r| r.to_string())).ok_or(
                "otlp.endpoint is not set and no AWS region is known for CloudWatch's \
                 (set otlp.endpoint, otlp.region or AWS_REGION)",
            )?;
            config::cloudwatch_endpoint(&r)
        }
    };
    let settings = client::Settings {
        endpoint,
        region,
        sigv4: match otlp.sigv4 {
            SigV4Setting::Auto => SigV4::Auto,
            SigV4Setting::On => SigV4::On,
            SigV4Setting::Off => SigV4::Off,
        },
        resource: client::resource(cx.cluster, cx.node),
        backoff: crate::sinks::cloudwatch::backoff(cx.aws),
        attempt_timeout: cx.aws.attempt_timeout,
        max_request_bytes: client::DEFAULT_MAX_REQUEST_BYTES,
    };
    let sink = OtlpSink::new(settings).await.map_err(|e| e.to_string())?;
    tracing::info!(endpoint = sink.endpoint(), sigv4 = sink.signs(), "OpenTelemetry metrics destination");
    Ok(sink)
}

#[async_trait::async_trait]
impl MetricDestination for OtlpSink {
    fn label(&self) -> &str {
        self.endpoint()
    }

    fn checks(&self) -> Box<dyn Checks<Aggregate>> {
        Box::new(OpenRules::default())
    }

    async fn put_in(&mut self, _label: &str, items: Vec<Aggregate>) -> Outcome<Aggregate> {
        self.put(items).await
    }
}
