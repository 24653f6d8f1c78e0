//! What a job costs, in dollars, on each node it runs on, and what of it was wasted.
//!
//! - The node's price an hour ([`Price`], with the [`Basis`] it came from) is found off the
//!   collection thread by [`lookup`] and kept in [`Prices`], with the nodes' sizes as Slurm
//!   defines them (`CPUTot`, `RealMemory`, GPUs).
//! - A job's share of a node ([`share`]) is the largest of its CPU, memory and GPU shares: a job
//!   that takes one GPU of eight pays an eighth of the node, an exclusive job all of it.
//! - Its cost ([`Bill`]) is price x share integrated over the time it held the node, from its
//!   start as Slurm reports it, so a daemon restarted mid-job, or one `--once`, still counts the
//!   whole time, and a job shorter than a collection (its TaskEpilog sample) too.
//! - Waste, one rule everywhere: the cost times the unused fraction of the resource that set
//!   the share (idle GPU time, unused cores, memory requested above the peak); the job table
//!   applies it (`transforms::jobs`), leaving out what a job cost while Slurm held it suspended.

pub mod config;
pub mod counted;
pub mod lookup;

use slurm_cw_formats::slurm::node::NodeSize;
use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::SystemTime;

/// Where a node's price came from (`CostBasis` in the records).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Basis {
    /// `cost.hourly_price` or `cost.prices`.
    Configured,
    /// EC2's Spot price of its instance type in its Availability Zone.
    Spot,
    /// The On-Demand Linux price of its instance type in its region (Price List API).
    OnDemand,
}

impl Basis {
    pub fn as_str(self) -> &'static str {
        match self {
            Basis::Configured => "configured",
            Basis::Spot => "spot",
            Basis::OnDemand => "on_demand",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Price {
    /// Dollars an hour for the whole node.
    pub hourly: f64,
    pub basis: Basis,
}

/// The resource whose share set a job's share of a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resource {
    Gpu,
    Cpu,
    Memory,
}

impl Resource {
    pub fn as_str(self) -> &'static str {
        match self {
            Resource::Gpu => "gpu",
            Resource::Cpu => "cpu",
            Resource::Memory => "memory",
        }
    }
}

/// A job's share of a node (0 to 1) and the resource that set it: the largest of what it holds
/// of the node's CPUs, memory and GPUs (GPUs first on a tie, then CPUs). None when it holds
/// nothing the node's size measures.
pub fn share(
    cpus: Option<f64>,
    memory: Option<f64>,
    gpus: Option<f64>,
    node: &NodeSize,
) -> Option<(f64, Resource)> {
    let part =
        |held: Option<f64>, total: f64| held.filter(|_| total > 0.0).map(|h| (h / total).clamp(0.0, 1.0));
    [
        (part(gpus, node.gpus), Resource::Gpu),
        (part(cpus, node.cpus), Resource::Cpu),
        (part(memory, node.memory_bytes), Resource::Memory),
    ]
    .into_iter()
    .filter_map(|(s, r)| Some((s?, r)))
    .filter(|(s, _)| *s > 0.0)
    .fold(None, |best: Option<(f64, Resource)>, (s, r)| match best {
        Some((b, _)) if b >= s => best,
        _ => Some((s, r)),
    })
}

/// How a job is billed now: the node's price and the job's share of it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rate {
    pub price: Price,
    pub share: f64,
    pub dominant: Resource,
}

impl Rate {
    pub fn per_hour(&self) -> f64 {
        self.price.hourly * self.share
    }
}

/// What one job has cost on one node so far.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Bill {
    pub usd: f64,
    /// Up to when it is counted; None before the first rate was known.
    pub until: Option<SystemTime>,
    /// The latest rate.
    pub rate: Option<Rate>,
    /// Where the count began.
    pub from: Option<SystemTime>,
    /// Time before this was another's to report (the daemon before this one's).
    pub mark: Option<SystemTime>,
    /// Dollars counted for time before `mark`, each span at the rate it was counted at.
    pub usd_before: f64,
}

/// Hours from `from` to `to`, none when `to` is not later.
fn hours(from: SystemTime, to: SystemTime) -> f64 {
    to.duration_since(from).map_or(0.0, |d| d.as_secs_f64() / 3600.0)
}

impl Bill {
    /// Counts the job's cost up to `to` at `rate`: from `started` (Slurm's start, else when this
    /// node first saw it) the first time, else from where it stood. Returns the dollars added.
    pub fn accrue(&mut self, rate: Rate, started: SystemTime, to: SystemTime) -> f64 {
        // A start earlier than where the count began: Slurm's start, come after the first count
        // began where this node first saw the job (Slurm slow to answer a restarted daemon, or
        // a job seen only by its TaskEpilog). The time between counts at this rate.
        let began = self.from.filter(|b| started < *b);
        let from = self.until.unwrap_or(started);
        self.from = Some(self.from.map_or(from, |b| b.min(started)));
        let mut added = 0.0;
        for (a, b) in began.map(|b| (started, b)).into_iter().chain([(from, to)]) {
            added += self.count(rate.per_hour(), a, b);
        }
        self.until = Some(self.until.map_or(to, |u| u.max(to)));
        self.rate = Some(rate);
        added
    }

