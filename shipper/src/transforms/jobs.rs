//! The job table between collections and flushes: each job's readings become one `job_sample`
//! record per flush, its lifetime figures a `job_summary` record when it ends on this node (its
//! TaskEpilog's final sample, or its cgroup gone at a collection), and its findings
//! `job_finding` records. It also hands the population figures what each job holds now.
//!
//! It reads the collectors' typed readings (`Batch::jobs`), one per job and node; the same
//! readings become the per-job series in `job_series`.

mod state;
mod suspension;
#[cfg(test)]
mod tests;

use super::findings::{Holding, Thresholds};
use super::records::{finish, head, round};
use crate::cost::Prices;
use crate::sample::Batch;
use serde_json::{Map, Value, json};
use slurm_cw_catalog::records::{self as r, endings, kinds};
use slurm_cw_formats::record::Record;
use state::Job;
use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::SystemTime;

/// (node, job id)
type Key = (String, String);

/// Dollars of cost and of waste the jobs of one account in one partition added since the last
/// flush (the cost metrics).
pub type Spent = BTreeMap<(String, String), (f64, f64)>;

/// How long an ended job's count is remembered, and for how many jobs at most.
const GONE_KEPT: std::time::Duration = std::time::Duration::from_secs(3600);
const GONE_MAX: usize = 4096;

pub struct Jobs {
    thresholds: Thresholds,
    /// The node's price and size, where job costs are on.
    prices: Option<Prices>,
    /// Where the cost metrics begin: this daemon's start, or where the daemon before it
    /// counted to ([`Jobs::resuming`]).
    since: SystemTime,
    /// The latest collection taken in: what the cost metrics have counted to once flushed.
    counted_to: Option<SystemTime>,
    spent: Spent,
    jobs: HashMap<Key, Job>,
    /// Up to when the cost metrics counted each job that ended lately: one that comes back
    /// (Slurm listed it as ended, or its cgroup was missed, and then it was there again) is
    /// counted on from there, not again from its start ([`GONE_KEPT`], [`GONE_MAX`]).
    gone: HashMap<Key, SystemTime>,
    /// Summaries and findings made since the last flush.
    pending: Vec<Record>,
    seq: u64,
    /// Records cut to fit one log event since the last flush.
    pub trimmed: u64,
    /// Jobs the last flush could put no cost on (no price, or no size of their node).
    pub uncosted: u64,
}

impl Jobs {
    pub fn new(thresholds: Thresholds, prices: Option<Prices>) -> Self {
        Jobs {
            thresholds,
            prices,
            since: SystemTime::now(),
            counted_to: None,
            spent: Spent::new(),
            jobs: HashMap::new(),
            gone: HashMap::new(),
            pending: Vec::new(),
            seq: 0,
            trimmed: 0,
            uncosted: 0,
        }
    }

    /// Counts the cost metrics from `counted` (where the daemon before this one counted to, see
    /// [`crate::cost::counted`]) rather than from this daemon's start: no time jobs ran while
    /// the daemon was down is missed.
    pub fn resuming(mut self, counted: Option<SystemTime>) -> Self {
        if let Some(t) = counted {
            self.since = self.since.min(t);
        }
        self
    }

    /// Up to when the cost metrics have counted the running jobs, once this flush is delivered.
    pub fn counted_to(&self) -> Option<SystemTime> {
        self.counted_to
    }

    /// What the jobs' cost and waste added since the last call, by (account, partition).
    pub fn take_spent(&mut self) -> Spent {
        std::mem::take(&mut self.spent)
    }

