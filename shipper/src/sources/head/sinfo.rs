//! sinfo's node rows (parsed in slurm-cw-formats) as node counts, flags and capacity for the
//! cluster and each partition.

pub use slurm_cw_formats::slurm::sinfo::*;

use crate::sample::{Batch, Dims};
use slurm_cw_catalog::dims::{FLAG, PARTITION, STATE};
use slurm_cw_catalog::metrics::*;
use slurm_cw_formats::slurm::state::CORE_NODE_STATES;
use std::collections::{BTreeMap, HashSet};

const MB: f64 = 1024.0 * 1024.0;

/// Node counts, flags and capacity of a set of nodes.
#[derive(Debug, Default)]
struct Summary {
    states: BTreeMap<&'static str, u64>,
    flags: BTreeMap<&'static str, u64>,
    cpus: [u64; 4],
    memory_mb: [u64; 2],
    gpus: [u64; 2],
    /// Down, not in maintenance and not a powered-down cloud node.
    down_unplanned: u64,
}

/// Sums saturate: absurd figures in damaged output must not wrap around.
fn add_all<const N: usize>(sums: &mut [u64; N], values: [u64; N]) {
    for (s, v) in sums.iter_mut().zip(values) {
        *s = s.saturating_add(v);
    }
}

/// Down, not in maintenance and not a powered-down cloud node (a failed launch): what the
/// nodes-down alarm watches.
fn is_down_unplanned(r: &NodeRow) -> bool {
    let planned = r.state.flags.iter().any(|f| matches!(*f, "maintenance" | "powered_down"));
    r.state.primary == "down" && !planned
}

/// The nodes of `rows` down and not planned, each once.
pub fn down_unplanned(rows: &[NodeRow]) -> u64 {
    let names: HashSet<&str> =
        rows.iter().filter(|r| is_down_unplanned(r)).map(|r| r.name.as_str()).collect();
    names.len() as u64
}

impl Summary {
    fn add(&mut self, r: &NodeRow) {
        *self.states.entry(r.state.primary).or_default() += 1;
        for f in &r.state.flags {
            *self.flags.entry(*f).or_default() += 1;
        }
        if is_down_unplanned(r) {
            self.down_unplanned += 1;
        }
        add_all(&mut self.cpus, [r.cpus_total, r.cpus_alloc, r.cpus_idle, r.cpus_other]);
        add_all(&mut self.memory_mb, [r.memory_mb, r.memory_alloc_mb]);
        add_all(&mut self.gpus, [r.gpus_total, r.gpus_alloc]);
    }

    fn emit(&self, dims: &Dims, out: &mut Batch) {
        for state in CORE_NODE_STATES {
            if !self.states.contains_key(state) {
                out.push(&NODE_COUNT, dims.clone().with(STATE, *state), 0.0);
            }
        }
        for (state, n) in &self.states {
            out.push(&NODE_COUNT, dims.clone().with(STATE, *state), *n as f64);
        }
        for (flag, n) in &self.flags {
            out.push(&NODE_FLAG_COUNT, dims.clone().with(FLAG, *flag), *n as f64);
        }
        out.push(&CPUS_TOTAL, dims.clone(), self.cpus[0] as f64);
        out.push(&CPUS_ALLOCATED, dims.clone(), self.cpus[1] as f64);
        out.push(&CPUS_IDLE, dims.clone(), self.cpus[2] as f64);
        out.push(&CPUS_OTHER, dims.clone(), self.cpus[3] as f64);
        out.push(&MEMORY_TOTAL, dims.clone(), self.memory_mb[0] as f64 * MB);
        out.push(&MEMORY_ALLOCATED, dims.clone(), self.memory_mb[1] as f64 * MB);
        out.push(&GPUS_TOTAL, dims.clone(), self.gpus[0] as f64);
        out.push(&GPUS_ALLOCATED, dims.clone(), self.gpus[1] as f64);
    }
}

