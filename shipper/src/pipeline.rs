//! Everything but delivery: the collectors, the transforms, the aggregator and the shipper's
//! own figures. `collect` runs every collector once; `flush` hands what was gathered since the
//! last flush to delivery, datums and job records.

use crate::aggregate::Aggregate;
use crate::aggregate::Aggregator;
use crate::config::Toggle;
use crate::cost::Prices;
use crate::role::Role;
use crate::sample::{Batch, Dims, JobReading, Sample};
use crate::sinks::delivery::{DeliveryStats, StatsHandle};
pub use crate::sinks::self_metrics::Delivered;
use crate::sinks::self_metrics::DeliveryFigures;
use crate::sources::FinalSample;
use crate::sources::{Collector, Errors};
use crate::transforms::derive::Derive;
use crate::transforms::findings::Thresholds;
use crate::transforms::job_series;
use crate::transforms::jobs::Jobs;
use crate::transforms::node_sample::NodeSamples;
use crate::transforms::population;
use crate::transforms::quiet::Quiet;
use crate::transforms::scheduler_sample::SchedulerSamples;
use crate::transforms::shape::Shape;
use crate::transforms::trim::{Copies, Trim};
use slurm_cw_catalog::Metric;
use slurm_cw_catalog::dims::{ACCOUNT, COLLECTOR, NODE_NAME, PARTITION};
use slurm_cw_catalog::metrics::*;
use slurm_cw_formats::record::Record;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::{Duration, Instant, SystemTime};

/// One datum a minute when a flush spans more (a flush is a billed request; a minute is what
/// dashboards and alarms read), else one a flush.
fn aggregator(cluster: String, flush_interval: Duration) -> Aggregator {
    let minute = Duration::from_secs(60);
    let a = Aggregator::new(cluster);
    if flush_interval > minute { a.with_period(minute) } else { a }
}

/// What the settings tell the pipeline (made by the app from the settings' sections).
#[derive(Debug, Clone)]
pub struct Options {
    pub flush_interval: Duration,
    /// `node.findings`.
    pub findings: Thresholds,
    /// `head.per_partition`.
    pub per_partition: Toggle,
    /// `head.scheduler_detail`: the scheduler figures no view reads as a record.
    pub scheduler_records: bool,
    /// `node.population_per_user`.
    pub population_per_user: bool,
    /// `node.per_partition`.
    pub node_per_partition: Toggle,
    /// `node.per_account`.
    pub node_per_account: Toggle,
    /// `exclude_metrics`: metric names never shipped.
    pub exclude_metrics: Vec<String>,
    /// The series a destination billed per series takes (`node.job_metrics`, ...).
    pub per_series: Shape,
}

/// One destination's series: its shape (what it takes) and its aggregator.
struct Lane {
    shape: Shape,
    aggregator: Aggregator,
    /// Where each series is billed (CloudWatch, EMF): counts of events at zero left out.
    quiet: Option<Quiet>,
    /// Where each collection's aggregates so far are shown (a pull endpoint's).
    live: Option<crate::sinks::prometheus::live::Live>,
}

/// Collectors, the transforms, one aggregator per destination and the self-metrics:
/// everything but delivery.
pub struct Pipeline {
    collectors: Vec<Box<dyn Collector>>,
    /// One per destination of metrics, in `sink`'s order.
    lanes: Vec<Lane>,
    node: String,
    /// The job table, where job records are made (node role, records on).
    jobs: Option<Jobs>,
    /// Increases, utilisation and backlog from the head node's readings, then what it leaves
    /// out (head role).
    derive: Option<(Derive, Trim)>,
    /// The node's own `node_sample` records (node role).
    node_samples: Option<NodeSamples>,
    /// The head's `scheduler_sample` records (head role, where records go somewhere).
    scheduler: Option<SchedulerSamples>,
    /// Which population figures go per partition and per account (`node.per_partition`,
    /// `node.per_account`; none here: every copy).
    node_copies: Vec<Copies>,
    /// What delivery did, for the self-metrics at each flush.
    delivery: DeliveryFigures,
    per_user: bool,
    idle_gpu_percent: f64,
    /// Metric names the configuration excludes.
    excluded: Vec<String>,
    /// Collections since the last flush.
    collections: u64,
}

/// What a pipeline is built from beside its configuration and collectors.
pub struct Parts {
    pub cluster: String,
    pub node: String,
    /// Each metric destination's delivery, in `sink`'s order: its shape, and its counts for
    /// the self-metrics.
    pub metrics: Vec<Delivered>,
    /// The job records' delivery counts, when they go anywhere.
    pub records: Option<StatsHandle>,
    /// The node's price and the nodes' sizes, where job costs are on.
    pub prices: Option<Prices>,
    /// Up to when the daemon before this one counted the cost metrics
    /// ([`crate::cost::counted`]): they count on from there.
    pub resume_from: Option<std::time::SystemTime>,
}

