//! Aggregation between flushes: every sample of a metric with the same dimensions collapses into
//! one [`Aggregate`] per flush (per minute when a flush spans several: see
//! [`Aggregator::with_period`]), so a node sends about one request per flush interval however
//! often it samples.
//!
//! An aggregate is neutral: the catalog's metric, its dimensions (`ClusterName` added, values
//! job users chose made printable), the time of its latest sample and a [`Summary`]. Each
//! destination encodes it into its own wire form (`sinks/*/encode`); the spool stores it as a
//! datum line and reads it back against the catalog.

use crate::datum::{Datum, DatumValue, Stats};
use crate::sample::{Dims, Observed, Sample};
use slurm_cw_catalog::{Kind, Metric};
use slurm_cw_sink::validate::clean_dimension_value;
use std::collections::{BTreeMap, HashMap};
use std::time::SystemTime;

/// What a series' samples in one period come to: one value, a statistic set, or a
/// distribution (values and counts). The same three whatever the wire, spelled once (formats).
pub type Summary = DatumValue;

/// One series' samples of one period, as every destination receives them.
#[derive(Debug, Clone, PartialEq)]
pub struct Aggregate {
    pub metric: &'static Metric,
    /// `ClusterName` included; sorted by name.
    pub dims: Dims,
    /// The latest sample's.
    pub time: SystemTime,
    pub value: Summary,
}

impl Aggregate {
    pub fn dimension(&self, name: &str) -> Option<&str> {
        self.dims.get(name)
    }

    /// Its stored form: the datum line's fields (what the spool and `--sink stdout` hold).
    pub fn to_datum(&self) -> Datum {
        Datum {
            metric: self.metric.name.to_owned(),
            unit: self.metric.unit.as_str().to_owned(),
            dimensions: self.dims.iter().map(|(n, v)| (n.to_owned(), v.to_owned())).collect(),
            timestamp: self.time,
            value: self.value.clone(),
        }
    }

    /// Back from its stored form, if the catalog still has its metric and every dimension (a
    /// spool written by another version may name what this one no longer has).
    pub fn from_datum(d: Datum) -> Option<Aggregate> {
        let metric = slurm_cw_catalog::by_name(&d.metric)?;
        let mut dims = Dims::new();
        for (n, v) in d.dimensions {
            dims.set(slurm_cw_catalog::dims::named(&n)?, v);
        }
        Some(Aggregate { metric, dims, time: d.timestamp, value: d.value })
    }
}

impl slurm_cw_formats::spool::Item for Aggregate {
    fn to_line(&self, namespace: &str) -> String {
        self.to_datum().to_json_line(namespace)
    }

    /// A line of a metric or dimension this version does not have is skipped (and counted).
    fn from_line(line: &str) -> Result<Option<Self>, String> {
        Datum::from_json_line(line).map(|(_, d)| Aggregate::from_datum(d)).map_err(|e| e.to_string())
    }
}

/// CloudWatch accepts at most this many distinct values in one `Values` array.
pub const MAX_DISTINCT_VALUES: usize = 150;

#[derive(Debug, Clone)]
enum Acc {
    Stats(Stats),
    /// value (as bits, so it can be a key) -> how many times seen
    Distribution(BTreeMap<u64, f64>),
}

#[derive(Debug, Clone)]
struct Entry {
    metric: &'static Metric,
    last: SystemTime,
    acc: Acc,
}

/// Accumulates samples until the next flush.
#[derive(Debug)]
pub struct Aggregator {
    cluster: String,
    /// Seconds of one datum's period; 0: one datum per series and flush.
    period: u64,
    /// (metric, dimensions, period index) -> what was seen.
    entries: HashMap<(&'static str, Dims, u64), Entry>,
}

impl Aggregator {
    pub fn new(cluster: impl Into<String>) -> Self {
        Aggregator { cluster: cluster.into(), period: 0, entries: HashMap::new() }
    }

