//! Reading what the shippers sent: ListMetrics to find a metric's series, GetMetricData in
//! batches of 500 queries (one per series) to read them. Writing goes through slurm-cw-sink.
//!
//! Every ListMetrics asks only for series with data in the last three hours (RecentlyActive):
//! without it, ListMetrics returns every series of the last two weeks, and a listing would grow
//! with whatever stopped reporting (jobs, nodes, partitions) long ago.

use anyhow::{Context, Result};
use aws_sdk_cloudwatch::Client;
use aws_sdk_cloudwatch::types::{
    Dimension, DimensionFilter, Metric, MetricDataQuery, MetricStat, RecentlyActive, ScanBy,
};
use slurm_cw_catalog::Metric as CatalogMetric;
use slurm_cw_catalog::dims::CLUSTER_NAME;
use slurm_cw_sink::datum::{Datum, DatumValue};
use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

/// GetMetricData takes at most 500 queries a call.
pub const MAX_QUERIES: usize = 500;

/// GetMetricData calls in flight at once, should a read ever need many: one after another they
/// could outlast a one-minute schedule. CloudWatch allows 50 a second by default.
pub const PARALLEL_CALLS: usize = 8;

/// Dimensions of a series besides ClusterName, sorted by name.
pub type Dims = Vec<(String, String)>;

/// One series to read: a metric, its other dimensions, a statistic.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    pub metric: &'static CatalogMetric,
    pub dims: Dims,
    pub stat: &'static str,
}

/// Points of a series: epoch seconds -> value.
pub type Points = BTreeMap<i64, f64>;

pub struct Cw {
    pub client: Client,
    pub namespace: String,
    pub cluster: String,
    /// GetMetricData calls made (each query in them is billed as one metric).
    pub calls: u32,
    pub queries: u32,
    /// ListMetrics calls made (pages included).
    pub list_calls: u32,
}

pub fn epoch(t: SystemTime) -> i64 {
    t.duration_since(SystemTime::UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0)
}

pub fn at_epoch(secs: i64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(secs.max(0) as u64)
}

/// Epoch milliseconds as RFC 3339.
pub fn rfc3339_ms(ms: i64) -> String {
    let t = at_epoch(ms.div_euclid(1000)) + Duration::from_millis(ms.rem_euclid(1000) as u64);
    slurm_cw_sink::datum::format_timestamp(t)
}

impl Cw {
    pub fn new(client: Client, namespace: String, cluster: String) -> Self {
        Cw { client, namespace, cluster, calls: 0, queries: 0, list_calls: 0 }
    }

    /// The other dimensions of every recently active series of `metric` in this cluster.
    pub async fn list(&mut self, metric: &CatalogMetric) -> Result<Vec<Dims>> {
        self.list_having(metric, &[]).await
    }

    /// As [`Cw::list`], of the series that have (at least) the dimensions `names`.
    async fn list_having(&mut self, metric: &CatalogMetric, names: &[&str]) -> Result<Vec<Dims>> {
        let all = self.list_named(Some(metric), names).await?;
        Ok(all.into_iter().map(|(_, d)| d).collect())
    }

    /// Every recently active series of this cluster that has (at least) the dimensions `names`,
    /// whatever its metric, with its metric's name: one listing where several metrics' series
    /// are wanted (a `ListMetrics` request is billed whatever it asks).
    pub async fn list_every(&mut self, names: &[&str]) -> Result<Vec<(String, Dims)>> {
        self.list_named(None, names).await
    }

    async fn list_named(
        &mut self,
        metric: Option<&CatalogMetric>,
        names: &[&str],
    ) -> Result<Vec<(String, Dims)>> {
        let mut out = Vec::new();
        let mut seen = std::collections::HashSet::new();
        let mut filters = vec![DimensionFilter::builder().name(CLUSTER_NAME).value(&self.cluster).build()];
        filters.extend(names.iter().map(|n| DimensionFilter::builder().name(*n).build()));
        let mut token = None;
        loop {
            self.list_calls += 1;
            let resp = self
                .client
                .list_metrics()
                .namespace(&self.namespace)
                .set_metric_name(metric.map(|m| m.name.to_owned()))
                .set_dimensions(Some(filters.clone()))
                .recently_active(RecentlyActive::Pt3H)
                .set_next_token(token)
                .send()
                .await
                .with_context(|| format!("ListMetrics {}", metric.map_or("", |m| m.name)))?;
            for m in resp.metrics() {
                let mut d: Dims = m
                    .dimensions()
                    .iter()
                    .filter_map(|d| Some((d.name()?.to_owned(), d.value()?.to_owned())))
                    .filter(|(n, _)| n != CLUSTER_NAME)
                    .collect();
                d.sort();
                let name = m.metric_name().unwrap_or_default().to_owned();
                if seen.insert((name.clone(), d.clone())) {
                    out.push((name, d));
                }
            }
            token = resp.next_token().map(str::to_owned);
            if token.is_none() {
                return Ok(out);
            }
        }
    }

