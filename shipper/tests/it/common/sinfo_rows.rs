//! sinfo rows as the Slurm fixture tests compare them: per node (a node in two partitions is one
//! node), whatever the format they were parsed from.

use slurm_cw_shipper::sources::head::sinfo::NodeRow;
use std::collections::{BTreeMap, HashSet};

/// Each node once: primary state -> count.
pub fn node_states(rows: &[NodeRow]) -> BTreeMap<&'static str, u64> {
    let mut seen = HashSet::new();
    let mut out = BTreeMap::new();
    for r in rows.iter().filter(|r| seen.insert(r.name.clone())) {
        *out.entry(r.state.primary).or_default() += 1;
    }
    out
}

/// A figure summed over the nodes, each once.
pub fn cluster_sum(rows: &[NodeRow], f: impl Fn(&NodeRow) -> u64) -> u64 {
    let mut seen = HashSet::new();
    rows.iter().filter(|r| seen.insert(r.name.clone())).map(f).sum()
}

/// One figure of a row, by name.
type Field = (&'static str, fn(&NodeRow) -> u64);

/// `sinfo --json` and the text format say the same of the cluster: node states, CPUs, GPUs and
/// memory.
pub fn assert_json_agrees_with_text(json: &[NodeRow], text: &[NodeRow]) {
    assert_eq!(node_states(json), node_states(text));
    let fields: [Field; 8] = [
        ("cpus_total", |r| r.cpus_total),
        ("cpus_alloc", |r| r.cpus_alloc),
        ("cpus_idle", |r| r.cpus_idle),
        ("cpus_other", |r| r.cpus_other),
        ("gpus_total", |r| r.gpus_total),
        ("gpus_alloc", |r| r.gpus_alloc),
        ("memory_mb", |r| r.memory_mb),
        ("memory_alloc_mb", |r| r.memory_alloc_mb),
    ];
    for (name, f) in fields {
        assert_eq!(cluster_sum(json, f), cluster_sum(text, f), "{name}");
    }
}
