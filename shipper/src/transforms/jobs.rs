//! The job table between collections and flushes: each job's samples become one `job_sample`
//! record per flush, its lifetime figures a `job_summary` record when it ends on this node (its
//! TaskEpilog's final sample, or its cgroup gone at a collection), and its findings
//! `job_finding` records. It also hands the population figures what each job showed now.

use super::findings::{self, JobFindings, Observation, Thresholds};
use super::records::{finish, head, round};
use crate::sample::{Batch, JobInfo, Observed, Sample};
use serde_json::{Map, Value, json};
use slurm_cw_catalog::Metric;
use slurm_cw_catalog::dims::{ACCOUNT, GPU, GPU_UUID, JOB_ID, NODE_NAME, USER};
use slurm_cw_catalog::metrics::*;
use slurm_cw_catalog::records::{self as r, endings, kinds};
use slurm_cw_formats::datum::format_timestamp;
use slurm_cw_formats::record::Record;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::{Duration, SystemTime};

/// (node, job id)
type Key = (String, String);

const JOULES_PER_KWH: f64 = 3.6e6;

/// A mean over the flush.
#[derive(Debug, Default, Clone, Copy)]
struct Mean {
    sum: f64,
    n: f64,
}

/// What one collection showed of one job, for the population figures.
#[derive(Debug, Clone)]
pub struct JobNow {
    pub info: JobInfo,
    /// Job-level figures of this collection, by metric.
    pub figures: HashMap<&'static str, f64>,
    pub holding: findings::Holding,
}

impl JobNow {
    pub fn get(&self, m: &Metric) -> Option<f64> {
        self.figures.get(m.name).copied()
    }
}

#[derive(Debug)]
struct Job {
    info: JobInfo,
    first_seen: SystemTime,
    last_seen: SystemTime,
    /// (metric, further dimension value) -> mean over this flush.
    flush: BTreeMap<(&'static str, Option<String>), Mean>,
    flush_samples: u32,
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
    memory_limit: f64,
    gpus: f64,
    gpu_seconds: f64,
    gpu_idle_seconds: f64,
    /// Energy its GPUs used, from NVML's counters; None while none reported.
    gpu_joules: Option<f64>,
    read_bytes: f64,
    write_bytes: f64,
    oom_kills: f64,
    findings: JobFindings,
    /// The last_seen of the summary a final sample wrote (a later sample means a newer summary
    /// when the cgroup goes).
    summarized: Option<SystemTime>,
}

impl Job {
    fn new(info: JobInfo, at: SystemTime) -> Self {
        Job {
            info,
            first_seen: at,
            last_seen: at,
            flush: BTreeMap::new(),
            flush_samples: 0,
            samples: 0,
            last_sample_at: None,
            io_at: None,
            cpu_time: None,
            cpu_integrated: 0.0,
            cpu_covered: 0.0,
            cores: 0.0,
            memory_peak: 0.0,
            memory_limit: 0.0,
            gpus: 0.0,
            gpu_seconds: 0.0,
            gpu_idle_seconds: 0.0,
            gpu_joules: None,
            read_bytes: 0.0,
            write_bytes: 0.0,
            oom_kills: 0.0,
            findings: JobFindings::default(),
            summarized: None,
        }
    }
}

pub struct Jobs {
    thresholds: Thresholds,
    jobs: HashMap<Key, Job>,
    /// Summaries and findings made since the last flush.
    pending: Vec<Record>,
    seq: u64,
    /// Records cut to fit one log event since the last flush.
    pub trimmed: u64,
}

/// The value of a sample: a scalar, or the mean of a distribution.
fn value(s: &Sample) -> Option<f64> {
    match &s.value {
        Observed::Scalar(v) => Some(*v),
        Observed::Distribution(v) if !v.is_empty() => Some(v.iter().sum::<f64>() / v.len() as f64),
        Observed::Distribution(_) => None,
    }
}

/// The further dimension of a per-job sample (thread state, executable), if any.
fn further(s: &Sample) -> Option<String> {
    s.dims.iter().find(|(n, _)| ![JOB_ID, USER, ACCOUNT, NODE_NAME].contains(n)).map(|(_, v)| v.to_owned())
}

impl Jobs {
    pub fn new(thresholds: Thresholds) -> Self {
        Jobs { thresholds, jobs: HashMap::new(), pending: Vec::new(), seq: 0, trimmed: 0 }
    }

