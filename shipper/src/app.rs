//! The shipper's main loop: collect every `collect_interval`, aggregate, and hand one batch of
//! datums per `flush_interval` to delivery, which runs beside it so a slow or unreachable
//! CloudWatch never delays sampling.

use crate::aggregate::Aggregator;
use crate::cli::{Cli, RoleArg, SinkArg};
use crate::config::{Config, RoleSetting, SinkKind, Toggle};
use crate::datum::Datum;
use crate::hook::{self, Answer};
use crate::role::{self, Role};
use crate::sample::{Batch, Dims};
use crate::sinks::cloudwatch::{CloudWatchSink, Settings, retry::Backoff};
use crate::sinks::delivery::{Destination, Delivery, Intake, SharedSpool, StatsHandle, Step};
use crate::sinks::logs::LogsSink;
use crate::sinks::spool::Spool;
use crate::sinks::stdout::StdoutSink;
use crate::sinks::validate::DropReason;
use crate::sinks::{MetricSink, RecordSink};
use crate::transforms::jobs::Jobs;
use crate::transforms::population;
use crate::transforms::shape::Shape;
use slurm_cw_formats::record::Record;
use slurm_cw_formats::spool::Item;
use crate::sources::gpu::GpuCollector;
use crate::sources::gpu::nvml::NvmlSource;
use crate::sources::head::HeadCollector;
use crate::sources::head::command::SlurmCommands;
use crate::sources::node::NodeCollector;
use crate::sources::shipper::ShipperCollector;
use crate::sources::{Collector, Errors};
use slurm_cw_catalog::dims::{COLLECTOR, NODE_NAME, REASON};
use slurm_cw_catalog::metrics::*;
use std::path::Path;
use std::sync::{Arc, Mutex};
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
    let group = config.logs.group_for(&cluster);
    let metrics = Route::open(&config, &config.namespace, config.spool.dir.clone(), build_sink(&config).await);
    let records = if role.runs_node() && config.node.job_metrics.records() {
        let sink = build_record_sink(&config, &group, &node).await;
        Some(Route::open(&config, &group, config.spool.dir.join("logs"), sink))
    } else {
        None
    };
    let pipeline = Pipeline::new(
        &config,
        role,
        cluster,
        node,
        metrics.stats.clone(),
        records.as_ref().map(|r| r.stats.clone()),
        metrics.spool.clone(),
    );
    if cli.once {
        once(pipeline, metrics, records).await
    } else {
        daemon(pipeline, metrics, records, &config, role).await
    }
}

/// One destination's intake, spool and delivery, and the counts of what they did.
pub struct Route<D: Destination> {
    pub intake: Intake<D::Item>,
    pub delivery: Delivery<D>,
    pub stats: StatsHandle,
    pub spool: Option<SharedSpool<D::Item>>,
}

impl<D: Destination> Route<D> {
    /// `dir`: this destination's spool directory (used when the sink is CloudWatch's and the
    /// spool is enabled).
    pub fn open(config: &Config, label: &str, dir: std::path::PathBuf, sink: D) -> Self {
        let stats = StatsHandle::default();
        let spool = if config.sink == SinkKind::Cloudwatch && config.spool.enabled {
            open_spool(&dir, config.spool.max_bytes, &stats)
        } else {
            None
        };
        let intake = Intake::new(label, spool.clone(), stats.clone());
        let delivery = Delivery::new(sink, spool.clone(), config.cloudwatch.max_backlog, stats.clone());
        Route { intake, delivery, stats, spool }
    }
}

/// A disk spool. When it cannot be opened the shipper runs on without it (one error line;
/// undelivered data then waits in memory).
pub fn open_spool<T: Item>(dir: &Path, max_bytes: u64, stats: &StatsHandle) -> Option<SharedSpool<T>> {
    match Spool::open(dir, max_bytes) {
        Ok((spool, dropped)) => {
            if dropped.corrupt_files > 0 {
                tracing::warn!(
                    dir = %dir.display(),
                    files = dropped.corrupt_files,
                    items = dropped.corrupt_datums,
                    "removed torn spool files of an earlier crash"
                );
            }
            stats.count_drop(DropReason::SpoolCorrupt, dropped.corrupt_datums);
            if !spool.is_empty() {
                tracing::info!(
                    dir = %dir.display(),
                    files = spool.files(),
                    bytes = spool.bytes(),
                    "spooled data from an earlier run will be sent first"
                );
            }
            Some(Arc::new(Mutex::new(spool)))
        }
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
            tracing::warn!(error = %e, "the spool is another process's: this one keeps undelivered data in memory");
            None
        }
        Err(e) => {
            tracing::error!(dir = %dir.display(), error = %e, "cannot use the spool; undelivered data will wait in memory");
            None
        }
    }
}

