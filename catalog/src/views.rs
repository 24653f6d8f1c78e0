//! What the generated views read: the metrics the cluster dashboard draws and the default alarm
//! rules watch. A head figure of slurmctld's scheduler that neither reads goes, by default, into
//! the head's `scheduler_sample` record (billed by the byte) instead of being a custom metric
//! (billed by the hour whatever its value): [`scheduler_detail`]. A count of events at zero
//! or a level of work at zero says only that nothing happened: [`quiet_at_zero`]. A figure's
//! copy per partition or account is sent where a view reads it so: [`read_per`].

use crate::alarms::default_rules;
use crate::dashboard::{cluster_dashboard, referenced_metrics};
use crate::metrics::*;
use crate::{ALL, Group, Kind, Metric, Role};
use std::collections::BTreeSet;

/// Every metric name the cluster dashboard draws or a default alarm rule watches.
pub fn shown() -> BTreeSet<String> {
    let mut names: BTreeSet<String> = referenced_metrics(&cluster_dashboard()).into_iter().collect();
    for r in default_rules() {
        names.extend(r.watch.iter().chain(r.terms.values()).map(|m| m.metric.clone()));
    }
    names
}

/// What the Lambda reads per partition or account: the autoscaling signal and the cores behind
/// `ClusterCpuEfficiency` per partition (lambda/src/cluster.rs), each account's spend for its
/// budget (lambda/src/budgets/).
pub const LAMBDA_READS: [(&str, &Metric); 5] = [
    (crate::dims::PARTITION, &BACKLOG_NODES),
    (crate::dims::PARTITION, &IDLE_NODES),
    (crate::dims::PARTITION, &JOB_CORES_USED),
    (crate::dims::PARTITION, &JOB_CORES_ALLOCATED),
    (crate::dims::ACCOUNT, &JOB_COST),
];

/// A metric a view reads, with the dimensions it names besides `ClusterName`, each with its
/// value where the view names one (a plain line, an alarm) and None where it reads every value
/// (a SEARCH).
type Read = (String, Vec<(String, Option<String>)>);

/// Every metric the dashboard draws as a metric: its plain lines and its SEARCH expressions
/// (their schema).
fn drawn_with_dimensions() -> Vec<Read> {
    let mut out = Vec::new();
    let dashboard: serde_json::Value = serde_json::from_str(&cluster_dashboard()).unwrap_or_default();
    let widgets = dashboard["widgets"].as_array().cloned().unwrap_or_default();
    for line in widgets.iter().filter_map(|w| w.pointer("/properties/metrics")?.as_array()).flatten() {
        let Some(parts) = line.as_array() else { continue };
        for p in parts {
            // SEARCH('{ns,ClusterName,Partition} MetricName="X" ...')
            if let Some(expr) = p.get("expression").and_then(|e| e.as_str())
                && let Some((schema, _)) = expr.split_once("} MetricName=")
                && let Some(name) = expr.split("MetricName=\"").nth(1).and_then(|r| r.split('"').next())
            {
                let dims = schema.split(',').skip(1).filter(|d| *d != crate::dims::CLUSTER_NAME);
                out.push((name.to_owned(), dims.map(|d| (d.to_owned(), None)).collect()));
            }
        }
        // [ns, name, "ClusterName", cluster, (dimension, value)..., {options}]
        if let Some(name) = parts.get(1).and_then(|n| n.as_str())
            && parts.len() >= 5
        {
            let pairs = parts[2..parts.len() - 1]
                .chunks(2)
                .filter_map(|kv| Some((kv[0].as_str()?, kv.get(1)?.as_str()?)));
            out.push((
                name.to_owned(),
                pairs
                    .filter(|(d, _)| *d != crate::dims::CLUSTER_NAME)
                    .map(|(d, v)| (d.to_owned(), Some(v.to_owned())))
                    .collect(),
            ));
        }
    }
    out
}

