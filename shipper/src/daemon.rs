//! How the process runs: `--once` (one collection, one flush, delivered or kept) or the daemon
//! loop (collect every `collect_interval`, flush every `flush_interval` at a random offset,
//! serve the TaskEpilog hook, stop on SIGTERM after a last flush), with one delivery task per
//! destination beside it so a slow or unreachable service never delays sampling, and the
//! pipeline on its own thread ([`crate::collection`]) so a hung read never delays delivery.

use crate::Exit;
use crate::aggregate::Aggregate;
use crate::collection::Collection;
use crate::cost::counted::Counted;
use crate::cost::lookup::Lookup;
use crate::hook;
use crate::pipeline::Pipeline;
use crate::sinks::MetricSink;
use crate::sinks::delivery::{Delivery, Destination, Intake, Step};
use crate::sinks::logs::RecordSink;
use crate::sinks::pacing::{Pace, deliver_loop};
use crate::sinks::route::Route;
use slurm_cw_formats::record::Record;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, SystemTime};
use tokio::sync::mpsc;

pub type Metrics = Route<MetricSink>;
/// How often the price lookup wakes: it asks AWS only when its price is due, and Slurm for the
/// sizes of nodes new jobs ran on.
const LOOKUP_EVERY: Duration = Duration::from_secs(20);
pub type Records = Route<RecordSink>;

/// One collection, one flush, each destination drained.
pub async fn once(
    mut pipeline: Pipeline,
    metrics: Vec<Metrics>,
    records: Option<Records>,
    mut cost: Option<Lookup>,
    mut counted: Option<Counted>,
) -> Exit {
    if let Some(c) = &mut cost {
        c.refresh().await;
    }
    pipeline.collect().await;
    // The sizes of the nodes the collection found jobs on, before their costs are counted.
    if let Some(c) = &mut cost {
        c.refresh_sizes().await;
    }
    let flushed = pipeline.flush();
    let mut results = Vec::new();
    let mut routes = metrics;
    let intakes = routes.iter_mut().map(|r| &mut r.intake);
    let kept = take_metrics(intakes, flushed.aggregates, &mut counted, flushed.counted_to);
    for (mut route, items) in routes.into_iter().zip(kept) {
        route.delivery.hold(items);
        let what = format!("metrics to {}", route.delivery.label());
        results.push((what, drain(&mut route.delivery).await));
    }
    if let Some(mut r) = records {
        r.delivery.hold(r.intake.take(flushed.records));
        results.push(("job records".to_owned(), drain(&mut r.delivery).await));
    }
    let failed: Vec<String> =
        results.into_iter().filter_map(|(what, r)| r.err().map(|e| format!("{what}: {e}"))).collect();
    if failed.is_empty() { Exit::Ok } else { Exit::Failed(failed.join("; ")) }
}

/// Hands a flush's aggregates to each destination's intake (into its spool first); returns
/// what each kept for its delivery to hold. Then keeps up to when the flush's cost metrics
/// counted, once every spool took the flush: a daemon that dies between the two counts that
/// time again after its restart rather than losing it, and a spool that refused a flush (held
/// in memory only) leaves the mark where it was.
fn take_metrics<'a>(
    intakes: impl Iterator<Item = &'a mut Intake<Aggregate>>,
    aggregates: Vec<Vec<Aggregate>>,
    counted: &mut Option<Counted>,
    counted_to: Option<SystemTime>,
) -> Vec<Vec<Aggregate>> {
    let mut spooled = true;
    let kept: Vec<Vec<Aggregate>> = intakes
        .zip(aggregates)
        .map(|(intake, items)| {
            let kept = intake.take(items);
            spooled &= !intake.spool_refused(&kept);
            kept
        })
        .collect();
    if let (Some(c), Some(t), true) = (counted, counted_to, spooled) {
        c.write(t);
    }
    kept
}

