//! Datums as CloudWatch embedded metric format (EMF) log events: one JSON object per dimension
//! set and minute, its `_aws` block naming the namespace, the dimension names and each metric's
//! name, unit and resolution, its members the dimension values and the metric values.
//!
//! A datum's statistics become values CloudWatch reads back exactly: a statistic set of count
//! n is its minimum, its maximum and n - 2 times the mean of the rest, so Sum, SampleCount,
//! Minimum, Maximum and Average are the datum's (percentiles of a set are approximate, as the
//! set never had them); `Values` with counts are repeated by their counts. An EMF value array
//! holds at most 100 numbers and a directive 100 metrics: more go into further events of the
//! same dimensions and minute, which CloudWatch adds into the same statistics.

use crate::aggregate::{Aggregate, Summary};
use crate::sample::Dims;
use serde_json::{Map, Value, json};
use slurm_cw_sink::record::Record;
use std::collections::BTreeMap;
use std::time::UNIX_EPOCH;

/// Numbers in one metric's value array (EMF's limit).
pub const MAX_VALUES: usize = 100;
/// Metrics in one directive (EMF's limit).
pub const MAX_METRICS: usize = 100;
/// Values one datum may expand into; a larger count is represented by this many, keeping
/// minimum, maximum and mean (sum and count then scale down).
pub const MAX_EXPANDED: usize = 10_000;

/// The events, and for each the indices of the aggregates it carries (part of).
#[derive(Debug, Default)]
pub struct Encoded {
    pub records: Vec<Record>,
    pub sources: Vec<Vec<usize>>,
}

/// Encodes `items` for `namespace` at `resolution` (60 or 1).
pub fn encode(namespace: &str, resolution: i32, items: &[Aggregate]) -> Encoded {
    // (milliseconds, dimensions) -> metric -> (unit, values, aggregate indices)
    type Metrics = BTreeMap<&'static str, (&'static str, Vec<f64>, Vec<usize>)>;
    type Group<'a> = (i64, &'a Dims);
    let mut groups: BTreeMap<Group, Metrics> = BTreeMap::new();
    for (i, d) in items.iter().enumerate() {
        let values = values(&d.value);
        if values.is_empty() {
            continue;
        }
        let m = groups.entry((millis(d), &d.dims)).or_default();
        let entry = m.entry(d.metric.name).or_insert((d.metric.unit.as_str(), Vec::new(), Vec::new()));
        entry.1.extend(values);
        entry.2.push(i);
    }
    let mut out = Encoded::default();
    for ((ms, dims), metrics) in groups {
        // Round r holds each metric's r-th array of at most MAX_VALUES numbers.
        let rounds = metrics.values().map(|(_, v, _)| v.len().div_ceil(MAX_VALUES)).max().unwrap_or(0);
        for r in 0..rounds {
            let part: Vec<(&str, &str, &[f64], &[usize])> = metrics
                .iter()
                .filter_map(|(name, (unit, v, src))| {
                    let chunk = v.chunks(MAX_VALUES).nth(r)?;
                    Some((*name, *unit, chunk, src.as_slice()))
                })
                .collect();
            for event in part.chunks(MAX_METRICS) {
                let (record, sources) = event_of(namespace, resolution, ms, dims, event);
                out.records.push(record);
                out.sources.push(sources);
            }
        }
    }
    out
}

fn millis(d: &Aggregate) -> i64 {
    d.time.duration_since(UNIX_EPOCH).map_or(0, |t| t.as_millis() as i64)
}

fn event_of(
    namespace: &str,
    resolution: i32,
    ms: i64,
    dims: &Dims,
    metrics: &[(&str, &str, &[f64], &[usize])],
) -> (Record, Vec<usize>) {
    let names: Vec<&str> = dims.names().collect();
    // StorageResolution 60 is the specification's default: left out, as it is on every event.
    let declared: Vec<Value> = metrics
        .iter()
        .map(|(name, unit, _, _)| match resolution {
            60 => json!({"Name": name, "Unit": unit}),
            r => json!({"Name": name, "Unit": unit, "StorageResolution": r}),
        })
        .collect();
    let mut body = Map::new();
    body.insert(
        "_aws".into(),
        json!({
            "Timestamp": ms,
            "CloudWatchMetrics": [{"Namespace": namespace, "Dimensions": [names], "Metrics": declared}],
        }),
    );
    for (n, v) in dims.iter() {
        body.insert(n.to_owned(), Value::String(v.to_owned()));
    }
    let mut sources = Vec::new();
    for (name, _, values, src) in metrics {
        let value = match values {
            [one] => json!(one),
            many => json!(many),
        };
        body.insert((*name).to_owned(), value);
        sources.extend_from_slice(src);
    }
    let time = UNIX_EPOCH + std::time::Duration::from_millis(ms.max(0) as u64);
    (Record { time, message: Value::Object(body).to_string() }, sources)
}

/// The numbers that stand for an aggregate's summary (see the module's comment).
pub fn values(v: &Summary) -> Vec<f64> {
    match v {
        Summary::Value { value } => vec![*value],
        Summary::Values { values, counts } => {
            let mut out = Vec::new();
            for (i, x) in values.iter().enumerate() {
                let n = counts.get(i).map_or(1, |c| c.round().max(1.0) as usize);
                let room = MAX_EXPANDED.saturating_sub(out.len());
                out.extend(std::iter::repeat_n(*x, n.min(room)));
            }
            out
        }
        Summary::Stats { stats } => {
            let n = (stats.count.round().max(0.0) as usize).min(MAX_EXPANDED);
            match n {
                0 => Vec::new(),
                1 => vec![stats.sum / stats.count.max(1.0)],
                2 => vec![stats.min, stats.max],
                _ => {
                    // The mean of the values between the extremes lies between them.
                    let rest = if stats.count > MAX_EXPANDED as f64 {
                        stats.sum / stats.count
                    } else {
                        (stats.sum - stats.min - stats.max) / (n - 2) as f64
                    };
                    let rest = rest.clamp(stats.min, stats.max);
                    let mut out = vec![stats.min, stats.max];
                    out.extend(std::iter::repeat_n(rest, n - 2));
                    out
                }
            }
        }
    }
}

#[cfg(test)]
#[path = "encode_tests.rs"]
mod tests;