    /// Jobs tracked now.
    pub fn len(&self) -> usize {
        self.jobs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.jobs.is_empty()
    }

    /// Takes in one collection (or one job's final sample); returns what each job read shows.
    pub fn observe(&mut self, batch: &Batch) -> Vec<JobNow> {
        let at = batch.time;
        let mut by_id: HashMap<&str, Vec<Key>> = HashMap::new();
        for info in &batch.jobs {
            let key = (info.node.clone(), info.id.clone());
            let job = self.jobs.entry(key.clone()).or_insert_with(|| Job::new(info.clone(), at));
            job.info = info.clone();
            job.last_seen = at;
            by_id.entry(info.id.as_str()).or_default().push(key);
        }
        // This collection's job-level figures, per job.
        let mut now: HashMap<Key, HashMap<&'static str, f64>> = HashMap::new();
        for s in &batch.samples {
            let Some(id) = s.dims.get(JOB_ID) else { continue };
            // Per-GPU detail is an option of the metrics; the record keeps the job's figures.
            if s.dims.get(GPU).is_some() || s.dims.get(GPU_UUID).is_some() {
                continue;
            }
            let Some(v) = value(s) else { continue };
            let Some(keys) = by_id.get(id) else { continue };
            let node = s.dims.get(NODE_NAME);
            // A sample names its node (node collector) or not (GPU collector: the job's first node).
            let Some(key) = keys.iter().find(|k| Some(k.0.as_str()) == node).or(keys.first()).cloned() else {
                continue;
            };
            let Some(job) = self.jobs.get_mut(&key) else { continue };
            let extra = further(s);
            let m = job.flush.entry((s.metric.name, extra.clone())).or_default();
            m.sum += v;
            m.n += 1.0;
            if extra.is_none() {
                now.entry(key).or_default().insert(s.metric.name, v);
            }
        }
        // GPU energy names no node: the job's first, as its GPU samples.
        for (id, joules) in &batch.gpu_joules {
            let Some(key) = by_id.get(id.as_str()).and_then(|keys| keys.first()) else { continue };
            if let Some(job) = self.jobs.get_mut(key) {
                *job.gpu_joules.get_or_insert(0.0) += joules;
            }
        }
        let mut out = Vec::new();
        for info in &batch.jobs {
            let key = (info.node.clone(), info.id.clone());
            let figures = now.remove(&key).unwrap_or_default();
            let Some(job) = self.jobs.get_mut(&key) else { continue };
            let holding = absorb(job, &figures, at, &self.thresholds, &mut self.pending, &mut self.seq);
            out.push(JobNow { info: info.clone(), figures, holding });
        }
        if batch.all_jobs {
            let seen: HashSet<Key> = batch.jobs.iter().map(|i| (i.node.clone(), i.id.clone())).collect();
            let gone: Vec<Key> = self.jobs.keys().filter(|k| !seen.contains(*k)).cloned().collect();
            for key in gone {
                if let Some(job) = self.jobs.remove(&key)
                    && job.summarized != Some(job.last_seen)
                {
                    let record = summary(&job, endings::CGROUP_GONE);
                    self.push(record, job.last_seen);
                }
            }
        } else {
            // A final sample (TaskEpilog): the summary now, while the job's figures are fresh,
            // but once. The hook cannot tell a job's last task from the others, and its user
            // may ask again and again: later final samples of a job that still runs are
            // samples, and the summary at its cgroup's end covers them (at most two a job).
            for info in &batch.jobs {
                let key = (info.node.clone(), info.id.clone());
                if let Some(job) = self.jobs.get_mut(&key)
                    && job.summarized.is_none()
                {
                    job.summarized = Some(job.last_seen);
                    let record = summary(job, endings::TASK_EPILOG);
                    let t = job.last_seen;
                    self.push(record, t);
                }
            }
        }
        out
    }

    fn push(&mut self, record: Map<String, Value>, time: SystemTime) {
        let (record, trimmed) = finish(record, time);
        self.trimmed += u64::from(trimmed);
        self.pending.push(record);
    }