/// Sends everything waiting; the error says what is kept.
async fn drain<D: Destination>(delivery: &mut Delivery<D>) -> Result<(), String> {
    match delivery.drain().await {
        Step::Sent | Step::Empty => Ok(()),
        // A closed standard output (`| head`): the reader has what it wanted.
        Step::Fatal(e) if crate::sinks::stdout::closed_pipe(&e) => Ok(()),
        Step::Failed(e) | Step::Fatal(e) => {
            let (held, files) = delivery.waiting();
            let kept = if files > 0 {
                format!("{files} flush(es) kept in the spool for the daemon to send")
            } else {
                format!("{held} items not delivered")
            };
            Err(format!("{kept}: {e}"))
        }
    }
}

/// When the loop collects and flushes, and where it listens (from the settings, by the app).
#[derive(Debug, Clone)]
pub struct Schedule {
    pub collect_interval: Duration,
    pub flush_interval: Duration,
    /// Start flushing at a random offset in the flush interval (`delivery.flush_jitter`).
    pub flush_jitter: bool,
    /// Requests a second while a backlog is sent again (`spool.replay_rate`).
    pub replay_rate: f64,
    /// Where the TaskEpilog hook is served, on a node (`node.hook_socket`).
    pub hook_socket: Option<PathBuf>,
}

