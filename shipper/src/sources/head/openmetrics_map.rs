//! slurmctld's /metrics/nodes and /metrics/partitions as the node samples sinfo gives (see
//! [`super::sinfo::emit`]): node counts by state, node flags, CPUs, memory and GPUs for the
//! cluster and each partition.
//!
//! The endpoint counts nodes per base state and per flag, and gives no node's own state, so a
//! node's one state (as [`NodeState`] picks it) is rebuilt from the counts: each state that a
//! flag gives a node (drained, fail, maint, powered_down...) is taken out of the base states
//! its nodes most likely have. That is exact when no node carries two of those flags (the
//! usual case, and the bench's); otherwise the split may differ from sinfo's. The maintenance
//! flags go to down nodes first: such a node stays down but planned (`down$`), so that no alarm
//! pages for it (a maintenance reservation also sets the reserved flag). Likewise the
//! CPUs of unusable nodes ("other") are their node count times the CPUs per node, exact where
//! a set's nodes are alike (one instance type per queue, as ParallelCluster makes them).
//!
//! Faults of the endpoint corrected here:
//! - the cluster-wide `slurm_nodes_powering_up` counts powering-down nodes: both power
//!   transitions come from the partitions' own series (summed where the partitions split the
//!   nodes, else the largest partition's, a lower bound);
//! - counts are 16-bit and wrap past 65,535: the number of per-node series is the witness for
//!   the cluster's node count, and a cluster's base states that sum short of it by a multiple of
//!   65,536 get the difference on the largest (the only one that can have wrapped at such
//!   sizes); a partition's node count is checked against its CPUs where nodes are alike;
//! - `*_bytes` memory figures are MiB.
//!
//! GPUs: the endpoint counts GPUs only where accounting tracks `gres/gpu` (AccountingStorageTRES,
//! which needs slurmdbd); elsewhere it says 0 for GPUs that exist, so the caller says whether
//! to ship its GPU figures ([`Options::gpus`]). Per partition it gives no allocated GPUs of
//! nodes (only of jobs, 0 on 25.11.0-25.11.4): left out.

use crate::sample::{Batch, Dims};
use slurm_cw_catalog::dims::{FLAG, PARTITION, STATE};
use slurm_cw_catalog::metrics::*;
use slurm_cw_formats::slurm::openmetrics::Exposition;
use slurm_cw_formats::slurm::state::{CORE_NODE_STATES, NodeState};
use std::collections::{BTreeMap, HashSet};

const MIB: f64 = 1024.0 * 1024.0;
const WRAP: u64 = 1 << 16;

pub struct Options {
    pub per_partition: bool,
    /// Ship GPU figures (the endpoint's GPUs are real: accounting tracks gres/gpu).
    pub gpus: bool,
}

/// What was corrected, for the log, and what the counts cannot tell.
#[derive(Debug, Default, PartialEq)]
pub struct Corrections {
    pub wrapped: Vec<String>,
    /// Down nodes beside counts of flags that make a node planned or drained (powered_down,
    /// maint, drain, fail): whether those are on the down nodes or on others the counts do
    /// not say, so `NodesDownUnplanned` is a guess; the caller asks sinfo for the down nodes.
    pub down_guessed: bool,
}

/// Counts of a set's nodes by the endpoint's series suffixes, normalised to the cluster's names.
#[derive(Debug, Default, Clone)]
struct Counts(BTreeMap<String, u64>);

impl Counts {
    fn get(&self, k: &str) -> u64 {
        self.0.get(k).copied().unwrap_or(0)
    }
}

/// The partition series' suffixes that differ from the cluster's.
fn normalise(suffix: &str) -> &str {
    match suffix {
        "cg" => "completing",
        "no_resp" => "noresp",
        "reboot_requested" => "reboot_req",
        other => other,
    }
}

