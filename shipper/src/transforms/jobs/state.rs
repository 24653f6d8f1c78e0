//! One job as the job table keeps it between collections: the flush's means for its
//! `job_sample` record, the integrals and peaks for its `job_summary`, and its findings.

use super::super::findings::{self, JobFindings, Observation, Thresholds};
use super::super::records::{finish, head, round};
use super::suspension::Suspension;

mod job_cost;
use crate::cost::{Bill, Prices};
use crate::sample::{JobInfo, JobReading};
use serde_json::{Map, Value, json};
use slurm_cw_catalog::Metric;
use slurm_cw_catalog::metrics::{
    CPU_CORE_UTILIZATION, GPU_MEMORY_TOTAL, GPU_MEMORY_USED, GPU_POWER, GPU_SM_ACTIVITY, GPU_UTILIZATION,
    PROCESS_CPU_USAGE, THREAD_COUNT,
};
use slurm_cw_catalog::records::{self as r, kinds};
use slurm_cw_formats::datum::format_timestamp;
use slurm_cw_formats::record::Record;
use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

const JOULES_PER_KWH: f64 = 3.6e6;

/// Each GPU's figures a sample's `PerGpu` keeps: what tells one GPU of a job from another
/// (busy or idle, its memory, its power), and no more, to keep records small.
static EACH_GPU: [&Metric; 5] =
    [&GPU_UTILIZATION, &GPU_SM_ACTIVITY, &GPU_MEMORY_USED, &GPU_MEMORY_TOTAL, &GPU_POWER];

/// A mean over the flush.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct Mean {
    pub sum: f64,
    pub n: f64,
}

