//! A job Slurm suspends (`scontrol suspend`, `PreemptMode=SUSPEND`) keeps its memory and GPUs
//! while Slurm lends its CPUs to other jobs: billed then for its memory and GPUs alone, that
//! time left out of its CPU efficiency, GPU idle time and waste (docs/job-costs.md).

use crate::cost::Resource;
use serde_json::{Map, Value, json};
use slurm_cw_catalog::records as r;

#[derive(Debug, Default)]
pub(super) struct Suspension {
    /// Slurm held it suspended over the interval its latest reading ends. A suspension seen at
    /// a job's first reading counts from its second: when it began, the node cannot tell, so
    /// the time before is billed as running.
    pub now: bool,
    seconds: f64,
    /// Dollars billed while suspended: no waste of its user's making.
    usd: f64,
    /// What set its share the last time it was billed running: the resource its waste is of.
    running_dominant: Option<Resource>,
}

impl Suspension {
    /// One reading: `suspended` as the node read it, `seen_before` whether it had a reading
    /// before this one, `dt` the seconds since.
    pub fn observe(&mut self, suspended: bool, seen_before: bool, dt: f64) {
        self.now = suspended && seen_before;
        if self.now {
            self.seconds += dt;
        }
    }

    /// `added` dollars billed up to its latest reading, its share set by `dominant`, as
    /// `suspended` or running.
    pub fn billed(&mut self, added: f64, dominant: Resource, suspended: bool) {
        if suspended {
            self.usd += added;
        } else {
            self.running_dominant = Some(dominant);
        }
    }

    /// Of `usd` billed in all, what it cost while it ran.
    pub fn running_usd(&self, usd: f64) -> f64 {
        if self.usd > 0.0 { (usd - self.usd).max(0.0) } else { usd }
    }

    /// Of `usd` billed in all, what its waste is counted on, and of which resource (`latest`:
    /// the latest rate's, where it was never billed running).
    pub fn waste_base(&self, usd: f64, latest: Resource) -> (f64, Resource) {
        (self.running_usd(usd), self.running_dominant.unwrap_or(latest))
    }

    /// Dollars billed while suspended.
    pub fn usd(&self) -> f64 {
        self.usd
    }

    /// `SuspendedSeconds`, for a job that was.
    pub fn put(&self, m: &mut Map<String, Value>) {
        if self.seconds > 0.0 {
            m.insert(r::SUSPENDED_SECONDS.name.into(), json!(super::super::records::round(self.seconds)));
        }
    }
}