/// Node states, flags and capacity for the cluster (each node once) and, with
/// `per_partition`, for each partition (a node in several partitions counts in each).
pub fn emit(rows: &[NodeRow], per_partition: bool, out: &mut Batch) {
    let mut cluster = Summary::default();
    let mut seen = HashSet::new();
    let mut partitions: BTreeMap<&str, Summary> = BTreeMap::new();
    for r in rows {
        if seen.insert(r.name.as_str()) {
            cluster.add(r);
        }
        if per_partition && !r.partition.is_empty() {
            partitions.entry(r.partition.as_str()).or_default().add(r);
        }
    }
    cluster.emit(&Dims::new(), out);
    out.push(&NODES_DOWN_UNPLANNED, Dims::new(), cluster.down_unplanned as f64);
    for (p, s) in partitions {
        s.emit(&Dims::new().with(PARTITION, p), out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_unplanned_down_nodes_are_what_the_alarm_watches() {
        // Down; down in a maintenance reservation; a cloud node down and powered down (a failed
        // launch); in error.
        let out = "c1|batch*|down|0/0/2/2|2000|0|(null)|(null)|\n\
                   c1|debug|down|0/0/2/2|2000|0|(null)|(null)|\n\
                   c2|batch*|down$|0/0/2/2|2000|0|(null)|(null)|\n\
                   q-dy-c5-1|batch*|down~|0/0/2/2|2000|0|(null)|(null)|\n\
                   c3|batch*|error|0/0/2/2|2000|0|(null)|(null)|\n";
        let (rows, _) = parse_text(out);
        let mut b = Batch::new(std::time::SystemTime::UNIX_EPOCH);
        emit(&rows, true, &mut b);
        assert_eq!(b.value(&NODE_COUNT, &[("State", "down")]), Some(3.0));
        assert_eq!(b.value(&NODES_DOWN_UNPLANNED, &[]), Some(1.0), "c1, once");
        assert!(b.of(&NODES_DOWN_UNPLANNED).all(|s| s.dims.get("Partition").is_none()));
    }

    #[test]
    fn emits_each_node_once_per_cluster_and_once_per_partition() {
        let out = "c1|batch*|mixed|1/1/0/2|2000|1000|(null)|(null)|\n\
                   c3|batch*|idle|0/2/0/2|2000|0|(null)|(null)|\n\
                   c3|debug|idle|0/2/0/2|2000|0|(null)|(null)|\n\
                   c4|debug|down+drain|0/0/2/2|2000|0|gpu:2|(null)|\n";
        let (rows, _) = parse_text(out);
        let mut b = Batch::new(std::time::SystemTime::UNIX_EPOCH);
        emit(&rows, true, &mut b);
        assert_eq!(b.value(&NODE_COUNT, &[("State", "idle")]), Some(1.0));
        assert_eq!(b.value(&NODE_COUNT, &[("State", "mixed")]), Some(1.0));
        assert_eq!(b.value(&NODE_COUNT, &[("State", "drained")]), Some(1.0));
        assert_eq!(b.value(&NODE_COUNT, &[("State", "down")]), Some(0.0), "core states are zero-filled");
        assert_eq!(b.value(&NODE_COUNT, &[("Partition", "batch"), ("State", "idle")]), Some(1.0));
        assert_eq!(b.value(&NODE_COUNT, &[("Partition", "debug"), ("State", "idle")]), Some(1.0));
        assert_eq!(b.value(&NODE_FLAG_COUNT, &[("Flag", "drain")]), Some(1.0));
        assert_eq!(b.value(&CPUS_TOTAL, &[]), Some(6.0), "c3 counted once for the cluster");
        assert_eq!(b.value(&CPUS_TOTAL, &[("Partition", "debug")]), Some(4.0));
        assert_eq!(b.value(&CPUS_OTHER, &[]), Some(2.0));
        assert_eq!(b.value(&MEMORY_ALLOCATED, &[]), Some(1000.0 * MB));
        assert_eq!(b.value(&GPUS_TOTAL, &[]), Some(2.0));
        assert_eq!(b.value(&NODES_DOWN_UNPLANNED, &[]), Some(0.0), "drained comes first");
        for s in &b.samples {
            let names: Vec<&str> = s.dims.names().chain(["ClusterName"]).collect();
            assert!(s.metric.accepts_dimensions(names), "{} {:?}", s.metric.name, s.dims);
        }
    }
}
