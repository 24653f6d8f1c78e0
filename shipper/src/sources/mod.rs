//! Collectors: each reads one source (Slurm commands, job cgroups, NVML, the node's fabric,
//! Lustre and RAPL counters, the shipper itself) and turns it into samples of catalog metrics.

pub mod gpu;
pub mod head;
pub mod host;
pub mod node;
pub mod shipper;
pub mod slurm_jobs;
pub mod table;

pub use table::{COLLECTORS, CollectorSpec, JobOwners, Shared};

use crate::sample::Batch;
use std::collections::BTreeMap;

/// Errors of one collection, by the part of the collector that had them (`sinfo`, `sdiag`,
/// `cgroup`...). Each part named is shipped as `CollectorErrors`, zero included, so an alarm
/// sees a continuous series.
#[derive(Debug, Default)]
pub struct Errors(BTreeMap<&'static str, u64>);

impl Errors {
    pub fn new() -> Self {
        Self::default()
    }

    /// Records that `part` ran, so it is reported even with no error.
    pub fn ran(&mut self, part: &'static str) {
        self.0.entry(part).or_default();
    }

    pub fn add(&mut self, part: &'static str, n: u64) {
        *self.0.entry(part).or_default() += n;
    }

    pub fn iter(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
        self.0.iter().map(|(k, v)| (*k, *v))
    }

    pub fn total(&self) -> u64 {
        self.0.values().sum()
    }
}

/// What asking a collector for a job's final sample gave (the hook, `crate::hook`, says it on
/// its socket).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FinalSample {
    /// Sampled; the number of job cgroups read.
    Sampled(usize),
    /// The requester is neither root nor the job's user.
    Denied,
    /// Asked again within a second.
    TooSoon,
    /// Ask again: collection is stuck on a read (the sample would come after the caller gave
    /// up), or the job is unknown and the job table was listed too recently to look again.
    Busy,
}

#[async_trait::async_trait(?Send)]
pub trait Collector {
    /// The `Collector` dimension of this collector's duration.
    fn name(&self) -> &'static str;

    /// One collection: samples into `out`, problems into `errors`. Never fails as a whole: what
    /// could be read is shipped.
    async fn collect(&mut self, out: &mut Batch, errors: &mut Errors);

    /// The final sample of one job that is ending, asked for by a process of user `uid` (see
    /// [`crate::hook`]). None from collectors that know nothing of jobs.
    fn final_sample(&mut self, _job: &str, _uid: u32, _out: &mut Batch) -> Option<FinalSample> {
        None
    }

    /// True when the last collection found nothing to read here (no such hardware): then its
    /// duration and errors are not shipped either, so a node without it ships what it would
    /// without the collector.
    fn found_nothing(&self) -> bool {
        false
    }
}
