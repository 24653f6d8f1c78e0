//! What collectors produce: one observation of one catalog metric with its dimensions.
//!
//! `ClusterName` is not stored here: the pipeline adds it to every datum, so collectors cannot
//! forget it.

use slurm_cw_catalog::Metric;
use slurm_cw_catalog::records::Field;
use std::time::SystemTime;

mod reading;
pub use reading::{GpuFigures, GpuLabel, Held, JobFigures, JobReading, OneGpu, limited};

/// Dimension name/value pairs, kept sorted by name so equal sets compare and hash equal.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Dims(Vec<(&'static str, String)>);

impl Dims {
    pub fn new() -> Self {
        Dims(Vec::new())
    }

    /// Adds (or replaces) one dimension.
    pub fn with(mut self, name: &'static str, value: impl Into<String>) -> Self {
        self.set(name, value);
        self
    }

    pub fn set(&mut self, name: &'static str, value: impl Into<String>) {
        let value = value.into();
        match self.0.binary_search_by(|(n, _)| n.cmp(&name)) {
            Ok(i) => self.0[i].1 = value,
            Err(i) => self.0.insert(i, (name, value)),
        }
    }

    pub fn get(&self, name: &str) -> Option<&str> {
        self.0.iter().find(|(n, _)| *n == name).map(|(_, v)| v.as_str())
    }

    pub fn iter(&self) -> impl Iterator<Item = (&'static str, &str)> {
        self.0.iter().map(|(n, v)| (*n, v.as_str()))
    }

    pub fn names(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.0.iter().map(|(n, _)| *n)
    }

    /// The same set less the dimension `name` (still sorted).
    pub fn without(&self, name: &str) -> Dims {
        Dims(self.0.iter().filter(|(n, _)| *n != name).cloned().collect())
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// The same names with each value passed through `f` (kept sorted: names do not change).
    pub fn map_values(self, mut f: impl FnMut(String) -> String) -> Dims {
        Dims(self.0.into_iter().map(|(n, v)| (n, f(v))).collect())
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// The value of one observation.
#[derive(Debug, Clone, PartialEq)]
pub enum Observed {
    /// One number.
    Scalar(f64),
    /// Many numbers observed at once (one per CPU core, say); shipped as Values/Counts.
    Distribution(Vec<f64>),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub metric: &'static Metric,
    pub dims: Dims,
    pub value: Observed,
    pub time: SystemTime,
}

impl Sample {
    pub fn new(metric: &'static Metric, dims: Dims, value: f64, time: SystemTime) -> Self {
        Sample { metric, dims, value: Observed::Scalar(value), time }
    }

    pub fn distribution(metric: &'static Metric, dims: Dims, values: Vec<f64>, time: SystemTime) -> Self {
        Sample { metric, dims, value: Observed::Distribution(values), time }
    }

    /// The scalar value, if this is one (tests read values back this way).
    pub fn scalar(&self) -> Option<f64> {
        match self.value {
            Observed::Scalar(v) => Some(v),
            Observed::Distribution(_) => None,
        }
    }
}

/// A job a node collection read, and whom it belongs to: the per-job series' dimensions, and
/// what the job records and the population figures name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobInfo {
    pub id: String,
    /// What else Slurm calls the job (its SLUID, array task or het component name).
    pub names: SlurmNames,
    /// The node it runs on (this host, or one of several slurmd on it).
    pub node: String,
    pub user: String,
    pub account: String,
    pub partition: String,
}

/// A job's other names, as Slurm gives them; records carry them so that `report` and Logs
/// Insights find a job by any of them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SlurmNames {
    /// Slurm 26.05's SLUID.
    pub sluid: Option<String>,
    /// `<array job>_<task>`.
    pub array_task: Option<String>,
    /// `<het job>+<offset>`.
    pub het_component: Option<String>,
}

/// How a figure of a `node_sample` record adds up over a flush.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shown {
    /// The counts over the seconds they cover.
    PerSecond,
    /// The counts added up.
    Total,
}