    /// Counts a job's cost up to now and adds what is new of it to `spent`. The records count a
    /// job from its Slurm start; the metrics from this daemon's start for a job that ran before
    /// it (the daemon before it, flushing as it stopped, added the rest).
    fn account_for(job: &mut Job, prices: Option<&Prices>, spent: &mut Spent) {
        let Some(p) = prices else { return };
        job.accrue(p);
        if job.bill.rate.is_none() {
            return;
        }
        let counted = job.bill.usd - job.bill.usd_before;
        let share = if job.bill.usd > 0.0 { counted / job.bill.usd } else { 0.0 };
        // Waste is of what it cost running: of the dollars counted here, less those suspended.
        let waste = job.waste().map_or(job.reported.1, |(usd, fraction, _)| {
            let suspended = job.suspended_usd();
            if suspended > 0.0 { (counted - suspended).max(0.0) * fraction } else { usd * share }
        });
        let (usd, wasted) = (counted - job.reported.0, waste - job.reported.1);
        if usd != 0.0 || wasted != 0.0 {
            let e = spent.entry((job.info.account.clone(), job.info.partition.clone())).or_default();
            e.0 += usd;
            e.1 += wasted;
            job.reported = (counted, waste);
        }
    }

    /// Jobs tracked now.
    pub fn len(&self) -> usize {
        self.jobs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.jobs.is_empty()
    }

    /// Takes in one collection (or one job's final sample); returns what each job's reading
    /// holds of the findings, in the order of `batch.jobs`.
    pub fn observe(&mut self, batch: &Batch) -> Vec<Holding> {
        let at = batch.time;
        // A final sample counts its own job to its time, the others only to the last
        // collection: a daemon restarted from its time would leave out theirs in between.
        if batch.all_jobs {
            self.counted_to = self.counted_to.max(Some(at));
        }
        let mut out = Vec::with_capacity(batch.jobs.len());
        let mut ended_runs = Vec::new();
        for reading in &batch.jobs {
            let info = &reading.info;
            let key = (info.node.clone(), info.id.clone());
            // Slurm's start is to the second: a job whose start second holds this daemon's may
            // have started after it, and that second is this daemon's to count.
            let mark = self.since - std::time::Duration::from_secs(1);
            let job = match self.jobs.entry(key) {
                // Requeued and started again here between collections: its last run ends where
                // it was last seen, the new one is a job of its own.
                Entry::Occupied(mut known) if known.get().new_run(reading) => {
                    let new = Job::new(info.clone(), at).marked(mark);
                    ended_runs.push(std::mem::replace(known.get_mut(), new));
                    known.into_mut()
                }
                Entry::Occupied(known) => known.into_mut(),
                Entry::Vacant(new) => {
                    // A job back after a collection without it: where its count stood.
                    let mark = self.gone.remove(new.key()).map_or(mark, |counted| mark.max(counted));
                    new.insert(Job::new(info.clone(), at).marked(mark))
                }
            };
            job.info.clone_from(info);
            job.last_seen = at;
        }
        for mut run in ended_runs {
            self.end(&mut run);
        }
        self.weigh(batch);
        for reading in &batch.jobs {
            let key = (reading.info.node.clone(), reading.info.id.clone());
            let Some(job) = self.jobs.get_mut(&key) else { continue };
            out.push(job.absorb(
                reading,
                at,
                &self.thresholds,
                self.prices.as_ref(),
                &mut self.pending,
                &mut self.seq,
            ));
        }
        if batch.all_jobs {
            let seen: HashSet<Key> =
                batch.jobs.iter().map(|j| (j.info.node.clone(), j.info.id.clone())).collect();
            let gone: Vec<Key> = self.jobs.keys().filter(|k| !seen.contains(*k)).cloned().collect();
            for key in gone {
                let Some(mut job) = self.jobs.remove(&key) else { continue };
                self.end(&mut job);
                if let Some(until) = job.bill.until {
                    self.gone.insert(key, until);
                }
            }
            if self.gone.len() > GONE_MAX {
                self.gone.retain(|_, until| at.duration_since(*until).is_ok_and(|d| d < GONE_KEPT));
                if self.gone.len() > GONE_MAX {
                    self.gone.clear();
                }
            }
        } else {
            // A final sample (TaskEpilog): the summary now, while the job's figures are fresh,
            // but once. The hook cannot tell a job's last task from the others, and its user
            // may ask again and again: later final samples of a job that still runs are
            // samples, and the summary at its cgroup's end covers them (at most two a job).
            for reading in &batch.jobs {
                let key = (reading.info.node.clone(), reading.info.id.clone());
                if let Some(job) = self.jobs.get_mut(&key)
                    && job.summarized.is_none()
                {
                    Self::account_for(job, self.prices.as_ref(), &mut self.spent);
                    job.summarized = Some(job.last_seen);
                    let record = job.summary(endings::TASK_EPILOG);
                    let t = job.last_seen;
                    self.push(record, t);
                }
            }
        }
        out
    }