pub async fn daemon(
    make: impl FnOnce() -> Pipeline + Send + 'static,
    metrics: Vec<Metrics>,
    records: Option<Records>,
    schedule: &Schedule,
    cost: Option<Lookup>,
    mut counted: Option<Counted>,
    owners: crate::sources::JobOwners,
) -> Exit {
    if let Some(mut c) = cost {
        tokio::spawn(async move {
            loop {
                c.refresh().await;
                tokio::time::sleep(LOOKUP_EVERY).await;
            }
        });
    }
    let pace = Pace {
        replay_gap: Duration::from_secs_f64(1.0 / schedule.replay_rate),
        max_backoff: schedule.flush_interval,
    };
    let mut collection = match Collection::start(make, schedule.collect_interval) {
        Ok(c) => c,
        Err(e) => return Exit::Failed(format!("cannot start the collection thread: {e}")),
    };
    let mut deliverers = Vec::new();
    // What each delivery holds in memory alone: lost where the stop's grace cuts it.
    let mut in_memory: Vec<Arc<AtomicUsize>> = Vec::new();
    let mut metric_routes = Vec::new();
    for Route { intake, delivery, .. } in metrics {
        let (tx, rx) = mpsc::unbounded_channel::<Vec<Aggregate>>();
        in_memory.push(Arc::default());
        deliverers.push(tokio::spawn(deliver_loop(
            delivery,
            rx,
            pace,
            in_memory[in_memory.len() - 1].clone(),
        )));
        metric_routes.push((intake, tx));
    }
    let mut record_route = None;
    if let Some(Route { intake, delivery, .. }) = records {
        let (rtx, rrx) = mpsc::unbounded_channel::<Vec<Record>>();
        in_memory.push(Arc::default());
        deliverers.push(tokio::spawn(deliver_loop(
            delivery,
            rrx,
            pace,
            in_memory[in_memory.len() - 1].clone(),
        )));
        record_route = Some((intake, rtx));
    }
    let mut to_delivery = |f: crate::pipeline::Flushed| -> bool {
        tracing::debug!(collections = f.collections, records = f.records.len(), "flushed");
        let mut ok = true;
        let intakes = metric_routes.iter_mut().map(|(intake, _)| intake);
        let kept = take_metrics(intakes, f.aggregates, &mut counted, f.counted_to);
        for ((_, tx), items) in metric_routes.iter().zip(kept) {
            ok &= tx.send(items).is_ok();
        }
        if let Some((intake, rtx)) = &mut record_route {
            ok &= rtx.send(intake.take(f.records)).is_ok();
        }
        ok
    };

    let offset = if schedule.flush_jitter {
        schedule.flush_interval.mul_f64(rand::random::<f64>())
    } else {
        schedule.flush_interval
    };
    tracing::debug!(?offset, "first flush after the random offset");
    let mut flush = tokio::time::interval_at(tokio::time::Instant::now() + offset, schedule.flush_interval);
    flush.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut shutdown = Shutdown::new();
    let (hook_tx, mut hook_rx) = mpsc::channel::<hook::Request>(hook::QUEUE);
    if let Some(socket) = &schedule.hook_socket {
        match hook::bind(socket) {
            Ok(listener) => {
                tokio::spawn(hook::serve(listener, hook_tx, owners));
            }
            Err(e) => tracing::warn!(
                socket = %socket.display(), error = %e,
                "cannot listen for final job samples; short jobs may be missed"
            ),
        }
    }

    let mut gave_up = false;
    // The collection thread ended (a bug: it only stops with the process); systemd restarts us.
    let mut collection_gone = false;
    loop {
        // Biased, in this order: a stop first, then what a flush made, then the rest.
        tokio::select! {
            biased;
            signal = shutdown.recv() => {
                tracing::info!(signal, "stopping: flushing what is buffered");
                // Into the spool first: whatever the last send does, nothing is lost. A
                // collection that hangs keeps what it holds: the flushes before are spooled.
                // Every flush asked for and not yet handed on, this last one included.
                if collection.flush() {
                    let deadline = tokio::time::Instant::now() + SHUTDOWN_GRACE;
                    while collection.pending_flushes() > 0 {
                        match tokio::time::timeout_at(deadline, collection.flushed.recv()).await {
                            Ok(Some(f)) => {
                                collection.took_flush();
                                to_delivery(f);
                            }
                            _ => {
                                tracing::warn!("the collection did not answer: its last samples are lost");
                                break;
                            }
                        }
                    }
                }
                break;
            }
            Some(f) = collection.flushed.recv() => {
                collection.took_flush();
                if !to_delivery(f) {
                    gave_up = true;
                    break;
                }
            }
            _ = flush.tick() => {
                // The collection thread says so when a collection ends late; one that hangs is
                // said here, at each flush it holds up.
                if let Some(running_for) = collection.stuck() {
                    tracing::warn!(?running_for, "a collection is still running: this flush waits for it");
                }
                if !collection.flush() {
                    tracing::error!("the collection thread stopped; exiting so that the service restarts");
                    collection_gone = true;
                    break;
                }
            }
            Some(req) = hook_rx.recv() => collection.final_sample(req),
        }
    }
    // Hanging up tells each delivery to send what is left and stop.
    drop(metric_routes);
    drop(record_route);
    let all = join_all(deliverers);
    let delivered = tokio::time::timeout(SHUTDOWN_GRACE, all).await;
    if collection_gone {
        return Exit::Failed("the collection thread stopped (see the log)".into());
    }
    match delivered {
        Ok(Ok(why)) if gave_up => match why.into_iter().flatten().next() {
            Some(e) if crate::sinks::stdout::closed_pipe(&e) => Exit::Ok,
            Some(e) => Exit::Failed(format!("delivery stopped: {e}")),
            None => Exit::Failed("delivery stopped (see the log)".into()),
        },
        Ok(Ok(_)) => Exit::Ok,
        Ok(Err(e)) => Exit::Failed(format!("delivery task failed: {e}")),
        Err(_) => {
            let lost: usize = in_memory.iter().map(|n| n.load(Ordering::Relaxed)).sum();
            if lost > 0 {
                tracing::error!(
                    lost,
                    ?SHUTDOWN_GRACE,
                    "delivery did not finish in time: datums held in memory (the spool could not take them) are lost"
                );
            } else {
                tracing::warn!(
                    ?SHUTDOWN_GRACE,
                    "delivery did not finish in time; what is left is in the spool"
                );
            }
            Exit::Ok
        }
    }
}

/// Waits for every delivery task; what each said when it gave up.
async fn join_all(
    tasks: Vec<tokio::task::JoinHandle<Option<String>>>,
) -> Result<Vec<Option<String>>, tokio::task::JoinError> {
    let mut out = Vec::new();
    for t in tasks {
        out.push(t.await?);
    }
    Ok(out)
}

