//! Everything but delivery: the collectors, the transforms, the aggregator and the shipper's
//! own figures. `collect` runs every collector once; `flush` hands what was gathered since the
//! last flush to delivery, datums and job records.

use crate::aggregate::Aggregator;
use crate::config::{Config, Toggle};
use crate::datum::Datum;
use crate::hook::Answer;
use crate::role::Role;
use crate::sample::{Batch, Dims};
use crate::sinks::delivery::{DeliveryStats, SharedSpool, StatsHandle};
use crate::sinks::validate::DropReason;
use crate::sources::gpu::GpuCollector;
use crate::sources::gpu::nvml::NvmlSource;
use crate::sources::head::HeadCollector;
use crate::sources::head::command::SlurmCommands;
use crate::sources::host::{HostCollector, Roots};
use crate::sources::node::NodeCollector;
use crate::sources::shipper::ShipperCollector;
use crate::sources::slurm_jobs::SlurmJobs;
use crate::sources::{Collector, Errors};
use crate::transforms::derive::Derive;
use crate::transforms::jobs::Jobs;
use crate::transforms::node_sample::NodeSamples;
use crate::transforms::population;
use crate::transforms::shape::Shape;
use slurm_cw_catalog::dims::{COLLECTOR, NODE_NAME, REASON};
use slurm_cw_catalog::metrics::*;
use slurm_cw_formats::record::Record;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Instant, SystemTime};

/// The GPU collector, when `gpu.enabled` allows and NVML loads; with `auto` and no driver, one
/// log line and no collector.
fn gpu_collector(config: &Config, node: &str) -> Option<GpuCollector> {
    if config.gpu.enabled == Toggle::Off {
        return None;
    }
    let (gpu, node_cfg) = (config.gpu.clone(), config.node.clone());
    match NvmlSource::init() {
        Ok(source) => {
            let (path, gres) = config.gres_conf();
            let order = gres.gpu_order(node);
            tracing::info!(gres_conf = ?path, ?order, "Slurm's GPU numbers read in this order");
            Some(GpuCollector::new(Box::new(source), gpu, node_cfg, node.to_owned()).with_gres_conf(gres))
        }
        Err(e) if config.gpu.enabled == Toggle::On => {
            Some(GpuCollector::unavailable(e, gpu, node_cfg, node.to_owned()))
        }
        Err(e) => {
            tracing::info!(reason = %e, "no NVIDIA driver here: GPU collector off");
            None
        }
    }
}

/// One datum a minute when a flush spans more (a flush is a billed request; a minute is what
/// dashboards and alarms read), else one a flush.
fn aggregator(cluster: String, config: &Config) -> Aggregator {
    let minute = std::time::Duration::from_secs(60);
    let a = Aggregator::new(cluster);
    if config.flush_interval > minute { a.with_period(minute) } else { a }
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
    /// Increases, utilisation and backlog from the head node's readings (head role).
    derive: Option<Derive>,
    /// The node's own `node_sample` records (node role).
    node_samples: Option<NodeSamples>,
    shape: Shape,
    per_user: bool,
    idle_gpu_percent: f64,
    /// Metric names the configuration excludes.
    excluded: Vec<String>,
    spool: Option<SharedSpool<Datum>>,
    /// Collections skipped because the one before was still running (the collection thread
    /// counts them).
    missed: Arc<AtomicU64>,
    /// Collections since the last flush.
    collections: u64,
}

/// What a pipeline is built from beside its configuration and collectors.
pub struct Parts {
    pub cluster: String,
    pub node: String,
    /// Delivery's figures, for the self-metrics: metrics, and records when they go anywhere.
    pub stats: StatsHandle,
    pub record_stats: Option<StatsHandle>,
    pub spool: Option<SharedSpool<Datum>>,
}