    /// Sets each running job's crowd: what its node's jobs' shares add up to. Each share is the
    /// largest of CPUs, memory and GPUs held, so jobs bound by different resources (one holding
    /// most of the memory, another most of the CPUs), or jobs Slurm lets oversubscribe a node,
    /// can add up to more than the node: then each share is divided by the sum and the node is
    /// billed once, never more. A collection holds all of a node's running jobs; a final sample
    /// one, beside the others still running: their crowd changes at its time, counted from
    /// their next reading back (`Job::crowds`), since a job seen only by its final sample is not
    /// in the crowd of the collection after. A job gone keeps the crowd it ran in.
    fn weigh(&mut self, batch: &Batch) {
        let Some(prices) = &self.prices else { return };
        let readings: HashMap<(&str, &str), &crate::sample::JobReading> =
            batch.jobs.iter().map(|r| ((r.info.node.as_str(), r.info.id.as_str()), r)).collect();
        let running = |node: &str, id: &str| !batch.all_jobs || readings.contains_key(&(node, id));
        let mut sums: HashMap<&str, f64> = HashMap::new();
        for ((node, id), job) in &self.jobs {
            if !running(node, id) {
                continue;
            }
            let Some(size) = prices.size(node) else { continue };
            let reading = readings.get(&(node.as_str(), id.as_str())).copied();
            if let Some((share, _)) = job.share_with(reading, &size) {
                *sums.entry(node.as_str()).or_default() += share;
            }
        }
        let sums: HashMap<String, f64> = sums.into_iter().map(|(n, s)| (n.to_owned(), s)).collect();
        // Where a final sample's job began: the others ran beside it from there only.
        let began: HashMap<&str, SystemTime> = if batch.all_jobs {
            HashMap::new()
        } else {
            let mut b: HashMap<&str, SystemTime> = HashMap::new();
            for r in &batch.jobs {
                // Slurm's start as this reading gives it (the job's own is taken in after).
                let start = r.held.started.unwrap_or(batch.time);
                let e = b.entry(r.info.node.as_str()).or_insert(start);
                *e = (*e).min(start);
            }
            b
        };
        for ((node, id), job) in &mut self.jobs {
            let crowd = sums.get(node.as_str()).copied().unwrap_or(1.0).max(1.0);
            if batch.all_jobs || readings.contains_key(&(node.as_str(), id.as_str())) {
                if running(node, id) {
                    job.crowd = crowd;
                }
            } else {
                job.ran_beside(began.get(node.as_str()).copied(), batch.time, crowd);
            }
        }
    }

    /// A run over on this node (its cgroup gone, or another run under it): its summary, unless
    /// its final sample's already covers its last reading.
    fn end(&mut self, job: &mut Job) {
        if job.summarized != Some(job.last_seen) {
            Self::account_for(job, self.prices.as_ref(), &mut self.spent);
            let record = job.summary(endings::CGROUP_GONE);
            self.push(record, job.last_seen);
        }
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
        self.uncosted = 0;
        for key in keys {
            let Some(job) = self.jobs.get_mut(&key) else { continue };
            Self::account_for(job, self.prices.as_ref(), &mut self.spent);
            self.uncosted += u64::from(self.prices.is_some() && job.bill.rate.is_none());
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
            if let Some(each) = job.take_each() {
                m.insert(r::PER_GPU.name.into(), each);
            }
            job.flush_samples = 0;
            job.put_cost(&mut m);
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
