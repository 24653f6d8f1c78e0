//! Per-minute rates of the counters the head node ships (sdiag's), reset-aware: never negative
//! across a reset (midnight UTC, slurmctld restart, `sdiag --reset`) and no spike after a gap.

use crate::cw::{Cw, Points, Series, at_epoch, datum};
use anyhow::Result;
use slurm_cw_catalog::{ALL, Kind, Metric};
use slurm_cw_sink::datum::Datum;

/// A previous value further back than this is too old to make a rate from.
pub const MAX_GAP_MINUTES: i64 = 15;

/// The per-minute rate at minute `at` (epoch seconds) from per-minute maxima of a counter:
/// the increase since the previous value, divided by the minutes between them. After a reset
/// (a lower value) the counter started again from zero, so the increase is the value itself.
/// None without a value at `at` or a previous one within [`MAX_GAP_MINUTES`].
pub fn rate_at(points: &Points, at: i64) -> Option<f64> {
    let now = *points.get(&at)?;
    let (prev_t, prev) = points.range(..at).next_back()?;
    let minutes = (at - prev_t) / 60;
    if !(1..=MAX_GAP_MINUTES).contains(&minutes) || !now.is_finite() || !prev.is_finite() {
        return None;
    }
    let increase = if now >= *prev { now - prev } else { now.max(0.0) };
    Some(increase / minutes as f64)
}

/// Every (rate metric, counter) pair of the catalog.
pub fn rate_metrics() -> Vec<(&'static Metric, &'static Metric)> {
    ALL.iter().filter_map(|m| Some((*m, m.rate_of?))).filter(|(_, c)| c.kind == Kind::Counter).collect()
}

/// Rates of every counter series at minute `at`.
pub async fn rates(cw: &mut Cw, at: i64) -> Result<Vec<Datum>> {
    let mut series = Vec::new();
    let mut targets = Vec::new();
    for (rate, counter) in rate_metrics() {
        let sets: Vec<Vec<(String, String)>> = if counter.dimension_sets == [&[] as &[&str]] {
            vec![Vec::new()]
        } else {
            cw.list(counter).await?
        };
        for dims in sets {
            series.push(Series { metric: counter, dims: dims.clone(), stat: "Maximum" });
            targets.push((rate, dims));
        }
    }
    let start = at_epoch(at - (MAX_GAP_MINUTES + 1) * 60);
    let points = cw.fetch(&series, start, at_epoch(at + 60), 60).await?;
    Ok(points
        .iter()
        .zip(targets)
        .filter_map(|(p, (rate, dims))| Some(datum(&cw.cluster, rate, &dims, at, rate_at(p, at)?)))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pts(v: &[(i64, f64)]) -> Points {
        v.iter().map(|(m, x)| (m * 60, *x)).collect()
    }

    #[test]
    fn steady_increase() {
        let p = pts(&[(0, 100.0), (1, 110.0), (2, 125.0)]);
        assert_eq!(rate_at(&p, 60), Some(10.0));
        assert_eq!(rate_at(&p, 120), Some(15.0));
        assert_eq!(rate_at(&p, 0), None, "no previous value");
        assert_eq!(rate_at(&p, 180), None, "no value at that minute");
    }

    #[test]
    fn reset_is_never_negative() {
        // sdiag --reset (or midnight) between minutes 1 and 2: the counter restarts from 0.
        let p = pts(&[(0, 500.0), (1, 520.0), (2, 7.0), (3, 19.0)]);
        assert_eq!(rate_at(&p, 120), Some(7.0));
        assert_eq!(rate_at(&p, 180), Some(12.0));
    }

    #[test]
    fn a_gap_spreads_the_increase_and_a_long_gap_gives_nothing() {
        let p = pts(&[(0, 100.0), (5, 150.0), (30, 200.0)]);
        assert_eq!(rate_at(&p, 300), Some(10.0), "50 over 5 minutes, not a spike of 50");
        assert_eq!(rate_at(&p, 1800), None, "25 minutes apart: too old");
    }

    #[test]
    fn every_counter_has_its_rate() {
        let pairs = rate_metrics();
        assert!(pairs.len() >= 10);
        use slurm_cw_catalog::metrics::{JOBS_SUBMITTED, JOBS_SUBMITTED_RATE};
        assert!(
            pairs
                .iter()
                .any(|(r, c)| std::ptr::eq(*r, &JOBS_SUBMITTED_RATE) && std::ptr::eq(*c, &JOBS_SUBMITTED))
        );
    }
}
