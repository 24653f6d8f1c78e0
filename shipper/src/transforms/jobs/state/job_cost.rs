//! What one job costs on its node and what of it was wasted, by the rule of [`crate::cost`]:
//! its share (CPUs, memory, GPUs; its memory and GPUs alone while Slurm holds it suspended),
//! its bill, its waste, and their record fields.

use super::Job;
use crate::cost::{self, Prices, Resource};
use crate::sample::JobReading;
use crate::transforms::records::{round, round_usd};
use serde_json::{Map, Value, json};
use slurm_cw_catalog::records as r;
use slurm_cw_formats::datum::format_timestamp;
use slurm_cw_formats::slurm::node::NodeSize;
use std::time::SystemTime;

/// Crowds a job keeps between its readings at most ([`Job::ran_beside`]).
const MAX_CROWDS: usize = 64;

impl Job {
    /// Counts its cost up to when it was last seen, where the node's price and size are known.
    pub fn accrue(&mut self, prices: &Prices) {
        let (Some(price), Some(size)) = (prices.price(), prices.size(&self.info.node)) else { return };
        // A first count reaches back to Slurm's start (so does one after a start Slurm gave
        // late): whether the job ran then, the node cannot tell, so it is billed as running.
        let back = self.bill.until.is_none() || self.bill.from.is_some_and(|b| self.start() < b);
        let suspended = self.suspension.now && !back;
        // Suspended, holding nothing but CPUs: the time passes unbilled.
        let latest = self.bill.rate.map_or(Resource::Cpu, |r| r.dominant);
        let share = self.share_as(None, &size, suspended).or_else(|| suspended.then_some((0.0, latest)));
        let Some((share, dominant)) = share else { return };
        // The crowds it ran in up to its last reading, each to its end, then the latest.
        let seen = self.last_seen;
        let counted = self.bill.until;
        let mut spans: Vec<(SystemTime, f64)> = self
            .crowds
            .iter()
            .copied()
            .filter(|(to, _)| *to < seen && counted.is_none_or(|u| *to > u))
            .collect();
        self.crowds.retain(|(to, _)| *to > seen);
        spans.push((seen, self.crowd));
        for (to, crowd) in spans {
            let rate = cost::Rate { price, share: share / crowd.max(1.0), dominant };
            let added = self.bill.accrue(rate, self.start(), to);
            self.suspension.billed(added, dominant, suspended);
        }
    }

    /// Another job of its node, seen only by its final sample at `to` and begun at `from`, ran
    /// beside it: until its next reading it counts its own crowd up to `from`, then `crowd`
    /// (that job's included) up to `to` ([`Self::accrue`] splits its next count there).
    /// Bounded: many final samples before its next reading merge into the last crowd, the
    /// larger (a job billed less, never a node billed twice).
    pub fn ran_beside(&mut self, from: Option<SystemTime>, to: SystemTime, crowd: f64) {
        let after_last = |t: SystemTime| self.crowds.last().is_none_or(|l| l.0 < t);
        if let Some(from) = from
            && from < to
            && after_last(from)
            && self.crowds.len() + 1 < MAX_CROWDS
        {
            self.crowds.push((from, self.crowd));
        }
        let full = self.crowds.len() >= MAX_CROWDS;
        match self.crowds.last_mut() {
            Some(last) if full => *last = (to, last.1.max(crowd)),
            _ => self.crowds.push((to, crowd)),
        }
    }

    /// Its share of a node of `size` before any crowding, with `reading` taken in when given:
    /// the largest CPUs and memory it has held, its GPUs' billed worth now; no CPUs while
    /// suspended.
    pub fn share_with(&self, reading: Option<&JobReading>, size: &NodeSize) -> Option<(f64, Resource)> {
        // A reading's suspension counts from the job's second reading, as in `absorb`.
        let suspended =
            reading.map_or(self.suspension.now, |r| r.job.suspended && self.last_sample_at.is_some());
        self.share_as(reading, size, suspended)
    }

