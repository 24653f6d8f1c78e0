//! The shipper's main loop: collect every `collect_interval`, aggregate, and hand one batch of
//! datums per `flush_interval` to delivery, which runs beside it so a slow or unreachable
//! CloudWatch never delays sampling.

use crate::aggregate::Aggregator;
use crate::cli::{Cli, RoleArg, SinkArg};
use crate::config::{Config, RoleSetting, SinkKind};
use crate::datum::Datum;
use crate::role::{self, Role};
use crate::sample::{Batch, Dims};
use crate::sinks::Sink;
use crate::sinks::cloudwatch::{CloudWatchSink, Settings, retry::Backoff};
use crate::sinks::delivery::{Delivery, StatsHandle};
use crate::sinks::stdout::StdoutSink;
use crate::sources::head::HeadCollector;
use crate::sources::head::command::SlurmCommands;
use crate::sources::shipper::ShipperCollector;
use crate::sources::{Collector, Errors};
use slurm_cw_catalog::dims::{COLLECTOR, NODE_NAME, REASON};
use slurm_cw_catalog::metrics::*;
use std::path::Path;
use std::time::{Duration, Instant, SystemTime};
use tokio::sync::mpsc;

/// How the process ends.
#[derive(Debug, PartialEq)]
pub enum Exit {
    Ok,
    /// Exit status 1, with a one-line reason.
    Failed(String),
    /// Exit status 2: the configuration (or the command line) cannot work.
    BadConfig(String),
}

/// Applies the command line over the configuration file.
pub fn apply_cli(cli: &Cli, config: &mut Config) {
    if let Some(r) = cli.role {
        config.role = match r {
            RoleArg::Node => RoleSetting::Node,
            RoleArg::Head => RoleSetting::Head,
            RoleArg::All => RoleSetting::All,
        };
    }
    if let Some(s) = cli.sink {
        config.sink = match s {
            SinkArg::Cloudwatch => SinkKind::Cloudwatch,
            SinkArg::Stdout => SinkKind::Stdout,
        };
    }
}

pub fn detect_role(config: &Config) -> Result<(Role, String), String> {
    let conf = config.slurm_conf_path();
    let host = crate::config::short_hostname();
    role::resolve(
        config.role,
        &role::Probe {
            cfnconfig: Path::new("/etc/parallelcluster/cfnconfig"),
            proc_root: &config.node.proc_root,
            slurm_conf: conf.as_deref(),
            hostname: &host,
        },
    )
}

pub async fn run(cli: Cli, mut config: Config) -> Exit {
    apply_cli(&cli, &mut config);
    if cli.check {
        return crate::check::run(&config).await;
    }
    let cluster = match config.resolve_cluster_name() {
        Ok((name, _)) => name,
        Err(e) => return Exit::BadConfig(e.0),
    };
    let (role, why) = match detect_role(&config) {
        Ok(r) => r,
        Err(e) => return Exit::BadConfig(e),
    };
    let node = config.node_name();
    tracing::info!(role = role.as_str(), why, cluster, node, "starting");
    let stats = StatsHandle::default();
    let sink = build_sink(&config).await;
    let delivery = Delivery::new(sink, config.cloudwatch.max_backlog, stats.clone());
    let pipeline = Pipeline::new(&config, role, cluster, node, stats);
    if cli.once {
        once(pipeline, delivery).await
    } else {
        daemon(pipeline, delivery, &config).await
    }
}

pub async fn build_sink(config: &Config) -> Sink {
    match config.sink {
        SinkKind::Stdout => Sink::Stdout(StdoutSink::new(&config.namespace)),
        SinkKind::Cloudwatch => {
            Sink::CloudWatch(CloudWatchSink::new(cloudwatch_settings(config)).await)
        }
    }
}

pub fn cloudwatch_settings(config: &Config) -> Settings {
    let cw = &config.cloudwatch;
    Settings {
        namespace: config.namespace.clone(),
        region: cw.region.clone(),
        endpoint: cw.endpoint.clone(),
        backoff: Backoff {
            base: cw.retry_base_delay,
            cap: cw.retry_max_delay,
            max_retries: cw.max_retries,
        },
        attempt_timeout: cw.attempt_timeout,
        storage_resolution: cw.storage_resolution,
    }
}

/// Collectors, the aggregator and the self-metrics: everything but delivery.
pub struct Pipeline {
    collectors: Vec<Box<dyn Collector>>,
    aggregator: Aggregator,
    node: String,
    stats: StatsHandle,
}

impl Pipeline {
    pub fn new(
        config: &Config,
        role: Role,
        cluster: String,
        node: String,
        stats: StatsHandle,
    ) -> Self {
        let mut collectors: Vec<Box<dyn Collector>> = Vec::new();
        if role.runs_head() {
            let cmds =
                SlurmCommands::new(config.slurm.bin_dir.clone(), config.slurm.command_timeout);
            collectors.push(Box::new(HeadCollector::new(cmds, config.head.clone())));
        }
        collectors.push(Box::new(ShipperCollector::new(node.clone())));
        Pipeline {
            collectors,
            aggregator: Aggregator::new(cluster),
            node,
            stats,
        }
    }