/// Every metric a default alarm rule watches.
fn watched_with_dimensions() -> Vec<Read> {
    default_rules()
        .iter()
        .flat_map(|r| r.watch.iter().chain(r.terms.values()).cloned().collect::<Vec<_>>())
        .map(|m| (m.metric, m.dimensions.into_iter().map(|(d, v)| (d, Some(v))).collect()))
        .collect()
}

/// Every metric name a view reads per `dim` (`Partition`, `Account`): the cluster dashboard's
/// lines and SEARCH expressions over it, the default alarms' with it, and the Lambda's.
pub fn read_per(dim: &str) -> BTreeSet<String> {
    let mut names: BTreeSet<String> =
        LAMBDA_READS.iter().filter(|(d, _)| *d == dim).map(|(_, m)| m.name.to_owned()).collect();
    for (name, dims) in drawn_with_dimensions().into_iter().chain(watched_with_dimensions()) {
        if dims.iter().any(|(d, _)| d == dim) {
            names.insert(name);
        }
    }
    names
}

/// What the Lambda reads across the cluster: the nodes' totals behind `GpuHoursIdle` and
/// `ClusterCpuEfficiency` (lambda/src/cluster.rs `job_figures`).
pub const LAMBDA_READS_CLUSTER: [&Metric; 3] = [&JOB_GPUS_IDLE, &JOB_CORES_USED, &JOB_CORES_ALLOCATED];

/// Every metric name a view reads across the cluster, with no partition or account: the
/// dashboard's lines and SEARCH expressions on `ClusterName` alone, the default alarms', the
/// Lambda's. A node's population figure whose cluster copy none reads is sent per partition
/// and account only (its sum), where those copies are sent as views read them.
pub fn read_cluster_wide() -> BTreeSet<String> {
    let mut names: BTreeSet<String> = LAMBDA_READS_CLUSTER.iter().map(|m| m.name.to_owned()).collect();
    for (name, dims) in drawn_with_dimensions().into_iter().chain(watched_with_dimensions()) {
        if dims.is_empty() {
            names.insert(name);
        }
    }
    names
}

/// slurmctld's figures that no view reads as a metric (the dashboard, the default alarms, the
/// Lambda): sdiag's cycles, depths, queue lengths and maxima, job and RPC rates, the capacity
/// totals and counts by flag; the dashboard's *Scheduler* row draws some of them from the
/// record ([`crate::dashboard::record_figures`]). Sent cluster-wide as the head's `scheduler_sample` record unless
/// `head.scheduler_detail = "metrics"`; copies per partition, where asked for, stay metrics.
pub fn scheduler_detail() -> Vec<&'static Metric> {
    let shown = shown();
    let lambda = |m: &Metric| LAMBDA_READS.iter().any(|(_, l)| l.name == m.name);
    ALL.iter()
        .copied()
        .filter(|m| {
            // The head's own, and its capacity figures (CPUs allocated, which a node counts per
            // job too).
            let head =
                m.roles == [Role::Head] || (m.roles.contains(&Role::Head) && m.group == Group::Capacity);
            head && m.kind != Kind::Counter && !shown.contains(m.name) && !lambda(m)
        })
        .collect()
}

/// Whether `m`'s count in `state` goes in the head's `scheduler_sample` record only (where the
/// dashboard draws it), not as a metric: a count of [`crate::dashboard::RECORD_BY_STATE`] in a
/// state that no default alarm watches and no metric chart draws as a line of its own.
pub fn state_in_record_only(m: &Metric, state: &str) -> bool {
    // (metric, state) of every series a view reads as a metric with its state named.
    static METRIC: std::sync::LazyLock<BTreeSet<(String, String)>> = std::sync::LazyLock::new(|| {
        drawn_with_dimensions()
            .into_iter()
            .chain(watched_with_dimensions())
            .flat_map(|(name, dims)| {
                dims.into_iter()
                    .filter(|(d, _)| d == crate::dims::STATE)
                    .filter_map(move |(_, v)| Some((name.clone(), v?)))
            })
            .collect()
    });
    crate::dashboard::RECORD_BY_STATE.iter().any(|r| std::ptr::eq(*r, m))
        && !METRIC.contains(&(m.name.to_owned(), state.to_owned()))
}

