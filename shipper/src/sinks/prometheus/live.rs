//! What the endpoint serves, shared by the two that update it: each collection shows its
//! aggregates so far (the collection thread, [`Live::collection`]), so a scrape reads the
//! figures as they come rather than once a flush; each flush (the delivery task,
//! [`Live::flush`]) brings the complete periods and the shipper's own delivery figures. Both
//! render the text once and swap it whole into the body the server answers with. Where
//! slurm.conf's `PrivateData` keeps jobs private ([`super::config::serves_job_series`]), no
//! series labelled with a job or a user is kept: any local user can read the endpoint.

use super::exposition::Series;
use super::server::Body;
use crate::aggregate::Aggregate;
use slurm_cw_catalog::dims::{JOB_ID, USER};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

#[derive(Debug, Clone)]
pub struct Live {
    series: Arc<Mutex<Series>>,
    body: Body,
    /// A series not updated for this long is dropped (an ended job's).
    ttl: Duration,
    /// Whether series labelled with a job or a user are served.
    job_series: bool,
}

impl Live {
    pub fn new(body: Body, ttl: Duration, job_series: bool) -> Self {
        Live { series: Arc::default(), body, ttl, job_series }
    }

    /// A collection's aggregates so far. Nothing is counted here (the flush counts what it
    /// delivers); what the flush's rules would drop (a value that is not finite, too many
    /// labels) is left out the same way.
    pub fn collection(&self, mut items: Vec<Aggregate>) {
        items.retain(|a| {
            a.dims.len() <= crate::sinks::open::MAX_LABELS && a.value.numbers().iter().all(|v| v.is_finite())
        });
        self.show(items);
    }

    /// A flush's aggregates (already through the rules); returns how many were kept private
    /// and the size of the text served now.
    pub fn flush(&self, items: Vec<Aggregate>) -> (usize, u64) {
        let offered = items.len();
        let (served, bytes) = self.show(items);
        (offered - served, bytes)
    }

    /// Returns how many were kept (those not private) and the text's size.
    fn show(&self, mut items: Vec<Aggregate>) -> (usize, u64) {
        if !self.job_series {
            items.retain(|a| a.dims.get(JOB_ID).is_none() && a.dims.get(USER).is_none());
        }
        let kept = items.len();
        let now = Instant::now();
        let text = {
            let mut series = lock(&self.series);
            series.update(items, now);
            series.expire(now, self.ttl);
            Arc::new(series.render())
        };
        let bytes = text.len() as u64;
        *lock(&self.body) = text;
        (kept, bytes)
    }
}

/// A poisoned lock still holds a whole value here: each update replaces it at once.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aggregate::Summary;
    use crate::sample::Dims;
    use slurm_cw_catalog::Metric;
    use slurm_cw_catalog::metrics::{MEMORY_RSS, SHIPPER_MEMORY_RSS};
    use std::time::SystemTime;

    fn datum(metric: &'static Metric, value: f64) -> Aggregate {
        let dims = Dims::new().with(slurm_cw_catalog::dims::NODE_NAME, "n1");
        Aggregate { metric, dims, time: SystemTime::now(), value: Summary::Value { value } }
    }

    #[test]
    fn a_collection_is_served_at_once_less_what_the_flush_would_drop() {
        let body: Body = Arc::default();
        let live = Live::new(body.clone(), Duration::from_secs(60), true);
        live.collection(vec![datum(&SHIPPER_MEMORY_RSS, 5.0), datum(&MEMORY_RSS, f64::NAN)]);
        let text = lock(&body).clone();
        assert!(text.contains("slurm_shipper_memory_rss_bytes{node_name=\"n1\"} 5\n"), "{text}");
        assert!(!text.contains("slurm_memory_rss_bytes"), "{text}");
    }
}