    /// This flush's records: one sample per job that had samples, then the summaries and
    /// findings made since the last flush.
    pub fn flush(&mut self, at: SystemTime) -> Vec<Record> {
        let mut out = Vec::new();
        let mut keys: Vec<Key> = self.jobs.keys().cloned().collect();
        keys.sort();
        let mut made = Vec::new();
        for key in keys {
            let Some(job) = self.jobs.get_mut(&key) else { continue };
            if job.flush.is_empty() {
                continue;
            }
            self.seq += 1;
            let mut m = head(
                &job.info,
                kinds::JOB_SAMPLE,
                at,
                format!("{}:{}:s{}", job.info.node, job.info.id, self.seq),
            );
            m.insert(r::SAMPLES.name.into(), json!(job.flush_samples));
            for ((metric, extra), mean) in std::mem::take(&mut job.flush) {
                let v = json!(round(mean.sum / mean.n));
                match extra {
                    None => {
                        m.insert(metric.into(), v);
                    }
                    Some(k) => {
                        let obj = m.entry(metric.to_owned()).or_insert_with(|| Value::Object(Map::new()));
                        if let Value::Object(o) = obj {
                            o.insert(k, v);
                        }
                    }
                }
            }
            job.flush_samples = 0;
            made.push(m);
        }
        for m in made {
            let (rec, trimmed) = finish(m, at);
            self.trimmed += u64::from(trimmed);
            out.push(rec);
        }
        out.append(&mut self.pending);
        out
    }
}

/// The summary's and findings' integrals, and the findings, from one collection of a job.
fn absorb(
    job: &mut Job,
    f: &HashMap<&'static str, f64>,
    at: SystemTime,
    t: &Thresholds,
    pending: &mut Vec<Record>,
    seq: &mut u64,
) -> findings::Holding {
    let get = |m: &Metric| f.get(m.name).copied();
    if !f.is_empty() {
        job.samples += 1;
        job.flush_samples += 1;
    }
    let dt = job.last_sample_at.and_then(|p| at.duration_since(p).ok()).map_or(0.0, |d| d.as_secs_f64());
    if !f.is_empty() {
        job.last_sample_at = Some(at);
    }
    if let Some(cores) = get(&CPU_USAGE) {
        job.cpu_integrated += cores * dt;
        job.cpu_covered += dt;
    }
    if let Some(s) = get(&CPU_TIME) {
        job.cpu_time = Some(s);
    }
    job.cores = job.cores.max(get(&CPUS_ALLOCATED).unwrap_or(0.0));
    for m in [&MEMORY_MAX, &MEMORY_USAGE, &MEMORY_RSS] {
        job.memory_peak = job.memory_peak.max(get(m).unwrap_or(0.0));
    }
    job.memory_limit = job.memory_limit.max(get(&MEMORY_LIMIT).unwrap_or(0.0));
    job.oom_kills = job.oom_kills.max(get(&OOM_KILLS).unwrap_or(0.0));
    if let Some(n) = get(&GPU_COUNT) {
        job.gpus = job.gpus.max(n);
        job.gpu_seconds += n * dt;
        let idle = match get(&GPU_UTILIZATION) {
            Some(u) if u < t.idle_gpu_percent => n,
            _ => get(&GPU_IDLE_COUNT).unwrap_or(0.0),
        };
        job.gpu_idle_seconds += idle * dt;
    }
    if let (Some(read), Some(write)) = (get(&READ_BYTES), get(&WRITE_BYTES)) {
        let since = job.io_at.unwrap_or(job.first_seen);
        let span = at.duration_since(since).unwrap_or_default().as_secs_f64();
        job.read_bytes += read * span;
        job.write_bytes += write * span;
        job.io_at = Some(at);
    }
    let obs = Observation {
        gpu_utilization: get(&GPU_UTILIZATION),
        cpu_efficiency: get(&CPU_UTILIZATION),
        memory: (job.memory_limit > 0.0).then_some((job.memory_peak, job.memory_limit)),
        age: at.duration_since(job.first_seen).unwrap_or_default(),
    };
    let mut new = Vec::new();
    let holding = job.findings.observe(&obs, at, t, &mut new);
    for n in new {
        *seq += 1;
        let mut m =
            head(&job.info, kinds::JOB_FINDING, at, format!("{}:{}:{}", job.info.node, job.info.id, n.kind));
        m.insert(r::FINDING.name.into(), json!(n.kind));
        m.insert(r::DETAIL.name.into(), json!(n.detail));
        pending.push(finish(m, at).0);
    }
    holding
}

fn summary(job: &Job, ended_by: &str) -> Map<String, Value> {
    let id = format!("{}:{}:summary", job.info.node, job.info.id);
    let mut m = head(&job.info, kinds::JOB_SUMMARY, job.last_seen, id);
    let elapsed = job.last_seen.duration_since(job.first_seen).unwrap_or(Duration::ZERO).as_secs_f64();
    let mut put = |f: &r::Field, v: f64| {
        m.insert(f.name.into(), json!(round(v)));
    };
    put(&r::SAMPLES, f64::from(job.samples));
    put(&r::ELAPSED_SECONDS, elapsed);
    put(&r::CPU_SECONDS, job.cpu_time.unwrap_or(job.cpu_integrated));
    if job.cores > 0.0 {
        put(&r::CORES_ALLOCATED, job.cores);
        if job.cpu_covered > 0.0 {
            put(&r::CPU_EFFICIENCY, job.cpu_integrated / (job.cores * job.cpu_covered) * 100.0);
        }
    }
    if job.memory_peak > 0.0 {
        put(&r::MEMORY_PEAK, job.memory_peak);
    }
    if job.memory_limit > 0.0 && job.memory_limit < (1u64 << 60) as f64 {
        put(&r::MEMORY_REQUESTED, job.memory_limit);
        put(&r::MEMORY_PEAK_PERCENT, job.memory_peak / job.memory_limit * 100.0);
    }
    if job.gpus > 0.0 {
        put(&r::GPUS, job.gpus);
        put(&r::GPU_HOURS, job.gpu_seconds / 3600.0);
        if job.gpu_seconds > 0.0 {
            put(&r::GPU_IDLE_PERCENT, job.gpu_idle_seconds / job.gpu_seconds * 100.0);
        }
    }
    if let Some(j) = job.gpu_joules {
        put(&r::GPU_ENERGY_KWH, j / JOULES_PER_KWH);
    }
    put(&r::READ_BYTES_TOTAL, job.read_bytes);
    put(&r::WRITE_BYTES_TOTAL, job.write_bytes);
    put(&r::OOM_KILLS, job.oom_kills);
    m.insert(r::FIRST_SEEN.name.into(), json!(format_timestamp(job.first_seen)));
    m.insert(r::LAST_SEEN.name.into(), json!(format_timestamp(job.last_seen)));
    m.insert(r::ENDED_BY.name.into(), json!(ended_by));
    m
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sample::Dims;

    fn t(s: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000 + s)
    }

