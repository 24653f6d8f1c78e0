//! What the endpoint serves, shared by the two that update it: each collection shows its
//! aggregates so far (the collection thread, [`Live::collection`]), so a scrape reads the
//! figures as they come rather than once a flush; each flush (the delivery task,
//! [`Live::flush`]) brings the complete periods and the shipper's own delivery figures. Both
//! render the text once and swap it whole into the body the server answers with. Where
//! slurm.conf's `PrivateData` keeps jobs private ([`super::config::serves_job_series`]), no
//! series labelled with a job or a user is kept: any local user can read the endpoint.

use super::exposition::Series;
use super::server::Body;
use crate::datum::Datum;
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
    pub fn collection(&self, mut datums: Vec<Datum>) {
        datums.retain(|d| {
            d.dimensions.len() <= crate::sinks::open::MAX_LABELS
                && d.value.numbers().iter().all(|v| v.is_finite())
        });
        self.show(datums);
    }

    /// A flush's datums (already through the rules); returns those the catalog does not know
    /// (not served), how many were kept private and the size of the text served now.
    pub fn flush(&self, datums: Vec<Datum>) -> (Vec<Datum>, usize, u64) {
        let offered = datums.len();
        let (unknown, served, bytes) = self.show(datums);
        (unknown, offered - served, bytes)
    }

    /// Returns the datums the catalog does not know, how many were kept (those not private)
    /// and the text's size.
    fn show(&self, mut datums: Vec<Datum>) -> (Vec<Datum>, usize, u64) {
        if !self.job_series {
            datums.retain(|d| !d.dimensions.iter().any(|(n, _)| n == JOB_ID || n == USER));
        }
        let kept = datums.len();
        let now = Instant::now();
        let (unknown, text) = {
            let mut series = lock(&self.series);
            let unknown = series.update(datums, now);
            series.expire(now, self.ttl);
            (unknown, Arc::new(series.render()))
        };
        let bytes = text.len() as u64;
        *lock(&self.body) = text;
        (unknown, kept, bytes)
    }
}

/// A poisoned lock still holds a whole value here: each update replaces it at once.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::datum::DatumValue;
    use slurm_cw_catalog::metrics::{MEMORY_RSS, SHIPPER_MEMORY_RSS};
    use std::time::SystemTime;

    fn datum(metric: &str, value: f64) -> Datum {
        Datum {
            metric: metric.into(),
            unit: "Bytes".into(),
            dimensions: vec![("NodeName".into(), "n1".into())],
            timestamp: SystemTime::now(),
            value: DatumValue::Value { value },
        }
    }

    #[test]
    fn a_collection_is_served_at_once_less_what_the_flush_would_drop() {
        let body: Body = Arc::default();
        let live = Live::new(body.clone(), Duration::from_secs(60), true);
        live.collection(vec![datum(SHIPPER_MEMORY_RSS.name, 5.0), datum(MEMORY_RSS.name, f64::NAN)]);
        let text = lock(&body).clone();
        assert!(text.contains("slurm_shipper_memory_rss_bytes{node_name=\"n1\"} 5\n"), "{text}");
        assert!(!text.contains("slurm_memory_rss_bytes"), "{text}");
    }
}