#[derive(Debug)]
pub(super) struct Job {
    pub info: JobInfo,
    pub first_seen: SystemTime,
    pub last_seen: SystemTime,
    /// (metric, further key: thread state or executable) -> mean over this flush.
    pub flush: BTreeMap<(&'static str, Option<String>), Mean>,
    pub flush_samples: u32,
    /// (GPU, metric) -> mean over this flush, for `PerGpu`.
    flush_each: BTreeMap<(String, &'static str), Mean>,
    samples: u32,
    last_sample_at: Option<SystemTime>,
    /// When I/O rates last came: they cover the time since (every node.process_every cycles
    /// where they come from /proc).
    io_at: Option<SystemTime>,
    cpu_time: Option<f64>,
    cpu_integrated: f64,
    cpu_covered: f64,
    cores: f64,
    memory_peak: f64,
    /// The largest limit read; None while it had none (unlimited).
    memory_limit: Option<f64>,
    gpus: f64,
    /// The GPUs' worth it is billed for now ([`crate::sample::GpuFigures::billed`]).
    gpus_billed: f64,
    gpu_seconds: f64,
    gpu_idle_seconds: f64,
    /// The most memory its GPUs held together at one reading, and the most they had.
    gpu_memory_peak: f64,
    gpu_memory_total: f64,
    /// Energy its GPUs used, from NVML's counters; None while none reported.
    gpu_joules: Option<f64>,
    /// The same per GPU.
    gpu_joules_each: BTreeMap<String, f64>,
    read_bytes: f64,
    write_bytes: f64,
    oom_kills: f64,
    /// When the job started, as Slurm says.
    started: Option<SystemTime>,
    /// Which run of the job its summaries are of, fixed at the first ([`Self::run`]).
    summary_run: Option<u64>,
    /// What Slurm allocated it here (else its cpuset and memory limit): the largest seen.
    cpus_held: Option<f64>,
    memory_held: Option<f64>,
    /// Whether those are Slurm's word: the cgroup's stand in only until Slurm answers.
    held_by_slurm: bool,
    pub bill: Bill,
    suspension: Suspension,
    /// What its node's jobs' shares add up to, where above 1: its share is divided by it, so
    /// that the node is billed once ([`super::Jobs`]'s `weigh`).
    pub crowd: f64,
    /// Crowds it ran in before its next reading, each up to when a final sample of another
    /// job on its node changed it (that job is in them): its next count is split there.
    pub crowds: Vec<(SystemTime, f64)>,
    /// Dollars of cost and waste already added to the cost metrics.
    pub reported: (f64, f64),
    findings: JobFindings,
    /// The last_seen of the summary a final sample wrote (a later sample means a newer summary
    /// when the cgroup goes).
    pub summarized: Option<SystemTime>,
}

impl Job {
    /// Its bill counts apart what falls before `mark` (this daemon's start): the daemon before
    /// this one reported it.
    pub fn marked(mut self, mark: SystemTime) -> Self {
        self.bill.mark = Some(mark);
        self
    }

    pub fn new(info: JobInfo, at: SystemTime) -> Self {
        Job {
            info,
            first_seen: at,
            last_seen: at,
            flush: BTreeMap::new(),
            flush_samples: 0,
            flush_each: BTreeMap::new(),
            samples: 0,
            last_sample_at: None,
            io_at: None,
            cpu_time: None,
            cpu_integrated: 0.0,
            cpu_covered: 0.0,
            cores: 0.0,
            memory_peak: 0.0,
            memory_limit: None,
            gpus: 0.0,
            gpus_billed: 0.0,
            gpu_seconds: 0.0,
            gpu_idle_seconds: 0.0,
            gpu_memory_peak: 0.0,
            gpu_memory_total: 0.0,
            gpu_joules: None,
            gpu_joules_each: BTreeMap::new(),
            read_bytes: 0.0,
            write_bytes: 0.0,
            oom_kills: 0.0,
            started: None,
            summary_run: None,
            cpus_held: None,
            memory_held: None,
            held_by_slurm: false,
            bill: Bill::default(),
            suspension: Suspension::default(),
            crowd: 1.0,
            crowds: Vec::new(),
            reported: (0.0, 0.0),
            findings: JobFindings::default(),
            summarized: None,
        }
    }

    /// Adds one reading's figures to this flush's means (the job's figures, its GPUs' as a
    /// whole, and the thread-state and executable breakdowns).
    fn add_to_flush(&mut self, reading: &JobReading) {
        let mut add = |metric: &'static str, further: Option<&str>, v: f64| {
            let m = self.flush.entry((metric, further.map(str::to_owned))).or_default();
            m.sum += v;
            m.n += 1.0;
        };
        let f = &reading.job;
        for (m, v) in f.figures() {
            add(m.name, None, v);
        }
        if let Some(cores) = f.per_core.as_ref().filter(|c| !c.is_empty()) {
            add(CPU_CORE_UTILIZATION.name, None, cores.iter().sum::<f64>() / cores.len() as f64);
        }
        if let Some(g) = &reading.gpus {
            for (m, v) in g.series() {
                add(m.name, None, v);
            }
            for one in &g.each {
                for (m, v) in
                    one.figures.iter().filter(|(m, _)| EACH_GPU.iter().any(|e| std::ptr::eq(*e, *m)))
                {
                    let mean = self.flush_each.entry((one.label.as_str().to_owned(), m.name)).or_default();
                    mean.sum += v;
                    mean.n += 1.0;
                }
            }
        }
        for (state, n) in &f.threads {
            add(THREAD_COUNT.name, Some(state), *n);
        }
        for (exe, cores) in &f.by_exe {
            add(PROCESS_CPU_USAGE.name, Some(exe), *cores);
        }
    }

    /// The summary's and findings' integrals, and the findings, from one reading of the job.
    pub fn absorb(
        &mut self,
        reading: &JobReading,
        at: SystemTime,
        t: &Thresholds,
        prices: Option<&Prices>,
        pending: &mut Vec<Record>,
        seq: &mut u64,
    ) -> findings::Holding {
        self.add_to_flush(reading);
        let read = reading.has_figures();
        if read {
            self.samples += 1;
            self.flush_samples += 1;
        }
        let dt = self.last_sample_at.and_then(|p| at.duration_since(p).ok()).map_or(0.0, |d| d.as_secs_f64());
        let seen_before = self.last_sample_at.is_some();
        if read {
            self.last_sample_at = Some(at);
        }
        let f = &reading.job;
        self.suspension.observe(f.suspended, seen_before, dt);
        let running = !self.suspension.now;
        if let Some(cores) = f.cpu_usage.filter(|_| running) {
            self.cpu_integrated += cores * dt;
            self.cpu_covered += dt;
        }
        if let Some(s) = f.cpu_time {
            self.cpu_time = Some(s);
        }
        self.cores = self.cores.max(f.cpus_allocated.unwrap_or(0.0));
        self.memory_peak = self.memory_peak.max(reading.memory_peak().unwrap_or(0.0));
        if let Some(limit) = reading.memory_limit() {
            self.memory_limit = Some(self.memory_limit.map_or(limit, |l| l.max(limit)));
        }
        self.oom_kills = self.oom_kills.max(f.oom_kills.unwrap_or(0.0));
        (self.cpus_held, self.memory_held) = self.held_with(Some(reading));
        self.held_by_slurm |= reading.held.from_slurm();
        self.started = reading.held.started.or(self.started);
        if let Some(g) = &reading.gpus {
            self.gpus = self.gpus.max(g.count);
            self.gpus_billed = g.billed;
            if running {
                // GPU time by its worth billed to the job, as its idle time: a GPU it shares
                // is partly its.
                self.gpu_seconds += g.billed * dt;
                self.gpu_idle_seconds += g.idle(t.idle_gpu_percent) * dt;
            }
            if let Some((used, total)) = g.memory() {
                self.gpu_memory_peak = self.gpu_memory_peak.max(used);
                self.gpu_memory_total = self.gpu_memory_total.max(total);
            }
            if let Some(j) = g.joules {
                *self.gpu_joules.get_or_insert(0.0) += j;
            }
            for one in &g.each {
                if let Some(j) = one.joules {
                    *self.gpu_joules_each.entry(one.label.as_str().to_owned()).or_default() += j;
                }
            }
        }
        if let (Some(read), Some(write)) = (f.read_bytes, f.write_bytes) {
            let since = self.io_at.unwrap_or(self.first_seen);
            let span = at.duration_since(since).unwrap_or_default().as_secs_f64();
            self.read_bytes += read * span;
            self.write_bytes += write * span;
            self.io_at = Some(at);
        }
        let obs = Observation {
            gpu_idle: reading.gpus.as_ref().and_then(|g| g.under(t.idle_gpu_percent)),
            cpu_efficiency: f.cpu_utilization,
            suspended: self.suspension.now,
            memory: self.memory_limit.map(|limit| (self.memory_peak, limit)),
            gpu_memory: (self.gpu_memory_total > 0.0)
                .then_some((self.gpu_memory_peak, self.gpu_memory_total)),
            age: at.duration_since(self.first_seen).unwrap_or_default(),
        };
        let mut new = Vec::new();
        let holding = self.findings.observe(&obs, at, t, &mut new);
        if let Some(p) = prices {
            self.accrue(p);
        }
        for n in new {
            *seq += 1;
            let id = format!("{}:{}:{}:{}", self.info.node, self.info.id, self.run(), n.kind);
            let mut m = head(&self.info, kinds::JOB_FINDING, at, id);
            m.insert(r::FINDING.name.into(), json!(n.kind));
            let mut detail = n.detail;
            if let Some((usd, fraction, resource)) = self.waste() {
                // The same rule as the summary's, so far.
                detail.push_str(&format!(
                    ": ${usd:.2} of its ${:.2} so far on this node ({:.0}% of its {} unused)",
                    self.suspension.running_usd(self.bill.usd),
                    fraction * 100.0,
                    resource.as_str()
                ));
                self.put_waste(&mut m, usd, fraction, resource);
            }
            m.insert(r::DETAIL.name.into(), json!(detail));
            pending.push(finish(m, at).0);
        }
        holding
    }

    /// Which run of the job this is, for record ids: its Slurm start in seconds (else when this
    /// node first saw it). A job Slurm requeues keeps its id and may run again on the same
    /// node (a Spot node replaced under the same name): its new run's records must not replace
    /// the last run's, nor its findings pass for ones already told. Slurm's start as given, not
    /// [`Self::start`]'s (bounded by first sight), so that daemons before and after a restart
    /// name a run alike.
    fn run(&self) -> u64 {
        let start = self.started.unwrap_or(self.first_seen);
        start.duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs())
    }