pub async fn build_sink(config: &Config) -> MetricSink {
    match config.sink {
        SinkKind::Stdout => MetricSink::Stdout(StdoutSink::new(&config.namespace)),
        SinkKind::Cloudwatch => MetricSink::CloudWatch(CloudWatchSink::new(cloudwatch_settings(config)).await),
    }
}

pub async fn build_record_sink(config: &Config, group: &str, node: &str) -> RecordSink {
    match config.sink {
        SinkKind::Stdout => RecordSink::Stdout(StdoutSink::new(group)),
        SinkKind::Cloudwatch => RecordSink::Logs(LogsSink::new(logs_settings(config, group, node)).await),
    }
}

pub fn logs_settings(config: &Config, group: &str, node: &str) -> crate::sinks::logs::Settings {
    let cw = cloudwatch_settings(config);
    crate::sinks::logs::Settings {
        group: group.to_owned(),
        stream: config.logs.stream.clone().unwrap_or_else(|| node.to_owned()),
        region: cw.region,
        endpoint: config.logs.endpoint.clone(),
        backoff: cw.backoff,
        attempt_timeout: cw.attempt_timeout,
    }
}

pub fn cloudwatch_settings(config: &Config) -> Settings {
    let cw = &config.cloudwatch;
    Settings {
        namespace: config.namespace.clone(),
        region: cw.region.clone(),
        endpoint: cw.endpoint.clone(),
        backoff: Backoff { base: cw.retry_base_delay, cap: cw.retry_max_delay, max_retries: cw.max_retries },
        attempt_timeout: cw.attempt_timeout,
        storage_resolution: cw.storage_resolution,
    }
}

/// The GPU collector, when `gpu.enabled` allows and NVML loads; with `auto` and no driver, one
/// log line and no collector.
fn gpu_collector(config: &Config, node: &str) -> Option<GpuCollector> {
    if config.gpu.enabled == Toggle::Off {
        return None;
    }
    let (gpu, node_cfg) = (config.gpu.clone(), config.node.clone());
    match NvmlSource::init() {
        Ok(source) => Some(GpuCollector::new(Box::new(source), gpu, node_cfg, node.to_owned())),
        Err(e) if config.gpu.enabled == Toggle::On => {
            Some(GpuCollector::unavailable(e, gpu, node_cfg, node.to_owned()))
        }
        Err(e) => {
            tracing::info!(reason = %e, "no NVIDIA driver here: GPU collector off");
            None
        }
    }
}

/// Collectors, the transforms, the aggregator and the self-metrics: everything but delivery.
pub struct Pipeline {
    collectors: Vec<Box<dyn Collector>>,
    aggregator: Aggregator,
    node: String,
    stats: StatsHandle,
    record_stats: Option<StatsHandle>,
    /// The job table, where job records are made (node role, records on).
    jobs: Option<Jobs>,
    shape: Shape,
    per_user: bool,
    idle_gpu_percent: f64,
    /// Metric names the configuration excludes.
    excluded: Vec<String>,
    spool: Option<SharedSpool<Datum>>,
    /// Collections since the last flush, and in the last flush.
    collections: u64,
    flushed_collections: u64,
}

/// What one flush hands to delivery.
#[derive(Debug, Default)]
pub struct Flushed {
    pub datums: Vec<Datum>,
    pub records: Vec<Record>,
}