/// Endpoint flag counts and the flag names sinfo's states give.
const FLAGS: &[(&str, &str)] = &[
    ("blocked", "blocked"),
    ("cloud", "cloud"),
    ("completing", "completing"),
    ("drain", "drain"),
    ("dyn_future", "dynamic_future"),
    ("dyn_normal", "dynamic_norm"),
    ("external", "external"),
    ("fail", "fail"),
    ("invalid_reg", "invalid_reg"),
    ("maint", "maintenance"),
    ("noresp", "not_responding"),
    ("planned", "planned"),
    ("power_down", "power_down"),
    ("power_up", "power_up"),
    ("powered_down", "powered_down"),
    ("powering_down", "powering_down"),
    ("powering_up", "powering_up"),
    ("reboot_issued", "reboot_issued"),
    ("reboot_req", "reboot_requested"),
    ("resv", "reserved"),
];

const BASES: &[&str] = &["alloc", "mixed", "idle", "down", "future", "unknown"];

/// One set's figures before emitting.
#[derive(Debug, Default)]
struct Set {
    nodes: u64,
    counts: Counts,
    cpus: u64,
    cpus_alloc: u64,
    memory_mib: u64,
    memory_alloc_mib: u64,
    gpus: Option<(u64, Option<u64>)>,
}

/// Reads a u64 from a gauge (negative, NaN or absurd values count as 0).
fn count(v: f64) -> u64 {
    if v.is_finite() && v > 0.0 { v.min(1e15) as u64 } else { 0 }
}

/// `reported` where it is right; `witness` where `reported` is `witness` wrapped at 16 bits.
pub fn unwrap16(reported: u64, witness: u64) -> u64 {
    if witness >= WRAP && witness % WRAP == reported { witness } else { reported }
}

/// Emits the node samples; returns what it corrected.
pub fn emit(nodes: &Exposition, partitions: &Exposition, opts: &Options, out: &mut Batch) -> Corrections {
    let mut fixes = Corrections::default();
    let per_node = |name: &str| -> BTreeMap<String, u64> {
        nodes.series(name).filter_map(|s| Some((s.label("node")?.to_owned(), count(s.value)))).collect()
    };
    let node_cpus = per_node("slurm_node_cpus");
    let sum = |m: &BTreeMap<String, u64>| m.values().fold(0u64, |a, v| a.saturating_add(*v));
    let n = node_cpus.len() as u64;
    let mut cluster = Set {
        nodes: n,
        cpus: sum(&node_cpus),
        cpus_alloc: sum(&per_node("slurm_node_cpus_alloc")),
        memory_mib: sum(&per_node("slurm_node_memory_bytes")),
        memory_alloc_mib: sum(&per_node("slurm_node_memory_alloc_bytes")),
        gpus: Some((sum(&per_node("slurm_node_gpus")), Some(sum(&per_node("slurm_node_gpus_alloc"))))),
        ..Default::default()
    };
    for s in &nodes.samples {
        if let Some(suffix) = s.name.strip_prefix("slurm_nodes_")
            && s.labels.is_empty()
        {
            cluster.counts.0.insert(normalise(suffix).to_owned(), count(s.value));
        }
    }
    let reported = nodes.value("slurm_nodes").map(count).unwrap_or(n);
    if reported != n {
        fixes.wrapped.push(format!("slurm_nodes {reported}, {n} nodes listed"));
    }
    fix_bases(&mut cluster.counts, n, "cluster", &mut fixes);
    // CPUs per node where all alike (exact "other" CPUs), else the mean.
    let alike: HashSet<u64> = node_cpus.values().copied().collect();
    let per_node_cpus = if alike.len() == 1 { alike.into_iter().next() } else { None };

    let mut parts: BTreeMap<String, Set> = BTreeMap::new();
    for s in &partitions.samples {
        let Some(p) = s.label("partition") else { continue };
        let set = parts.entry(p.to_owned()).or_default();
        let v = count(s.value);
        match s.name.as_str() {
            "slurm_partition_nodes" => set.nodes = v,
            "slurm_partition_cpus" => set.cpus = v,
            "slurm_partition_nodes_cpus_alloc" => set.cpus_alloc = v,
            "slurm_partition_nodes_mem_tot" => set.memory_mib = v,
            "slurm_partition_nodes_mem_alloc" => set.memory_alloc_mib = v,
            "slurm_partition_gpus" => set.gpus = Some((v, None)),
            name => {
                if let Some(suffix) = name.strip_prefix("slurm_partition_nodes_") {
                    set.counts.0.insert(normalise(suffix).to_owned(), v);
                }
            }
        }
    }
    for (p, set) in parts.iter_mut() {
        if let Some(c) = per_node_cpus.filter(|c| *c > 0 && set.cpus.is_multiple_of(*c)) {
            let witness = set.cpus / c;
            let fixed = unwrap16(set.nodes, witness);
            if fixed != set.nodes {
                fixes.wrapped.push(format!("partition {p}: {} nodes, {witness} by its CPUs", set.nodes));
                set.nodes = fixed;
            }
        }
        let nodes = set.nodes;
        fix_bases(&mut set.counts, nodes, p, &mut fixes);
    }
    parts.retain(|_, s| s.nodes > 0);

    // Power transitions from the partitions (see the module's comment).
    let disjoint = parts.values().map(|s| s.nodes).sum::<u64>() == n;
    for key in ["powering_up", "powering_down"] {
        let each = parts.values().map(|s| s.counts.get(key));
        let v = if disjoint { each.sum() } else { each.max().unwrap_or(0) };
        cluster.counts.0.insert(key.to_owned(), v);
    }

    let (states, planned) = node_states_and_planned(&cluster.counts);
    emit_set(&cluster, &states, per_node_cpus, opts, &Dims::new(), out);
    let c = &cluster.counts;
    fixes.down_guessed = c.get("down") > 0
        && ["powered_down", "maint", "drained", "drain", "fail", "planned"].iter().any(|f| c.get(f) > 0);
    let down = states.get("down").copied().unwrap_or(0);
    out.push(&NODES_DOWN_UNPLANNED, Dims::new(), (down - planned) as f64);
    if opts.per_partition {
        for (p, set) in &parts {
            let states = node_states(&set.counts);
            let mean = (set.nodes > 0).then(|| set.cpus / set.nodes);
            emit_set(
                set,
                &states,
                per_node_cpus.or(mean),
                opts,
                &Dims::new().with(PARTITION, p.as_str()),
                out,
            );
        }
    }
    fixes
}