/// How long a stopping shipper waits for its last delivery (systemd's TimeoutStopSec is longer).
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(20);

/// SIGTERM and SIGINT.
struct Shutdown {
    term: Option<tokio::signal::unix::Signal>,
    int: Option<tokio::signal::unix::Signal>,
}

impl Shutdown {
    fn new() -> Self {
        use tokio::signal::unix::{SignalKind, signal};
        Shutdown { term: signal(SignalKind::terminate()).ok(), int: signal(SignalKind::interrupt()).ok() }
    }

    async fn recv(&mut self) -> &'static str {
        async fn wait(s: &mut Option<tokio::signal::unix::Signal>) {
            match s {
                Some(s) => {
                    s.recv().await;
                }
                None => std::future::pending::<()>().await,
            }
        }
        tokio::select! {
            _ = wait(&mut self.term) => "SIGTERM",
            _ = wait(&mut self.int) => "SIGINT",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aggregate::Summary;
    use crate::sinks::cloudwatch::PutMetricDataRules;
    use crate::sinks::delivery::StatsHandle;
    use crate::sinks::spool::Spool;
    use std::time::UNIX_EPOCH;

    /// The mark a restarted daemon counts job costs on from moves only with a flush on the disk.
    #[test]
    fn up_to_when_costs_were_counted_is_kept_only_once_the_spool_holds_the_flush() {
        let dir = tempfile::tempdir().unwrap();
        let spool_dir = dir.path().join("cloudwatch");
        std::fs::create_dir(&spool_dir).unwrap();
        let (spool, _) = Spool::open(&spool_dir, 1 << 20).unwrap();
        let spool = std::sync::Arc::new(std::sync::Mutex::new(spool));
        let rules = Box::new(PutMetricDataRules::default());
        let mut intake = Intake::new("ns", Some(spool), StatsHandle::default(), rules);
        let mut counted = Some(Counted::in_dir(dir.path()));
        // Whole seconds an hour ago: times CloudWatch takes, and the mark keeps exactly.
        let hour_ago = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs() - 3600;
        let t = |s| UNIX_EPOCH + Duration::from_secs(hour_ago + s);
        let flush = |at| {
            let dims = crate::sample::Dims::new().with(slurm_cw_catalog::dims::CLUSTER_NAME, "c");
            let cost = Aggregate {
                metric: &slurm_cw_catalog::metrics::JOB_COST,
                dims,
                time: at,
                value: Summary::Value { value: 0.25 },
            };
            vec![vec![cost]]
        };
        let mark = || Counted::in_dir(dir.path()).read(SystemTime::now());

        let kept = take_metrics(std::iter::once(&mut intake), flush(t(60)), &mut counted, Some(t(60)));
        assert!(kept[0].is_empty(), "in the spool, nothing held in memory");
        assert_eq!(
            std::fs::read_dir(&spool_dir).unwrap().count(),
            2,
            "the flush's file and the spool's lock"
        );
        assert_eq!(mark(), Some(t(60)));

        // The spool's directory gone: the flush is held in memory only, and a daemon that dies
        // now must count its time again.
        std::fs::remove_dir_all(&spool_dir).unwrap();
        let kept = take_metrics(std::iter::once(&mut intake), flush(t(120)), &mut counted, Some(t(120)));
        assert_eq!(kept[0].len(), 1, "held for delivery");
        assert_eq!(mark(), Some(t(60)), "not moved past what is on the disk");

        // No job running: nothing to count on from.
        std::fs::create_dir(&spool_dir).unwrap();
        take_metrics(std::iter::once(&mut intake), flush(t(180)), &mut counted, None);
        assert_eq!(mark(), Some(t(60)));
        take_metrics(std::iter::once(&mut intake), flush(t(240)), &mut counted, Some(t(240)));
        assert_eq!(mark(), Some(t(240)), "the spool takes flushes again");
    }
}