    /// Counts `a` to `b` at `per_hour`; returns the dollars.
    fn count(&mut self, per_hour: f64, a: SystemTime, b: SystemTime) -> f64 {
        let usd = per_hour * hours(a, b);
        self.usd += usd;
        if let Some(mark) = self.mark {
            self.usd_before += per_hour * hours(a, b.min(mark));
        }
        usd
    }
}

#[derive(Debug, Default)]
struct Book {
    price: Option<Price>,
    /// Why there is no price, for the log and `--check`.
    missing: Option<String>,
    sizes: HashMap<String, NodeSize>,
    /// Nodes whose size was asked for and is not known yet.
    wanted: BTreeSet<String>,
}

/// The node's price and the sizes of the nodes this host runs, shared between the lookup task
/// and the collection thread.
#[derive(Debug, Clone, Default)]
pub struct Prices(Arc<Mutex<Book>>);

impl Prices {
    fn book(&self) -> std::sync::MutexGuard<'_, Book> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A fixed price and node sizes (tests, benches).
    pub fn fixed(price: Price, sizes: &[(&str, NodeSize)]) -> Self {
        let p = Prices::default();
        p.set_price(Ok(price));
        for (n, s) in sizes {
            p.set_size(n, *s);
        }
        p
    }

    pub fn price(&self) -> Option<Price> {
        self.book().price
    }

    /// Why there is no price, when there is none.
    pub fn missing(&self) -> Option<String> {
        self.book().missing.clone()
    }

    pub fn set_price(&self, price: Result<Price, String>) {
        let mut b = self.book();
        match price {
            Ok(p) => {
                b.price = Some(p);
                b.missing = None;
            }
            // A price once known stays until a new one comes.
            Err(why) => b.missing = Some(why),
        }
    }

    /// The size of `node`; asked for (see [`Prices::wanted`]) when not known.
    pub fn size(&self, node: &str) -> Option<NodeSize> {
        let mut b = self.book();
        let s = b.sizes.get(node).copied();
        if s.is_none() {
            b.wanted.insert(node.to_owned());
        }
        s
    }

    pub fn set_size(&self, node: &str, size: NodeSize) {
        let mut b = self.book();
        b.wanted.remove(node);
        b.sizes.insert(node.to_owned(), size);
    }

    /// Nodes whose size is wanted and not known.
    pub fn wanted(&self) -> Vec<String> {
        self.book().wanted.iter().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    const GPU_NODE: NodeSize = NodeSize { cpus: 96.0, memory_bytes: 1e12, gpus: 8.0 };

    #[test]
    fn the_share_is_the_largest_of_cpus_memory_and_gpus() {
        assert_eq!(share(Some(12.0), Some(1e11), Some(1.0), &GPU_NODE), Some((0.125, Resource::Gpu)));
        assert_eq!(share(Some(48.0), Some(1e11), Some(1.0), &GPU_NODE), Some((0.5, Resource::Cpu)));
        assert_eq!(share(Some(1.0), Some(7.5e11), None, &GPU_NODE), Some((0.75, Resource::Memory)));
        assert_eq!(share(Some(96.0), None, None, &GPU_NODE), Some((1.0, Resource::Cpu)), "exclusive");
        assert_eq!(share(Some(200.0), None, None, &GPU_NODE), Some((1.0, Resource::Cpu)), "never above 1");
        let cpu_node = NodeSize { cpus: 4.0, memory_bytes: 0.0, gpus: 0.0 };
        assert_eq!(share(Some(1.0), Some(1e9), Some(1.0), &cpu_node), Some((0.25, Resource::Cpu)));
        assert_eq!(share(None, None, None, &cpu_node), None);
    }

    #[test]
    fn a_bill_counts_from_the_jobs_start_at_each_rate() {
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let h = |x: f64| t0 + Duration::from_secs_f64(x * 3600.0);
        let rate = |hourly, share| Rate {
            price: Price { hourly, basis: Basis::Spot },
            share,
            dominant: Resource::Gpu,
        };
        let mut b = Bill::default();
        // First seen two hours in (a restarted daemon): the first two hours count too.
        assert_eq!(b.accrue(rate(32.0, 0.125), t0, h(2.0)), 8.0);
        // The Spot price moves: the next hour at the new price.
        b.accrue(rate(16.0, 0.125), t0, h(3.0));
        assert_eq!(b.usd, 10.0);
        b.accrue(rate(16.0, 0.125), t0, h(3.0));
        assert_eq!(b.usd, 10.0, "the same time twice counts once");
    }
}