/// What one flush hands to delivery.
#[derive(Debug, Default)]
pub struct Flushed {
    pub datums: Vec<Datum>,
    pub records: Vec<Record>,
    /// What delivery did since the last flush (the self-metrics' figures), metrics and records.
    pub delivered: DeliveryStats,
    pub records_delivered: Option<DeliveryStats>,
    /// Collections in this flush.
    pub collections: u64,
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
            let endpoint = crate::sources::head::openmetrics::Endpoint::new(
                config.head.source,
                crate::sources::head::openmetrics::resolve(config),
                crate::sources::head::openmetrics::TokenFrom::of(&config.head),
                config.slurm.command_timeout,
            );
            collectors.push(Box::new(HeadCollector::new(cmds, config.head.clone()).with_endpoint(endpoint)));
        }
        if role.runs_node() {
            // Accounts, partitions and GPU allocations as Slurm says, not as a job's user wrote.
            let slurm = SlurmJobs::new(SlurmCommands::new(
                config.slurm.bin_dir.clone(),
                config.slurm.command_timeout,
            ));
            let node_collector =
                NodeCollector::new(config.node.clone(), node.clone()).with_slurm(slurm.clone());
            // The GPU collector runs after it and reads the jobs it found.
            let jobs = node_collector.jobs();
            collectors.push(Box::new(node_collector));
            if let Some(gpu) = gpu_collector(config, &node) {
                collectors.push(Box::new(gpu.with_slurm(slurm).with_jobs(jobs)));
            }
            // EFA/InfiniBand, Lustre and RAPL: nothing at all shipped where there are none.
            collectors.push(Box::new(HostCollector::new(Roots::from_config(&config.node), node.clone())));
        }
        collectors.push(Box::new(ShipperCollector::new(node.clone())));
        let parts = Parts { cluster, node, stats, record_stats, spool };
        Pipeline::from_parts(config, role, collectors, parts)
    }

    /// A pipeline over the given collectors (the cost bench brings its own, on simulated time).
    pub fn from_parts(
        config: &Config,
        role: Role,
        collectors: Vec<Box<dyn Collector>>,
        parts: Parts,
    ) -> Self {
        let Parts { cluster, node, stats, record_stats, spool } = parts;
        let node_samples = role.runs_node().then(|| NodeSamples::new(node.clone()));
        Pipeline {
            collectors,
            aggregator: aggregator(cluster, config),
            node,
            stats,
            record_stats,
            jobs: role.runs_node().then(|| Jobs::new(config.node.findings.clone())),
            node_samples,
            derive: role.runs_head().then(Derive::default),
            shape: Shape {
                job_metrics: config.node.job_metrics,
                per_node_job_dimensions: config.node.per_node_dimensions,
                per_node_self_metrics: config.self_metrics_per_node,
            },
            per_user: config.node.population_per_user,
            idle_gpu_percent: config.node.findings.idle_gpu_percent,
            excluded: config.exclude_metrics.clone(),
            spool,
            missed: Arc::default(),
            collections: 0,
        }
    }

    /// Reports collections skipped by whoever runs this pipeline, counted in `missed`.
    pub fn counting_missed(mut self, missed: Arc<AtomicU64>) -> Self {
        self.missed = missed;
        self
    }

    /// The final sample of an ending job (see [`crate::hook`]). The first collector that
    /// refuses (the node collector, which runs first, decides whose job it is and how often it
    /// may be asked) ends the request: no later collector is asked and no sample is kept, not
    /// even those of collectors asked before.
    pub fn final_sample(&mut self, job: &str, uid: u32) -> Answer {
        let mut batch = Batch::new(SystemTime::now());
        let mut total = 0;
        for c in &mut self.collectors {
            match c.final_sample(job, uid, &mut batch) {
                Some(Answer::Sampled(n)) => total += n,
                Some(refused) => return refused,
                None => {}
            }
        }
        self.add(batch);
        Answer::Sampled(total)
    }

    /// Through the transforms into the aggregator, less the excluded metrics.
    pub fn add(&mut self, mut batch: Batch) {
        if let Some(derive) = &mut self.derive {
            derive.apply(&mut batch);
        }
        if let Some(n) = &mut self.node_samples {
            n.observe(&batch);
        }
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
        self.collect_at(SystemTime::now()).await
    }

    /// [`Pipeline::collect`], the samples stamped `now`.
    pub async fn collect_at(&mut self, now: SystemTime) -> u64 {
        let mut batch = Batch::new(now);
        let mut total_errors = 0;
        for c in &mut self.collectors {
            let started = Instant::now();
            let mut errors = Errors::new();
            c.collect(&mut batch, &mut errors).await;
            let took = started.elapsed();
            if c.found_nothing() {
                continue;
            }
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
        self.flush_at(SystemTime::now())
    }

    /// [`Pipeline::flush`] at `now`.
    pub fn flush_at(&mut self, now: SystemTime) -> Flushed {
        let mut records = self.jobs.as_mut().map(|j| j.flush(now)).unwrap_or_default();
        if let Some(r) = self.node_samples.as_mut().and_then(|n| n.flush(now)) {
            records.push(r);
        }
        let delivered = self.stats.take();
        let mut s = delivered.clone();
        let mut batch = Batch::new(now);
        let host = Dims::new().with(NODE_NAME, self.node.as_str());
        let records_delivered = self.record_stats.as_ref().map(StatsHandle::take);
        if let Some(r) = &records_delivered {
            batch.push(&JOB_RECORDS, Dims::new(), r.sent as f64);
            for (reason, n) in &r.dropped {
                *s.dropped.entry(*reason).or_default() += n;
            }
        }
        if let Some(jobs) = &mut self.jobs
            && jobs.trimmed > 0
        {
            *s.dropped.entry(DropReason::Trimmed).or_default() += std::mem::take(&mut jobs.trimmed);
        }
        if let Some(n) = &mut self.node_samples
            && n.trimmed > 0
        {
            *s.dropped.entry(DropReason::Trimmed).or_default() += std::mem::take(&mut n.trimmed);
        }
        batch.push(&SHIPPER_DATUMS_SENT, host.clone(), s.sent as f64);
        let missed = self.missed.swap(0, Ordering::Relaxed);
        batch.push(&SHIPPER_COLLECTIONS_MISSED, host.clone(), missed as f64);
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
        self.aggregator
            .extend(shaped.into_iter().filter(|s| !self.excluded.iter().any(|e| e == s.metric.name)));
        let collections = std::mem::take(&mut self.collections);
        Flushed { datums: self.aggregator.drain(), records, delivered, records_delivered, collections }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::JobMetrics;
    use crate::sample::JobInfo;
    use slurm_cw_catalog::dims::{ACCOUNT, JOB_ID, USER};

    /// Answers a final sample with `answer`, after adding job 7's sample and itself.
    struct Stub(Answer);

    #[async_trait::async_trait(?Send)]
    impl Collector for Stub {
        fn name(&self) -> &'static str {
            "stub"
        }

        async fn collect(&mut self, _out: &mut Batch, _errors: &mut Errors) {}

        fn final_sample(&mut self, job: &str, _uid: u32, out: &mut Batch) -> Option<Answer> {
            out.jobs.push(JobInfo {
                id: job.into(),
                names: Default::default(),
                node: "n1".into(),
                user: "u".into(),
                account: "a".into(),
                partition: "p".into(),
            });
            let d = Dims::new().with(JOB_ID, job).with(USER, "u").with(ACCOUNT, "a");
            out.push(&CPU_USAGE, d, 1.0);
            Some(self.0.clone())
        }
    }

    fn pipeline(answers: &[Answer]) -> Pipeline {
        let mut config = Config::default();
        config.node.job_metrics = JobMetrics::Both;
        let collectors: Vec<Box<dyn Collector>> =
            answers.iter().map(|a| Box::new(Stub(a.clone())) as Box<dyn Collector>).collect();
        let parts = Parts {
            cluster: "c".into(),
            node: "n1".into(),
            stats: StatsHandle::default(),
            record_stats: None,
            spool: None,
        };
        Pipeline::from_parts(&config, Role::Node, collectors, parts)
    }

    #[test]
    fn a_refused_final_sample_keeps_no_collectors_samples() {
        for refusal in [Answer::Denied, Answer::TooSoon] {
            let mut p = pipeline(&[Answer::Sampled(1), refusal.clone(), Answer::Sampled(0)]);
            assert_eq!(p.final_sample("7", 1000), refusal);
            let f = p.flush();
            assert!(f.datums.iter().all(|d| d.metric != CPU_USAGE.name), "{refusal:?}");
            assert!(f.records.is_empty(), "{refusal:?}: {:?}", f.records);
        }
        let mut p = pipeline(&[Answer::Sampled(1), Answer::Sampled(0)]);
        assert_eq!(p.final_sample("7", 1000), Answer::Sampled(1));
        let f = p.flush();
        assert!(f.datums.iter().any(|d| d.metric == CPU_USAGE.name));
        assert!(!f.records.is_empty(), "the job's summary");
    }
}