impl Parts {
    /// One CloudWatch destination without a spool, and job records (tests, benches).
    pub fn cloudwatch(cluster: &str, node: &str) -> Self {
        Parts {
            cluster: cluster.to_owned(),
            node: node.to_owned(),
            metrics: vec![Delivered {
                sink: crate::sinks::SinkKind::default(),
                stats: StatsHandle::default(),
                spool: None,
            }],
            records: Some(StatsHandle::default()),
            prices: None,
            resume_from: None,
        }
    }
}

/// What one flush hands to delivery.
#[derive(Debug, Default)]
pub struct Flushed {
    /// One list per metric destination, in `sink`'s order.
    pub aggregates: Vec<Vec<Aggregate>>,
    pub records: Vec<Record>,
    /// What delivery did since the last flush (the self-metrics' figures), per metric
    /// destination and for the records.
    pub delivered: Vec<DeliveryStats>,
    pub records_delivered: Option<DeliveryStats>,
    /// Collections in this flush.
    pub collections: u64,
    /// Up to when this flush's cost metrics counted the running jobs (none while none runs: a
    /// job that starts later is counted from its own start). Kept once the flush is spooled.
    pub counted_to: Option<std::time::SystemTime>,
}

impl Pipeline {
    /// A pipeline over `collectors` (the table's, [`crate::sources::table::build`]; the cost
    /// bench brings its own, on simulated time).
    pub fn new(options: &Options, role: Role, collectors: Vec<Box<dyn Collector>>, parts: Parts) -> Self {
        let Parts { cluster, node, metrics, records, prices, resume_from } = parts;
        let node_samples = role.runs_node().then(|| NodeSamples::new(node.clone()));
        let lanes: Vec<Lane> = metrics
            .iter()
            .map(|d| {
                let shape = d.sink.shape(options.per_series);
                Lane {
                    shape,
                    aggregator: aggregator(cluster.clone(), options.flush_interval),
                    quiet: matches!(shape, Shape::CloudWatch { .. }).then(Quiet::default),
                    live: None,
                }
            })
            .collect();
        // At rest the head's figures go in its record instead of destinations billed per series.
        let rest = lanes.iter().any(|l| l.quiet.is_some());
        let own = !matches!(options.per_series, Shape::CloudWatch { all_self_metrics: true, .. });
        let scheduler = (role.runs_head() && records.is_some()).then(|| {
            SchedulerSamples::new(
                node.clone(),
                &options.exclude_metrics,
                rest,
                !options.scheduler_records,
                own,
            )
        });
        Pipeline {
            collectors,
            lanes,
            node: node.clone(),
            jobs: role.runs_node().then(|| Jobs::new(options.findings.clone(), prices).resuming(resume_from)),
            node_samples,
            scheduler,
            node_copies: [(PARTITION, options.node_per_partition), (ACCOUNT, options.node_per_account)]
                .into_iter()
                .filter_map(|(dim, setting)| Copies::by(dim, setting))
                .chain(Copies::cluster(options.node_per_partition, options.node_per_account))
                .collect(),
            derive: role.runs_head().then(|| (Derive::default(), Trim::new(options.per_partition))),
            delivery: DeliveryFigures { node, metrics, records, missed: Arc::default() },
            per_user: options.population_per_user,
            idle_gpu_percent: options.findings.idle_gpu_percent,
            excluded: options.exclude_metrics.clone(),
            collections: 0,
        }
    }

    /// Reports collections skipped by whoever runs this pipeline, counted in `missed`.
    pub fn counting_missed(mut self, missed: Arc<AtomicU64>) -> Self {
        self.delivery.missed = missed;
        self
    }

    /// Each destination's place to show its aggregates after every collection (see
    /// [`crate::sinks::MetricDestination::live`]), in `sink`'s order.
    pub fn showing_live(mut self, live: Vec<Option<crate::sinks::prometheus::live::Live>>) -> Self {
        for (lane, live) in self.lanes.iter_mut().zip(live) {
            lane.live = live;
        }
        self
    }

    /// The final sample of an ending job (see [`crate::hook`]). The first collector that
    /// refuses (the node collector, which runs first, decides whose job it is and how often it
    /// may be asked) ends the request: no later collector is asked and no sample is kept, not
    /// even those of collectors asked before.
    pub fn final_sample(&mut self, job: &str, uid: u32) -> FinalSample {
        let mut batch = Batch::new(SystemTime::now());
        let mut total = 0;
        for c in &mut self.collectors {
            match c.final_sample(job, uid, &mut batch) {
                Some(FinalSample::Sampled(n)) => total += n,
                Some(refused) => return refused,
                None => {}
            }
        }
        self.add(batch);
        FinalSample::Sampled(total)
    }

