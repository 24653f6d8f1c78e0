//! Cluster figures that need every node's totals: the GPU-hours held idle and the jobs' CPU
//! efficiency; and the autoscaling signal the head node publishes, read back to tell the
//! autoscaler when it moves. Each reads a fixed set of series per partition, however many jobs
//! ran. (Utilisation, backlog and rates are derived on the head node, from its own readings.)
//!
//! A run derives every minute since the last one ([`crate::minutes`]): `GetMetricData` is billed
//! by the series requested, not by the minutes read, so a run every five minutes reads the same
//! figures for a fifth of the price of five runs.

use crate::cw::{Cw, Dims, Points, Series, at_epoch, datum};
use crate::minutes::Span;
use anyhow::Result;
use slurm_cw_catalog::Metric;
use slurm_cw_catalog::dims::PARTITION;
use slurm_cw_catalog::metrics::*;
use slurm_cw_sink::datum::Datum;

/// A partition's backlog at one minute.
#[derive(Debug, Clone, PartialEq)]
pub struct Backlog {
    pub partition: String,
    /// The minute (epoch seconds).
    pub minute: i64,
    pub backlog_nodes: f64,
    pub idle_nodes: f64,
    /// BacklogNodes as published a minute earlier, when it was.
    pub previous: Option<f64>,
}

fn value(p: &Points, at: i64) -> Option<f64> {
    p.get(&at).copied()
}

/// The cluster's partitions as its series name them: the head's (`BacklogNodes`) and the
/// nodes' (`JobCoresAllocated`), from one listing of the series per partition (a `ListMetrics`
/// request is billed; one a run instead of two).
#[derive(Debug, Default)]
pub struct Partitions {
    pub backlog: Vec<Dims>,
    pub cores: Vec<Dims>,
}

pub async fn partitions(cw: &mut Cw) -> Result<Partitions> {
    let all = cw.list_every(&[PARTITION]).await?;
    let of = |m: &Metric| -> Vec<Dims> {
        all.iter()
            .filter(|(name, d)| name == m.name && d.len() == 1 && d[0].0 == PARTITION)
            .map(|(_, d)| d.clone())
            .collect()
    };
    Ok(Partitions { backlog: of(&BACKLOG_NODES), cores: of(&JOB_CORES_ALLOCATED) })
}

/// Each partition's backlog at each minute of `span` (and the minute before each), as the head
/// node published it; oldest first.
pub async fn backlogs(cw: &mut Cw, span: Span, partitions: &[Dims]) -> Result<Vec<Backlog>> {
    if span.is_empty() || partitions.is_empty() {
        return Ok(Vec::new());
    }
    let mut series = Vec::new();
    for dims in partitions {
        for m in [&BACKLOG_NODES, &IDLE_NODES] {
            series.push(Series { metric: m, dims: dims.clone(), stat: "Maximum" });
        }
    }
    let points = cw.fetch(&series, at_epoch(span.first - 60), at_epoch(span.last + 60), 60).await?;
    let mut out = Vec::new();
    for (i, dims) in partitions.iter().enumerate() {
        let Some((_, part)) = dims.iter().find(|(n, _)| n == PARTITION) else { continue };
        for minute in span.minutes() {
            let (Some(backlog_nodes), Some(idle_nodes)) =
                (value(&points[2 * i], minute), value(&points[2 * i + 1], minute))
            else {
                continue;
            };
            let previous = value(&points[2 * i], minute - 60);
            out.push(Backlog { partition: part.clone(), minute, backlog_nodes, idle_nodes, previous });
        }
    }
    Ok(out)
}

/// Per partition, the last minute of the window at which the backlog moved enough to tell the
/// autoscaler (an earlier move in the same window is already stale).
pub fn last_moves(backlogs: &[Backlog], threshold: f64) -> Vec<&Backlog> {
    let mut last: Vec<&Backlog> = Vec::new();
    for b in backlogs.iter().filter(|b| changed(b, threshold)) {
        match last.iter_mut().find(|l| l.partition == b.partition) {
            Some(l) if l.minute < b.minute => *l = b,
            Some(_) => {}
            None => last.push(b),
        }
    }
    last
}

