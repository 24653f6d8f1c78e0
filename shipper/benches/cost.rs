//! What the shipper costs in CloudWatch a month, at list prices (us-east-1), for three clusters:
//!
//! - C: the most common ParallelCluster cluster: one queue of dynamic nodes scaling to zero, on
//!   average 2 busy 8 hours a day, 200 jobs a day of 5 minutes (3 accounts);
//! - A: 64 nodes, 2,000 jobs a day of 30 minutes (2 partitions, 10 accounts);
//! - B: 1,000 nodes, 100,000 jobs a day of 5 minutes (8 partitions, 50 accounts).
//!
//! Each is run at reduced scale against LocalStack: one simulated hour of a few of its nodes
//! (8 of A's, 16 of B's, each with the jobs the scenario gives a node: arrivals evenly spaced,
//! one job on one node, the scenario's duration), every 30 s a collection of synthetic per-job
//! samples as the node collector emits them (cgroup v1: every per-job metric of the catalog but
//! the GPU ones), and every `flush_interval` (120 s) a flush, through the shipper's own `pipeline::Pipeline` (the
//! transforms, the aggregator, the self-metrics) on simulated time, and
//! `sinks::route::Route` (intake, spool, delivery) into the real CloudWatch and CloudWatch Logs sinks.
//! The head node is the real head collector running fake `sinfo`/`squeue`/`sdiag` that print
//! the scenario's cluster. Then the real Lambda (`bootstrap`, through a stand-in Runtime API)
//! runs once for the last simulated minute. Counted: distinct metrics (ListMetrics),
//! PutMetricData requests, PutLogEvents bytes (message + 26 per event), the Lambda's
//! GetMetricData series and ListMetrics calls. Extrapolated to the whole cluster and a month,
//! priced, and compared with the target; then again with `node.job_metrics = "metrics"` (per-job
//! custom metrics, the old default), the baseline. See docs/cost.md for the model. In that run
//! the same flushes are also encoded as the OTLP sink sends them (cost/otlp.rs): its bytes a
//! month, priced at `COST_OTLP_PER_GB`, and as the `emf` destination sends them (cost/emf.rs):
//! the same metrics, no PutMetricData requests, their log bytes.
//!
//! `scripts/cost.sh` (LocalStack, the Lambda build, this bench). Alone:
//! `eval "$(scripts/bench/localstack.sh start)"; COST_LAMBDA_BOOTSTRAP=target/debug/bootstrap
//! cargo bench -p slurm-cw-shipper --bench cost`. `COST_SCENARIOS=A` runs one scenario,
//! `COST_MODES=logs` skips the baseline, `COST_DETAIL=1` adds the metrics by name,
//! `COST_EXCLUDE=Name,...` and `COST_TOP_RPC_TYPES=n` try `exclude_metrics` and
//! `head.top_rpc_types`.

#[path = "cost/emf.rs"]
mod emf;
#[path = "../../tests/support/http.rs"]
mod http;
#[path = "cost/otlp.rs"]
mod otlp;
#[path = "cost/slurm.rs"]
mod slurm;
#[path = "cost/views.rs"]
mod views;

use slurm::{FakeSdiag, fake_slurm};

use slurm_cw_catalog::dims::{ACCOUNT, COLLECTOR, JOB_ID, NODE_NAME, USER};
use slurm_cw_catalog::metrics::*;
use slurm_cw_formats::slurm::node::NodeSize;
use slurm_cw_shipper::cost::{Basis, Price, Prices};
use slurm_cw_shipper::datum::format_timestamp;
use slurm_cw_shipper::pipeline::Delivered;
use slurm_cw_shipper::pipeline::{Parts, Pipeline};
use slurm_cw_shipper::role::Role;
use slurm_cw_shipper::sample::{Batch, Dims, JobFigures, JobInfo, JobReading};
use slurm_cw_shipper::settings::Settings;
use slurm_cw_shipper::sinks::cloudwatch::{self as cloudwatch, CloudWatchSink, retry::Backoff};
use slurm_cw_shipper::sinks::delivery::{Destination, Step};
use slurm_cw_shipper::sinks::logs::LogsSink;
use slurm_cw_shipper::sinks::logs::RecordSink;
use slurm_cw_shipper::sinks::route::Route;
use slurm_cw_shipper::sinks::{MetricSink, SinkKind};
use slurm_cw_shipper::sources::Collector;
use slurm_cw_shipper::sources::head::HeadCollector;
use slurm_cw_shipper::sources::head::command::SlurmCommands;
use slurm_cw_shipper::sources::shipper::ShipperCollector;
use slurm_cw_shipper::transforms::shape::JobMetrics;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::BufReader;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

// List prices, us-east-1 (docs/cost.md says where they come from).
const METRIC_TIERS: [(f64, f64); 4] =
    [(10_000.0, 0.30), (240_000.0, 0.10), (750_000.0, 0.05), (f64::INFINITY, 0.02)];
const PER_1000_REQUESTS: f64 = 0.01;
const PER_1000_SERIES_READ: f64 = 0.01;
const LOG_INGEST_PER_GB: f64 = 0.50;
const LOG_STORE_PER_GB_MONTH: f64 = 0.03;
const ALARM_METRIC_MONTH: f64 = 0.10;
const DASHBOARD_MONTH: f64 = 3.00;
/// Hours in a billing month, as AWS prorates metrics.
const HOURS: f64 = 730.0;
/// The job log group's retention assumed (days).
const RETENTION_DAYS: f64 = 30.0;
/// Flushes (and Lambda runs) a minute.
const MINUTES: f64 = HOURS * 60.0;
/// The Terraform module's `every_minutes` (default): a Lambda run derives that many minutes
/// with one read of each series.
const LAMBDA_EVERY_MINUTES: u32 = 5;

const COLLECT: u64 = 30;
const SIM_SECONDS: u64 = 3600;

#[derive(Clone, Copy)]
struct Scenario {
    name: &'static str,
    nodes: usize,
    jobs_per_day: f64,
    job_minutes: u64,
    partitions: usize,
    accounts: usize,
    /// Nodes simulated.
    sim_nodes: usize,
    cores: u32,
    memory_gib: u64,
    /// ParallelCluster compute resource in the node names.
    resource: &'static str,
    first_job: u64,
    target: f64,
    /// Hours a day the nodes run (dynamic nodes scale to zero otherwise); the head runs always.
    busy_hours: f64,
}