    /// Whether `reading` is of a later run of the job than the one counted here: Slurm gives a
    /// later start than it gave before, and after this node last saw the job (requeued, and
    /// started again here before a collection saw its cgroup gone). Slurm's start names a run
    /// in the records' ids. A start Slurm moves later within one run (a cloud node's power up:
    /// "Resetting start time for node power up", while the job's cgroup already held its
    /// prolog) is before the readings that followed it: the same run.
    pub fn new_run(&self, reading: &JobReading) -> bool {
        matches!((self.started, reading.held.started), (Some(was), Some(now)) if now > was && now > self.last_seen)
    }

    /// When it started, as Slurm says; a controller's clock ahead of this node's cannot start
    /// it after it was seen.
    pub fn start(&self) -> SystemTime {
        self.started.map_or(self.first_seen, |s| s.min(self.first_seen))
    }

    /// This flush's `PerGpu`: each GPU's means, where the job held more than one here.
    pub fn take_each(&mut self) -> Option<Value> {
        let each = std::mem::take(&mut self.flush_each);
        per_gpu(each.into_iter().map(|((gpu, metric), mean)| (gpu, metric, mean.sum / mean.n)))
    }

    /// Its `job_summary` record. Every summary of a run has the id of its first, even where
    /// Slurm's start came in between (a short job's final sample, then its cgroup's end).
    pub fn summary(&mut self, ended_by: &str) -> Map<String, Value> {
        let run = self.run();
        let run = *self.summary_run.get_or_insert(run);
        let id = format!("{}:{}:{run}:summary", self.info.node, self.info.id);
        let mut m = head(&self.info, kinds::JOB_SUMMARY, self.last_seen, id);
        let elapsed = self.last_seen.duration_since(self.first_seen).unwrap_or(Duration::ZERO).as_secs_f64();
        let mut put = |f: &r::Field, v: f64| {
            m.insert(f.name.into(), json!(round(v)));
        };
        put(&r::SAMPLES, f64::from(self.samples));
        put(&r::ELAPSED_SECONDS, elapsed);
        put(&r::CPU_SECONDS, self.cpu_time.unwrap_or(self.cpu_integrated));
        if self.cores > 0.0 {
            put(&r::CORES_ALLOCATED, self.cores);
            if self.cpu_covered > 0.0 {
                put(&r::CPU_EFFICIENCY, self.cpu_integrated / (self.cores * self.cpu_covered) * 100.0);
            }
        }
        if self.memory_peak > 0.0 {
            put(&r::MEMORY_PEAK, self.memory_peak);
        }
        if let Some(limit) = self.memory_limit {
            put(&r::MEMORY_REQUESTED, limit);
            put(&r::MEMORY_PEAK_PERCENT, self.memory_peak / limit * 100.0);
        }
        if self.gpus > 0.0 {
            put(&r::GPUS, self.gpus);
            put(&r::GPU_HOURS, self.gpu_seconds / 3600.0);
            if self.gpu_seconds > 0.0 {
                put(&r::GPU_IDLE_PERCENT, self.gpu_idle_seconds / self.gpu_seconds * 100.0);
            }
        }
        if self.gpu_memory_total > 0.0 {
            put(&r::GPU_MEMORY_PEAK, self.gpu_memory_peak);
            put(&r::GPU_MEMORY_TOTAL, self.gpu_memory_total);
            put(&r::GPU_MEMORY_PEAK_PERCENT, self.gpu_memory_peak / self.gpu_memory_total * 100.0);
        }
        if let Some(j) = self.gpu_joules {
            put(&r::GPU_ENERGY_KWH, j / JOULES_PER_KWH);
        }
        put(&r::READ_BYTES_TOTAL, self.read_bytes);
        put(&r::WRITE_BYTES_TOTAL, self.write_bytes);
        put(&r::OOM_KILLS, self.oom_kills);
        let each = self
            .gpu_joules_each
            .iter()
            .map(|(gpu, j)| (gpu.clone(), r::GPU_ENERGY_KWH.name, j / JOULES_PER_KWH));
        if let Some(each) = per_gpu(each) {
            m.insert(r::PER_GPU.name.into(), each);
        }
        self.put_cost(&mut m);
        if let Some((usd, fraction, resource)) = self.waste() {
            self.put_waste(&mut m, usd, fraction, resource);
        }
        m.insert(r::FIRST_SEEN.name.into(), json!(format_timestamp(self.first_seen)));
        m.insert(r::LAST_SEEN.name.into(), json!(format_timestamp(self.last_seen)));
        m.insert(r::ENDED_BY.name.into(), json!(ended_by));
        m
    }
}

/// A `PerGpu` object of (GPU, field, value), where there is more than one GPU: a job on one
/// GPU has its figures as the job's already.
fn per_gpu(items: impl Iterator<Item = (String, &'static str, f64)>) -> Option<Value> {
    let mut out = Map::new();
    for (gpu, field, v) in items {
        if let Value::Object(o) = out.entry(gpu).or_insert_with(|| Value::Object(Map::new())) {
            o.insert(field.into(), json!(round(v)));
        }
    }
    (out.len() > 1).then_some(Value::Object(out))
}
