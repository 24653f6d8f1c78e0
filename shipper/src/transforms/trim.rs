//! What the head leaves out of its collection, as each series it sends is a custom metric
//! billed by the hour whatever its value (docs/cost.md):
//!
//! - with `head.per_partition = "auto"`, the partitions' copies of the cluster's figures that
//!   no view reads per partition ([`Copies`]; on a cluster of one partition, every copy: it
//!   repeats the cluster's figure). The figures that exist per partition only (the autoscaling
//!   signal) stay. The node's population figures follow the same rule per partition and per
//!   account (`node.per_partition`, `node.per_account`);
//! - the node and job counts of a state at zero: sent once when the count falls to zero (a graph
//!   comes down to it), then not until the state has nodes or jobs again; a state an alarm of
//!   the catalog's default rules watches (drained nodes, pending jobs) is sent at zero always.
//!
//! It runs after [`super::derive`], which reads every partition's figures for the backlog.

use crate::config::Toggle;
use crate::sample::{Batch, Dims, Sample};
use slurm_cw_catalog::Metric;
use slurm_cw_catalog::dims::{CLUSTER_NAME, PARTITION, STATE};
use slurm_cw_catalog::metrics::{JOB_COUNT, NODE_COUNT};
use std::collections::HashSet;

/// The state counts sent only while some node or job is in the state.
const STATE_COUNTS: [&Metric; 2] = [&NODE_COUNT, &JOB_COUNT];