const SCENARIOS: [Scenario; 3] = [
    Scenario {
        name: "C",
        nodes: 2,
        jobs_per_day: 200.0,
        job_minutes: 5,
        partitions: 1,
        accounts: 3,
        sim_nodes: 2,
        cores: 16,
        memory_gib: 64,
        resource: "c6i32xlarge",
        first_job: 12_000,
        target: 10.0,
        busy_hours: 8.0,
    },
    Scenario {
        name: "A",
        nodes: 64,
        jobs_per_day: 2_000.0,
        job_minutes: 30,
        partitions: 2,
        accounts: 10,
        sim_nodes: 8,
        cores: 16,
        memory_gib: 64,
        resource: "c6i32xlarge",
        first_job: 481_000,
        target: 50.0,
        busy_hours: 24.0,
    },
    Scenario {
        name: "B",
        nodes: 1_000,
        jobs_per_day: 100_000.0,
        job_minutes: 5,
        partitions: 8,
        accounts: 50,
        sim_nodes: 16,
        cores: 4,
        memory_gib: 16,
        resource: "hpc7a96xlarge",
        first_job: 3_620_000,
        target: 250.0,
        busy_hours: 24.0,
    },
];

fn at(secs: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(secs)
}

fn epoch(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

/// A number in [0, 1) that depends only on its arguments (splitmix64): figures that vary like
/// real ones, the same every run.
fn noise(a: u64, b: u64, c: u64) -> f64 {
    let mut z = a.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ b.rotate_left(21) ^ c.rotate_left(42);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    (z ^ (z >> 31)) as f64 / u64::MAX as f64
}

fn partition_name(p: usize) -> String {
    format!("queue{}", p + 1)
}

fn node_name(s: &Scenario, i: usize) -> String {
    format!("{}-dy-{}-{}", partition_name(i % s.partitions), s.resource, i / s.partitions + 1)
}

#[derive(Debug, Clone)]
struct Job {
    idx: u64,
    info: JobInfo,
    start: u64,
    end: u64,
    cores: u32,
    memory_limit: f64,
    efficiency: f64,
}

/// Jobs of the simulated nodes: the scenario's arrival rate for that share of the cluster,
/// evenly spaced, round robin over the nodes; those started up to one duration before `t0`
/// are running when the hour begins.
fn jobs_for(s: &Scenario, t0: u64, nodes: &[String]) -> Vec<Job> {
    // The day's jobs arrive while the nodes run.
    let per_second = s.jobs_per_day * s.sim_nodes as f64 / s.nodes as f64 / (s.busy_hours * 3600.0);
    let gap = 1.0 / per_second;
    let duration = s.job_minutes * 60;
    let first = t0 - duration;
    let users = s.accounts * 3;
    let mut out = Vec::new();
    for k in 0.. {
        let start = first + (k as f64 * gap) as u64;
        if start >= t0 + SIM_SECONDS {
            break;
        }
        let k = k as u64;
        let node = (k as usize) % nodes.len();
        out.push(Job {
            idx: k,
            info: JobInfo {
                id: (s.first_job + k).to_string(),
                names: Default::default(),
                node: nodes[node].clone(),
                user: format!("user{:03}", k as usize % users),
                account: format!("proj-{:02}", k as usize % s.accounts),
                partition: partition_name(node % s.partitions),
            },
            start,
            end: start + duration,
            cores: s.cores,
            memory_limit: (s.memory_gib << 30) as f64,
            efficiency: 0.55 + 0.4 * noise(k, 1, 0),
        });
    }
    out
}

/// Bytes, in whole pages as cgroup files give them.
fn pages(v: f64) -> f64 {
    (v / 4096.0).round() * 4096.0
}

/// One reading of a job, as the node collector makes it on cgroup v1: memory, CPU and I/O
/// every reading, rates from the second, processes when `with_procs`. The pipeline makes its
/// series.
fn emit_job(out: &mut Batch, job: &Job, t: u64, previous: Option<u64>, with_procs: bool) {
    let mut figures: Vec<(&'static slurm_cw_catalog::Metric, f64)> = Vec::new();
    let (mut per_core_busy, mut threads, mut by_exe) = (None, Vec::new(), Vec::new());
    let n = |salt: u64| noise(job.idx, t, salt);
    let limit = job.memory_limit;
    let usage = pages(limit * (0.30 + 0.25 * n(1)));
    let cache = pages(usage * (0.10 + 0.15 * n(2)));
    let rss = pages(usage - cache);
    let cores = f64::from(job.cores);
    let busy = (job.efficiency + 0.05 * (n(3) - 0.5)).clamp(0.0, 1.0);
    let elapsed = (t - job.start) as f64;
    let mut push = |m: &'static slurm_cw_catalog::Metric, v: f64| figures.push((m, v));
    for (m, v) in [
        (&MEMORY_USAGE, usage),
        (&MEMORY_MAX, pages(limit * (0.58 + 0.02 * noise(job.idx, 0, 4)))),
        (&MEMORY_LIMIT, limit),
        (&MEMORY_CACHE, cache),
        (&MEMORY_RSS, rss),
        (&MEMORY_RSS_HUGE, (rss * 0.2 / 2_097_152.0).round() * 2_097_152.0),
        (&MEMORY_MAPPED_FILE, pages(3.0e7 + 2.0e7 * n(5))),
        (&MEMORY_ACTIVE_FILE, pages(cache * 0.4)),
        (&MEMORY_INACTIVE_FILE, pages(cache * 0.6)),
        (&MEMORY_UNEVICTABLE, 0.0),
        (&MEMORY_SWAP, 0.0),
        (&OOM_KILLS, 0.0),
        (&CPUS_ALLOCATED, cores),
        (&CPU_TIME, (elapsed * cores * job.efficiency * 1e3).round() / 1e3),
    ] {
        push(m, v);
    }
    if previous.is_some() {
        push(&CPU_USAGE, cores * busy);
        push(&CPU_UTILIZATION, busy * 100.0);
        push(&CPU_THROTTLED_TIME, 0.0);
        push(&READ_BYTES, 2.0e5 + 4.0e7 * n(6));
        push(&WRITE_BYTES, 1.0e5 + 2.0e7 * n(7));
        push(&READ_OPS, 5.0 + 400.0 * n(8));
        push(&WRITE_OPS, 2.0 + 200.0 * n(9));
        let per_core: Vec<f64> = (0..job.cores)
            .map(|c| (busy * 100.0 + 8.0 * (noise(job.idx, t, 100 + u64::from(c)) - 0.5)).clamp(0.0, 100.0))
            .collect();
        per_core_busy = Some(per_core);
    }
    if with_procs {
        figures.extend([(&PROCESS_COUNT, cores + 3.0), (&OPEN_FILES, 40.0 + 6.0 * cores)]);
        threads = vec![("running", (cores * busy).round()), ("sleeping", 2.0 * cores + 5.0)];
        if previous.is_some() {
            by_exe = vec![
                ("lmp_mpi".to_owned(), cores * busy * 0.97),
                ("python3".to_owned(), cores * busy * 0.03),
            ];
        }
    }
    let job_figures =
        JobFigures { per_core: per_core_busy, threads, by_exe, ..JobFigures::from_figures(figures) };
    out.jobs.push(JobReading {
        info: job.info.clone(),
        job: job_figures,
        gpus: None,
        held: Default::default(),
    });
}

/// What one simulated host sent.
#[derive(Debug, Default, Clone)]
struct Sent {
    metric_requests: u64,
    datums: u64,
    log_requests: u64,
    log_events: u64,
    log_bytes: u64,
    /// Records by Type.
    records: BTreeMap<String, u64>,
}

/// One shipper on simulated time: the real `Pipeline` (transforms, aggregator, self-metrics)
/// over its collectors, with the node collector's readings of the scenario's jobs fed in, into
/// the real routes.
struct Host {
    node: String,
    pipeline: Pipeline,
    runs_node: bool,
    metrics: Route<MetricSink>,
    records: Option<Route<RecordSink>>,
    sent: Sent,
    /// Per job on this node: (last reading, collections since the processes were read).
    seen: HashMap<String, (u64, u32)>,
    process_every: u32,
    cluster: String,
    namespace: String,
    otlp: otlp::OtlpBytes,
    emf: emf::EmfBytes,
    /// The head's fake sdiag, rewritten before each collection.
    sdiag: Option<FakeSdiag>,
}

impl Host {
    /// One reading of `job` by the node collector at `t` (a collection, or its final sample).
    fn read_job(&mut self, out: &mut Batch, job: &Job, t: u64, final_sample: bool) {
        let before = self.seen.get(&job.info.id).copied();
        let with_procs = final_sample || before.is_none_or(|(_, since)| since + 1 >= self.process_every);
        emit_job(out, job, t, before.map(|(p, _)| p), with_procs);
        let since = if with_procs { 0 } else { before.map_or(0, |(_, s)| s + 1) };
        self.seen.insert(job.info.id.clone(), (t, since));
    }

    /// A collection at simulated time `t`: this node's jobs read as the node collector would
    /// (None on the head), then the pipeline's own collectors.
    async fn collect(&mut self, t: u64, jobs: Option<&[&Job]>) {
        let host = Dims::new().with(NODE_NAME, self.node.as_str());
        if let Some(jobs) = jobs {
            // TaskEpilog: the final sample of each job that ended since the last collection.
            for job in
                jobs.iter().filter(|j| j.end > t.saturating_sub(COLLECT) && j.end <= t && j.start < j.end)
            {
                let mut last = Batch::new(at(job.end));
                self.read_job(&mut last, job, job.end, true);
                self.pipeline.add(last);
            }
            let mut batch = Batch::new(at(t));
            let started = Instant::now();
            let running: Vec<&Job> = jobs.iter().copied().filter(|j| j.start <= t && t < j.end).collect();
            for job in &running {
                self.read_job(&mut batch, job, t, false);
            }
            self.seen.retain(|id, _| running.iter().any(|j| &j.info.id == id));
            batch.all_jobs = true;
            batch.push(&JOBS_ON_NODE, host.clone(), running.len() as f64);
            batch.push(
                &SHIPPER_COLLECTION_DURATION,
                host.clone().with(COLLECTOR, "node"),
                started.elapsed().as_secs_f64() * 1e3,
            );
            batch.push(&COLLECTOR_ERRORS, host.clone().with(COLLECTOR, "cgroup"), 0.0);
            self.pipeline.add(batch);
        }
        if let Some(f) = &self.sdiag {
            f.write(t);
        }
        self.pipeline.collect_at(at(t)).await;
    }

    /// `Pipeline::flush` at simulated time `t`, then delivery of what it made.
    async fn flush(&mut self, t: u64) {
        let flushed = self.pipeline.flush_at(at(t));
        // What the last delivery did, as the self-metrics saw it: this bench's counts.
        // CloudWatch's route is the first destination; the OTLP lane (its own shape: per-job
        // series) is only encoded, for its bytes.
        self.sent.metric_requests += flushed.delivered.first().map_or(0, |d| d.requests);
        if let Some(r) = &flushed.records_delivered {
            self.sent.log_requests += r.requests;
            self.sent.log_bytes += r.bytes;
            self.sent.log_events += r.sent;
        }
        let mut lanes = flushed.aggregates.into_iter();
        let (mut cloudwatch, open) = (lanes.next().unwrap_or_default(), lanes.next().unwrap_or_default());
        // CloudWatch as configured alone (the default): without the OTLP destination's own
        // delivery figures, four more metrics when both are on.
        cloudwatch.retain(|d| d.dimension(slurm_cw_catalog::dims::SINK).is_none());
        self.sent.datums += cloudwatch.len() as u64;
        self.otlp.flush(&self.cluster, &self.node, open);
        self.emf.flush(&self.namespace, &cloudwatch);
        let held = self.metrics.intake.take(cloudwatch);
        self.metrics.delivery.hold(held);
        deliver(&mut self.metrics, "PutMetricData").await;
        if let Some(r) = &mut self.records {
            for rec in &flushed.records {
                let kind = serde_json::from_str::<serde_json::Value>(&rec.message)
                    .ok()
                    .and_then(|v| v["Type"].as_str().map(str::to_owned))
                    .unwrap_or_default();
                *self.sent.records.entry(kind).or_default() += 1;
            }
            let held = r.intake.take(flushed.records);
            r.delivery.hold(held);
            deliver(r, "PutLogEvents").await;
        }
    }

    /// The head through `hours` simulated hours from `from` of the cluster the fake commands
    /// print, the distinct series its CloudWatch lane had in each hour. Counted, not delivered:
    /// these hours lie outside the hour the Lambda reads (the head's warm-up before it, the
    /// idle hours after), and only their number of series is billed differently.
    async fn undelivered_hours(
        &mut self,
        what: &str,
        from: u64,
        hours: u64,
        flush: u64,
    ) -> Vec<BTreeSet<String>> {
        let mut out = Vec::new();
        for hour in 0..hours {
            let mut series = BTreeSet::new();
            for step in 0..SIM_SECONDS / COLLECT {
                let t = from + hour * SIM_SECONDS + step * COLLECT;
                if let Some(f) = &self.sdiag {
                    f.write(t);
                }
                self.pipeline.collect_at(at(t)).await;
                if (step + 1) % (flush / COLLECT) == 0 {
                    let flushed = self.pipeline.flush_at(at(t + COLLECT - 1));
                    let cloudwatch = flushed.aggregates.into_iter().next().unwrap_or_default();
                    for a in cloudwatch.iter().filter(|a| a.dimension(slurm_cw_catalog::dims::SINK).is_none())
                    {
                        series.insert(format!("{} {:?}", a.metric.name, a.dims));
                    }
                }
            }
            if std::env::var_os("COST_DETAIL").is_some() && !self.runs_node {
                let names: Vec<&str> = series.iter().map(|s| s.as_str()).collect();
                eprintln!("  {what} hour {}: {} series: {}", hour + 1, names.len(), names.join("; "));
            }
            out.push(series);
        }
        out
    }

    /// What the last delivery did (after the last flush).
    fn finish(&mut self) {
        self.sent.metric_requests += self.metrics.stats.take().requests;
        if let Some(r) = &self.records {
            let r = r.stats.take();
            self.sent.log_requests += r.requests;
            self.sent.log_bytes += r.bytes;
            self.sent.log_events += r.sent;
        }
    }
}

/// Sends what waits (all of it: LocalStack is up).
async fn deliver<D: Destination>(route: &mut Route<D>, what: &str) {
    let step = route.delivery.drain().await;
    assert!(matches!(step, Step::Sent | Step::Empty), "{what} to LocalStack failed: {step:?}");
}

impl Sent {
    fn add(&mut self, o: &Sent) {
        self.metric_requests += o.metric_requests;
        self.datums += o.datums;
        self.log_requests += o.log_requests;
        self.log_events += o.log_events;
        self.log_bytes += o.log_bytes;
        for (k, n) in &o.records {
            *self.records.entry(k.clone()).or_default() += n;
        }
    }
}

/// The distinct metrics of a namespace (ListMetrics, every page), by what they scale with.
#[derive(Debug, Default)]
struct Listing {
    total: usize,
    pages: u32,
    /// cluster, partition, account, user, node, job
    by_scope: BTreeMap<&'static str, usize>,
    /// Of those with neither JobId nor NodeName, who sends them: head, node (the population
    /// figures), shipper (about itself), lambda.
    by_role: BTreeMap<&'static str, usize>,
    partitions: BTreeSet<String>,
    accounts: BTreeSet<String>,
    jobs: BTreeSet<String>,
    by_name: BTreeMap<String, usize>,
}

async fn list_metrics(cw: &aws_sdk_cloudwatch::Client, namespace: &str) -> Listing {
    use slurm_cw_catalog::Role;
    let mut l = Listing::default();
    let mut token = None;
    loop {
        let resp =
            cw.list_metrics().namespace(namespace).set_next_token(token).send().await.expect("ListMetrics");
        l.pages += 1;
        for m in resp.metrics() {
            l.total += 1;
            *l.by_name.entry(m.metric_name().unwrap_or_default().to_owned()).or_default() += 1;
            let dims: BTreeMap<&str, &str> =
                m.dimensions().iter().filter_map(|d| Some((d.name()?, d.value()?))).collect();
            let scope = if let Some(j) = dims.get(JOB_ID) {
                l.jobs.insert((*j).to_owned());
                "job"
            } else if dims.contains_key(NODE_NAME) {
                "node"
            } else if let Some(p) = dims.get("Partition") {
                l.partitions.insert((*p).to_owned());
                "partition"
            } else if let Some(a) = dims.get(ACCOUNT) {
                l.accounts.insert((*a).to_owned());
                "account"
            } else if dims.contains_key(USER) {
                "user"
            } else {
                "cluster"
            };
            *l.by_scope.entry(scope).or_default() += 1;
            if scope != "job" && scope != "node" {
                let name = m.metric_name().unwrap_or_default();
                let roles =
                    slurm_cw_catalog::ALL.iter().find(|c| c.name == name).map_or(&[][..], |c| c.roles);
                let role = if roles.contains(&Role::Lambda) {
                    "lambda"
                } else if roles.contains(&Role::Shipper) || name == COLLECTOR_ERRORS.name {
                    "shipper"
                } else if roles.contains(&Role::Head) {
                    "head"
                } else {
                    "node"
                };
                *l.by_role.entry(role).or_default() += 1;
            }
        }
        token = resp.next_token().map(str::to_owned);
        if token.is_none() {
            break;
        }
    }
    l
}

/// What one Lambda run reported (its Summary).
#[derive(Debug, Default, Clone)]
struct LambdaRun {
    series_read: u64,
    get_metric_data_calls: u64,
    list_metrics_calls: u64,
    datums_published: u64,
    alarms: u64,
    seconds: f64,
    failed: String,
}

/// Runs the real `bootstrap` once, as Lambda would, for the minute `minute` (epoch seconds).
fn run_lambda(bootstrap: &Path, url: &str, namespace: &str, cluster: &str, minute: u64) -> LambdaRun {
    // The handler derives the minute three minutes before the event's time.
    let event = serde_json::json!({
        "version": "0", "id": "0d4e4c5c-0000-0000-0000-00000000c057", "detail-type": "Scheduled Event",
        "source": "aws.events", "account": "000000000000", "time": format_timestamp(at(minute + 180 + 7)),
        "region": "us-east-1", "resources": ["arn:aws:events:us-east-1:000000000000:rule/slurm-cw"], "detail": {}
    })
    .to_string();
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
    let addr = listener.local_addr().expect("local address");
    let (tx, posted) = mpsc::channel::<(String, String)>();
    std::thread::spawn(move || runtime_api(listener, event, tx));
    let config = serde_json::json!({
        "namespace": namespace,
        "cluster_name": cluster,
        "every_minutes": LAMBDA_EVERY_MINUTES,
        "rules": serde_json::from_str::<serde_json::Value>(&slurm_cw_catalog::alarms::default_rules_json()).expect("the catalog's rules are JSON"),
    })
    .to_string();
    let started = Instant::now();
    let mut child = std::process::Command::new(bootstrap)
        .env("AWS_LAMBDA_RUNTIME_API", addr.to_string())
        .env("AWS_LAMBDA_FUNCTION_NAME", "slurm-cw")
        .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "256")
        .env("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
        .env("AWS_LAMBDA_LOG_STREAM_NAME", "cost")
        .env("AWS_LAMBDA_LOG_GROUP_NAME", "/aws/lambda/slurm-cw")
        .env("AWS_ENDPOINT_URL", url)
        .env("AWS_ACCESS_KEY_ID", "test")
        .env("AWS_SECRET_ACCESS_KEY", "test")
        .env("AWS_REGION", "us-east-1")
        .env("RUST_LOG", "error")
        .env("SLURM_CW_LAMBDA_CONFIG", config)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the Lambda's bootstrap");
    let answer = posted.recv_timeout(Duration::from_secs(300));
    let seconds = started.elapsed().as_secs_f64();
    let _ = child.kill();
    let _ = child.wait();
    let (path, body) = answer.expect("the Lambda answered within 300 s");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
    let n = |k: &str| v[k].as_u64().unwrap_or(0);
    let alarms = v["alarms"]["created_or_updated"].as_array().map_or(0, Vec::len) as u64
        + v["alarms"]["unchanged"].as_u64().unwrap_or(0);
    LambdaRun {
        series_read: n("metrics_read"),
        get_metric_data_calls: n("get_metric_data_calls"),
        list_metrics_calls: n("list_metrics_calls"),
        datums_published: n("datums_published"),
        alarms,
        seconds,
        failed: if path.ends_with("/response") { v["failed_stages"].to_string() } else { body },
    }
}

/// A stand-in Lambda Runtime API: hands out `event` once, passes back what the function posts.
fn runtime_api(listener: TcpListener, event: String, tx: mpsc::Sender<(String, String)>) {
    let mut handed_out = false;
    for stream in listener.incoming().flatten() {
        let Ok(mut w) = stream.try_clone() else { continue };
        let mut r = BufReader::new(stream);
        while let Some(m) = http::read_message(&mut r) {
            let (method, path) = m.target();
            if method == "GET" && path.ends_with("/invocation/next") {
                if handed_out {
                    // No second event: the function waits here until it is stopped.
                    std::thread::sleep(Duration::from_secs(600));
                    return;
                }
                handed_out = true;
                let deadline = epoch(SystemTime::now()) * 1000 + 300_000;
                let headers = [
                    ("lambda-runtime-aws-request-id", "cost-1".to_owned()),
                    ("lambda-runtime-deadline-ms", deadline.to_string()),
                    (
                        "lambda-runtime-invoked-function-arn",
                        "arn:aws:lambda:us-east-1:000000000000:function:slurm-cw".to_owned(),
                    ),
                    ("lambda-runtime-trace-id", "Root=1-00000000-000000000000000000000000".to_owned()),
                    ("content-type", "application/json".to_owned()),
                ];
                http::respond(&mut w, "200 OK", &headers, event.as_bytes());
            } else {
                let _ = tx.send((path.to_owned(), String::from_utf8_lossy(&m.body).into_owned()));
                http::respond(
                    &mut w,
                    "202 Accepted",
                    &[("content-type", "application/json".to_owned())],
                    b"{}",
                );
            }
        }
    }
}

/// One scenario in one mode, measured.
struct Run {
    scenario: Scenario,
    mode: JobMetrics,
    nodes: Sent,
    head: Sent,
    /// The head's distinct series in its first and second idle hour (scenarios whose nodes
    /// scale to zero; empty else).
    idle_series: Vec<usize>,
    /// Metric names the hosts sent in their warm-up hour (listed by their daily zero).
    listed_earlier: BTreeSet<String>,
    listing: Listing,
    /// The fields of the head's `scheduler_sample` records, as read back from CloudWatch Logs.
    record_fields: BTreeSet<String>,
    lambda: Option<LambdaRun>,
    seconds: f64,
    otlp_nodes: otlp::OtlpBytes,
    otlp_head: otlp::OtlpBytes,
    emf_nodes: emf::EmfBytes,
    emf_head: emf::EmfBytes,
}

async fn simulate(
    url: &str,
    sdk: &aws_config::SdkConfig,
    s: Scenario,
    mode: JobMetrics,
    bootstrap: Option<&Path>,
) -> Run {
    let started = Instant::now();
    let tag = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() % 100_000_000).unwrap_or(0);
    let mode_name = if mode == JobMetrics::Metrics { "metrics" } else { "logs" };
    let namespace = format!("CostBench/{}{mode_name}{tag}", s.name);
    let cluster = format!("cost{}{mode_name}{tag}", s.name.to_lowercase());
    let work = tempfile::Builder::new()
        .prefix("slurm-cw-cost")
        .tempdir_in(if Path::new("/dev/shm").is_dir() { "/dev/shm" } else { "/tmp" })
        .expect("a temporary directory");

    let mut config = Settings {
        namespace: Some(namespace.clone()),
        cluster_name: Some(cluster.clone()),
        ..Settings::default()
    };
    config.node.job_metrics = mode;
    // For trying a trimmed configuration (docs/cost.md): metric names never shipped, and fewer
    // RPC types by name.
    if let Some(n) = std::env::var("COST_TOP_RPC_TYPES").ok().and_then(|v| v.parse().ok()) {
        config.head.top_rpc_types = n;
    }
    if let Ok(names) = std::env::var("COST_EXCLUDE") {
        config.exclude_metrics =
            names.split(',').map(|n| n.trim().to_owned()).filter(|n| !n.is_empty()).collect();
    }
    let group = config.logs.group_for(&cluster);
    let logs_client = aws_sdk_cloudwatchlogs::Client::from_conf(
        aws_sdk_cloudwatchlogs::config::Builder::from(sdk)
            .retry_config(aws_sdk_cloudwatchlogs::config::retry::RetryConfig::disabled())
            .build(),
    );
    // The Terraform module creates it; the Lambda's findings stage reads it in either mode.
    logs_client.create_log_group().log_group_name(&group).send().await.expect("CreateLogGroup");
    let cw = aws_sdk_cloudwatch::Client::from_conf(
        aws_sdk_cloudwatch::config::Builder::from(sdk)
            .retry_config(aws_sdk_cloudwatch::config::retry::RetryConfig::disabled())
            .build(),
    );

    let now = epoch(SystemTime::now());
    let t_end = now - now % 60 - 60;
    let t0 = t_end - SIM_SECONDS;
    let names: Vec<String> = (0..s.sim_nodes).map(|i| node_name(&s, i)).collect();
    let all_jobs = jobs_for(&s, t0, &names);
    let bin = work.path().join("slurm");
    std::fs::create_dir_all(&bin).expect("mkdir");
    fake_slurm(&s, &bin, false);

    let make = |node: &str, collectors: Vec<Box<dyn Collector>>, runs_node: bool| {
        let mut c = config.clone();
        c.spool.dir = work.path().join("spool").join(node);
        let metric_sink: MetricSink =
            Box::new(CloudWatchSink::from_client(cw.clone(), cloudwatch_settings(&c, &namespace)));
        let metrics = Route::open(&c.spool, &c.delivery, &namespace, Some(c.spool.dir.clone()), metric_sink);
        let role = if runs_node { Role::Node } else { Role::Head };
        let records = c.writes_records(role).then(|| {
            let settings = slurm_cw_shipper::sinks::logs::settings(&c.cloudwatch, &c.logs, &group, node);
            let sink = RecordSink::Logs(LogsSink::from_client(logs_client.clone(), settings));
            Route::open(&c.spool, &c.delivery, &group, Some(c.spool.dir.join("logs")), sink)
        });
        // Two destinations, as `sink = ["cloudwatch", "otlp"]` makes them: CloudWatch's sent
        // for real, the OTLP one's datums (its own shape) only encoded (cost/otlp.rs).
        let parts = Parts {
            cluster: cluster.clone(),
            node: node.to_owned(),
            metrics: vec![
                Delivered {
                    sink: SinkKind::default(),
                    stats: metrics.stats.clone(),
                    spool: metrics.spool.clone(),
                },
                Delivered {
                    sink: SinkKind::named("otlp").expect("registered"),
                    stats: Default::default(),
                    spool: None,
                },
            ],
            records: records.as_ref().map(|r| r.stats.clone()),
            // Job costs on, as by default, at a configured price (c6i.16xlarge or c7i.48xlarge
            // On-Demand in us-east-1): the JobCost and JobWaste metrics count here too.
            prices: runs_node.then(|| {
                let cpus = if s.cores >= 16 { 64.0 } else { 192.0 };
                let price = Price { hourly: cpus * 0.0425, basis: Basis::Configured };
                Prices::fixed(
                    price,
                    &[(node, NodeSize { cpus, memory_bytes: cpus * 8.0 * (1u64 << 30) as f64, gpus: 0.0 })],
                )
            }),
            resume_from: None,
        };
        Host {
            node: node.to_owned(),
            pipeline: Pipeline::new(&c.pipeline(), role, collectors, parts),
            runs_node,
            metrics,
            records,
            sent: Sent::default(),
            seen: HashMap::new(),
            process_every: c.node.process_every.max(1),
            cluster: cluster.clone(),
            namespace: namespace.clone(),
            otlp: otlp::OtlpBytes::default(),
            emf: emf::EmfBytes::default(),
            sdiag: None,
        }
    };
    let mut hosts: Vec<(Host, Option<Vec<Job>>)> = Vec::new();
    for name in &names {
        let mine: Vec<Job> = all_jobs.iter().filter(|j| &j.info.node == name).cloned().collect();
        hosts.push((make(name, vec![Box::new(ShipperCollector::new(name.clone()))], true), Some(mine)));
    }
    let head_name = "head-node".to_owned();
    let head: Vec<Box<dyn Collector>> = vec![
        Box::new(HeadCollector::new(
            SlurmCommands::new(Some(bin.clone()), config.slurm.command_timeout),
            config.head.clone(),
        )),
        Box::new(ShipperCollector::new(head_name.clone())),
    ];
    let mut head = make(&head_name, head, false);
    head.sdiag = Some(FakeSdiag { dir: bin.clone(), scenario: s, t0, idle_from: None });
    hosts.push((head, None));

    // Every host on its own task, as every node runs its own shipper.
    let flush = config.flush_interval.as_secs().max(COLLECT);
    let local = tokio::task::LocalSet::new();
    // Where the nodes scale to zero, the cluster is idle the rest of the day.
    let idle_after = (s.busy_hours < 24.0).then(|| bin.clone());
    let tasks: Vec<_> = hosts
        .into_iter()
        .map(|(mut host, jobs)| {
            let idle_after = idle_after.clone().filter(|_| !host.runs_node);
            local.spawn_local(async move {
                // The head runs all day, and so do the nodes of a cluster that never scales
                // down: an hour before the busy one (the head's busy too, as the hour before most
                // of a day's busy hours is; a node's without jobs), so that the hour measured is
                // not the daemon's first (the zeros a daemon sends once a day are sent: on a
                // cluster that rests, in the first busy hour of the day, one of C's eight). The
                // nodes of a cluster that scales to zero start each day: their first hour is the
                // one measured.
                let mut warm = Vec::new();
                if !host.runs_node || s.busy_hours >= 24.0 {
                    warm = host.undelivered_hours("warm-up", t0 - SIM_SECONDS, 1, flush).await;
                }
                let refs: Option<Vec<&Job>> = jobs.as_ref().map(|j| j.iter().collect());
                for step in 0..SIM_SECONDS / COLLECT {
                    let t = t0 + step * COLLECT;
                    host.collect(t, refs.as_deref()).await;
                    if (step + 1) % (flush / COLLECT) == 0 {
                        host.flush(t + COLLECT - 1).await;
                    }
                }
                host.finish();
                // The head's series in the first two idle hours after the busy one.
                let idle = match idle_after {
                    Some(bin) => {
                        fake_slurm(&s, &bin, true);
                        if let Some(f) = &mut host.sdiag {
                            f.idle_from = Some(t0 + SIM_SECONDS);
                        }
                        host.undelivered_hours("idle", t0 + SIM_SECONDS, 2, flush).await
                    }
                    None => Vec::new(),
                };
                let idle = idle.iter().map(BTreeSet::len).collect::<Vec<_>>();
                // What the head sent while warming up: listed in CloudWatch as well (a series at
                // zero goes once a day), whether or not it had data in the hour measured.
                let warm: BTreeSet<String> =
                    warm.iter().flatten().filter_map(|k| k.split(' ').next()).map(str::to_owned).collect();
                (host.runs_node, host.sent, host.otlp, host.emf, idle, warm)
            })
        })
        .collect();
    let results = local
        .run_until(async {
            let mut out = Vec::new();
            for t in tasks {
                out.push(t.await.expect("a simulated host"));
            }
            out
        })
        .await;
    let (mut nodes, mut head_sent) = (Sent::default(), Sent::default());
    let (mut otlp_nodes, mut otlp_head) = (otlp::OtlpBytes::default(), otlp::OtlpBytes::default());
    let (mut emf_nodes, mut emf_head) = (emf::EmfBytes::default(), emf::EmfBytes::default());
    let mut idle_series = Vec::new();
    let mut listed_earlier = BTreeSet::new();
    for (is_node, sent, otlp, emf, idle, warm) in &results {
        listed_earlier.extend(warm.iter().cloned());
        if *is_node {
            nodes.add(sent);
            otlp_nodes.add(otlp);
            emf_nodes.add(emf);
        } else {
            head_sent.add(sent);
            idle_series.clone_from(idle);
            otlp_head.add(otlp);
            emf_head.add(emf);
        }
    }
    let lambda = bootstrap.map(|b| {
        let (b, url, ns, cl) = (b.to_owned(), url.to_owned(), namespace.clone(), cluster.clone());
        // Blocking: it waits on a child process and a channel.
        std::thread::spawn(move || run_lambda(&b, &url, &ns, &cl, t_end - 60)).join().expect("the Lambda run")
    });
    let listing = list_metrics(&cw, &namespace).await;
    let record_fields = views::record_fields(&logs_client, &group).await;
    Run {
        scenario: s,
        mode,
        nodes,
        head: head_sent,
        idle_series,
        listed_earlier,
        listing,
        record_fields,
        lambda,
        seconds: started.elapsed().as_secs_f64(),
        otlp_nodes,
        otlp_head,
        emf_nodes,
        emf_head,
    }
}

fn cloudwatch_settings(c: &Settings, namespace: &str) -> cloudwatch::Settings {
    let mut s = cloudwatch::settings(&c.cloudwatch, namespace);
    // LocalStack answers slowly under load; the daemon's 10 s would only add retries here.
    s.attempt_timeout = Duration::from_secs(60);
    s.backoff = Backoff {
        base: Duration::from_millis(100),
        cap: Duration::from_secs(2),
        max_retries: s.backoff.max_retries,
    };
    s
}

/// Dollars a month for `metric_months` custom metrics, by AWS's volume tiers.
fn metric_dollars(metric_months: f64) -> f64 {
    let (mut left, mut usd) = (metric_months, 0.0);
    for (size, price) in METRIC_TIERS {
        let n = left.min(size);
        usd += n * price;
        left -= n;
        if left <= 0.0 {
            break;
        }
    }
    usd
}

/// Alarm metrics of the default rules: one per alarm, or one per term of a metric-math alarm.
fn alarm_metrics() -> usize {
    slurm_cw_catalog::alarms::default_rules()
        .iter()
        .map(|r| if r.expression.is_some() { r.terms.len().max(1) } else { 1 })
        .sum()
}

/// A month of the whole cluster, from one simulated hour of a few of its nodes.
#[derive(Debug, Default)]
struct Month {
    /// PutMetricData requests of the Lambda alone (the rest are the shipper's).
    lambda_requests: f64,
    metric_months: f64,
    steady_metrics: f64,
    job_metric_hours: f64,
    metrics_usd: f64,
    put_requests: f64,
    put_usd: f64,
    log_gb: f64,
    logs_usd: f64,
    read_usd: f64,
    list_usd: f64,
    alarms_usd: f64,
    dashboard_usd: f64,
    total: f64,
}

fn month(r: &Run) -> Month {
    let s = &r.scenario;
    let l = &r.listing;
    let scope = |k: &str| l.by_scope.get(k).copied().unwrap_or(0) as f64;
    let scale = s.nodes as f64 / s.sim_nodes as f64;
    // Series per partition and per account, at the scenario's counts (all accounts run jobs every hour).
    let partitions = scope("partition") / l.partitions.len().max(1) as f64 * s.partitions as f64;
    let accounts = scope("account") / l.accounts.len().max(1) as f64 * s.accounts as f64;
    // Series only the nodes' figures feed are billed the hours the nodes run; the head's,
    // the shipper's own (the head sends them too) and the Lambda's every hour.
    let busy = s.busy_hours / 24.0;
    let node_only = l.by_role.get("node").copied().unwrap_or(0) as f64;
    let lambda_series = l.by_role.get("lambda").copied().unwrap_or(0) as f64;
    let steady = match r.idle_series.as_slice() {
        // Measured where the cluster idles: a busy hour's series the busy hours of a day; then
        // the head's (and the Lambda's, as in a busy hour: an upper bound) in its first idle
        // hour, and in the second for each idle hour after.
        [first, then] => {
            let all = scope("cluster") + partitions + accounts + scope("user") + scope("node") * scale;
            let idle = 24.0 - s.busy_hours;
            (s.busy_hours * all
                + (*first as f64 + lambda_series)
                + (idle - 1.0).max(0.0) * (*then as f64 + lambda_series))
                / 24.0
        }
        _ => {
            scope("cluster") + partitions + accounts + scope("user") + scope("node") * scale * busy
                - node_only * (1.0 - busy)
        }
    };
    // A job's series are billed for each clock hour they get data: 1 + duration/60 on average.
    let per_job = scope("job") / l.jobs.len().max(1) as f64;
    let jobs_a_month = s.jobs_per_day * HOURS / 24.0;
    let job_metric_hours = per_job * jobs_a_month * (1.0 + s.job_minutes as f64 / 60.0);
    let metric_months = steady + job_metric_hours / HOURS;
    let lambda = r.lambda.clone().unwrap_or(LambdaRun {
        series_read: 36,
        list_metrics_calls: 5,
        datums_published: 30,
        ..LambdaRun::default()
    });
    // Requests a minute: a node's, the head's, and the Lambda's (one run every
    // LAMBDA_EVERY_MINUTES, reading and publishing that many minutes at once).
    let minutes = SIM_SECONDS as f64 / 60.0;
    let node_requests = r.nodes.metric_requests as f64 / (s.sim_nodes as f64 * minutes);
    let lambda_runs = MINUTES / f64::from(LAMBDA_EVERY_MINUTES);
    let lambda_requests = (lambda.datums_published as f64 / 1000.0).ceil() * lambda_runs;
    let put_requests = (node_requests * s.nodes as f64 * busy + r.head.metric_requests as f64 / minutes)
        * MINUTES
        + lambda_requests;
    // The nodes' records while they run; the head's (its scheduler detail) every hour.
    let log_gb = (r.nodes.log_bytes as f64 * scale * busy + r.head.log_bytes as f64) * HOURS / 1e9;
    let logs_usd =
        log_gb * LOG_INGEST_PER_GB + log_gb * (RETENTION_DAYS * 24.0 / HOURS) * LOG_STORE_PER_GB_MONTH;
    let mut m = Month {
        lambda_requests,
        metric_months,
        steady_metrics: steady,
        job_metric_hours,
        metrics_usd: metric_dollars(metric_months),
        put_requests,
        put_usd: put_requests / 1000.0 * PER_1000_REQUESTS,
        log_gb,
        logs_usd,
        read_usd: lambda.series_read as f64 * lambda_runs / 1000.0 * PER_1000_SERIES_READ,
        list_usd: lambda.list_metrics_calls as f64 * lambda_runs / 1000.0 * PER_1000_REQUESTS,
        alarms_usd: alarm_metrics() as f64 * ALARM_METRIC_MONTH,
        dashboard_usd: DASHBOARD_MONTH,
        total: 0.0,
    };
    m.total =
        m.metrics_usd + m.put_usd + m.logs_usd + m.read_usd + m.list_usd + m.alarms_usd + m.dashboard_usd;
    m
}

/// One line per run: what was measured, then the month by item, the total and the verdict.
fn print(r: &Run, m: &Month, baseline_of: Option<f64>) {
    let s = &r.scenario;
    let l = &r.listing;
    let scope = |k: &str| l.by_scope.get(k).copied().unwrap_or(0);
    let role = |k: &str| l.by_role.get(k).copied().unwrap_or(0);
    let mut mode = if r.mode == JobMetrics::Metrics {
        "job_metrics=metrics (baseline)"
    } else {
        "default (job records)"
    }
    .to_owned();
    for var in ["COST_TOP_RPC_TYPES", "COST_EXCLUDE"] {
        if let Ok(v) = std::env::var(var) {
            mode.push_str(&format!(" {var}={v}"));
        }
    }
    let mut lambda = match &r.lambda {
        Some(x) if x.failed == "[]" => format!("Lambda {} series/run", x.series_read),
        Some(x) => format!("Lambda {} series/run (failed: {})", x.series_read, x.failed),
        None => "Lambda not run: 36 series/run assumed".into(),
    };
    if let [first, then] = r.idle_series.as_slice() {
        lambda.push_str(&format!(", idle: head {first} then {then} series an hour"));
    }
    let verdict = if m.total <= s.target { "meets" } else { "MISSES" };
    let ratio =
        baseline_of.map(|b| format!(", {:.1}x the default's ${b:.2}", m.total / b)).unwrap_or_default();
    println!(
        "{} {mode}: measured {}/{} nodes + head, 1 h: {} metrics ({} cluster, {} partition, {} account, {} job, {} node), {} PutMetricData, {} log bytes in {} events, {lambda} | month: {:.0} metrics ${:.2}, {:.1}M PutMetricData ${:.2}, {:.2} GB logs ${:.2}, GetMetricData ${:.2}, ListMetrics ${:.2}, alarms ${:.2}, dashboard ${:.2} = ${:.2} ({verdict} ${:.0}{ratio})",
        s.name,
        s.sim_nodes,
        s.nodes,
        l.total,
        scope("cluster"),
        scope("partition"),
        scope("account"),
        scope("job"),
        scope("node"),
        r.nodes.metric_requests + r.head.metric_requests,
        r.nodes.log_bytes + r.head.log_bytes,
        r.nodes.log_events + r.head.log_events,
        m.metric_months,
        m.metrics_usd,
        m.put_requests / 1e6,
        m.put_usd,
        m.log_gb,
        m.logs_usd,
        m.read_usd,
        m.list_usd,
        m.alarms_usd,
        m.dashboard_usd,
        m.total,
        s.target,
    );
    if std::env::var_os("COST_DETAIL").is_some() {
        let records: Vec<String> =
            r.nodes.records.iter().chain(&r.head.records).map(|(k, n)| format!("{n} {k}")).collect();
        let mut names: Vec<(&String, &usize)> = l.by_name.iter().collect();
        names.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        let list: Vec<String> = names.iter().map(|(n, c)| format!("{n} {c}")).collect();
        let x = r.lambda.clone().unwrap_or_default();
        println!(
            "  detail: metrics from head {}, node population {}, shipper {}, Lambda {}; {} partitions, {} accounts, {} jobs listed; {} ListMetrics pages; PutMetricData {} nodes + {} head; records {} in {} PutLogEvents/CreateLogStream; Lambda {} GetMetricData, {} ListMetrics, {} datums, {} alarms, {:.1} s; month: {:.0} steady metrics + {:.0} job metric-hours; {:.0} s",
            role("head"),
            role("node"),
            role("shipper"),
            role("lambda"),
            l.partitions.len(),
            l.accounts.len(),
            l.jobs.len(),
            l.pages,
            r.nodes.metric_requests,
            r.head.metric_requests,
            if records.is_empty() { "none".into() } else { records.join(", ") },
            r.nodes.log_requests,
            x.get_metric_data_calls,
            x.list_metrics_calls,
            x.datums_published,
            x.alarms,
            x.seconds,
            m.steady_metrics,
            m.job_metric_hours,
            r.seconds,
        );
        println!("  metrics by name: {}", list.join(", "));
    }
}

fn main() {
    let Ok(url) = std::env::var("BENCH_LOCALSTACK_URL") else {
        println!("needs LocalStack: scripts/cost.sh, or eval \"$(scripts/bench/localstack.sh start)\" first");
        return;
    };
    let bootstrap = std::env::var_os("COST_LAMBDA_BOOTSTRAP").map(PathBuf::from).filter(|p| p.is_file());
    let wanted = std::env::var("COST_SCENARIOS").unwrap_or_else(|_| "C,A,B".into());
    let modes = std::env::var("COST_MODES").unwrap_or_else(|_| "logs,metrics".into());
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a tokio runtime");
    println!(
        "CloudWatch cost a month at us-east-1 list prices, 730 h; model and assumptions in docs/cost.md"
    );
    rt.block_on(async {
        let sdk = aws_config::defaults(aws_config::BehaviorVersion::latest())
            .endpoint_url(&url)
            .region(aws_config::Region::new("us-east-1"))
            .credentials_provider(aws_sdk_cloudwatch::config::Credentials::new(
                "test", "test", None, None, "cost",
            ))
            .load()
            .await;
        for s in SCENARIOS.iter().filter(|s| wanted.split(',').any(|w| w.trim() == s.name)) {
            let mut default_total = None;
            for (name, mode) in [("logs", JobMetrics::Logs), ("metrics", JobMetrics::Metrics)] {
                if !modes.split(',').any(|m| m.trim() == name) {
                    continue;
                }
                let run = simulate(&url, &sdk, *s, mode, bootstrap.as_deref()).await;
                let m = month(&run);
                print(&run, &m, if mode == JobMetrics::Metrics { default_total } else { None });
                if mode == JobMetrics::Logs {
                    default_total = Some(m.total);
                    // What the OTLP destination beside it sends: its own shape, per-job series
                    // included whatever node.job_metrics says.
                    otlp::print(
                        s.name,
                        s.sim_nodes,
                        s.nodes,
                        s.busy_hours / 24.0,
                        &run.otlp_nodes,
                        &run.otlp_head,
                        m.total,
                    );
                    emf::print(s, &run, &m);
                    views::print(s.name, &run.listing, &run.listed_earlier, &run.record_fields);
                }
            }
        }
    });
}
