//! The CloudWatch sink: PutMetricData through aws-sdk-cloudwatch.
//!
//! Credentials and region come from aws-config's default chain (environment, profile, IMDSv2
//! instance profile); `AWS_ENDPOINT_URL` / `AWS_ENDPOINT_URL_CLOUDWATCH` redirect it (tests point
//! it at LocalStack). The SDK's own retries are off: this module retries throttling, 5xx and
//! network errors itself with full-jitter backoff, counts every retry, and splits a request that
//! CloudWatch rejects as invalid until only the bad datums are left out.

pub mod batch;
pub use crate::failure::source_chain;
pub use crate::retry;

use crate::datum::{Datum, DatumValue};
use crate::failure::{Failure, classify};
use crate::outcome::Outcome;
use crate::validate::clean_dimension_value;
use aws_sdk_cloudwatch::Client;
use aws_sdk_cloudwatch::types::{Dimension, MetricDatum, StandardUnit, StatisticSet};
use rand::SeedableRng;
use rand::rngs::StdRng;
use retry::Backoff;
use slurm_cw_catalog::Metric;
use std::time::Duration;

#[derive(Debug, Clone)]
pub struct Settings {
    pub namespace: String,
    pub region: Option<String>,
    /// Overrides the endpoint the SDK would choose.
    pub endpoint: Option<String>,
    pub backoff: Backoff,
    /// Limit for one HTTP attempt, connection included.
    pub attempt_timeout: Duration,
    /// 60 (standard) or 1 (high resolution).
    pub storage_resolution: i32,
}

/// A datum of a catalog metric, in `cluster`: `ClusterName` first, dimensions sorted, their
/// values cleaned as CloudWatch needs them. The one way the shipper and the Lambda make datums.
pub fn datum(
    cluster: &str,
    metric: &Metric,
    dims: impl IntoIterator<Item = (String, String)>,
    timestamp: std::time::SystemTime,
    value: DatumValue,
) -> Datum {
    let mut dimensions: Vec<(String, String)> =
        vec![(slurm_cw_catalog::dims::CLUSTER_NAME.to_owned(), cluster.to_owned())];
    dimensions.extend(dims.into_iter().map(|(n, v)| {
        let v = clean_dimension_value(&v).into_owned();
        (n, v)
    }));
    dimensions.sort();
    Datum {
        metric: metric.name.to_owned(),
        unit: metric.unit.as_str().to_owned(),
        dimensions,
        timestamp,
        value,
    }
}

/// What PutMetricData sends: a datum, or an item that carries the datum encoded from it (the
/// shipper's aggregates), so that what did not go comes back as the item itself.
pub trait AsDatum {
    fn datum(&self) -> &Datum;
}

impl AsDatum for Datum {
    fn datum(&self) -> &Datum {
        self
    }
}

/// What one `put` achieved.
pub type PutOutcome = Outcome<Datum>;

pub struct CloudWatchSink {
    client: Client,
    settings: Settings,
    rng: StdRng,
}

impl CloudWatchSink {
    /// Builds the client from the default AWS configuration chain.
    pub async fn new(settings: Settings) -> Result<Self, crate::aws::NoCaCertificates> {
        let sdk = crate::aws::sdk_config(settings.region.as_deref()).await?;
        let mut conf = aws_sdk_cloudwatch::config::Builder::from(&sdk);
        if let Some(url) = &settings.endpoint {
            conf = conf.endpoint_url(url);
        }
        let conf = conf
            .retry_config(aws_sdk_cloudwatch::config::retry::RetryConfig::disabled())
            .timeout_config(
                aws_sdk_cloudwatch::config::timeout::TimeoutConfig::builder()
                    .operation_attempt_timeout(settings.attempt_timeout)
                    .connect_timeout(settings.attempt_timeout.min(Duration::from_secs(5)))
                    .build(),
            )
            .build();
        Ok(CloudWatchSink { client: Client::from_conf(conf), settings, rng: StdRng::from_os_rng() })
    }

    /// Uses a client built elsewhere (the Lambda's, with its own configuration), with the SDK's
    /// own retries turned off: this sink retries itself, counted and with jitter.
    pub fn from_client(client: Client, settings: Settings) -> Self {
        let conf = client
            .config()
            .to_builder()
            .retry_config(aws_sdk_cloudwatch::config::retry::RetryConfig::disabled())
            .build();
        CloudWatchSink { client: Client::from_conf(conf), settings, rng: StdRng::from_os_rng() }
    }

