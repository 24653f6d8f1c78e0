//! The node's own HPC hardware, per node rather than per job: EFA and InfiniBand port counters
//! ([`fabric`]), the Lustre client's per-mount stats ([`lustre`]) and RAPL CPU energy
//! ([`rapl`]). Each reader finds its source again every collection while the node has any of
//! them (a file system mounted later is picked up); a node with none looks again every
//! [`LOOK_AGAIN_EVERY`] collections, not four failed opens a cycle. Each turns counters into
//! rates against its previous reading (a counter
//! that went back was reset: counted from zero, never negative), and emits
//!
//! - a few metrics summed over the node's ports, mounts or packages, with `NodeName`, which
//!   `transforms::shape` ships across the cluster (per node only with
//!   `self_metrics_per_node`);
//! - per port, mount and zone [`DeviceReading`]s for the node's `node_sample` record.
//!
//! A node with none of them ships nothing more than before: no metric, no record, not even
//! this collector's duration (see [`Collector::found_nothing`]).

pub mod fabric;
pub mod lustre;
pub mod rapl;

use super::{Collector, Errors};
use crate::sample::{Batch, DeviceReading};
use crate::sources::node::config::NodeConfig;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Where the sources are, so tests can point at fixture trees.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Roots {
    /// `/sys`
    pub sys: PathBuf,
    /// `/proc`
    pub proc: PathBuf,
}

impl Roots {
    pub fn from_config(cfg: &NodeConfig) -> Self {
        Roots { sys: cfg.sys_root.clone(), proc: cfg.proc_root.clone() }
    }

    pub fn infiniband(&self) -> PathBuf {
        self.sys.join("class/infiniband")
    }

    pub fn powercap(&self) -> PathBuf {
        self.sys.join("class/powercap")
    }

    /// Lustre's llite directories, older clients' (procfs, up to 2.11) first, then 2.12 and
    /// newer (debugfs).
    pub fn llite(&self) -> [(PathBuf, &'static str); 2] {
        [
            (self.proc.join("fs/lustre/llite"), "procfs"),
            (self.sys.join("kernel/debug/lustre/llite"), "debugfs"),
        ]
    }
}

/// The largest file read here: these files are a few lines long.
const MAX_FILE: u64 = 1 << 20;

/// Reads a small text file into `buf` (cleared first), at most [`MAX_FILE`] bytes.
pub fn read_small(path: &Path, buf: &mut String) -> std::io::Result<()> {
    buf.clear();
    std::fs::File::open(path)?.take(MAX_FILE).read_to_string(buf).map(|_| ())
}

/// The names in a directory, sorted; empty when it cannot be read.
pub fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .map(|d| d.flatten().filter_map(|e| e.file_name().into_string().ok()).collect())
        .unwrap_or_default();
    v.sort();
    v
}

/// Seconds between two readings; None when the clock did not move.
pub fn seconds(then: Instant, now: Instant) -> Option<f64> {
    let s = now.checked_duration_since(then)?.as_secs_f64();
    (s > 0.0).then_some(s)
}

/// The three readers as one collector (one `Collector` series rather than three).
pub struct HostCollector {
    node: String,
    fabric: fabric::Fabric,
    lustre: lustre::Lustre,
    rapl: rapl::Rapl,
    found: bool,
    /// Collections since the last look, while nothing was found.
    idle: u32,
}

/// How often a node with none of the sources looks for them again (a Lustre file system
/// mounted after the daemon started): every 10th collection, 5 minutes at the default interval.
pub const LOOK_AGAIN_EVERY: u32 = 10;

/// The host collector, reading where `[node]` says /proc and /sys are ([`super::table`]);
/// nothing is shipped where there are none.
pub fn build(
    node: &crate::sources::node::config::NodeConfig,
    shared: &super::Shared,
) -> Option<Box<dyn Collector>> {
    Some(Box::new(HostCollector::new(Roots::from_config(node), shared.node.clone())))
}

impl HostCollector {
    pub fn new(roots: Roots, node: String) -> Self {
        HostCollector {
            node,
            fabric: fabric::Fabric::new(roots.infiniband()),
            lustre: lustre::Lustre::new(roots.llite()),
            rapl: rapl::Rapl::new(roots.powercap()),
            found: false,
            idle: LOOK_AGAIN_EVERY,
        }
    }

    /// One collection as of `now` (tests give the time; the daemon the clock's).
    pub fn collect_at(&mut self, now: Instant, out: &mut Batch, errors: &mut Errors) {
        if !self.found && self.idle + 1 < LOOK_AGAIN_EVERY {
            self.idle += 1;
            return;
        }
        self.idle = 0;
        let node = self.node.as_str();
        let fabric = self.fabric.collect(now, node, out, errors);
        let lustre = self.lustre.collect(now, node, out, errors);
        let rapl = self.rapl.collect(now, node, out, errors);
        self.found = fabric || lustre || rapl;
    }
}

#[async_trait::async_trait(?Send)]
impl Collector for HostCollector {
    fn name(&self) -> &'static str {
        "host"
    }

    async fn collect(&mut self, out: &mut Batch, errors: &mut Errors) {
        self.collect_at(Instant::now(), out, errors);
    }

    fn found_nothing(&self) -> bool {
        !self.found
    }
}

/// What `--check` says of the sources: what was found, or where nothing was.
pub fn survey(roots: &Roots) -> [(&'static str, Result<String, String>); 3] {
    let llite = roots.llite();
    let llite_places: Vec<String> = llite.iter().map(|(d, _)| d.display().to_string()).collect();
    let none = |what: String| Err(format!("none under {what}"));
    [
        (
            "efa/infiniband",
            fabric::survey(&roots.infiniband())
                .ok_or_else(|| roots.infiniband().display().to_string())
                .or_else(none),
        ),
        ("lustre client", lustre::survey(&llite).ok_or_else(|| llite_places.join(" or ")).or_else(none)),
        (
            "rapl energy",
            rapl::survey(&roots.powercap())
                .ok_or_else(|| roots.powercap().display().to_string())
                .or_else(none),
        ),
    ]
}

/// A reading's figures, for the record, in the order given.
pub fn reading(
    source: &'static slurm_cw_catalog::records::Field,
    item: &str,
    seconds: f64,
    reset: bool,
    figures: Vec<(&'static slurm_cw_catalog::records::Field, f64, crate::sample::Shown)>,
) -> DeviceReading {
    DeviceReading { source, item: item.to_owned(), seconds, figures, reset }
}