/// Base-state counts that sum short of the set's nodes by a multiple of 65,536: the largest
/// wrapped.
fn fix_bases(counts: &mut Counts, nodes: u64, set: &str, fixes: &mut Corrections) {
    let total: u64 = BASES.iter().map(|b| counts.get(b)).sum();
    if total < nodes && (nodes - total).is_multiple_of(WRAP) {
        let Some(largest) = BASES.iter().max_by_key(|b| counts.get(b)) else { return };
        let v = counts.get(largest) + (nodes - total);
        fixes.wrapped.push(format!("{set}: nodes {largest} {} taken for {v}", counts.get(largest)));
        counts.0.insert((*largest).to_owned(), v);
    }
}

/// Each node's one state, rebuilt from the counts (see the module's comment).
fn node_states(c: &Counts) -> BTreeMap<&'static str, u64> {
    node_states_and_planned(c).0
}

/// [`node_states`], and how many of the down nodes are planned: in maintenance or powered
/// down (the power flags that no state of their own took are taken to be on down nodes).
fn node_states_and_planned(c: &Counts) -> (BTreeMap<&'static str, u64>, u64) {
    let mut base: BTreeMap<&str, u64> = BASES.iter().map(|b| (*b, c.get(b))).collect();
    let mut states: BTreeMap<&'static str, u64> = BTreeMap::new();
    // Busy nodes' states come out of allocated and mixed; the others' out of the base states
    // such nodes usually have, first to last.
    // A node down is that whatever its power flags (as in NodeState).
    const IDLE_FIRST: &[&str] = &["idle", "unknown", "future"];
    let overrides: &[(&'static str, u64, &[&str])] = &[
        ("inval", c.get("invalid_reg"), &["unknown", "down", "idle", "future"]),
        ("drained", c.get("drained"), &["idle", "down", "unknown", "future"]),
        ("draining", c.get("draining"), &["alloc", "mixed", "idle"]),
        ("fail", c.get("fail"), &["down", "idle", "unknown", "future"]),
        ("powered_down", c.get("powered_down"), IDLE_FIRST),
        ("powering_down", c.get("powering_down"), IDLE_FIRST),
        ("powering_up", c.get("powering_up"), IDLE_FIRST),
        ("completing", c.get("completing").saturating_sub(c.get("draining")), &["alloc", "mixed", "idle"]),
        ("maint", c.get("maint"), &["idle"]),
        // A maintenance reservation sets the reserved flag too.
        ("reserved", c.get("resv").saturating_sub(c.get("maint")), &["idle"]),
        ("planned", c.get("planned"), &["idle"]),
        ("blocked", c.get("blocked"), &["idle"]),
    ];
    let mut planned = 0;
    for (state, want, from) in overrides {
        let mut left = *want;
        // Maintenance on a down node leaves it down, but planned (`down$`): down nodes are
        // taken to be the ones in maintenance first, so that no alarm pages for a planned one.
        if *state == "maint" {
            let on_down = left.min(base.get("down").copied().unwrap_or(0));
            planned += on_down;
            left -= on_down;
        }
        for b in *from {
            let e = base.entry(b).or_default();
            let take = left.min(*e);
            *e -= take;
            left -= take;
            *states.entry(state).or_default() += take;
        }
    }
    for (b, name) in [
        ("alloc", "allocated"),
        ("mixed", "mixed"),
        ("idle", "idle"),
        ("down", "down"),
        ("future", "future"),
        ("unknown", "unknown"),
    ] {
        *states.entry(name).or_default() += base.get(b).copied().unwrap_or(0);
    }
    let taken = |st: &str| states.get(st).copied().unwrap_or(0);
    let powered_down_on_down = c.get("powered_down").saturating_sub(taken("powered_down"));
    let planned = (planned + powered_down_on_down).min(taken("down"));
    (states, planned)
}

fn emit_set(
    s: &Set,
    states: &BTreeMap<&'static str, u64>,
    cpus_per_node: Option<u64>,
    opts: &Options,
    dims: &Dims,
    out: &mut Batch,
) {
    for (state, n) in states {
        if *n > 0 || CORE_NODE_STATES.contains(state) {
            out.push(&NODE_COUNT, dims.clone().with(STATE, *state), *n as f64);
        }
    }
    for state in CORE_NODE_STATES {
        if !states.contains_key(state) {
            out.push(&NODE_COUNT, dims.clone().with(STATE, *state), 0.0);
        }
    }
    for (key, flag) in FLAGS {
        let n = s.counts.get(key);
        if n > 0 {
            out.push(&NODE_FLAG_COUNT, dims.clone().with(FLAG, *flag), n as f64);
        }
    }
    // "Other" CPUs: those of unusable nodes that no job holds (draining nodes' are left to
    // their jobs: the endpoint does not say how many they hold).
    let unusable: u64 = states
        .iter()
        .filter(|(st, _)| **st != "draining")
        .filter(|(st, _)| NodeState { primary: st, flags: Vec::new(), recognised: true }.unusable())
        .map(|(_, n)| *n)
        .sum();
    let free = s.cpus.saturating_sub(s.cpus_alloc);
    let other = unusable.saturating_mul(cpus_per_node.unwrap_or(0)).min(free);
    out.push(&CPUS_TOTAL, dims.clone(), s.cpus as f64);
    out.push(&CPUS_ALLOCATED, dims.clone(), s.cpus_alloc as f64);
    out.push(&CPUS_IDLE, dims.clone(), (free - other) as f64);
    out.push(&CPUS_OTHER, dims.clone(), other as f64);
    out.push(&MEMORY_TOTAL, dims.clone(), s.memory_mib as f64 * MIB);
    out.push(&MEMORY_ALLOCATED, dims.clone(), s.memory_alloc_mib as f64 * MIB);
    if opts.gpus
        && let Some((total, alloc)) = s.gpus
    {
        out.push(&GPUS_TOTAL, dims.clone(), total as f64);
        if let Some(a) = alloc {
            out.push(&GPUS_ALLOCATED, dims.clone(), a as f64);
        }
    }
}

#[cfg(test)]
#[path = "openmetrics_map_tests.rs"]
mod tests;
