//! The head's `scheduler_sample` record: slurmctld's figures that no view reads as a metric
//! (sdiag's cycles, depths, queue lengths and maxima, job and RPC rates, capacity totals, counts
//! by flag: the catalog's [`slurm_cw_catalog::views::scheduler_detail`]), one record per flush
//! beside the job records, where the dashboard's *Scheduler* row reads them with Logs Insights.
//! Destinations billed per series leave them out ([`SchedulerSamples::rests`]) instead of
//! paying about 55 custom metrics by the hour whatever their value (docs/cost.md); those billed
//! by the byte keep them. The figures the alarms watch and the Lambda reads stay metrics, and
//! so do copies per partition where `head.per_partition` asks for them.

use super::records::{finish, round};
use super::trim::watched;
use crate::sample::{Batch, Dims, Sample};
use serde_json::{Map, Value, json};
use slurm_cw_catalog::dashboard::RECORD_BY_STATE;
use slurm_cw_catalog::dims::{CLUSTER_NAME, NODE_NAME, PARTITION, STATE};
use slurm_cw_catalog::records::{self as r, kinds};
use slurm_cw_catalog::views::state_in_record_only;
use slurm_cw_catalog::{Kind, Metric, Role};
use slurm_cw_formats::datum::format_timestamp;
use slurm_cw_formats::record::Record;
use std::collections::BTreeMap;
use std::time::SystemTime;

#[derive(Debug)]
pub struct SchedulerSamples {
    node: String,
    detail: Vec<&'static Metric>,
    /// `head.scheduler_detail = "metrics"`: the detail, in the record (the dashboard reads
    /// some of it there), stays a metric too where billed per series.
    copy: bool,
    excluded: Vec<String>,
    /// Whether rest applies (some destination bills per series).
    rest: bool,
    /// The series a default alarm watches (`ClusterName` left out): metrics always.
    watched: Vec<(&'static str, Dims)>,
    /// Whether the last collection found the cluster at rest ([`super::rest`]).
    at_rest: bool,
    /// (metric name, its one dimension's value: message type, flag, collector) -> (metric, sum,
    /// readings).
    figures: BTreeMap<(&'static str, String), (&'static Metric, f64, u32)>,
    samples: u32,
    /// Records cut to fit one log event.
    pub trimmed: u64,
}

impl SchedulerSamples {
    /// For `node`'s records; a metric in `excluded` (`exclude_metrics`) is left out of them too.
    /// `rest`: some destination bills per series, so that at rest the head's figures no alarm
    /// watches go in the record too (and, for those destinations, not as metrics: [`Self::rests`]).
    /// `copy`: the detail stays a metric too (`head.scheduler_detail = "metrics"`).
    /// `own`: the shipper's own figures no view reads are detail too (`self_metrics = "read"`).
    pub fn new(node: String, excluded: &[String], rest: bool, copy: bool, own: bool) -> Self {
        let mut detail = slurm_cw_catalog::views::scheduler_detail();
        if own {
            detail.extend(
                slurm_cw_catalog::ALL.iter().copied().filter(|m| slurm_cw_catalog::views::self_detail(m)),
            );
        }
        detail.retain(|m| !excluded.iter().any(|e| e == m.name));

        SchedulerSamples {
            node,
            detail,
            copy,
            excluded: excluded.to_vec(),
            rest,
            watched: watched(slurm_cw_catalog::ALL),
            at_rest: false,
            figures: BTreeMap::new(),
            samples: 0,
            trimmed: 0,
        }
    }

    /// Copies the detail figures of one collection into the record, and at rest (as `at_rest`
    /// says of it) every head figure no alarm watches.
    pub fn take(&mut self, batch: &Batch, at_rest: bool) {
        self.at_rest = at_rest && self.rest;
        if self.put(batch) {
            self.samples += 1;
        }
    }

    /// Copies the flush's own figures (what delivery did, records written) that are detail, at
    /// rest every one no alarm watches: they go in the next flush's record.
    pub fn take_flushed(&mut self, batch: &Batch) {
        self.put(batch);
    }

    /// Copies what the record takes from `batch` into the figures (the detail, at rest the
    /// rest too); whether it took any. The batch keeps them: destinations billed by the byte
    /// take everything, those billed per series leave out what [`Self::rests`] says.
    fn put(&mut self, batch: &Batch) -> bool {
        let mut took = false;
        for s in &batch.samples {
            let Some((by, _)) = self.field(s) else { continue };
            if let Some(v) = s.scalar().filter(|v| v.is_finite()) {
                let e = self.figures.entry((s.metric.name, by)).or_insert((s.metric, 0.0, 0));
                e.1 += v;
                e.2 += 1;
                took = true;
            }
        }
        took
    }

    /// Whether a destination billed per series leaves `s` out: `s` is in the record and is
    /// detail (unless `head.scheduler_detail = "metrics"`), or the cluster is at rest.
    pub fn rests(&self, s: &Sample) -> bool {
        self.field(s).is_some_and(|(_, detail)| {
            (detail && !self.copy) || (self.at_rest && !is_watched(&self.watched, s))
        })
    }