    /// Series of `metric` whose other dimensions are exactly `names` (so per-job series, not
    /// their per-node or per-GPU detail).
    pub async fn list_with(&mut self, metric: &CatalogMetric, names: &[&str]) -> Result<Vec<Dims>> {
        let mut want: Vec<&str> = names.to_vec();
        want.sort_unstable();
        Ok(self
            .list_having(metric, names)
            .await?
            .into_iter()
            .filter(|d| d.iter().map(|(n, _)| n.as_str()).eq(want.iter().copied()))
            .collect())
    }

    /// Reads `series` over [start, end) at `period` seconds, one [`Points`] per series, in order.
    pub async fn fetch(
        &mut self,
        series: &[Series],
        start: SystemTime,
        end: SystemTime,
        period: i32,
    ) -> Result<Vec<Points>> {
        let mut out = vec![Points::new(); series.len()];
        let mut chunks = series.chunks(MAX_QUERIES).enumerate();
        let mut running = tokio::task::JoinSet::new();
        loop {
            while running.len() < PARALLEL_CALLS {
                let Some((chunk_no, chunk)) = chunks.next() else { break };
                let queries = self.queries(chunk, period);
                self.queries += queries.len() as u32;
                let client = self.client.clone();
                running.spawn(async move { (chunk_no, get_metric_data(client, queries, start, end).await) });
            }
            let Some(done) = running.join_next().await else { break };
            let (chunk_no, result) = done.context("GetMetricData task")?;
            let (calls, points) = result?;
            self.calls += calls;
            for (i, t, v) in points {
                if let Some(p) = out.get_mut(chunk_no * MAX_QUERIES + i) {
                    p.insert(t, v);
                }
            }
        }
        Ok(out)
    }

    /// One query per series, with ids q0, q1, ... in order.
    fn queries(&self, chunk: &[Series], period: i32) -> Vec<MetricDataQuery> {
        chunk
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let mut dims = vec![Dimension::builder().name(CLUSTER_NAME).value(&self.cluster).build()];
                dims.extend(s.dims.iter().map(|(n, v)| Dimension::builder().name(n).value(v).build()));
                MetricDataQuery::builder()
                    .id(format!("q{i}"))
                    .metric_stat(
                        MetricStat::builder()
                            .metric(
                                Metric::builder()
                                    .namespace(&self.namespace)
                                    .metric_name(s.metric.name)
                                    .set_dimensions(Some(dims))
                                    .build(),
                            )
                            .period(period)
                            .stat(s.stat)
                            .build(),
                    )
                    .return_data(true)
                    .build()
            })
            .collect()
    }
}

/// One GetMetricData request, every page of it: the calls made and (query index, time, value).
async fn get_metric_data(
    client: Client,
    queries: Vec<MetricDataQuery>,
    start: SystemTime,
    end: SystemTime,
) -> Result<(u32, Vec<(usize, i64, f64)>)> {
    let (mut calls, mut points) = (0, Vec::new());
    let mut token = None;
    loop {
        calls += 1;
        let resp = client
            .get_metric_data()
            .set_metric_data_queries(Some(queries.clone()))
            .start_time(aws_smithy_types::DateTime::from(start))
            .end_time(aws_smithy_types::DateTime::from(end))
            .scan_by(ScanBy::TimestampAscending)
            .set_next_token(token)
            .send()
            .await
            .context("GetMetricData")?;
        for r in resp.metric_data_results() {
            let Some(i) = r.id().and_then(|id| id.strip_prefix('q')).and_then(|n| n.parse::<usize>().ok())
            else {
                continue;
            };
            points.extend(r.timestamps().iter().zip(r.values()).map(|(t, v)| (i, t.secs(), *v)));
        }
        token = resp.next_token().map(str::to_owned);
        if token.is_none() {
            return Ok((calls, points));
        }
    }
}

/// A derived datum of `metric` at `at` (epoch seconds), with ClusterName and `dims`.
pub fn datum(cluster: &str, metric: &CatalogMetric, dims: &[(String, String)], at: i64, value: f64) -> Datum {
    slurm_cw_sink::cloudwatch::datum(
        cluster,
        metric,
        dims.iter().cloned(),
        at_epoch(at),
        DatumValue::Value { value },
    )
}
