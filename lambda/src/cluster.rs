//! Cluster figures that need every node's totals: the GPU-hours held idle and the jobs' CPU
//! efficiency; and the autoscaling signal the head node publishes, read back to tell the
//! autoscaler when it moves. Each reads a fixed set of series per partition, however many jobs
//! ran. (Utilisation, backlog and rates are derived on the head node, from its own readings.)
//!
//! A run derives every minute since the last one ([`crate::minutes`]): `GetMetricData` is billed
//! by the series requested, not by the minutes read, so a run every five minutes reads the same
//! figures for a fifth of the price of five runs. [`stage`] is the invocation's cluster stage: the
//! figures of those minutes published (whole minutes a request), the backlog moves told, the
//! minutes derived kept.

use crate::config::Config;
use crate::cw::{Cw, Dims, Points, Series, at_epoch, datum};
use crate::handler::Clients;
use crate::minutes::{self, Done, Marks, Span};
use crate::notify;
use anyhow::Result;
use slurm_cw_catalog::Metric;
use slurm_cw_catalog::dims::PARTITION;
use slurm_cw_catalog::metrics::*;
use slurm_cw_sink::cloudwatch::retry::Backoff;
use slurm_cw_sink::cloudwatch::{CloudWatchSink, Settings};
use slurm_cw_sink::datum::Datum;
use slurm_cw_sink::validate::Validator;
use std::time::Duration;

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

/// What the cluster stage did, part by part.
pub struct ClusterStage {
    /// Backlog events sent.
    pub events: Result<usize>,
    /// The derived datums (sent, dropped as invalid or refused).
    pub published: Result<(usize, usize)>,
    /// Reading and keeping the minutes derived.
    pub state: Result<()>,
    pub figure_minutes: u32,
    pub left_out: u32,
}

/// The cluster figures of every minute since the last run's, published, and the backlog moves
/// among them told; then the minutes derived kept. A part that failed keeps its mark, so the
/// next run derives its minutes again; one that succeeded moves on.
pub async fn stage(cfg: &Config, clients: &Clients, cw: &mut Cw, at: i64, group: &str) -> ClusterStage {
    let every = cfg.every_minutes;
    // Unreadable marks: this run's own minutes, as a first run (a minute may be derived twice,
    // none is lost), and the failure named.
    let (marks, after_ms, read) = match minutes::read(&clients.logs, group).await {
        Ok(Some((m, t))) => (Some(m), t, Ok(())),
        Ok(None) => (None, 0, Ok(())),
        Err(e) => (None, 0, Err(e.context("the last minutes derived could not be read"))),
    };
    let (figures, left_out) = Span::after(marks.map(|m| m.figures_to), at, every);
    let (backlog, _) = Span::after(marks.map(|m| m.backlog_to), at, every);
    let mut done =
        ClusterStage { events: Ok(0), published: Ok((0, 0)), state: Ok(()), figure_minutes: 0, left_out };
    if left_out > 0 {
        tracing::warn!(left_out, "minutes since the last run left out: more than a run catches up");
    }
    let partitions = match partitions(cw).await {
        Ok(p) => p,
        Err(e) => {
            done.events = Err(e);
            done.state = read;
            return done;
        }
    };
    let mut figures_done = Done::Nothing;
    match job_figures(cw, figures, &partitions.cores).await {
        Ok(datums) => {
            let minutes: std::collections::BTreeSet<i64> =
                datums.iter().map(|d| crate::cw::epoch(d.timestamp)).collect();
            match publish(clients, cfg, datums).await {
                Ok(sent) => {
                    figures_done = Done::All;
                    done.figure_minutes = minutes.len() as u32;
                    done.published = Ok(sent);
                }
                Err((first_undelivered, e)) => {
                    figures_done = first_undelivered.map_or(Done::Nothing, Done::Before);
                    done.published = Err(e);
                }
            }
        }
        Err(e) => done.published = Err(e),
    }
    let mut backlog_done = Done::Nothing;
    done.events = async {
        let backlogs = backlogs(cw, backlog, &partitions.backlog).await?;
        let changed = last_moves(&backlogs, cfg.thresholds.backlog_change_nodes);
        if !changed.is_empty() {
            notify::backlog_events(&clients.eventbridge, &cfg.event_bus, &cfg.cluster_name, &changed).await?;
        }
        backlog_done = Done::All;
        Ok(changed.len())
    }
    .await;
    let kept = Marks::new(figures.mark(figures_done), backlog.mark(backlog_done));
    done.state = match read {
        Err(e) => Err(e),
        Ok(()) if Some(kept) == marks => Ok(()),
        Ok(()) => minutes::write(&clients.logs, group, kept, after_ms).await.map_err(|e| {
            e.context("the minutes derived could not be kept: the next run may derive them again")
        }),
    };
    done
}

