//! What a destination billed per series (CloudWatch, EMF) leaves out of a flush: a count of
//! events at zero (catalog [`slurm_cw_catalog::views::quiet_at_zero`]: RPCs and jobs by the
//! minute, a collector's errors, retries, drops, a spool's backlog) says only that nothing
//! happened, yet each minute of it bills the series' hour. Such a series at zero is sent as it
//! falls to zero, and then once a day (so that it stays listed, and a dashboard over a day
//! shows its zero); one that has never been above zero since this daemon started is not sent
//! at all (a node that powers up each morning would otherwise bill an hour of zeros for each
//! of its error counts every day); a series a default alarm watches always. On a cluster idle
//! most of the day, that is most of its job figures and nearly all of the shipper's own error
//! counts (docs/cost.md).

use super::trim::watched;
use crate::aggregate::{Aggregate, Summary};
use crate::sample::Dims;
use slurm_cw_catalog::dims::CLUSTER_NAME;
use slurm_cw_catalog::views::quiet_at_zero;
use std::collections::HashMap;
use std::time::{Duration, SystemTime};

/// How often a series that stays at zero is sent.
pub const ZERO_AGAIN_AFTER: Duration = Duration::from_secs(24 * 3600);

#[derive(Debug)]
pub struct Quiet {
    /// Series a default alarm watches (`ClusterName` left out): always sent.
    watched: Vec<(&'static str, Dims)>,
    /// Per quiet series: when it was last sent at zero (None: its last value was not zero).
    last: HashMap<(&'static str, Dims), Option<SystemTime>>,
}

impl Default for Quiet {
    fn default() -> Self {
        let quiet: Vec<&'static slurm_cw_catalog::Metric> =
            slurm_cw_catalog::ALL.iter().copied().filter(|m| quiet_at_zero(m)).collect();
        Quiet { watched: watched(&quiet), last: HashMap::new() }
    }
}

impl Quiet {
    /// Leaves out of one flush's aggregates the quiet series at zero not due.
    pub fn apply(&mut self, aggregates: &mut Vec<Aggregate>) {
        aggregates.retain(|a| self.keep(a));
    }

    fn keep(&mut self, a: &Aggregate) -> bool {
        if !quiet_at_zero(a.metric) {
            return true;
        }
        let key = (a.metric.name, a.dims.clone());
        if !is_zero(&a.value) {
            self.last.insert(key, None);
            return true;
        }
        let due = match self.last.get(&key) {
            // Never above zero here: nothing to say yet.
            None => false,
            // Falling to zero now.
            Some(None) => true,
            Some(Some(sent)) => a.time.duration_since(*sent).is_ok_and(|d| d >= ZERO_AGAIN_AFTER),
        };
        let watched = || {
            let dims = a.dims.without(CLUSTER_NAME);
            self.watched.iter().any(|(m, d)| *m == a.metric.name && *d == dims)
        };
        if due || watched() {
            self.last.insert(key, Some(a.time));
            return true;
        }
        false
    }
}

/// Every figure of the summary is zero (nothing counted, or all counts zero).
fn is_zero(v: &Summary) -> bool {
    match v {
        Summary::Value { value } => *value == 0.0,
        Summary::Values { values, .. } => values.iter().all(|v| *v == 0.0),
        Summary::Stats { stats } => stats.min == 0.0 && stats.max == 0.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use slurm_cw_catalog::Metric;
    use slurm_cw_catalog::dims::MESSAGE_TYPE;
    use slurm_cw_catalog::metrics::{NODE_COUNT, RPC_RATE, SHIPPER_DATUMS_DROPPED, SHIPPER_RETRIES};

    fn agg(metric: &'static Metric, minute: u64, value: f64) -> Aggregate {
        let mut dims = Dims::new().with(CLUSTER_NAME, "c");
        if std::ptr::eq(metric, &RPC_RATE) {
            dims.set(MESSAGE_TYPE, "REQUEST_PING");
        }
        Aggregate {
            metric,
            dims,
            time: SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000 + minute * 60),
            value: Summary::Value { value },
        }
    }

    fn sent(q: &mut Quiet, metric: &'static Metric, minute: u64, value: f64) -> bool {
        let mut v = vec![agg(metric, minute, value)];
        q.apply(&mut v);
        !v.is_empty()
    }

    #[test]
    fn an_event_count_at_zero_goes_as_it_falls_and_once_a_day() {
        let mut q = Quiet::default();
        let day = ZERO_AGAIN_AFTER.as_secs() / 60;
        let seen: Vec<bool> = [
            (0, 0.0),
            (1, 0.0),
            (2, 3.0),
            (3, 0.0),
            (4, 0.0),
            (3 + day - 1, 0.0),
            (3 + day, 0.0),
            (4 + day, 0.0),
        ]
        .into_iter()
        .map(|(minute, v)| sent(&mut q, &RPC_RATE, minute, v))
        .collect();
        assert_eq!(seen, [false, false, true, true, false, false, true, false], "never above zero: not sent");
    }

    #[test]
    fn watched_series_and_other_figures_always_go() {
        let mut q = Quiet::default();
        for minute in 0..5 {
            assert!(sent(&mut q, &SHIPPER_DATUMS_DROPPED, minute, 0.0), "a default alarm watches it");
            assert!(sent(&mut q, &NODE_COUNT, minute, 0.0), "not a count of events");
        }
        assert!(!sent(&mut q, &SHIPPER_RETRIES, 0, 0.0));
        assert!(sent(&mut q, &SHIPPER_RETRIES, 1, 2.0));
        assert!(sent(&mut q, &SHIPPER_RETRIES, 2, 0.0));
        assert!(!sent(&mut q, &SHIPPER_RETRIES, 3, 0.0));
    }
}