    /// [`Self::share_with`], suspended or not as said.
    fn share_as(
        &self,
        reading: Option<&JobReading>,
        size: &NodeSize,
        suspended: bool,
    ) -> Option<(f64, Resource)> {
        let (cpus, memory) = self.held_with(reading);
        let cpus = cpus.filter(|_| !suspended);
        let billed = reading.and_then(|r| r.gpus.as_ref()).map_or(self.gpus_billed, |g| g.billed);
        cost::share(cpus, memory, (billed > 0.0).then_some(billed), size)
    }

    /// The CPUs and memory it holds with `reading` taken in: the largest of each seen, Slurm's
    /// word over the cgroup's. A job first read before Slurm answered (a collection waits 2 s)
    /// had its cgroup's figures stand in: with `CR_Core` and `ConstrainRAMSpace` its memory
    /// limit is the whole node's, and kept as the largest it billed the job the whole node for
    /// good.
    pub(super) fn held_with(&self, reading: Option<&JobReading>) -> (Option<f64>, Option<f64>) {
        let larger = |a: Option<f64>, b: Option<f64>| [a, b].into_iter().flatten().reduce(f64::max);
        match reading {
            None => (self.cpus_held, self.memory_held),
            Some(r) if r.held.from_slurm() && !self.held_by_slurm => (r.cpus_held(), r.memory_held()),
            Some(r) if !r.held.from_slurm() && self.held_by_slurm => (self.cpus_held, self.memory_held),
            Some(r) => (larger(self.cpus_held, r.cpus_held()), larger(self.memory_held, r.memory_held())),
        }
    }

    /// The unused fraction of `resource` so far.
    fn unused(&self, resource: Resource) -> Option<f64> {
        match resource {
            Resource::Gpu => (self.gpu_seconds > 0.0).then(|| self.gpu_idle_seconds / self.gpu_seconds),
            Resource::Cpu => (self.cores > 0.0 && self.cpu_covered > 0.0)
                .then(|| 1.0 - self.cpu_integrated / (self.cores * self.cpu_covered)),
            Resource::Memory => self
                .memory_held
                .filter(|m| *m > 0.0 && self.memory_peak > 0.0)
                .map(|m| 1.0 - self.memory_peak / m),
        }
    }

    /// Dollars it cost while Slurm held it suspended.
    pub fn suspended_usd(&self) -> f64 {
        self.suspension.usd()
    }

    /// Dollars wasted by the rule, the unused fraction, and of what: what it cost, less what
    /// it cost while suspended, times the unused fraction of the resource that set its share
    /// while it ran. None where that fraction is not known.
    pub fn waste(&self) -> Option<(f64, f64, Resource)> {
        let (usd, resource) = self.suspension.waste_base(self.bill.usd, self.bill.rate?.dominant);
        let fraction = self.unused(resource)?.clamp(0.0, 1.0);
        Some((usd * fraction, fraction, resource))
    }

    pub(super) fn put_waste(&self, m: &mut Map<String, Value>, usd: f64, fraction: f64, resource: Resource) {
        m.insert(r::WASTE_USD.name.into(), json!(round_usd(usd)));
        m.insert(r::WASTE_RESOURCE.name.into(), json!(resource.as_str()));
        m.insert(r::UNUSED_PERCENT.name.into(), json!(round(fraction * 100.0)));
    }

    /// Its cost so far, with the price and share behind it, into a record.
    pub fn put_cost(&self, m: &mut Map<String, Value>) {
        if let Some(s) = self.started {
            m.insert(r::SLURM_START.name.into(), json!(format_timestamp(s)));
        }
        let Some(rate) = self.bill.rate else { return };
        m.insert(r::COST_USD.name.into(), json!(round_usd(self.bill.usd)));
        m.insert(r::HOURLY_PRICE.name.into(), json!(round_usd(rate.price.hourly)));
        m.insert(r::SHARE.name.into(), json!(round(rate.share)));
        m.insert(r::COST_BASIS.name.into(), json!(rate.price.basis.as_str()));
        self.suspension.put(m);
    }
}