    /// Runs every collector once; returns the errors they had in all.
    pub async fn collect(&mut self) -> u64 {
        let mut batch = Batch::new(SystemTime::now());
        let mut total_errors = 0;
        for c in &mut self.collectors {
            let started = Instant::now();
            let mut errors = Errors::new();
            c.collect(&mut batch, &mut errors).await;
            let took = started.elapsed();
            let host = Dims::new().with(NODE_NAME, self.node.as_str());
            batch.push(
                &SHIPPER_COLLECTION_DURATION,
                host.clone().with(COLLECTOR, c.name()),
                took.as_secs_f64() * 1000.0,
            );
            for (part, n) in errors.iter() {
                batch.push(
                    &COLLECTOR_ERRORS,
                    host.clone().with(COLLECTOR, part),
                    n as f64,
                );
            }
            total_errors += errors.total();
        }
        tracing::debug!(
            samples = batch.samples.len(),
            errors = total_errors,
            "collected"
        );
        self.aggregator.extend(batch.samples);
        total_errors
    }

    /// Everything aggregated since the last flush, with the delivery self-metrics.
    pub fn flush(&mut self) -> Vec<Datum> {
        let s = self.stats.take();
        let mut batch = Batch::new(SystemTime::now());
        let host = Dims::new().with(NODE_NAME, self.node.as_str());
        batch.push(&SHIPPER_DATUMS_SENT, host.clone(), s.sent as f64);
        batch.push(&SHIPPER_REQUESTS, host.clone(), s.requests as f64);
        batch.push(&SHIPPER_RETRIES, host.clone(), s.retries as f64);
        batch.push(&SHIPPER_BYTES_SENT, host.clone(), s.bytes as f64);
        for (reason, n) in &s.dropped {
            batch.push(
                &SHIPPER_DATUMS_DROPPED,
                host.clone().with(REASON, reason.as_str()),
                *n as f64,
            );
        }
        self.aggregator.extend(batch.samples);
        self.aggregator.drain()
    }
}

async fn once(mut pipeline: Pipeline, mut delivery: Delivery) -> Exit {
    pipeline.collect().await;
    let datums = pipeline.flush();
    let count = datums.len();
    let report = delivery.deliver(datums).await;
    tracing::info!(sent = report.sent, dropped = report.dropped, "flushed once");
    if report.pending > 0 {
        return Exit::Failed(format!(
            "{} of {count} datums not delivered: {}",
            report.pending,
            report.error.unwrap_or_else(|| "unknown error".into())
        ));
    }
    Exit::Ok
}

async fn daemon(mut pipeline: Pipeline, delivery: Delivery, config: &Config) -> Exit {
    let (tx, rx) = mpsc::unbounded_channel::<Vec<Datum>>();
    let deliverer = tokio::spawn(deliver_loop(delivery, rx));

    let mut collect = tokio::time::interval(config.collect_interval);
    collect.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let offset = if config.cloudwatch.flush_jitter {
        config.flush_interval.mul_f64(rand::random::<f64>())
    } else {
        config.flush_interval
    };
    tracing::debug!(?offset, "first flush after the random offset");
    let mut flush =
        tokio::time::interval_at(tokio::time::Instant::now() + offset, config.flush_interval);
    flush.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut shutdown = Shutdown::new();

    loop {
        tokio::select! {
            _ = collect.tick() => { pipeline.collect().await; }
            _ = flush.tick() => {
                let datums = pipeline.flush();
                if tx.send(datums).is_err() {
                    return Exit::Failed("delivery stopped unexpectedly".into());
                }
            }
            signal = shutdown.recv() => {
                tracing::info!(signal, "stopping: flushing what is buffered");
                let _ = tx.send(pipeline.flush());
                break;
            }
        }
    }
    drop(tx);
    match tokio::time::timeout(SHUTDOWN_GRACE, deliverer).await {
        Ok(Ok(())) => Exit::Ok,
        Ok(Err(e)) => Exit::Failed(format!("delivery task failed: {e}")),
        Err(_) => {
            tracing::warn!(
                ?SHUTDOWN_GRACE,
                "delivery did not finish in time; exiting anyway"
            );
            Exit::Ok
        }
    }
}

/// How long a stopping shipper waits for its last delivery (systemd's TimeoutStopSec is longer).
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(20);

/// Delivers each flush; while one delivery runs, later flushes queue up and go together.
async fn deliver_loop(mut delivery: Delivery, mut rx: mpsc::UnboundedReceiver<Vec<Datum>>) {
    while let Some(mut datums) = rx.recv().await {
        while let Ok(more) = rx.try_recv() {
            datums.extend(more);
        }
        let report = delivery.deliver(datums).await;
        if let Some(e) = &report.error {
            tracing::warn!(sent = report.sent, pending = report.pending, error = %e, "delivery incomplete");
        } else {
            tracing::debug!(sent = report.sent, dropped = report.dropped, "delivered");
        }
    }
}

/// SIGTERM and SIGINT.
struct Shutdown {
    term: Option<tokio::signal::unix::Signal>,
    int: Option<tokio::signal::unix::Signal>,
}

impl Shutdown {
    fn new() -> Self {
        use tokio::signal::unix::{SignalKind, signal};
        Shutdown {
            term: signal(SignalKind::terminate()).ok(),
            int: signal(SignalKind::interrupt()).ok(),
        }
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