impl Pipeline {
    pub fn new(
        config: &Config,
        role: Role,
        cluster: String,
        node: String,
        stats: StatsHandle,
        record_stats: Option<StatsHandle>,
        spool: Option<SharedSpool<Datum>>,
    ) -> Self {
        let mut collectors: Vec<Box<dyn Collector>> = Vec::new();
        if role.runs_head() {
            let cmds = SlurmCommands::new(config.slurm.bin_dir.clone(), config.slurm.command_timeout);
            collectors.push(Box::new(HeadCollector::new(cmds, config.head.clone())));
        }
        let mut jobs = None;
        if role.runs_node() {
            collectors.push(Box::new(NodeCollector::new(config.node.clone(), node.clone())));
            if let Some(gpu) = gpu_collector(config, &node) {
                collectors.push(Box::new(gpu));
            }
            jobs = Some(Jobs::new(config.node.findings.clone()));
        }
        collectors.push(Box::new(ShipperCollector::new(node.clone())));
        Pipeline {
            collectors,
            aggregator: Aggregator::new(cluster),
            node,
            stats,
            record_stats,
            jobs,
            shape: Shape {
                job_metrics: config.node.job_metrics,
                per_node_job_dimensions: config.node.per_node_dimensions,
                per_node_self_metrics: config.self_metrics_per_node,
            },
            per_user: config.node.population_per_user,
            idle_gpu_percent: config.node.findings.idle_gpu_percent,
            excluded: config.exclude_metrics.clone(),
            spool,
            collections: 0,
            flushed_collections: 0,
        }
    }

    /// The final sample of an ending job (see [`crate::hook`]).
    pub fn final_sample(&mut self, job: &str, uid: u32) -> Answer {
        let mut batch = Batch::new(SystemTime::now());
        let mut answer = Answer::Sampled(0);
        for c in &mut self.collectors {
            match c.final_sample(job, uid, &mut batch) {
                Some(Answer::Sampled(n)) => {
                    if let Answer::Sampled(total) = &mut answer {
                        *total += n;
                    }
                }
                Some(other) => answer = other,
                None => {}
            }
        }
        self.add(batch);
        answer
    }

    /// Through the transforms into the aggregator, less the excluded metrics.
    fn add(&mut self, mut batch: Batch) {
        if let Some(jobs) = &mut self.jobs {
            let now = jobs.observe(&batch);
            if batch.all_jobs {
                population::push(&now, self.per_user, self.idle_gpu_percent, &mut batch);
            }
        }
        let mut shaped = Vec::with_capacity(batch.samples.len());
        self.shape.apply(batch.samples, &mut shaped);
        let excluded = &self.excluded;
        let kept = shaped.into_iter().filter(|s| !excluded.iter().any(|e| e == s.metric.name));
        self.aggregator.extend(kept);
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
                batch.push(&COLLECTOR_ERRORS, host.clone().with(COLLECTOR, part), n as f64);
            }
            total_errors += errors.total();
        }
        tracing::debug!(samples = batch.samples.len(), errors = total_errors, "collected");
        self.collections += 1;
        self.add(batch);
        total_errors
    }

    /// Everything aggregated since the last flush, with the delivery self-metrics, and the job
    /// records made since.
    pub fn flush(&mut self) -> Flushed {
        let now = SystemTime::now();
        let records = self.jobs.as_mut().map(|j| j.flush(now)).unwrap_or_default();
        let mut s = self.stats.take();
        let mut batch = Batch::new(now);
        let host = Dims::new().with(NODE_NAME, self.node.as_str());
        if let Some(rs) = &self.record_stats {
            let r = rs.take();
            batch.push(&JOB_RECORDS, Dims::new(), r.sent as f64);
            for (reason, n) in r.dropped {
                *s.dropped.entry(reason).or_default() += n;
            }
        }
        if let Some(jobs) = &mut self.jobs
            && jobs.trimmed > 0
        {
            *s.dropped.entry(DropReason::Trimmed).or_default() += std::mem::take(&mut jobs.trimmed);
        }
        batch.push(&SHIPPER_DATUMS_SENT, host.clone(), s.sent as f64);
        batch.push(&SHIPPER_REQUESTS, host.clone(), s.requests as f64);
        batch.push(&SHIPPER_RETRIES, host.clone(), s.retries as f64);
        batch.push(&SHIPPER_BYTES_SENT, host.clone(), s.bytes as f64);
        for (reason, n) in &s.dropped {
            batch.push(&SHIPPER_DATUMS_DROPPED, host.clone().with(REASON, reason.as_str()), *n as f64);
        }
        // Cluster-wide, every host adds into one series that an alarm can watch (zero too, so
        // the alarm sees data).
        let total: u64 = s.dropped.values().sum();
        batch.push(&SHIPPER_DATUMS_DROPPED, Dims::new(), total as f64);
        if let Some(spool) = &self.spool {
            let (files, bytes) = match spool.lock() {
                Ok(g) => (g.files(), g.bytes()),
                Err(p) => (p.get_ref().files(), p.get_ref().bytes()),
            };
            batch.push(&SHIPPER_SPOOL_FILES, host.clone(), files as f64);
            batch.push(&SHIPPER_SPOOL_BYTES, host.clone(), bytes as f64);
        }
        let mut shaped = Vec::new();
        self.shape.apply(batch.samples, &mut shaped);
        self.aggregator.extend(shaped.into_iter().filter(|s| !self.excluded.iter().any(|e| e == s.metric.name)));
        self.flushed_collections = std::mem::take(&mut self.collections);
        Flushed { datums: self.aggregator.drain(), records }
    }

    /// Collections in the last flush.
    pub fn flushed_collections(&self) -> u64 {
        self.flushed_collections
    }
}