/// GpuHoursIdle (cluster) and ClusterCpuEfficiency (cluster, and each partition where there are
/// several) at each minute of `span`, from the nodes' totals: each node sends one value per
/// minute, so the minute's Sum is the cluster's (or partition's) figure.
pub async fn job_figures(cw: &mut Cw, span: Span, partitions: &[Dims]) -> Result<Vec<Datum>> {
    if span.is_empty() {
        return Ok(Vec::new());
    }
    let mut scopes: Vec<Vec<(String, String)>> = vec![Vec::new()];
    // One partition's figures are the cluster's (the head sends no copy either): two series a
    // minute fewer to read, one fewer to publish.
    if partitions.len() > 1 {
        scopes.extend(partitions.iter().cloned());
    }
    let mut series = vec![Series { metric: &JOB_GPUS_IDLE, dims: Vec::new(), stat: "Sum" }];
    for dims in &scopes {
        for m in [&JOB_CORES_USED, &JOB_CORES_ALLOCATED] {
            series.push(Series { metric: m, dims: dims.clone(), stat: "Sum" });
        }
    }
    let points = cw.fetch(&series, at_epoch(span.first), at_epoch(span.last + 60), 60).await?;
    let mut out = Vec::new();
    for minute in span.minutes() {
        // GPU-minutes idle over the minute, in hours: where some node's jobs hold GPUs (a node
        // reports JobGpusIdle, 0 included, only then). A cluster without GPU jobs pays for no
        // series of zeros, as with the nodes' GPU figures.
        if let Some(gpus) = value(&points[0], minute) {
            out.push(datum(&cw.cluster, &GPU_HOURS_IDLE, &[], minute, gpus / 60.0));
        }
        for (i, dims) in scopes.iter().enumerate() {
            if let (Some(used), Some(alloc)) =
                (value(&points[1 + 2 * i], minute), value(&points[2 + 2 * i], minute))
                && alloc > 0.0
            {
                out.push(datum(&cw.cluster, &CLUSTER_CPU_EFFICIENCY, dims, minute, used / alloc * 100.0));
            }
        }
    }
    Ok(out)
}

/// Whether a backlog moved enough to tell the autoscaler: by `threshold` nodes, or from none
/// known to some.
pub fn changed(b: &Backlog, threshold: f64) -> bool {
    match b.previous {
        Some(p) => (b.backlog_nodes - p).abs() >= threshold,
        None => b.backlog_nodes > 0.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn material_changes() {
        let b = |now, prev| Backlog {
            partition: "p".into(),
            minute: 0,
            backlog_nodes: now,
            idle_nodes: 0.0,
            previous: prev,
        };
        assert!(changed(&b(3.0, Some(1.0)), 1.0));
        assert!(!changed(&b(3.0, Some(3.0)), 1.0));
        assert!(!changed(&b(3.5, Some(3.0)), 1.0));
        assert!(changed(&b(2.0, None), 1.0));
        assert!(!changed(&b(0.0, None), 1.0));
    }

    #[test]
    fn the_last_move_is_told() {
        let b = |partition: &str, minute, now, prev| Backlog {
            partition: partition.into(),
            minute,
            backlog_nodes: now,
            idle_nodes: 0.0,
            previous: Some(prev),
        };
        let all = [
            b("p", 60, 2.0, 0.0),
            b("p", 120, 2.0, 2.0),
            b("p", 180, 0.0, 2.0),
            b("q", 60, 1.0, 1.0),
            b("r", 120, 4.0, 1.0),
        ];
        let told: Vec<(&str, i64)> =
            last_moves(&all, 1.0).iter().map(|b| (b.partition.as_str(), b.minute)).collect();
        assert_eq!(told, [("p", 180), ("r", 120)], "p went up and down again: its current figure");
    }
}