    /// One datum per series and `period` (from the epoch) instead of one per flush: a flush that
    /// spans several minutes (fewer, billed, requests) keeps per-minute datapoints, and a
    /// `Total` stays a per-minute figure whose `Sum` across nodes is the cluster's.
    pub fn with_period(mut self, period: std::time::Duration) -> Self {
        self.period = period.as_secs();
        self
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Distinct (metric, dimensions) series waiting for the next flush.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn add(&mut self, sample: Sample) {
        let Sample { metric, dims, value, time } = sample;
        let bucket = match self.period {
            0 => 0,
            p => time.duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() / p),
        };
        let entry = self.entries.entry((metric.name, dims, bucket)).or_insert_with(|| Entry {
            metric,
            last: time,
            acc: match value {
                Observed::Scalar(_) => {
                    Acc::Stats(Stats { min: f64::INFINITY, max: f64::NEG_INFINITY, sum: 0.0, count: 0.0 })
                }
                Observed::Distribution(_) => Acc::Distribution(BTreeMap::new()),
            },
        });
        entry.last = entry.last.max(time);
        let values: &[f64] = match &value {
            Observed::Scalar(v) => std::slice::from_ref(v),
            Observed::Distribution(vs) => vs,
        };
        for &v in values {
            match &mut entry.acc {
                Acc::Stats(s) => {
                    // NaN compares false, so min/max keep it out; the sum carries it to
                    // validation, which drops the datum with a reason.
                    s.min = s.min.min(v);
                    s.max = s.max.max(v);
                    if v.is_nan() {
                        s.min = f64::NAN;
                    }
                    s.sum += v;
                    s.count += 1.0;
                }
                Acc::Distribution(d) => *d.entry(v.to_bits()).or_insert(0.0) += 1.0,
            }
        }
    }

    pub fn extend(&mut self, samples: impl IntoIterator<Item = Sample>) {
        for s in samples {
            self.add(s);
        }
    }

    /// Everything accumulated so far, left in place for the flush: what a pull endpoint serves
    /// between flushes (unsorted).
    pub fn snapshot(&self) -> Vec<Aggregate> {
        self.entries
            .iter()
            .map(|((_, dims, _), e)| aggregate(&self.cluster, e.clone(), dims.clone()))
            .collect()
    }

    /// Takes everything accumulated so far, sorted by metric and dimensions so output is stable.
    pub fn drain(&mut self) -> Vec<Aggregate> {
        let mut out: Vec<Aggregate> =
            self.entries.drain().map(|((_, dims, _), e)| aggregate(&self.cluster, e, dims)).collect();
        out.sort_by(|a, b| (a.metric.name, &a.dims, a.time).cmp(&(b.metric.name, &b.dims, b.time)));
        out
    }
}

fn aggregate(cluster: &str, e: Entry, sample_dims: Dims) -> Aggregate {
    let value = match e.acc {
        Acc::Stats(s) if s.count == 1.0 => DatumValue::Value { value: s.sum },
        // One value per node and flush, so that Sum across nodes is the cluster's total.
        Acc::Stats(s) if e.metric.kind == Kind::Total => DatumValue::Value { value: s.sum / s.count },
        Acc::Stats(stats) => DatumValue::Stats { stats },
        Acc::Distribution(d) => {
            let (values, counts) = fold_distribution(&d);
            DatumValue::Values { values, counts }
        }
    };
    // Values come from Slurm and from job users (process names, accounts): made printable once,
    // here, for every wire; never dropped.
    let dims = sample_dims
        .map_values(|v| match clean_dimension_value(&v) {
            std::borrow::Cow::Borrowed(same) if same.len() == v.len() => v,
            cleaned => cleaned.into_owned(),
        })
        .with(slurm_cw_catalog::dims::CLUSTER_NAME, cluster);
    Aggregate { metric: e.metric, dims, time: e.last, value }
}

/// At most [`MAX_DISTINCT_VALUES`] (value, count) pairs: when there are more, values are merged
/// into equal-width bins, each represented by the count-weighted mean of its members.
fn fold_distribution(d: &BTreeMap<u64, f64>) -> (Vec<f64>, Vec<f64>) {
    let mut pairs: Vec<(f64, f64)> = d.iter().map(|(b, c)| (f64::from_bits(*b), *c)).collect();
    pairs.sort_by(|a, b| a.0.total_cmp(&b.0));
    if pairs.len() <= MAX_DISTINCT_VALUES {
        return pairs.into_iter().unzip();
    }
    let lo = pairs.first().map_or(0.0, |p| p.0);
    let hi = pairs.last().map_or(0.0, |p| p.0);
    let width = (hi - lo) / MAX_DISTINCT_VALUES as f64;
    let mut bins: Vec<(f64, f64)> = vec![(0.0, 0.0); MAX_DISTINCT_VALUES];
    for (v, c) in pairs {
        let i = if width > 0.0 { (((v - lo) / width) as usize).min(MAX_DISTINCT_VALUES - 1) } else { 0 };
        bins[i].0 += v * c;
        bins[i].1 += c;
    }
    bins.into_iter().filter(|(_, c)| *c > 0.0).map(|(s, c)| (s / c, c)).unzip()
}

#[cfg(test)]
mod tests {
    use super::*;
    use slurm_cw_catalog::metrics::{CPU_CORE_UTILIZATION, NODE_COUNT};
    use std::time::Duration;