/// What the head sends as metrics to a destination billed per series while the cluster works:
/// each head figure a view reads (the dashboard, the default alarms, the Lambda), by name, with
/// the states it sends of a count by state (`NodeCount (drained, draining)`). The rest of
/// slurmctld's figures go in the head's `scheduler_sample` record only: what `--check` says of
/// where each figure comes from (beside AWS PCS's managed Prometheus collector, say).
pub fn head_metrics() -> Vec<String> {
    let shown = shown();
    let lambda = |m: &Metric| LAMBDA_READS.iter().any(|(_, l)| l.name == m.name);
    ALL.iter()
        .filter(|m| {
            m.roles == [Role::Head] && m.kind != Kind::Counter && (shown.contains(m.name) || lambda(m))
        })
        .map(|m| {
            let states = crate::dashboard::states_of(m);
            if states.is_empty() {
                return m.name.to_owned();
            }
            let sent: Vec<&str> = states.into_iter().filter(|s| !state_in_record_only(m, s)).collect();
            format!("{} ({})", m.name, sent.join(", "))
        })
        .collect()
}

/// The shipper's own figures that no view reads and that go every flush (what it sent and how
/// often, its CPU): a destination billed per series takes them only with `self_metrics =
/// "all"`; the head keeps them in its record and every destination billed by the byte takes
/// them. The ones a view reads (drops, spool backlog, memory, collection time, records written)
/// are always metrics, and so are its counts of trouble (retries, missed collections, spool
/// files, a collector's errors): at zero they are not sent (`quiet_at_zero`), and above it they
/// say that something blinds or slows the node.
pub fn self_detail(m: &Metric) -> bool {
    static DETAIL: std::sync::LazyLock<Vec<&'static str>> = std::sync::LazyLock::new(|| {
        let shown = shown();
        ALL.iter()
            .filter(|m| m.roles == [Role::Shipper] && !quiet_at_zero(m))
            .filter(|m| !shown.contains(m.name))
            .map(|m| m.name)
            .collect()
    });
    DETAIL.contains(&m.name)
}