    /// Validates `datums` (each bad one dropped, logged once by `validator`) and sends the
    /// rest: what the Lambda publishes. Returns the outcome and the reasons of the drops.
    pub async fn publish(
        &mut self,
        validator: &mut crate::validate::Validator,
        mut datums: Vec<Datum>,
    ) -> (PutOutcome, Vec<crate::validate::DropReason>) {
        let dropped = validator.retain_valid(&mut datums, std::time::SystemTime::now());
        let outcome = self.put(datums).await;
        (outcome, dropped.into_iter().map(|(_, reason)| reason).collect())
    }

    pub fn namespace(&self) -> &str {
        &self.settings.namespace
    }

    /// Sends `datums` (already validated), in order, in as many requests as the limits need.
    pub async fn put(&mut self, datums: Vec<Datum>) -> PutOutcome {
        let namespace = self.settings.namespace.clone();
        self.put_in(&namespace, datums).await
    }

    /// Sends `items` into `namespace` (a spooled batch keeps the namespace it was made for).
    pub async fn put_in<T: AsDatum>(&mut self, namespace: &str, items: Vec<T>) -> Outcome<T> {
        crate::send::send_all(self, namespace, batch::requests(items)).await
    }
}

impl<T: AsDatum> crate::send::Requests<T> for CloudWatchSink {
    const SERVICE: &'static str = "CloudWatch";

    fn size(d: &T) -> usize {
        batch::estimated_size(d.datum())
    }

    async fn request(
        &mut self,
        namespace: &str,
        chunk: &[T],
        outcome: &mut Outcome<T>,
    ) -> Result<Vec<usize>, Failure> {
        let request: Vec<MetricDatum> =
            chunk.iter().map(|d| to_sdk(d.datum(), self.settings.storage_resolution)).collect();
        let mut attempt = 0;
        loop {
            outcome.requests += 1;
            let result = self
                .client
                .put_metric_data()
                .namespace(namespace)
                .set_metric_data(Some(request.clone()))
                .send()
                .await;
            let failure = match result {
                Ok(_) => return Ok(Vec::new()),
                Err(e) => classify("PutMetricData", &e),
            };
            match failure {
                Failure::Transient(msg) if attempt < self.settings.backoff.max_retries => {
                    let delay = self.settings.backoff.delay(attempt, &mut self.rng);
                    tracing::debug!(attempt, ?delay, error = %msg, "PutMetricData failed; retrying");
                    outcome.retries += 1;
                    attempt += 1;
                    tokio::time::sleep(delay).await;
                }
                other => return Err(other),
            }
        }
    }
}

fn to_sdk(d: &Datum, storage_resolution: i32) -> MetricDatum {
    let dims: Vec<Dimension> =
        d.dimensions.iter().map(|(n, v)| Dimension::builder().name(n).value(v).build()).collect();
    let b = MetricDatum::builder()
        .metric_name(&d.metric)
        .unit(StandardUnit::from(d.unit.as_str()))
        .timestamp(aws_smithy_types::DateTime::from(d.timestamp))
        .storage_resolution(storage_resolution)
        .set_dimensions(Some(dims));
    match &d.value {
        DatumValue::Value { value } => b.value(*value),
        DatumValue::Values { values, counts } => {
            b.set_values(Some(values.clone())).set_counts(Some(counts.clone()))
        }
        DatumValue::Stats { stats } => b.statistic_values(
            StatisticSet::builder()
                .minimum(stats.min)
                .maximum(stats.max)
                .sum(stats.sum)
                .sample_count(stats.count)
                .build(),
        ),
    }
    .build()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::datum::Stats;
    use std::time::SystemTime;

    #[test]
    fn datums_map_to_sdk_fields() {
        let d = Datum {
            metric: "NodeCount".into(),
            unit: "Count".into(),
            dimensions: vec![("ClusterName".into(), "c".into())],
            timestamp: SystemTime::UNIX_EPOCH,
            value: DatumValue::Stats { stats: Stats { min: 1.0, max: 3.0, sum: 4.0, count: 2.0 } },
        };
        let m = to_sdk(&d, 60);
        assert_eq!(m.metric_name(), Some("NodeCount"));
        assert_eq!(m.unit(), Some(&StandardUnit::Count));
        assert_eq!(m.storage_resolution(), Some(60));
        let s = m.statistic_values().unwrap();
        assert_eq!(
            (s.minimum(), s.maximum(), s.sum(), s.sample_count()),
            (Some(1.0), Some(3.0), Some(4.0), Some(2.0))
        );
        assert_eq!(m.dimensions()[0].name(), Some("ClusterName"));
        assert_eq!(m.value(), None);
    }
}