    /// Through the transforms into the aggregator, less the excluded metrics.
    pub fn add(&mut self, mut batch: Batch) {
        // Before trim, which leaves out the state counts at zero that say so.
        let at_rest = self.scheduler.is_some() && crate::transforms::rest::at_rest(&batch);
        if let Some((derive, trim)) = &mut self.derive {
            derive.apply(&mut batch);
            trim.apply(&mut batch);
        }
        if let Some(s) = &mut self.scheduler {
            s.take(&batch, at_rest);
        }
        if let Some(n) = &mut self.node_samples {
            n.observe(&batch);
        }
        if let Some(jobs) = &mut self.jobs {
            let held = jobs.observe(&batch);
            if batch.all_jobs {
                let read = std::mem::take(&mut batch.jobs);
                let from = batch.samples.len();
                population::push(&read, &held, self.per_user, self.idle_gpu_percent, &mut batch);
                for c in &self.node_copies {
                    c.apply(&mut batch, from);
                }
                batch.jobs = read;
            }
        }
        self.feed_lanes(batch.samples, &batch.jobs, batch.time);
    }

    /// Each destination's shape of the samples and of the jobs' series (read at `time`), less
    /// the excluded metrics, into its aggregator.
    fn feed_lanes(&mut self, mut samples: Vec<Sample>, jobs: &[JobReading], time: SystemTime) {
        let excluded = &self.excluded;
        let keep = |m: &Metric| !excluded.iter().any(|e| e == m.name);
        samples.retain(|s| keep(s.metric));
        let last = self.lanes.len().saturating_sub(1);
        let resting = self.scheduler.as_ref();
        for (i, lane) in self.lanes.iter_mut().enumerate() {
            // The last destination takes the samples themselves; the others a copy.
            let mut mine = if i == last { std::mem::take(&mut samples) } else { samples.clone() };
            if lane.quiet.is_some()
                && let Some(s) = resting
            {
                mine.retain(|x| !s.rests(x));
            }
            let mut shaped = Vec::with_capacity(mine.len());
            lane.shape.apply(mine, &mut shaped);
            job_series::push(lane.shape, jobs, time, keep, &mut shaped);
            lane.aggregator.extend(shaped);
        }
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
        for lane in &self.lanes {
            if let Some(live) = &lane.live {
                live.collection(lane.aggregator.snapshot());
            }
        }
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
        if let Some(r) = self.scheduler.as_mut().and_then(|s| s.flush(now)) {
            records.push(r);
        }
        let mut trimmed = 0;
        if let Some(jobs) = &mut self.jobs {
            trimmed += std::mem::take(&mut jobs.trimmed);
        }
        if let Some(n) = &mut self.node_samples {
            trimmed += std::mem::take(&mut n.trimmed);
        }
        if let Some(s) = &mut self.scheduler {
            trimmed += std::mem::take(&mut s.trimmed);
        }
        let mut batch = Batch::new(now);
        let mut counted_to = None;
        if let Some(jobs) = &mut self.jobs {
            spend(jobs.take_spent(), &mut batch);
            counted_to = jobs.counted_to().filter(|_| !jobs.is_empty());
            for c in &self.node_copies {
                c.apply(&mut batch, 0);
            }
            // Jobs without a cost figure (no price, or no node size), counted where they are.
            if jobs.uncosted > 0 {
                let dims = Dims::new().with(NODE_NAME, self.node.as_str()).with(COLLECTOR, "cost");
                batch.push(&COLLECTOR_ERRORS, dims, jobs.uncosted as f64);
            }
        }
        let (delivered, records_delivered) = self.delivery.push(&mut batch, trimmed);
        if let Some(s) = &mut self.scheduler {
            s.take_flushed(&batch);
        }
        self.feed_lanes(batch.samples, &[], now);
        let collections = std::mem::take(&mut self.collections);
        let aggregates = self
            .lanes
            .iter_mut()
            .map(|l| {
                let mut a = l.aggregator.drain();
                if let Some(q) = &mut l.quiet {
                    q.apply(&mut a);
                }
                a
            })
            .collect();
        Flushed { aggregates, records, delivered, records_delivered, collections, counted_to }
    }
}

/// What the jobs cost and wasted since the last flush, per cluster, partition and account.
fn spend(spent: crate::transforms::jobs::Spent, out: &mut Batch) {
    let mut sums: std::collections::BTreeMap<Dims, (f64, f64)> = std::collections::BTreeMap::new();
    for ((account, partition), (usd, waste)) in spent {
        for scope in
            [Dims::new(), Dims::new().with(PARTITION, partition.as_str()), Dims::new().with(ACCOUNT, account)]
        {
            let e = sums.entry(scope).or_default();
            e.0 += usd;
            e.1 += waste;
        }
    }
    for (scope, (usd, waste)) in sums {
        out.push(&JOB_COST, scope.clone(), usd);
        out.push(&JOB_WASTE, scope, waste);
    }
}

#[cfg(test)]
#[path = "pipeline_tests.rs"]
mod tests;