/// What one collection counted on one of this node's devices or file systems (an EFA or
/// InfiniBand port, a Lustre mount, a RAPL zone) since the collection before: for the node's
/// `node_sample` record (see `transforms::node_sample`). Never a metric by itself.
#[derive(Debug, Clone, PartialEq)]
pub struct DeviceReading {
    /// The record's object it belongs in (`Fabric`, `Lustre`, `Rapl`).
    pub source: &'static Field,
    /// The port, file system or zone.
    pub item: String,
    /// The time the counts cover.
    pub seconds: f64,
    pub figures: Vec<(&'static Field, f64, Shown)>,
    /// Its counters went back since the reading before (counted from zero).
    pub reset: bool,
}

/// Where collectors put samples, stamped with the time of the collection.
#[derive(Debug)]
pub struct Batch {
    pub time: SystemTime,
    /// Node, cluster and shipper figures; never a job's (see `jobs`).
    pub samples: Vec<Sample>,
    /// The jobs the node collector read, one reading per (node, job), with the GPU
    /// collector's figures of the same job and node. Their series are made from these, in
    /// each destination's shape (`transforms::job_series`).
    pub jobs: Vec<JobReading>,
    /// True when `jobs` is every job on the node (a full collection, not one job's final
    /// sample): a job tracked before and missing now has ended.
    pub all_jobs: bool,
    /// This node's own devices and file systems, for its `node_sample` record.
    pub devices: Vec<DeviceReading>,
}

impl Batch {
    pub fn new(time: SystemTime) -> Self {
        Batch { time, samples: Vec::new(), jobs: Vec::new(), all_jobs: false, devices: Vec::new() }
    }

    pub fn push(&mut self, metric: &'static Metric, dims: Dims, value: f64) {
        self.samples.push(Sample::new(metric, dims, value, self.time));
    }

    pub fn push_distribution(&mut self, metric: &'static Metric, dims: Dims, values: Vec<f64>) {
        self.samples.push(Sample::distribution(metric, dims, values, self.time));
    }

    /// The reading of job `id` on `node`.
    pub fn reading_mut(&mut self, node: &str, id: &str) -> Option<&mut JobReading> {
        self.jobs.iter_mut().find(|r| r.info.node == node && r.info.id == id)
    }

    /// Samples of `metric` (tests use this to assert values).
    pub fn of<'a>(&'a self, metric: &'static Metric) -> impl Iterator<Item = &'a Sample> + 'a {
        self.samples.iter().filter(move |s| std::ptr::eq(s.metric, metric))
    }

    /// The value of the one scalar sample of `metric` whose dimensions include all of `want`.
    pub fn value(&self, metric: &'static Metric, want: &[(&str, &str)]) -> Option<f64> {
        let mut found = self
            .of(metric)
            .filter(|s| want.iter().all(|(n, v)| s.dims.get(n) == Some(*v)))
            .filter(|s| s.dims.len() == want.len());
        let first = found.next()?;
        first.scalar()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use slurm_cw_catalog::metrics::NODE_COUNT;

    #[test]
    fn dims_stay_sorted_and_replace() {
        let d = Dims::new().with("State", "idle").with("Partition", "a").with("State", "down");
        let pairs: Vec<_> = d.iter().collect();
        assert_eq!(pairs, vec![("Partition", "a"), ("State", "down")]);
        assert_eq!(d, Dims::new().with("Partition", "a").with("State", "down"));
    }

    #[test]
    fn batch_value_matches_exact_dimension_set() {
        let mut b = Batch::new(SystemTime::UNIX_EPOCH);
        b.push(&NODE_COUNT, Dims::new().with("State", "idle"), 3.0);
        b.push(&NODE_COUNT, Dims::new().with("State", "idle").with("Partition", "p"), 2.0);
        assert_eq!(b.value(&NODE_COUNT, &[("State", "idle")]), Some(3.0));
        assert_eq!(b.value(&NODE_COUNT, &[("State", "idle"), ("Partition", "p")]), Some(2.0));
        assert_eq!(b.value(&NODE_COUNT, &[("State", "down")]), None);
    }
}