    fn info(id: &str) -> JobInfo {
        JobInfo {
            id: id.into(),
            names: Default::default(),
            node: "n1".into(),
            user: "alice".into(),
            account: "phys".into(),
            partition: "cpu".into(),
        }
    }

    fn collection(at: u64, jobs: &[(&str, f64, f64)]) -> Batch {
        let mut b = Batch::new(t(at));
        b.all_jobs = true;
        for (id, cores, rss) in jobs {
            b.jobs.push(info(id));
            let d =
                Dims::new().with(JOB_ID, *id).with(USER, "alice").with(ACCOUNT, "phys").with(NODE_NAME, "n1");
            b.push(&CPU_USAGE, d.clone(), *cores);
            b.push(&CPU_UTILIZATION, d.clone(), cores / 2.0 * 100.0);
            b.push(&CPUS_ALLOCATED, d.clone(), 2.0);
            b.push(&CPU_TIME, d.clone(), cores * at as f64);
            b.push(&MEMORY_RSS, d.clone(), *rss);
            b.push(&MEMORY_LIMIT, d.clone(), 4e9);
            b.push(&THREAD_COUNT, d.with(slurm_cw_catalog::dims::THREAD_STATE, "running"), 3.0);
        }
        b
    }

    fn parse(r: &Record) -> Value {
        serde_json::from_str(&r.message).unwrap()
    }