/// Counts of events (an increase: RPCs, jobs submitted, dollars spent; a collector's errors, a
/// shipper's retries, drops, missed collections, its spool's backlog) and levels of work (CPUs,
/// memory and GPUs allocated, running and pending, slurmctld's queues, utilisation): at zero
/// they say only that nothing happened or waits, so a destination billed per series sends one
/// as the figure falls to zero and then one a day, not one a minute (shipper
/// `transforms/quiet.rs`). Node and job counts by state have their own rule (`trim.rs`).
pub fn quiet_at_zero(m: &Metric) -> bool {
    const QUIET: [&Metric; 20] = [
        &COLLECTOR_ERRORS,
        &SHIPPER_RETRIES,
        &SHIPPER_COLLECTIONS_MISSED,
        &SHIPPER_DATUMS_DROPPED,
        &SHIPPER_SPOOL_BYTES,
        &SHIPPER_SPOOL_FILES,
        &CPUS_ALLOCATED,
        &CPUS_OTHER,
        &GPUS_ALLOCATED,
        &MEMORY_ALLOCATED,
        &RUNNING_CPUS,
        &RUNNING_GPUS,
        &PENDING_CPUS,
        &PENDING_GPUS,
        &PENDING_NODES,
        &AGENT_QUEUE_SIZE,
        &DBD_AGENT_QUEUE_SIZE,
        &PENDING_RPCS,
        &CLUSTER_CPU_UTILIZATION,
        &CLUSTER_GPU_UTILIZATION,
    ];
    m.kind == Kind::Increase || QUIET.iter().any(|q| std::ptr::eq(*q, m))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_views_read_per_partition_and_account() {
        let names: Vec<String> = read_per(crate::dims::PARTITION).into_iter().collect();
        assert_eq!(
            names,
            [
                "BacklogNodes",
                "ClusterCpuEfficiency",
                "IdleNodes",
                "JobCoresAllocated",
                "JobCoresUsed",
                "JobCost"
            ],
            "the dashboard's partition widgets, and the Lambda's reads"
        );
        let names: Vec<String> = read_per(crate::dims::ACCOUNT).into_iter().collect();
        assert_eq!(names, ["JobCost", "JobCpuEfficiency", "JobWaste"], "the account widgets, and budgets");
    }

    #[test]
    fn what_views_read_across_the_cluster() {
        let names = read_cluster_wide();
        for read in
            ["JobCpuEfficiency", "JobCoresAllocated", "JobGpusIdle", "IdleGpuJobs", "ShipperMemoryRss"]
        {
            assert!(names.contains(read), "{read}: {names:?}");
        }
        for unread in ["JobCost", "JobWaste", "JobMemoryUsed"] {
            assert!(!names.contains(unread), "{unread} is read per account or partition only: {names:?}");
        }
    }

    #[test]
    fn the_head_sends_as_metrics_what_views_read() {
        let names = head_metrics();
        for read in [
            "SlurmctldUp",
            "BackfillLastCycle",
            "NodesDownUnplanned",
            "NodeCount (drained, draining)",
            "JobCount (pending)",
            "BacklogNodes",
        ] {
            assert!(names.iter().any(|n| n == read), "{read}: {names:?}");
        }
        for record in ["ServerThreadCount", "MainSchedLastCycle", "RpcRate", "CpusTotal", "JobsPending"] {
            assert!(!names.iter().any(|n| n == record), "{record} is in the record: {names:?}");
        }
    }

    #[test]
    fn counts_by_state_in_the_record_only_but_what_alarms_and_metric_charts_read() {
        for (m, state) in [(&NODE_COUNT, "idle"), (&NODE_COUNT, "allocated"), (&JOB_COUNT, "running")] {
            assert!(state_in_record_only(m, state), "{} {state}", m.name);
        }
        for (m, state) in [(&NODE_COUNT, "drained"), (&NODE_COUNT, "draining"), (&JOB_COUNT, "pending")] {
            assert!(!state_in_record_only(m, state), "{} {state}: watched or drawn as a metric", m.name);
        }
        assert!(!state_in_record_only(&PENDING_JOB_COUNT, "x"));
    }

    #[test]
    fn self_detail_is_the_shippers_figures_no_view_reads() {
        for m in [&SHIPPER_BYTES_SENT, &SHIPPER_REQUESTS, &SHIPPER_CPU_USAGE, &SHIPPER_DATUMS_SENT] {
            assert!(self_detail(m), "{}", m.name);
        }
        for m in [
            &SHIPPER_DATUMS_DROPPED,
            &SHIPPER_SPOOL_BYTES,
            &SHIPPER_MEMORY_RSS,
            &SHIPPER_COLLECTION_DURATION,
            &JOB_RECORDS,
            &JOB_COUNT,
            &COLLECTOR_ERRORS,
            &SHIPPER_RETRIES,
            &SHIPPER_COLLECTIONS_MISSED,
            &SHIPPER_SPOOL_FILES,
        ] {
            assert!(!self_detail(m), "{} is read by a view, or not the shipper's own", m.name);
        }
    }

    #[test]
    fn detail_is_the_scheduler_figures_no_view_reads() {
        let names: Vec<&str> = scheduler_detail().iter().map(|m| m.name).collect();
        assert!(!names.contains(&"BackfillLastCycle"), "an alarm watches it: {names:?}");
        for m in crate::dashboard::record_figures() {
            assert!(names.contains(&m.name), "the dashboard reads {} from the record: {names:?}", m.name);
        }
        for detail in [
            "RpcTimeRate",
            "AgentCount",
            "BackfillDepthMean",
            "MainSchedMeanDepth",
            "CpusTotal",
            "CpusAllocated",
            "NodeFlagCount",
        ] {
            assert!(names.contains(&detail), "{detail} is read by no view: {names:?}");
        }
        for read in ["SlurmctldUp", "JobCount", "IdleNodes", "BacklogNodes", "ClusterCpuUtilization"] {
            assert!(!names.contains(&read), "{read} is read by a view: {names:?}");
        }
    }
}
