//! What the head node derives from its own readings, where the data is, instead of a Lambda
//! reading it back from CloudWatch (GetMetricData is billed per series, every run):
//!
//! - each sdiag counter becomes its increase since the previous read (reset-aware), and the
//!   counter itself is not sent: [`Kind::Increase`] metrics, whose `Sum` over a period is the
//!   count in the period;
//! - CPU and GPU utilisation, allocated over total, for the cluster and each partition;
//! - the autoscaling signal per partition: nodes the pending demand needs beyond the idle ones;
//! - and a cluster without a GPU (none configured, none asked for) sends no GPU figures: zeros
//!   that nobody reads are billed like any other metric.

use crate::sample::{Batch, Dims, Observed, Sample};
use slurm_cw_catalog::dims::{PARTITION, STATE};
use slurm_cw_catalog::metrics::*;
use slurm_cw_catalog::{ALL, Kind, Metric};
use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, SystemTime};

/// A previous reading further back than this is too old to make an increase from: after a long
/// gap (a stalled slurmctld, a restarted shipper) the next read starts again.
pub const MAX_GAP: Duration = Duration::from_secs(15 * 60);

/// The previous reading of every counter series, to take increases from.
#[derive(Debug, Default)]
pub struct Derive {
    previous: HashMap<(&'static str, Dims), (f64, SystemTime)>,
}

/// The metric that carries `counter`'s increase.
fn increase_of(counter: &'static Metric) -> Option<&'static Metric> {
    ALL.iter().copied().find(|m| m.rate_of.is_some_and(|c| std::ptr::eq(c, counter)))
}

/// The increase of a counter from `prev` to `now`: after a reset (a lower value: midnight UTC,
/// slurmctld restarted, `sdiag --reset`) the counter started again from zero, so the increase is
/// the value itself. Never negative.
pub fn increase(prev: f64, now: f64) -> f64 {
    if now >= prev { now - prev } else { now.max(0.0) }
}

/// Nodes the pending demand needs beyond the idle ones, and idle nodes beyond the demand. The
/// demand is in nodes the larger of the jobs' minimum node counts and their CPUs spread over
/// nodes of the partition's average size.
pub fn backlog(
    pending_nodes: f64,
    pending_cpus: f64,
    idle_nodes: f64,
    cpus_total: f64,
    nodes_total: f64,
) -> (f64, f64) {
    let by_cpus = if cpus_total > 0.0 && nodes_total > 0.0 {
        (pending_cpus / (cpus_total / nodes_total)).ceil()
    } else {
        0.0
    };
    let demand = pending_nodes.max(by_cpus);
    ((demand - idle_nodes).max(0.0), (idle_nodes - demand).max(0.0))
}

impl Derive {
    /// Replaces the batch's counters with their increases and adds the derived figures.
    pub fn apply(&mut self, batch: &mut Batch) {
        let samples = std::mem::take(&mut batch.samples);
        let mut kept = Vec::with_capacity(samples.len());
        for s in samples {
            if s.metric.kind != Kind::Counter {
                kept.push(s);
                continue;
            }
            let (Observed::Scalar(now), Some(rate)) = (s.value.clone(), increase_of(s.metric)) else {
                continue;
            };
            let key = (s.metric.name, s.dims);
            if let Some((prev, at)) = self.previous.get(&key)
                && let Ok(gap) = s.time.duration_since(*at)
                && !gap.is_zero()
                && gap <= MAX_GAP
                && now.is_finite()
                && prev.is_finite()
            {
                kept.push(Sample::new(rate, key.1.clone(), increase(*prev, now), s.time));
            }
            self.previous.insert(key, (now, s.time));
        }
        batch.samples = kept;
        utilisation(batch);
        without_gpus(batch);
    }
}

/// The head's GPU figures.
const GPU_FIGURES: [&Metric; 4] = [&GPUS_TOTAL, &GPUS_ALLOCATED, &PENDING_GPUS, &RUNNING_GPUS];

/// Drops the GPU figures of a collection that saw no GPU anywhere in the cluster.
fn without_gpus(batch: &mut Batch) {
    let gpu = |s: &Sample| GPU_FIGURES.iter().any(|m| std::ptr::eq(*m, s.metric));
    let mut seen = false;
    let mut any = false;
    for s in batch.samples.iter().filter(|s| gpu(s) && s.dims.is_empty()) {
        seen = true;
        any |= s.scalar().is_none_or(|v| v != 0.0);
    }
    if seen && !any {
        batch.samples.retain(|s| !gpu(s));
    }
}

/// Utilisation and backlog from one head collection's samples.
fn utilisation(batch: &mut Batch) {
    // Per scope (the cluster: no partition; else the partition): the figures the ratios need.
    let mut scopes: BTreeMap<Option<String>, Scope> = BTreeMap::new();
    for s in &batch.samples {
        let Some(v) = s.scalar() else { continue };
        let partition = s.dims.get(PARTITION).map(str::to_owned);
        let only_partition = s.dims.len() == usize::from(partition.is_some());
        if std::ptr::eq(s.metric, &NODE_COUNT) {
            let Some(state) = s.dims.get(STATE) else { continue };
            if s.dims.len() != 1 + usize::from(partition.is_some()) {
                continue;
            }
            let e = scopes.entry(partition).or_default();
            e.nodes += v;
            if state == "idle" {
                e.idle_nodes += v;
            }
            continue;
        }
        if !only_partition {
            continue;
        }
        let e = scopes.entry(partition).or_default();
        let slot = match s.metric.name {
            n if n == CPUS_ALLOCATED.name => &mut e.cpus_allocated,
            n if n == CPUS_TOTAL.name => &mut e.cpus_total,
            n if n == GPUS_ALLOCATED.name => &mut e.gpus_allocated,
            n if n == GPUS_TOTAL.name => &mut e.gpus_total,
            n if n == PENDING_NODES.name => &mut e.pending_nodes,
            n if n == PENDING_CPUS.name => &mut e.pending_cpus,
            _ => continue,
        };
        *slot = Some(v);
    }
    for (partition, e) in scopes {
        let dims = match &partition {
            Some(p) => Dims::new().with(PARTITION, p.as_str()),
            None => Dims::new(),
        };
        if let (Some(alloc), Some(total)) = (e.cpus_allocated, e.cpus_total)
            && total > 0.0
        {
            batch.push(&CLUSTER_CPU_UTILIZATION, dims.clone(), alloc / total * 100.0);
        }
        if let (Some(alloc), Some(total)) = (e.gpus_allocated, e.gpus_total)
            && total > 0.0
        {
            batch.push(&CLUSTER_GPU_UTILIZATION, dims.clone(), alloc / total * 100.0);
        }
        if partition.is_none() {
            continue;
        }
        if let (Some(nodes), Some(cpus)) = (e.pending_nodes, e.pending_cpus) {
            let (b, idle) = backlog(nodes, cpus, e.idle_nodes, e.cpus_total.unwrap_or(0.0), e.nodes);
            batch.push(&BACKLOG_NODES, dims.clone(), b);
            batch.push(&IDLE_NODES, dims, idle);
        }
    }
}

#[derive(Debug, Default)]
struct Scope {
    nodes: f64,
    idle_nodes: f64,
    cpus_allocated: Option<f64>,
    cpus_total: Option<f64>,
    gpus_allocated: Option<f64>,
    gpus_total: Option<f64>,
    pending_nodes: Option<f64>,
    pending_cpus: Option<f64>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use slurm_cw_catalog::dims::MESSAGE_TYPE;

    fn at(secs: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000 + secs)
    }

    fn read(d: &mut Derive, t: u64, submitted: f64) -> Batch {
        let mut b = Batch::new(at(t));
        b.push(&JOBS_SUBMITTED, Dims::new(), submitted);
        b.push(&RPC_COUNT, Dims::new().with(MESSAGE_TYPE, "REQUEST_PING"), submitted * 2.0);
        d.apply(&mut b);
        b
    }

    #[test]
    fn counters_become_increases_and_are_not_sent() {
        let mut d = Derive::default();
        let first = read(&mut d, 0, 100.0);
        assert!(first.samples.is_empty(), "no previous read: nothing yet, and never the counter");
        let b = read(&mut d, 30, 110.0);
        assert_eq!(b.value(&JOBS_SUBMITTED_RATE, &[]), Some(10.0));
        assert_eq!(b.value(&RPC_RATE, &[("MessageType", "REQUEST_PING")]), Some(20.0));
        assert_eq!(b.of(&JOBS_SUBMITTED).count(), 0);
        assert_eq!(b.of(&RPC_COUNT).count(), 0);
    }

    #[test]
    fn a_reset_is_never_negative_and_a_long_gap_starts_again() {
        let mut d = Derive::default();
        read(&mut d, 0, 500.0);
        read(&mut d, 30, 520.0);
        // sdiag --reset (or midnight) between two reads: the counter restarts from 0.
        assert_eq!(read(&mut d, 60, 7.0).value(&JOBS_SUBMITTED_RATE, &[]), Some(7.0));
        assert_eq!(read(&mut d, 90, 19.0).value(&JOBS_SUBMITTED_RATE, &[]), Some(12.0));
        // 20 minutes without a read: no spike, the next read is a new start.
        assert!(read(&mut d, 90 + 1200, 400.0).samples.is_empty());
        assert_eq!(read(&mut d, 1320, 401.0).value(&JOBS_SUBMITTED_RATE, &[]), Some(1.0));
    }

    #[test]
    fn every_counter_has_its_increase() {
        for m in ALL.iter().filter(|m| m.kind == Kind::Counter) {
            let rate = increase_of(m);
            assert!(rate.is_some_and(|r| r.kind == Kind::Increase), "{} has no increase metric", m.name);
        }
    }

    #[test]
    fn a_cluster_without_gpus_sends_no_gpu_figures() {
        let collection = |total: f64, pending: f64| {
            let mut b = Batch::new(at(0));
            for dims in [Dims::new(), Dims::new().with(PARTITION, "p")] {
                b.push(&GPUS_TOTAL, dims.clone(), total);
                b.push(&GPUS_ALLOCATED, dims.clone(), 0.0);
                b.push(&PENDING_GPUS, dims.clone(), pending);
                b.push(&RUNNING_GPUS, dims.clone(), 0.0);
                b.push(&CPUS_TOTAL, dims, 8.0);
            }
            Derive::default().apply(&mut b);
            b
        };
        let b = collection(0.0, 0.0);
        assert!(GPU_FIGURES.iter().all(|m| b.of(m).count() == 0));
        assert_eq!(b.of(&CPUS_TOTAL).count(), 2);
        assert_eq!(collection(4.0, 0.0).of(&GPUS_TOTAL).count(), 2, "GPUs configured");
        assert_eq!(collection(0.0, 1.0).of(&GPUS_TOTAL).count(), 2, "GPUs asked for");
    }

    #[test]
    fn backlog_is_demand_net_of_idle_nodes() {
        // 3 nodes asked for, 1 idle: 2 to add.
        assert_eq!(backlog(3.0, 12.0, 1.0, 64.0, 16.0), (2.0, 0.0));
        // CPUs spread over 4-CPU nodes need more nodes than the jobs' minimum: 40 / 4 = 10.
        assert_eq!(backlog(3.0, 40.0, 1.0, 64.0, 16.0), (9.0, 0.0));
        // More idle than demand.
        assert_eq!(backlog(1.0, 2.0, 5.0, 64.0, 16.0), (0.0, 4.0));
        // No capacity known: node counts alone.
        assert_eq!(backlog(2.0, 100.0, 0.0, 0.0, 0.0), (2.0, 0.0));
    }

    #[test]
    fn utilisation_and_backlog_per_partition() {
        let mut b = Batch::new(at(0));
        let p = || Dims::new().with(PARTITION, "batch");
        for (dims, alloc, total) in [(Dims::new(), 48.0, 64.0), (p(), 12.0, 16.0)] {
            b.push(&CPUS_ALLOCATED, dims.clone(), alloc);
            b.push(&CPUS_TOTAL, dims.clone(), total);
            b.push(&GPUS_ALLOCATED, dims.clone(), 0.0);
            b.push(&GPUS_TOTAL, dims, 0.0);
        }
        b.push(&PENDING_NODES, p(), 3.0);
        b.push(&PENDING_CPUS, p(), 12.0);
        b.push(&NODE_COUNT, p().with(STATE, "idle"), 1.0);
        b.push(&NODE_COUNT, p().with(STATE, "mixed"), 3.0);
        b.push(&NODE_COUNT, Dims::new().with(STATE, "idle"), 9.0);
        Derive::default().apply(&mut b);
        assert_eq!(b.value(&CLUSTER_CPU_UTILIZATION, &[]), Some(75.0));
        assert_eq!(b.value(&CLUSTER_CPU_UTILIZATION, &[("Partition", "batch")]), Some(75.0));
        assert_eq!(b.of(&CLUSTER_GPU_UTILIZATION).count(), 0, "no GPUs: no ratio");
        assert_eq!(b.value(&BACKLOG_NODES, &[("Partition", "batch")]), Some(2.0));
        assert_eq!(b.value(&IDLE_NODES, &[("Partition", "batch")]), Some(0.0));
        assert_eq!(b.of(&BACKLOG_NODES).count(), 1, "per partition only");
    }
}
