//! Cluster figures from the head node's: CPU and GPU utilisation (allocated over total) for the
//! cluster and each partition, and the autoscaling signal per partition; and from the nodes'
//! job-population totals: the GPU-hours held idle and the jobs' CPU efficiency. Each reads a
//! fixed set of series per partition, however many jobs ran.

use crate::cw::{Cw, Points, Series, at_epoch, datum};
use anyhow::Result;
use slurm_cw_catalog::dims::{PARTITION, STATE};
use slurm_cw_catalog::metrics::*;
use slurm_cw_sink::datum::Datum;
use std::collections::BTreeMap;

/// A partition's backlog at one minute.
#[derive(Debug, Clone, PartialEq)]
pub struct Backlog {
    pub partition: String,
    pub backlog_nodes: f64,
    pub idle_nodes: f64,
    /// BacklogNodes as published a minute earlier, when it was.
    pub previous: Option<f64>,
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

fn value(p: &Points, at: i64) -> Option<f64> {
    p.get(&at).copied()
}

/// Utilisation datums and each partition's backlog at minute `at`.
pub async fn cluster(cw: &mut Cw, at: i64) -> Result<(Vec<Datum>, Vec<Backlog>)> {
    // Scopes: the cluster ([]) and every partition that reports capacity.
    let mut scopes: Vec<Vec<(String, String)>> = vec![Vec::new()];
    scopes.extend(cw.list_with(&CPUS_TOTAL, &[PARTITION]).await?);
    let node_counts = cw.list_with(&NODE_COUNT, &[PARTITION, STATE]).await?;

    let mut series = Vec::new();
    for dims in &scopes {
        for m in [&CPUS_ALLOCATED, &CPUS_TOTAL, &GPUS_ALLOCATED, &GPUS_TOTAL, &PENDING_NODES, &PENDING_CPUS] {
            series.push(Series { metric: m, dims: dims.clone(), stat: "Maximum" });
        }
    }
    let first_count = series.len();
    for dims in &node_counts {
        series.push(Series { metric: &NODE_COUNT, dims: dims.clone(), stat: "Maximum" });
    }
    let first_backlog = series.len();
    for dims in scopes.iter().skip(1) {
        series.push(Series { metric: &BACKLOG_NODES, dims: dims.clone(), stat: "Maximum" });
    }
    let points = cw.fetch(&series, at_epoch(at - 60), at_epoch(at + 60), 60).await?;

    // Nodes per partition: all, and idle.
    let mut nodes: BTreeMap<&str, (f64, f64)> = BTreeMap::new();
    for (dims, p) in node_counts.iter().zip(&points[first_count..first_backlog]) {
        let get = |k: &str| dims.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        let (Some(part), Some(state), Some(n)) = (get(PARTITION), get(STATE), value(p, at)) else { continue };
        let e = nodes.entry(part).or_default();
        e.0 += n;
        if state == "idle" {
            e.1 += n;
        }
    }

    let mut out = Vec::new();
    let mut backlogs = Vec::new();
    for (i, dims) in scopes.iter().enumerate() {
        let v = |k: usize| value(&points[i * 6 + k], at);
        if let (Some(alloc), Some(total)) = (v(0), v(1))
            && total > 0.0
        {
            out.push(datum(&cw.cluster, &CLUSTER_CPU_UTILIZATION, dims, at, alloc / total * 100.0));
        }
        if let (Some(alloc), Some(total)) = (v(2), v(3))
            && total > 0.0
        {
            out.push(datum(&cw.cluster, &CLUSTER_GPU_UTILIZATION, dims, at, alloc / total * 100.0));
        }
        let Some((_, part)) = dims.first() else { continue };
        let (Some(pending_nodes), Some(pending_cpus), Some(cpus_total)) = (v(4), v(5), v(1)) else {
            continue;
        };
        let (nodes_total, idle) = nodes.get(part.as_str()).copied().unwrap_or((0.0, 0.0));
        let (b, idle_net) = backlog(pending_nodes, pending_cpus, idle, cpus_total, nodes_total);
        out.push(datum(&cw.cluster, &BACKLOG_NODES, dims, at, b));
        out.push(datum(&cw.cluster, &IDLE_NODES, dims, at, idle_net));
        let previous = value(&points[first_backlog + i - 1], at - 60);
        backlogs.push(Backlog { partition: part.clone(), backlog_nodes: b, idle_nodes: idle_net, previous });
    }
    Ok((out, backlogs))
}

/// GpuHoursIdle (cluster) and ClusterCpuEfficiency (cluster and each partition) at minute `at`,
/// from the nodes' totals: each node sends one value per minute, so the minute's Sum is the
/// cluster's (or partition's) figure.
pub async fn job_figures(cw: &mut Cw, at: i64) -> Result<Vec<Datum>> {
    let mut scopes: Vec<Vec<(String, String)>> = vec![Vec::new()];
    scopes.extend(cw.list_with(&JOB_CORES_ALLOCATED, &[PARTITION]).await?);
    let mut series = vec![Series { metric: &JOB_GPUS_IDLE, dims: Vec::new(), stat: "Sum" }];
    for dims in &scopes {
        for m in [&JOB_CORES_USED, &JOB_CORES_ALLOCATED] {
            series.push(Series { metric: m, dims: dims.clone(), stat: "Sum" });
        }
    }
    let points = cw.fetch(&series, at_epoch(at), at_epoch(at + 60), 60).await?;
    let mut out = Vec::new();
    let allocated_anywhere = value(&points[2], at).is_some();
    // GPU-minutes idle over the minute, in hours; none reported while nodes report jobs is 0.
    if let Some(gpus) = value(&points[0], at).or(allocated_anywhere.then_some(0.0)) {
        out.push(datum(&cw.cluster, &GPU_HOURS_IDLE, &[], at, gpus / 60.0));
    }
    for (i, dims) in scopes.iter().enumerate() {
        if let (Some(used), Some(alloc)) = (value(&points[1 + 2 * i], at), value(&points[2 + 2 * i], at))
            && alloc > 0.0
        {
            out.push(datum(&cw.cluster, &CLUSTER_CPU_EFFICIENCY, dims, at, used / alloc * 100.0));
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
    fn material_changes() {
        let b = |now, prev| Backlog {
            partition: "p".into(),
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
}