type Metrics = Route<MetricSink>;
type Records = Route<RecordSink>;

async fn once(mut pipeline: Pipeline, mut metrics: Metrics, records: Option<Records>) -> Exit {
    pipeline.collect().await;
    let flushed = pipeline.flush();
    metrics.delivery.hold(metrics.intake.take(flushed.datums));
    let mut results = vec![("metrics", drain(&mut metrics.delivery).await)];
    if let Some(mut r) = records {
        r.delivery.hold(r.intake.take(flushed.records));
        results.push(("job records", drain(&mut r.delivery).await));
    }
    let failed: Vec<String> = results.into_iter().filter_map(|(what, r)| r.err().map(|e| format!("{what}: {e}"))).collect();
    if failed.is_empty() { Exit::Ok } else { Exit::Failed(failed.join("; ")) }
}

/// Standard output closed by its reader (`| head`): the end Unix tools meet quietly.
fn closed_pipe(why: &str) -> bool {
    // The OS's text ("Broken pipe (os error 32)"), whatever its case.
    why.to_ascii_lowercase().contains("broken pipe")
}

/// Sends everything waiting; the error says what is kept.
async fn drain<D: Destination>(delivery: &mut Delivery<D>) -> Result<(), String> {
    match delivery.drain().await {
        Step::Sent | Step::Empty => Ok(()),
        // A closed standard output (`| head`): the reader has what it wanted.
        Step::Fatal(e) if closed_pipe(&e) => Ok(()),
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

async fn daemon(mut pipeline: Pipeline, metrics: Metrics, records: Option<Records>, config: &Config, role: Role) -> Exit {
    let pace = Pace {
        replay_gap: Duration::from_secs_f64(1.0 / config.spool.replay_rate),
        max_backoff: config.flush_interval,
    };
    let Route { intake: mut metric_intake, delivery, .. } = metrics;
    let (tx, rx) = mpsc::unbounded_channel::<Vec<Datum>>();
    let mut deliverers = vec![tokio::spawn(deliver_loop(delivery, rx, pace))];
    let mut record_route = None;
    if let Some(Route { intake, delivery, .. }) = records {
        let (rtx, rrx) = mpsc::unbounded_channel::<Vec<Record>>();
        deliverers.push(tokio::spawn(deliver_loop(delivery, rrx, pace)));
        record_route = Some((intake, rtx));
    }
    let mut flush_to_delivery = |pipeline: &mut Pipeline| -> bool {
        let f = pipeline.flush();
        let held = metric_intake.take(f.datums);
        tracing::debug!(collections = pipeline.flushed_collections(), in_memory = held.len(), records = f.records.len(), "flushed");
        let mut ok = tx.send(held).is_ok();
        if let Some((intake, rtx)) = &mut record_route {
            ok &= rtx.send(intake.take(f.records)).is_ok();
        }
        ok
    };

    let mut collect = tokio::time::interval(config.collect_interval);
    collect.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let offset = if config.cloudwatch.flush_jitter {
        config.flush_interval.mul_f64(rand::random::<f64>())
    } else {
        config.flush_interval
    };
    tracing::debug!(?offset, "first flush after the random offset");
    let mut flush = tokio::time::interval_at(tokio::time::Instant::now() + offset, config.flush_interval);
    flush.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut shutdown = Shutdown::new();
    let (hook_tx, mut hook_rx) = mpsc::channel::<hook::Request>(64);
    if role.runs_node() {
        match hook::bind(&config.node.hook_socket) {
            Ok(listener) => {
                tokio::spawn(hook::serve(listener, hook_tx));
            }
            Err(e) => tracing::warn!(
                socket = %config.node.hook_socket.display(), error = %e,
                "cannot listen for final job samples; short jobs may be missed"
            ),
        }
    }

    let mut gave_up = false;
    loop {
        // Biased, in this order: a collection slower than its interval makes its tick ready
        // again at once, and a fair choice would then starve the flush and the shutdown.
        tokio::select! {
            biased;
            signal = shutdown.recv() => {
                tracing::info!(signal, "stopping: flushing what is buffered");
                // Into the spool first: whatever the last send does, nothing is lost.
                flush_to_delivery(&mut pipeline);
                break;
            }
            _ = flush.tick() => {
                if !flush_to_delivery(&mut pipeline) {
                    gave_up = true;
                    break;
                }
            }
            Some(req) = hook_rx.recv() => {
                let answer = pipeline.final_sample(&req.job, req.uid);
                let _ = req.reply.send(answer);
            }
            _ = collect.tick() => { pipeline.collect().await; }
        }
    }
    // Hanging up tells each delivery to send what is left and stop.
    drop(flush_to_delivery);
    drop(tx);
    drop(record_route);
    let all = join_all(deliverers);
    match tokio::time::timeout(SHUTDOWN_GRACE, all).await {
        Ok(Ok(why)) if gave_up => match why.into_iter().flatten().next() {
            Some(e) if closed_pipe(&e) => Exit::Ok,
            Some(e) => Exit::Failed(format!("delivery stopped: {e}")),
            None => Exit::Failed("delivery stopped (see the log)".into()),
        },
        Ok(Ok(_)) => Exit::Ok,
        Ok(Err(e)) => Exit::Failed(format!("delivery task failed: {e}")),
        Err(_) => {
            tracing::warn!(?SHUTDOWN_GRACE, "delivery did not finish in time; exiting anyway");
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

/// How delivery paces itself: at most one request set per `replay_gap` while a backlog is sent,
/// and after a failure a doubling wait of up to `max_backoff` (the flush interval) before the
/// next try.
#[derive(Debug, Clone, Copy)]
pub struct Pace {
    pub replay_gap: Duration,
    pub max_backoff: Duration,
}

/// Sends what waits, oldest first, paced; a new flush is tried at once. Stops when the main
/// loop hangs up (one last paced drain, bounded by [`SHUTDOWN_GRACE`] in the caller) or when
/// the sink cannot work any more.
/// Returns why the sink gave up, when it did.
async fn deliver_loop<D: Destination>(
    mut delivery: Delivery<D>,
    mut rx: mpsc::UnboundedReceiver<Vec<D::Item>>,
    pace: Pace,
) -> Option<String> {
    let mut next = tokio::time::Instant::now();
    let mut failures: u32 = 0;
    let mut open = true;
    while open || delivery.has_backlog() {
        let backlog = delivery.has_backlog();
        tokio::select! {
            biased;
            msg = rx.recv(), if open => match msg {
                Some(held) => {
                    delivery.hold(held);
                    // A new flush: try now, unless CloudWatch just failed us.
                    if failures == 0 {
                        next = tokio::time::Instant::now();
                    }
                }
                None => {
                    open = false;
                    next = tokio::time::Instant::now();
                }
            },
            _ = tokio::time::sleep_until(next), if backlog => {
                match delivery.send_oldest().await {
                    Step::Sent | Step::Empty => {
                        failures = 0;
                        next = tokio::time::Instant::now() + pace.replay_gap;
                    }
                    Step::Failed(e) => {
                        if failures == 0 {
                            let (held, files) = delivery.waiting();
                            tracing::warn!(error = %e, spooled_flushes = files, held_in_memory = held, "cannot deliver; will retry");
                        }
                        if !open {
                            return None; // stopping: what is left stays in the spool
                        }
                        failures += 1;
                        let wait = pace.replay_gap.saturating_mul(1 << failures.min(16)).min(pace.max_backoff);
                        next = tokio::time::Instant::now() + wait;
                    }
                    Step::Fatal(e) => {
                        // Dropping the receiver makes the main loop's next flush fail and the daemon exit.
                        if !closed_pipe(&e) {
                            tracing::error!(error = %e, "delivery cannot continue");
                        }
                        return Some(e);
                    }
                }
            }
        }
    }
    None
}

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