#[derive(Debug)]
pub struct Trim {
    /// `auto`'s partition rule; None with `on` (or `off`, where no partition is read).
    copies: Option<Copies>,
    /// The state-count series an alarm watches: sent at zero.
    watched: Vec<(&'static str, Dims)>,
    /// State-count series sent non-zero last time.
    shown: HashSet<(&'static str, Dims)>,
}

impl Trim {
    pub fn new(per_partition: Toggle) -> Self {
        let watched = watched(&STATE_COUNTS);
        let copies = (per_partition == Toggle::Auto).then(|| Copies::read(PARTITION));
        Trim { copies, watched, shown: HashSet::new() }
    }

    pub fn apply(&mut self, batch: &mut Batch) {
        if let Some(c) = &self.copies {
            one_partition(batch);
            c.apply(batch, 0);
        }
        let samples = std::mem::take(&mut batch.samples);
        batch.samples = samples.into_iter().filter(|s| self.keep(s)).collect();
    }

    /// Whether a state count goes out: non-zero, watched, or falling to zero now.
    fn keep(&mut self, s: &Sample) -> bool {
        let (Some(_), Some(v)) = (s.dims.get(STATE), s.scalar()) else { return true };
        if !STATE_COUNTS.iter().any(|m| std::ptr::eq(*m, s.metric)) {
            return true;
        }
        let key = (s.metric.name, s.dims.clone());
        if v != 0.0 {
            self.shown.insert(key);
            return true;
        }
        let fell = self.shown.remove(&key);
        fell || self.watched.iter().any(|(m, d)| *m == s.metric.name && *d == s.dims)
    }
}

/// The series of `metrics` a rule of the catalog's default alarms watches: metric name and
/// dimensions, `ClusterName` left out.
pub fn watched(metrics: &[&'static Metric]) -> Vec<(&'static str, Dims)> {
    slurm_cw_catalog::alarms::default_rules()
        .iter()
        .flat_map(|r| r.watch.iter().chain(r.terms.values()).cloned().collect::<Vec<_>>())
        .filter_map(|m| {
            let metric = metrics.iter().find(|s| s.name == m.metric)?;
            let mut dims = Dims::new();
            for (n, v) in &m.dimensions {
                dims.set(slurm_cw_catalog::dims::named(n)?, v.as_str());
            }
            Some((metric.name, dims))
        })
        .collect()
}

/// A partition's copy of a cluster figure: a sample with a `Partition` whose metric has the
/// same set without it (or an `Account`, ...).
fn is_copy(s: &Sample, dim: &str) -> bool {
    s.dims.get(dim).is_some()
        && s.metric.accepts_dimensions(s.dims.names().filter(|n| *n != dim).chain([CLUSTER_NAME]))
}

/// Drops the per-partition copies of the cluster's figures when the collection saw one
/// partition.
fn one_partition(batch: &mut Batch) {
    let mut partitions = batch.samples.iter().filter_map(|s| s.dims.get(PARTITION));
    let Some(first) = partitions.next() else { return };
    if partitions.any(|p| p != first) {
        return;
    }
    batch.samples.retain(|s| !is_copy(s, PARTITION));
}

/// Which copies of the cluster's figures per partition (or account) go: those a view reads
/// so (catalog `views::read_per`: the dashboard's widgets, the alarms, the Lambda's reads; the
/// others say per partition what no one looks at, each a billed metric), or none.
#[derive(Debug)]
pub struct Copies {
    dim: &'static str,
    /// None: no copy at all.
    read: Option<Vec<String>>,
}

impl Copies {
    /// The copies per `dim` a view reads.
    pub fn read(dim: &'static str) -> Self {
        Copies { dim, read: Some(slurm_cw_catalog::views::read_per(dim).into_iter().collect()) }
    }

    /// A `node.per_*` setting's rule: `auto` what a view reads, `off` none; `on` every copy (None).
    pub fn by(dim: &'static str, setting: Toggle) -> Option<Self> {
        match setting {
            Toggle::Auto => Some(Copies::read(dim)),
            Toggle::Off => Some(Copies { dim, read: None }),
            Toggle::On => None,
        }
    }

    /// The node's population figures' cluster copy (no partition, account or user) where a view
    /// reads it so (catalog `views::read_cluster_wide`), when both `node.per_partition` and
    /// `node.per_account` are `auto`: the copies those send add up to it (spend, waste), or no
    /// view reads the figure anywhere (each job's memory in use: the job records carry it).
    pub fn cluster(per_partition: Toggle, per_account: Toggle) -> Option<Self> {
        (per_partition == Toggle::Auto && per_account == Toggle::Auto).then(|| Copies {
            dim: CLUSTER_NAME,
            read: Some(slurm_cw_catalog::views::read_cluster_wide().into_iter().collect()),
        })
    }

    /// Leaves out the samples from `from` on that are copies not wanted.
    pub fn apply(&self, batch: &mut Batch, from: usize) {
        let mut i = 0;
        batch.samples.retain(|s| {
            i += 1;
            let wanted = || self.read.as_ref().is_some_and(|r| r.iter().any(|n| n == s.metric.name));
            let copy =
                if self.dim == CLUSTER_NAME { s.dims.names().next().is_none() } else { is_copy(s, self.dim) };
            i <= from || !copy || wanted()
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transforms::derive::Derive;
    use slurm_cw_catalog::metrics::*;
    use std::time::{Duration, SystemTime};

    fn at(s: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000 + s)
    }

    #[test]
    fn one_partition_sends_the_cluster_figures_once() {
        let batch = |partitions: &[&str]| {
            let mut b = Batch::new(at(0));
            b.push(&CPUS_ALLOCATED, Dims::new(), 12.0);
            b.push(&CPUS_TOTAL, Dims::new(), 16.0);
            b.push(&NODE_COUNT, Dims::new().with(STATE, "idle"), 1.0);
            for p in partitions {
                let d = || Dims::new().with(PARTITION, *p);
                b.push(&CPUS_ALLOCATED, d(), 12.0);
                b.push(&CPUS_TOTAL, d(), 16.0);
                b.push(&PENDING_NODES, d(), 3.0);
                b.push(&PENDING_CPUS, d(), 12.0);
                b.push(&NODE_COUNT, d().with(STATE, "idle"), 1.0);
            }
            Derive::default().apply(&mut b);
            b
        };
        let mut one = batch(&["batch"]);
        Trim::new(Toggle::Auto).apply(&mut one);
        let batch_p = [("Partition", "batch")];
        assert_eq!(one.value(&CPUS_TOTAL, &[]), Some(16.0));
        assert_eq!(one.value(&CLUSTER_CPU_UTILIZATION, &[]), Some(75.0));
        for m in [&CPUS_TOTAL, &CPUS_ALLOCATED, &PENDING_NODES, &CLUSTER_CPU_UTILIZATION] {
            assert_eq!(one.value(m, &batch_p), None, "{m}: the cluster's figure says it");
        }
        assert_eq!(one.value(&NODE_COUNT, &[("Partition", "batch"), ("State", "idle")]), None);
        assert_eq!(one.value(&BACKLOG_NODES, &batch_p), Some(2.0), "per partition only: kept");
        assert_eq!(one.value(&IDLE_NODES, &batch_p), Some(0.0));

        let mut two = batch(&["batch", "gpu"]);
        Trim::new(Toggle::Auto).apply(&mut two);
        assert_eq!(two.value(&CPUS_TOTAL, &batch_p), None, "two partitions: no view reads it per partition");
        assert_eq!(two.value(&BACKLOG_NODES, &[("Partition", "gpu")]), Some(2.0), "the autoscaling signal");
        assert_eq!(two.value(&CPUS_TOTAL, &[]), Some(16.0), "the cluster's");

        let mut on = batch(&["batch"]);
        Trim::new(Toggle::On).apply(&mut on);
        assert_eq!(on.value(&CPUS_TOTAL, &batch_p), Some(16.0), "per_partition = on keeps the copies");
    }

    #[test]
    fn a_state_at_zero_goes_once_then_not_unless_an_alarm_watches_it() {
        let mut trim = Trim::new(Toggle::Auto);
        let mut cycle = |idle: f64, drained: f64, pending: f64, running: f64| {
            let mut b = Batch::new(at(0));
            b.push(&NODE_COUNT, Dims::new().with(STATE, "idle"), idle);
            b.push(&NODE_COUNT, Dims::new().with(STATE, "drained"), drained);
            b.push(&JOB_COUNT, Dims::new().with(STATE, "pending"), pending);
            b.push(&JOB_COUNT, Dims::new().with(STATE, "running"), running);
            b.push(&NODE_COUNT, Dims::new().with(STATE, "drained").with(PARTITION, "a"), drained);
            b.push(&NODE_COUNT, Dims::new().with(STATE, "drained").with(PARTITION, "b"), drained);
            b.push(&CPUS_IDLE, Dims::new(), 0.0);
            trim.apply(&mut b);
            let mut sent: Vec<String> = b
                .samples
                .iter()
                .map(|s| {
                    format!("{}={}", s.dims.get(STATE).unwrap_or(s.metric.name), s.scalar().unwrap_or(-1.0))
                })
                .collect();
            sent.sort();
            sent.join(" ")
        };
        assert_eq!(
            cycle(0.0, 0.0, 0.0, 0.0),
            "CpusIdle=0 drained=0 pending=0",
            "watched states and other figures at zero go"
        );
        assert_eq!(cycle(2.0, 0.0, 0.0, 3.0), "CpusIdle=0 drained=0 idle=2 pending=0 running=3");
        assert_eq!(
            cycle(0.0, 0.0, 0.0, 0.0),
            "CpusIdle=0 drained=0 idle=0 pending=0 running=0",
            "falling to zero: sent once"
        );
        assert_eq!(cycle(0.0, 0.0, 0.0, 0.0), "CpusIdle=0 drained=0 pending=0", "then left out");
    }
}
