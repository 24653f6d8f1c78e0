use super::*;
use crate::sources::head::sinfo;
use slurm_cw_formats::slurm::openmetrics::parse;

const DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../formats/tests/fixtures/slurm/26.05-real/");

fn fixture(name: &str) -> String {
    std::fs::read_to_string(format!("{DIR}{name}")).unwrap()
}

/// Every sample as (metric, dims, value), sorted, GPU figures left out.
fn samples(b: &Batch) -> Vec<(String, String, f64)> {
    let mut v: Vec<_> = b
        .samples
        .iter()
        .filter(|s| !s.metric.name.starts_with("Gpus"))
        .map(|s| (s.metric.name.to_string(), format!("{:?}", s.dims), s.scalar().unwrap()))
        .collect();
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v
}

#[test]
fn real_26_05_endpoint_gives_sinfos_samples() {
    let nodes = parse(&fixture("openmetrics-nodes.txt"));
    let parts = parse(&fixture("openmetrics-partitions.txt"));
    assert!(nodes.bad.is_empty() && parts.bad.is_empty());
    let mut from_endpoint = Batch::new(std::time::SystemTime::UNIX_EPOCH);
    let fixes = emit(&nodes, &parts, &Options { per_partition: true, gpus: false }, &mut from_endpoint);
    assert!(fixes.wrapped.is_empty());
    assert!(fixes.down_guessed, "a drained node beside a down one: the collector asks sinfo which");
    let (rows, bad) = sinfo::parse_text(&fixture("sinfo-26.05.txt"));
    assert!(bad.is_empty());
    let mut from_sinfo = Batch::new(std::time::SystemTime::UNIX_EPOCH);
    sinfo::emit(&rows, true, &mut from_sinfo);
    assert_eq!(samples(&from_endpoint), samples(&from_sinfo));
    assert_eq!(from_endpoint.value(&NODE_COUNT, &[("State", "drained")]), Some(1.0));
    assert_eq!(from_endpoint.value(&CPUS_OTHER, &[("Partition", "batch")]), Some(4.0));
    assert!(from_endpoint.of(&GPUS_TOTAL).next().is_none(), "untracked GPUs are not shipped");
}

#[test]
fn cluster_power_transitions_come_from_the_partitions() {
    // The cluster series says 1 powering up: it is the powering-down node.
    let nodes = parse(
        "slurm_node_cpus{node=\"a\"} 4\nslurm_node_cpus{node=\"b\"} 4\nslurm_node_cpus{node=\"c\"} 4\n\
         slurm_nodes 3\nslurm_nodes_idle 3\nslurm_nodes_powering_up 1\n",
    );
    let parts = parse(
        "slurm_partition_nodes{partition=\"p\"} 2\nslurm_partition_nodes{partition=\"q\"} 1\n\
         slurm_partition_cpus{partition=\"p\"} 8\nslurm_partition_cpus{partition=\"q\"} 4\n\
         slurm_partition_nodes_idle{partition=\"p\"} 2\nslurm_partition_nodes_idle{partition=\"q\"} 1\n\
         slurm_partition_nodes_powering_down{partition=\"p\"} 1\nslurm_partition_nodes_powering_up{partition=\"p\"} 0\n",
    );
    let mut b = Batch::new(std::time::SystemTime::UNIX_EPOCH);
    emit(&nodes, &parts, &Options { per_partition: true, gpus: true }, &mut b);
    assert_eq!(b.value(&NODE_COUNT, &[("State", "powering_up")]), Some(0.0));
    assert_eq!(b.value(&NODE_COUNT, &[("State", "powering_down")]), Some(1.0));
    assert_eq!(b.value(&NODE_COUNT, &[("State", "idle")]), Some(2.0));
    assert_eq!(b.value(&CPUS_OTHER, &[]), Some(4.0), "a powering-down node's CPUs are other");
}

#[test]
fn sixteen_bit_counts_are_unwrapped_against_the_node_list() {
    // 70,000 idle nodes: Slurm's 16-bit counts say 4,464.
    let mut text = String::new();
    for i in 0..70_000 {
        text.push_str(&format!("slurm_node_cpus{{node=\"n{i}\"}} 2\n"));
    }
    text.push_str("slurm_nodes 4464\nslurm_nodes_idle 4464\n");
    let nodes = parse(&text);
    let parts = parse(
        "slurm_partition_nodes{partition=\"p\"} 4464\nslurm_partition_cpus{partition=\"p\"} 140000\n\
         slurm_partition_nodes_idle{partition=\"p\"} 4464\n",
    );
    let mut b = Batch::new(std::time::SystemTime::UNIX_EPOCH);
    let fixes = emit(&nodes, &parts, &Options { per_partition: true, gpus: true }, &mut b);
    assert_eq!(b.value(&NODE_COUNT, &[("State", "idle")]), Some(70_000.0));
    assert_eq!(b.value(&NODE_COUNT, &[("Partition", "p"), ("State", "idle")]), Some(70_000.0));
    assert_eq!(b.value(&CPUS_IDLE, &[]), Some(140_000.0));
    assert_eq!(fixes.wrapped.len(), 4, "{:?}", fixes.wrapped);
    assert_eq!(unwrap16(5, 5), 5);
    assert_eq!(unwrap16(5, 65_541), 65_541);
    assert_eq!(unwrap16(6, 65_541), 6, "not a wrap: the reported figure stands");
}

#[test]
fn absurd_values_never_panic() {
    let nodes = parse(
        "slurm_node_cpus{node=\"a\"} -5\nslurm_node_cpus_alloc{node=\"a\"} 1e300\nslurm_nodes_idle NaN\nslurm_nodes_drained 9e18\n",
    );
    let parts = parse(
        "slurm_partition_nodes{partition=\"p\"} +Inf\nslurm_partition_nodes_drained{partition=\"p\"} 1e20\n",
    );
    let mut b = Batch::new(std::time::SystemTime::UNIX_EPOCH);
    emit(&nodes, &parts, &Options { per_partition: true, gpus: true }, &mut b);
    assert!(b.samples.iter().all(|s| s.scalar().is_some_and(|v| v.is_finite() && v >= 0.0)));
}

#[test]
fn a_down_node_in_a_maintenance_reservation_is_planned() {
    // Real 26.05.5 counts with m2 down in a maint reservation (sinfo: `down$`, the rest idle).
    let nodes = parse(
        "slurm_node_cpus{node=\"m1\"} 2\nslurm_node_cpus{node=\"m2\"} 2\nslurm_node_cpus{node=\"m3\"} 2\n\
         slurm_node_cpus{node=\"m4\"} 2\nslurm_nodes 4\nslurm_nodes_down 1\nslurm_nodes_idle 3\n\
         slurm_nodes_maint 1\nslurm_nodes_resv 1\n",
    );
    let mut b = Batch::new(std::time::SystemTime::UNIX_EPOCH);
    emit(&nodes, &parse(""), &Options { per_partition: false, gpus: false }, &mut b);
    assert_eq!(b.value(&NODE_COUNT, &[("State", "idle")]), Some(3.0));
    assert_eq!(b.value(&NODE_COUNT, &[("State", "down")]), Some(1.0));
    assert_eq!(b.value(&NODE_COUNT, &[("State", "maint")]), None);
    assert_eq!(b.value(&NODE_COUNT, &[("State", "reserved")]), None);
    assert_eq!(b.value(&NODES_DOWN_UNPLANNED, &[]), Some(0.0));
    assert_eq!(b.value(&NODE_FLAG_COUNT, &[("Flag", "maintenance")]), Some(1.0));
}
