//! `cloudwatch`: datums to CloudWatch with PutMetricData. The client (batching, retries,
//! splitting refused requests) is the slurm-cw-sink crate's, shared with the Lambda; here are
//! what is CloudWatch's own on the node: its section of the configuration, its shape (which
//! series are worth a billed custom metric) and its rules (PutMetricData's limits).

pub mod config;
pub mod encode;

pub use slurm_cw_sink::cloudwatch::*;

use crate::aggregate::Aggregate;
use crate::sinks::delivery::Checks;
use crate::sinks::{BuildError, Context, MetricDestination, MetricSink, Records, Spool};
use crate::transforms::shape::Shape;
pub use encode::PutMetricDataRules;
use slurm_cw_sink::outcome::Outcome;
use slurm_cw_sink::retry::Backoff;

/// `cloudwatch` in the registry.
pub struct Spec;

#[async_trait::async_trait]
impl crate::sinks::Component for Spec {
    type Section = config::CloudWatchConfig;

    fn name(&self) -> &'static str {
        "cloudwatch"
    }

    fn keys(&self) -> &'static [crate::config::docs::Key] {
        config::KEYS
    }

    /// Every series is a custom metric billed by the hour.
    fn shape(&self, per_series: Shape) -> Shape {
        per_series
    }

    fn spool(&self) -> Spool {
        Spool::Root
    }

    fn records(&self) -> Records {
        Records::Logs
    }

    fn uses_aws(&self) -> bool {
        true
    }

    fn plain_self_metrics(&self) -> bool {
        true
    }

    async fn build(&self, cw: &config::CloudWatchConfig, cx: &Context<'_>) -> Result<MetricSink, BuildError> {
        let sink = CloudWatchSink::new(settings(cw, cx.namespace)).await;
        Ok(Box::new(sink.map_err(|e| BuildError::new(self.name(), e))?))
    }
}

#[async_trait::async_trait]
impl MetricDestination for CloudWatchSink {
    fn label(&self) -> &str {
        self.namespace()
    }

    fn checks(&self) -> Box<dyn Checks<Aggregate>> {
        Box::new(PutMetricDataRules::default())
    }

    async fn put_in(&mut self, namespace: &str, items: Vec<Aggregate>) -> Outcome<Aggregate> {
        let encoded: Vec<encode::Encoded> = items.into_iter().map(encode::Encoded::new).collect();
        CloudWatchSink::put_in(self, namespace, encoded).await.map(|e| e.aggregate)
    }
}

/// The client, for the namespace the run resolved. Fails without CA certificates.
/// The client's settings from `[cloudwatch]`.
pub fn settings(cw: &config::CloudWatchConfig, namespace: &str) -> Settings {
    Settings {
        namespace: namespace.to_owned(),
        region: cw.region.clone(),
        endpoint: cw.endpoint.clone(),
        backoff: backoff(cw),
        attempt_timeout: cw.attempt_timeout,
        storage_resolution: cw.storage_resolution,
    }
}

/// `[cloudwatch]`'s retry settings, which CloudWatch Logs uses too.
pub fn backoff(cw: &config::CloudWatchConfig) -> Backoff {
    Backoff { base: cw.retry_base_delay, cap: cw.retry_max_delay, max_retries: cw.max_retries }
}