    /// The field's key (its one dimension's value, or "") when the record takes `s`, and
    /// whether `s` is detail (a metric nowhere) rather than a figure at rest (a metric where no
    /// destination bills per series).
    fn field(&self, s: &Sample) -> Option<(String, bool)> {
        if s.dims.get(PARTITION).is_some() || self.excluded.iter().any(|e| e == s.metric.name) {
            // Copies per partition are metrics where asked for; an excluded metric goes nowhere.
            return None;
        }
        // A count by state the dashboard draws from the record: every state in the record, those
        // no alarm watches and no metric chart draws only there.
        let state =
            RECORD_BY_STATE.iter().any(|m| std::ptr::eq(*m, s.metric)).then(|| s.dims.get(STATE)).flatten();
        let detail = self.detail.iter().any(|m| std::ptr::eq(*m, s.metric))
            || state.is_some_and(|v| state_in_record_only(s.metric, v));
        let rest = || {
            self.at_rest
                && s.scalar().is_some()
                && (s.metric.roles.contains(&Role::Head) || s.metric.roles.contains(&Role::Shipper))
                && !is_watched(&self.watched, s)
        };
        if !detail && state.is_none() && !rest() {
            return None;
        }
        let mut other = s.dims.iter().filter(|(n, _)| *n != CLUSTER_NAME && *n != NODE_NAME);
        let by = match (other.next(), other.next()) {
            (None, _) => String::new(),
            (Some((_, v)), None) => v.to_owned(),
            _ => return None,
        };
        Some((by, detail))
    }

    /// The record of the figures taken since the last flush: each under its metric's name (by
    /// message type, flag or collector where it has one), a level as its mean over the flush,
    /// an increase as its total. None when nothing was taken.
    pub fn flush(&mut self, at: SystemTime) -> Option<Record> {
        if self.samples == 0 {
            return None;
        }
        let millis = at.duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_millis());
        let mut m = Map::new();
        m.insert(r::TYPE.name.into(), json!(kinds::SCHEDULER_SAMPLE));
        m.insert(r::RECORD_ID.name.into(), json!(format!("{}:scheduler:{millis}", self.node)));
        m.insert(r::TIME.name.into(), json!(format_timestamp(at)));
        m.insert(r::NODE_NAME.name.into(), json!(self.node));
        m.insert(r::SAMPLES.name.into(), json!(std::mem::take(&mut self.samples)));
        for ((name, by), (metric, sum, n)) in std::mem::take(&mut self.figures) {
            let v = json!(round(if metric.kind == Kind::Increase { sum } else { sum / f64::from(n) }));
            if by.is_empty() {
                m.insert(name.into(), v);
            } else if let Value::Object(o) = m.entry(name).or_insert_with(|| Value::Object(Map::new())) {
                o.insert(by, v);
            }
        }
        let (rec, cut) = finish(m, at);
        self.trimmed += u64::from(cut);
        Some(rec)
    }
}

/// A default alarm watches `s`: its metric, with the watched dimensions among its own.
fn is_watched(watched: &[(&'static str, Dims)], s: &Sample) -> bool {
    watched.iter().any(|(m, d)| *m == s.metric.name && d.iter().all(|(n, v)| s.dims.get(n) == Some(v)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sample::Dims;
    use slurm_cw_catalog::dims::{FLAG, MESSAGE_TYPE};
    use slurm_cw_catalog::metrics::{
        AGENT_COUNT, BACKFILL_DEPTH_MEAN, BACKFILL_LAST_CYCLE, CPUS_TOTAL, NODE_FLAG_COUNT, RPC_RATE,
        RPC_TIME_RATE,
    };
    use std::time::Duration;

    #[test]
    fn detail_leaves_the_metrics_for_one_record_a_flush() {
        let at = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let mut s = SchedulerSamples::new("head".into(), &["AgentCount".into()], true, false, true);
        let rpc = |t: &str| Dims::new().with(MESSAGE_TYPE, t);
        for (depth, time) in [(10.0, 300.0), (20.0, 500.0)] {
            let mut b = Batch::new(at);
            b.push(&BACKFILL_DEPTH_MEAN, Dims::new(), depth);
            b.push(&BACKFILL_LAST_CYCLE, Dims::new(), 1200.0);
            b.push(&RPC_TIME_RATE, rpc("REQUEST_JOB_INFO"), time);
            b.push(&RPC_RATE, rpc("REQUEST_JOB_INFO"), 4.0);
            b.push(&AGENT_COUNT, Dims::new(), 2.0);
            b.push(&CPUS_TOTAL, Dims::new(), 64.0);
            b.push(&CPUS_TOTAL, Dims::new().with(PARTITION, "p"), 32.0);
            b.push(&NODE_FLAG_COUNT, Dims::new().with(FLAG, "cloud"), 4.0);
            s.take(&b, false);
            let left: Vec<&str> = b.samples.iter().filter(|x| !s.rests(x)).map(|x| x.metric.name).collect();
            assert_eq!(
                left,
                ["BackfillLastCycle", "AgentCount", "CpusTotal"],
                "what the views read stays a metric (and an excluded metric is left to the exclusion, \
                 a copy per partition to head.per_partition)"
            );
            let kept: Vec<_> = b.samples.iter().filter(|x| !s.rests(x)).collect();
            assert_eq!(kept[2].dims.get(PARTITION), Some("p"));
        }
        let v: Value = serde_json::from_str(&s.flush(at).unwrap().message).unwrap();
        assert_eq!(v["Type"], "scheduler_sample");
        assert_eq!(v["RecordId"], "head:scheduler:1800000000000");
        assert_eq!(v["Samples"], 2);
        assert_eq!(v["BackfillDepthMean"], 15.0, "a level: its mean over the flush");
        assert_eq!(v["RpcTimeRate"], json!({"REQUEST_JOB_INFO": 800.0}), "an increase: its total");
        assert_eq!(v["RpcRate"], json!({"REQUEST_JOB_INFO": 8.0}), "the dashboard's RPC table reads it here");
        assert_eq!(
            (v["CpusTotal"].clone(), v["NodeFlagCount"].clone()),
            (json!(64.0), json!({"cloud": 4.0}))
        );
        assert!(s.flush(at).is_none(), "a flush takes everything");
    }
}