    #[test]
    fn one_sample_record_per_job_and_flush_then_a_summary_when_the_cgroup_goes() {
        let mut jobs = Jobs::new(Thresholds::default());
        jobs.observe(&collection(0, &[("7", 1.0, 300e6)]));
        jobs.observe(&collection(30, &[("7", 1.0, 310e6), ("8", 0.0, 1e6)]));
        let recs = jobs.flush(t(31));
        let samples: Vec<Value> = recs.iter().map(parse).collect();
        assert_eq!(samples.len(), 2);
        let seven = &samples[0];
        assert_eq!(seven["Type"], "job_sample");
        assert_eq!(
            (seven["JobId"].as_str(), seven["Account"].as_str(), seven["Partition"].as_str()),
            (Some("7"), Some("phys"), Some("cpu"))
        );
        assert_eq!(seven["MemoryRss"], 305e6, "the mean over the flush");
        assert_eq!(seven["Samples"], 2);
        assert_eq!(seven["ThreadCount"]["running"], 3.0);
        assert!(jobs.flush(t(40)).is_empty(), "nothing new, nothing sent");

        jobs.observe(&collection(60, &[("8", 0.0, 1e6)]));
        let recs = jobs.flush(t(61));
        let summary = recs.iter().map(parse).find(|v| v["Type"] == "job_summary").expect("job 7 ended");
        assert_eq!(summary["JobId"], "7");
        assert_eq!(summary["EndedBy"], "cgroup_gone");
        assert_eq!(summary["ElapsedSeconds"], 30.0);
        assert_eq!(summary["CpuSeconds"], 30.0, "the cgroup counter");
        assert_eq!(summary["CpuEfficiency"], 50.0, "1 of 2 cores");
        assert_eq!(summary["MemoryPeakBytes"], 310e6);
        assert_eq!(summary["MemoryRequestedBytes"], 4e9);
        assert_eq!(summary["RecordId"], "n1:7:summary");
        assert_eq!(jobs.len(), 1);
    }

    #[test]
    fn a_final_sample_writes_the_summary_once() {
        let mut jobs = Jobs::new(Thresholds::default());
        jobs.observe(&collection(0, &[("9", 2.0, 1e6)]));
        let mut last = collection(10, &[("9", 2.0, 1e6)]);
        last.all_jobs = false;
        jobs.observe(&last);
        jobs.observe(&collection(30, &[]));
        let summaries: Vec<Value> =
            jobs.flush(t(31)).iter().map(parse).filter(|v| v["Type"] == "job_summary").collect();
        assert_eq!(summaries.len(), 1, "the cgroup's end adds nothing new");
        assert_eq!(summaries[0]["EndedBy"], "task_epilog");
        assert_eq!(summaries[0]["CpuEfficiency"], 100.0);
    }

    #[test]
    fn a_job_asked_for_again_while_it_runs_gets_samples_and_one_more_summary_at_its_end() {
        let mut jobs = Jobs::new(Thresholds::default());
        jobs.observe(&collection(0, &[("9", 2.0, 1e6)]));
        for at in 1..=50 {
            let mut again = collection(at, &[("9", 2.0, 2e6)]);
            again.all_jobs = false;
            jobs.observe(&again);
        }
        let recs: Vec<Value> = jobs.flush(t(51)).iter().map(parse).collect();
        let summaries: Vec<&Value> = recs.iter().filter(|v| v["Type"] == "job_summary").collect();
        assert_eq!(summaries.len(), 1, "{recs:?}");
        assert_eq!(summaries[0]["LastSeen"], format_timestamp(t(1)));
        let sample = recs.iter().find(|v| v["Type"] == "job_sample").unwrap();
        assert_eq!(sample["Samples"], 51, "every final sample is a sample");
        jobs.observe(&collection(60, &[]));
        let recs: Vec<Value> = jobs.flush(t(61)).iter().map(parse).collect();
        let last = recs.iter().find(|v| v["Type"] == "job_summary").expect("the end's summary");
        assert_eq!(last["EndedBy"], "cgroup_gone");
        assert_eq!(last["LastSeen"], format_timestamp(t(50)), "covers the later samples");
        assert_eq!(last["MemoryPeakBytes"], 2e6);
    }
}