    fn t(s: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000 + s)
    }

    #[test]
    fn one_sample_is_a_plain_value_with_cluster_name() {
        let mut a = Aggregator::new("prod");
        a.add(Sample::new(&NODE_COUNT, Dims::new().with("State", "idle"), 4.0, t(0)));
        let out = a.drain();
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].value, DatumValue::Value { value: 4.0 });
        assert_eq!(out[0].dimension("ClusterName"), Some("prod"));
        assert_eq!(out[0].dimension("State"), Some("idle"));
        assert_eq!(out[0].metric.unit.as_str(), "Count");
        assert!(a.is_empty());
    }

    #[test]
    fn samples_of_one_series_become_statistic_values() {
        let mut a = Aggregator::new("c");
        for (i, v) in [5.0, 3.0, 7.0, 5.0].into_iter().enumerate() {
            a.add(Sample::new(&NODE_COUNT, Dims::new().with("State", "idle"), v, t(i as u64 * 10)));
        }
        a.add(Sample::new(&NODE_COUNT, Dims::new().with("State", "down"), 1.0, t(0)));
        let out = a.drain();
        assert_eq!(out.len(), 2);
        let idle = out.iter().find(|d| d.dimension("State") == Some("idle")).unwrap();
        assert_eq!(
            idle.value,
            DatumValue::Stats { stats: Stats { min: 3.0, max: 7.0, sum: 20.0, count: 4.0 } }
        );
        assert_eq!(idle.time, t(30), "an aggregate carries the time of its latest sample");
    }

    #[test]
    fn user_chosen_names_are_cleaned_not_dropped() {
        let mut a = Aggregator::new("c");
        let exe = "sölver\u{1b}[31m";
        a.add(Sample::new(
            &slurm_cw_catalog::metrics::PROCESS_CPU_USAGE,
            Dims::new().with("Executable", exe),
            1.0,
            t(0),
        ));
        let out = a.drain();
        assert_eq!(out[0].dimension("Executable"), Some("s\\u{f6}lver\\u{1b}[31m"));
        let mut out: Vec<Datum> = out.iter().map(Aggregate::to_datum).collect();
        let dropped = slurm_cw_sink::validate::Validator::new().retain_valid(&mut out, t(0));
        assert!(dropped.is_empty() && out.len() == 1, "{dropped:?}");
    }

    #[test]
    fn totals_are_one_mean_value_per_flush() {
        let mut a = Aggregator::new("c");
        for v in [4.0, 6.0] {
            a.add(Sample::new(&slurm_cw_catalog::metrics::JOB_ALLOCATIONS, Dims::new(), v, t(0)));
        }
        assert_eq!(a.drain()[0].value, DatumValue::Value { value: 5.0 });
    }

    #[test]
    fn a_long_flush_keeps_one_datum_a_minute() {
        let mut a = Aggregator::new("c").with_period(Duration::from_secs(60));
        // A 120 s flush from 20 s into a minute: samples every 30 s, two in each minute.
        for (s, v) in [(0, 4.0), (30, 6.0), (60, 8.0), (90, 12.0)] {
            a.add(Sample::new(&slurm_cw_catalog::metrics::JOB_ALLOCATIONS, Dims::new(), v, t(s)));
        }
        let out = a.drain();
        let got: Vec<_> = out.iter().map(|d| (d.time, d.value.clone())).collect();
        assert_eq!(
            got,
            vec![(t(30), DatumValue::Value { value: 5.0 }), (t(90), DatumValue::Value { value: 10.0 })],
            "one datum a minute, each the mean of its minute's samples"
        );
    }

    #[test]
    fn distributions_become_values_and_counts() {
        let mut a = Aggregator::new("c");
        let d = Dims::new().with("JobId", "1");
        a.add(Sample::distribution(&CPU_CORE_UTILIZATION, d.clone(), vec![100.0, 50.0, 100.0], t(0)));
        a.add(Sample::distribution(&CPU_CORE_UTILIZATION, d, vec![50.0, 0.0], t(10)));
        let out = a.drain();
        assert_eq!(
            out[0].value,
            DatumValue::Values { values: vec![0.0, 50.0, 100.0], counts: vec![1.0, 2.0, 2.0] }
        );
    }

    #[test]
    fn wide_distributions_fold_to_150_values_and_keep_totals() {
        let mut a = Aggregator::new("c");
        let values: Vec<f64> = (0..1000).map(|i| i as f64 / 10.0).collect();
        let mean: f64 = values.iter().sum::<f64>() / values.len() as f64;
        a.add(Sample::distribution(&CPU_CORE_UTILIZATION, Dims::new(), values, t(0)));
        let out = a.drain();
        let DatumValue::Values { values, counts } = &out[0].value else { panic!("not values") };
        assert!(values.len() <= MAX_DISTINCT_VALUES);
        assert_eq!(counts.iter().sum::<f64>(), 1000.0);
        let folded_mean: f64 = values.iter().zip(counts).map(|(v, c)| v * c).sum::<f64>() / 1000.0;
        assert!((folded_mean - mean).abs() < 1e-9, "{folded_mean} vs {mean}");
    }

    #[test]
    fn stored_lines_read_back_and_a_metric_this_version_lacks_is_skipped() {
        use slurm_cw_formats::spool::{Item, decode, encode};
        let mut a = Aggregator::new("c");
        a.add(Sample::new(&NODE_COUNT, Dims::new().with("State", "idle"), 4.0, t(0)));
        let kept = a.drain().remove(0);
        let line = kept.to_line("Slurm/c");
        assert_eq!(Aggregate::from_line(&line), Ok(Some(kept.clone())));
        assert_eq!(Aggregate::from_line(&line.replace("NodeCount", "NodeCountOfOld")), Ok(None));
        assert_eq!(Aggregate::from_line(&line.replace("\"State\"", "\"Colour\"")), Ok(None));
        assert!(Aggregate::from_line("{not json").is_err());
        // A file holding one such line keeps the rest.
        let mut gone = kept.to_datum();
        gone.metric = "Retired".into();
        let file = encode("Slurm/c", &[kept.to_datum(), gone]);
        let back = decode::<Aggregate>(&file).expect("the file is whole");
        assert_eq!((back.items, back.skipped), (vec![kept], 1));
    }

    #[test]
    fn nan_is_kept_for_validation_to_drop() {
        let mut a = Aggregator::new("c");
        a.add(Sample::new(&NODE_COUNT, Dims::new(), 1.0, t(0)));
        a.add(Sample::new(&NODE_COUNT, Dims::new(), f64::NAN, t(1)));
        let out = a.drain();
        assert!(out[0].value.numbers().iter().any(|v| v.is_nan()));
    }
}