/// Publishes the derived datums with the shipper's validation and retries: (sent, dropped), or
/// the time (epoch seconds) of the oldest datum not delivered, with why.
async fn publish(
    clients: &Clients,
    cfg: &Config,
    datums: Vec<Datum>,
) -> std::result::Result<(usize, usize), (Option<i64>, anyhow::Error)> {
    let sink_settings = Settings {
        namespace: cfg.namespace.clone(),
        region: None,
        endpoint: None,
        backoff: Backoff { base: Duration::from_millis(200), cap: Duration::from_secs(5), max_retries: 4 },
        attempt_timeout: Duration::from_secs(10),
        storage_resolution: 60,
    };
    let mut sink = CloudWatchSink::from_client(clients.cloudwatch.clone(), sink_settings);
    let mut validator = Validator::new();
    let (mut sent, mut dropped) = (0, 0);
    // A request of whole minutes at a time: a minute half sent before a failure would be sent
    // again whole by the next run, half of it twice.
    for chunk in whole_minutes(datums, PUT_MAX) {
        let first = chunk.iter().map(|d| crate::cw::epoch(d.timestamp)).min();
        let (outcome, refused) = sink.publish(&mut validator, chunk).await;
        (sent, dropped) = (sent + outcome.sent, dropped + refused.len() + outcome.rejected.len());
        if !outcome.undelivered.is_empty() {
            let e = anyhow::anyhow!(
                "{} derived datums not delivered: {}",
                outcome.undelivered.len(),
                outcome.last_error.unwrap_or_default()
            );
            return Err((first, e));
        }
    }
    Ok((sent, dropped))
}

/// Datums a PutMetricData request takes at most.
const PUT_MAX: usize = 1000;

/// `datums` in chunks of at most `max` that never split a minute (one minute of more than `max`
/// is a chunk of its own), oldest first.
fn whole_minutes(mut datums: Vec<Datum>, max: usize) -> Vec<Vec<Datum>> {
    datums.sort_by_key(|d| d.timestamp);
    let mut chunks: Vec<Vec<Datum>> = Vec::new();
    let mut minute: Vec<Datum> = Vec::new();
    let flush = |minute: &mut Vec<Datum>, chunks: &mut Vec<Vec<Datum>>| match chunks.last_mut() {
        Some(last) if last.len() + minute.len() <= max => last.append(minute),
        _ if !minute.is_empty() => chunks.push(std::mem::take(minute)),
        _ => {}
    };
    for d in datums {
        let at = crate::cw::epoch(d.timestamp).div_euclid(60);
        if minute.first().is_some_and(|m| crate::cw::epoch(m.timestamp).div_euclid(60) != at) {
            flush(&mut minute, &mut chunks);
        }
        minute.push(d);
    }
    flush(&mut minute, &mut chunks);
    chunks
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

    #[test]
    fn requests_never_split_a_minute() {
        use slurm_cw_catalog::metrics::GPU_HOURS_IDLE;
        let at = |minute: i64, n: usize| {
            (0..n).map(move |_| crate::cw::datum("c", &GPU_HOURS_IDLE, &[], 1_800_000_000 + 60 * minute, 1.0))
        };
        // Minutes of 400, 400 and 300 datums: 800 and 300, not 1,000 and 100.
        let datums: Vec<Datum> = at(2, 300).chain(at(0, 400)).chain(at(1, 400)).collect();
        let sizes: Vec<usize> = whole_minutes(datums, 1000).iter().map(Vec::len).collect();
        assert_eq!(sizes, [800, 300]);
        let big: Vec<Datum> = at(0, 1200).chain(at(1, 10)).collect();
        assert_eq!(whole_minutes(big, 1000).iter().map(Vec::len).collect::<Vec<_>>(), [1200, 10]);
        assert!(whole_minutes(Vec::new(), 1000).is_empty());
    }
}
