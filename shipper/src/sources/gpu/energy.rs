//! Per-GPU energy from NVML's total energy counters, between readings.

use super::source::{GpuId, Reading};
use crate::sources::node::table::Key;
use std::collections::HashMap;

/// Per GPU UUID: the energy counter (mJ) at the last reading accounted to jobs.
#[derive(Debug, Default)]
pub(super) struct Energy {
    last: HashMap<String, u64>,
    /// Joules counted but not yet given: (GPU UUID, job) -> another job's part of a GPU a
    /// final sample accounted (its counter moved on), for that job's next reading.
    carried: HashMap<(String, Key), f64>,
}

impl Energy {
    /// Keeps `joules` of a GPU for `job`'s next reading of it.
    pub(super) fn carry(&mut self, uuid: String, job: Key, joules: f64) {
        *self.carried.entry((uuid, job)).or_default() += joules;
    }

    /// What was kept for `job` of this GPU, given once.
    pub(super) fn carried(&mut self, uuid: &str, job: &Key) -> f64 {
        self.carried.remove(&(uuid.to_owned(), job.clone())).unwrap_or(0.0)
    }

    /// Forgets what was kept for jobs gone.
    pub(super) fn retain_jobs(&mut self, alive: impl Fn(&Key) -> bool) {
        self.carried.retain(|(_, job), _| alive(job));
    }

    /// Joules each reading's GPU used since its counter was last accounted, for the readings
    /// `account` picks (the others keep their last value): none at a GPU's first reading, nor
    /// for a MIG instance or a GPU without the counter; counted from zero where the counter went
    /// back (the driver was reloaded).
    pub(super) fn since(
        &mut self,
        readings: &[(GpuId, Reading)],
        account: impl Fn(usize) -> bool,
    ) -> Vec<Option<f64>> {
        let mut out = Vec::with_capacity(readings.len());
        for (g, (id, r)) in readings.iter().enumerate() {
            let (Some(now), None, true) = (r.energy_mj, id.mig, account(g)) else {
                out.push(None);
                continue;
            };
            let mj = match self.last.insert(id.uuid.clone(), now) {
                Some(before) if now >= before => Some(now - before),
                Some(_) => Some(now),
                None => None,
            };
            out.push(mj.map(|mj| mj as f64 / 1000.0));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gpu(uuid: &str, mig: Option<u32>, mj: Option<u64>) -> (GpuId, Reading) {
        let id = GpuId { index: 0, mig, uuid: uuid.into() };
        (id, Reading { energy_mj: mj, ..Reading::default() })
    }

    #[test]
    fn differences_of_the_counter_from_zero_after_a_reload() {
        let mut e = Energy::default();
        let all = |_| true;
        assert_eq!(e.since(&[gpu("a", None, Some(5_000))], all), vec![None], "a baseline");
        assert_eq!(e.since(&[gpu("a", None, Some(9_000))], all), vec![Some(4.0)]);
        assert_eq!(e.since(&[gpu("a", None, Some(1_500))], all), vec![Some(1.5)], "reloaded");
        // Not accounted: the next reading covers the time since the last accounted one.
        assert_eq!(e.since(&[gpu("a", None, Some(2_000))], |_| false), vec![None]);
        assert_eq!(e.since(&[gpu("a", None, Some(3_000))], all), vec![Some(1.5)]);
        // Kept joules go to their job once.
        let job: Key = (None, "7".into());
        e.carry("a".into(), job.clone(), 0.25);
        assert_eq!(
            (e.carried("a", &(None, "8".into())), e.carried("a", &job), e.carried("a", &job)),
            (0.0, 0.25, 0.0)
        );
        let none = [gpu("b", None, None), gpu("m", Some(1), Some(7))];
        assert_eq!(e.since(&none, all), vec![None, None]);
        assert_eq!(e.since(&none, all), vec![None, None], "no counter, no MIG instance");
    }
}
