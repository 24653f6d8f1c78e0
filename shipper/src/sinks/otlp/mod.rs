//! `otlp`: OpenTelemetry metrics over HTTP (protobuf, gzip) to CloudWatch's OTLP endpoint
//! (signed with SigV4), Amazon Managed Prometheus, a collector or Prometheus' own receiver.
//! The client is the slurm-cw-sink crate's ([`slurm_cw_sink::otlp`]); here are its section of
//! the configuration and its place among the destinations: the open shape (per-job series
//! labelled by job, user, account and partition cost bytes there, not metrics), the open rules,
//! and a spool of its own.

pub mod config;

use crate::datum::Datum;
use crate::sinks::delivery::Checks;
use crate::sinks::open::OpenRules;
use crate::sinks::{Context, MetricDestination};
use config::SigV4Setting;
use slurm_cw_sink::otlp::{self as client, OtlpSink, SigV4};
use slurm_cw_sink::outcome::Outcome;

/// The client, to `otlp.endpoint` (CloudWatch's in the region when not set).
pub async fn build(ctx: &Context<'_>) -> Result<OtlpSink, String> {
    let otlp = &ctx.config.otlp;
    let region = otlp.region.clone().or_else(|| ctx.config.cloudwatch.region.clone());
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
        resource: client::resource(ctx.cluster, ctx.node),
        backoff: crate::sinks::cloudwatch::backoff(&ctx.config.cloudwatch),
        attempt_timeout: ctx.config.cloudwatch.attempt_timeout,
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

    fn checks(&self) -> Box<dyn Checks<Datum>> {
        Box::new(OpenRules::default())
    }

    async fn put_in(&mut self, _label: &str, datums: Vec<Datum>) -> Outcome<Datum> {
        self.put(datums).await
    }
}
