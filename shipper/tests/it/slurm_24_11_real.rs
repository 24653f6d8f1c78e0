//! The head collector's parsers (and the node role's `scontrol show job` reader) against real
//! Slurm 24.11.5 output, the release AWS ParallelCluster 3.14 ships, captured from the bench
//! (`scripts/bench/slurm.sh start --version 24.11`; see formats/tests/fixtures/slurm/24.11-real/README.md).
//! The values asserted are the scenario's truth: n1 down, n2 drained, a job running on n3 and
//! a GPU job on n4, a completed, a failed and a cancelled job, six pending (Resources,
//! Dependency, four array tasks that no batch node can take).

use crate::common::sdiag_forms;
use crate::common::sinfo_rows;

use sinfo_rows::{cluster_sum, node_states};
use slurm_cw_catalog::metrics::*;
use slurm_cw_formats::slurm::job;
use slurm_cw_shipper::sources::head::sdiag;
use slurm_cw_shipper::sources::head::sinfo::{self, NodeRow};
use slurm_cw_shipper::sources::head::squeue::{self, JobStats};
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

fn fixture(name: &str) -> String {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../formats/tests/fixtures/slurm/24.11-real")
        .join(name);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

const COMMA_REASON: &str = "Nodes required for job are DOWN";

/// The four array tasks' reason is the one with a comma ("Nodes required for job are DOWN,
/// DRAINED or reserved for jobs in higher priority partitions"): whatever name the parser gives
/// it, it begins so and counts the four tasks.
fn comma_reason_count(s: &JobStats) -> u64 {
    s.pending_reasons.iter().filter(|(r, _)| r.starts_with(COMMA_REASON)).map(|(_, n)| n).sum()
}

#[test]
fn version_is_24_11() {
    assert_eq!(fixture("version.txt").trim(), "slurm-wlm 24.11.5");
    let v = slurm_cw_shipper::sources::head::Version::parse(&fixture("version.txt")).unwrap();
    assert!(v.has_sdiag_json(), "the collector reads sdiag --json on 24.11");
}

#[test]
fn sinfo_text_real() {
    let (rows, bad) = sinfo::parse_text(&fixture("sinfo.txt"));
    assert!(bad.is_empty(), "{bad:?}");
    assert_eq!(rows.len(), 5, "n3 is in both partitions");
    assert!(rows.iter().all(|r| r.state.recognised), "{rows:?}");
    assert_eq!(node_states(&rows), BTreeMap::from([("down", 1), ("drained", 1), ("mixed", 2)]));
    // 24.11 prints a drained node with no jobs as `idle+drain`.
    let n2 = rows.iter().find(|r| r.name == "n2").unwrap();
    assert_eq!((n2.state.primary, n2.state.flags.contains(&"drain")), ("drained", true));
    assert_eq!(rows.iter().filter(|r| r.partition == "debug").count(), 2);
    assert_eq!(rows.iter().filter(|r| r.partition == "batch").count(), 3);
    assert_eq!(cluster_sum(&rows, |r| r.cpus_total), 8);
    assert_eq!(cluster_sum(&rows, |r| r.cpus_alloc), 2);
    assert_eq!(cluster_sum(&rows, |r| r.cpus_other), 4, "the down and the drained node's CPUs");
    assert_eq!(cluster_sum(&rows, |r| r.memory_mb), 4 * 2000);
    assert_eq!(cluster_sum(&rows, |r| r.memory_alloc_mb), 200, "two jobs, DefMemPerCPU=100");
    // GresUsed is `(null)` on nodes without GRES here (22.05 printed `gpu:0`).
    assert_eq!((cluster_sum(&rows, |r| r.gpus_total), cluster_sum(&rows, |r| r.gpus_alloc)), (2, 1));
}

#[test]
fn sinfo_json_real_agrees_with_text() {
    let (text, _) = sinfo::parse_text(&fixture("sinfo.txt"));
    let (json, bad) = sinfo::parse_json(&fixture("sinfo.json")).unwrap();
    assert!(bad.is_empty(), "{bad:?}");
    let key = |rows: &[NodeRow]| -> BTreeSet<(String, String)> {
        rows.iter().map(|r| (r.name.clone(), r.partition.clone())).collect()
    };
    assert_eq!(key(&json), key(&text), "the same node and partition rows");
    sinfo_rows::assert_json_agrees_with_text(&json, &text);
}

#[test]
fn squeue_text_real() {
    let (q, bad) = squeue::parse_text(&fixture("squeue.txt"));
    assert!(bad.is_empty(), "{bad:?}");
    assert_eq!(q.unknown_states, 0);
    let c = &q.cluster;
    assert_eq!(
        c.states,
        BTreeMap::from([("cancelled", 1), ("completed", 1), ("failed", 1), ("pending", 6), ("running", 2)])
    );
    // The four array tasks print Slurm's description of Resources, commas and all: shipped as
    // the code, as squeue --json gives it, never cut at a comma.
    assert_eq!(c.pending_reasons.get("Resources"), Some(&5));
    assert_eq!(c.pending_reasons.get("Dependency"), Some(&1));
    assert_eq!(comma_reason_count(c), 0, "no description shipped as a reason: {:?}", c.pending_reasons);
    assert_eq!(c.pending_reasons.values().sum::<u64>(), 6);
    // 24.11 prints tres-per-task `cpu=N` where 22.05 printed N/A: no GPUs in it.
    assert_eq!((c.pending_gpus, c.running_gpus), (1, 1));
    // Demand: the Resources job (2 CPUs) and the four array tasks (2 each); not the dependent one.
    assert_eq!((c.pending_cpus, c.running_cpus), (10, 2));
    assert_eq!(c.pending_nodes, 5);
    let debug = &q.partitions["debug"];
    assert_eq!((debug.states.get("running"), debug.states.get("pending")), (Some(&1), Some(&1)));
    assert_eq!((debug.pending_gpus, debug.running_gpus), (1, 1));
    let batch = &q.partitions["batch"];
    assert_eq!(batch.states.get("pending"), Some(&5));
    assert_eq!((batch.pending_gpus, batch.running_gpus), (0, 0));
}

#[test]
fn squeue_json_real() {
    // What the collector's JSON fallback runs (`squeue --json --all`): on 24.11 it lists only
    // pending and running jobs, and the pending array as one record (`array_task_string`
    // "1-4") whose reason is the record's own, `Resources`, not the tasks' reason.
    let (q, bad) = squeue::parse_json(&fixture("squeue.json")).unwrap();
    assert!(bad.is_empty(), "{bad:?}");
    let c = &q.cluster;
    assert_eq!(c.states, BTreeMap::from([("pending", 6), ("running", 2)]));
    assert_eq!(c.pending_reasons.values().sum::<u64>(), 6);
    assert_eq!(c.pending_reasons.get("Dependency"), Some(&1));
    assert_eq!(c.pending_reasons.get("Resources"), Some(&5), "{:?}", c.pending_reasons);
    assert_eq!((c.pending_gpus, c.running_gpus), (1, 1));
    assert_eq!((c.pending_cpus, c.running_cpus), (10, 2));

    // With --states=all the finished jobs are there too, and the JSON agrees with the text
    // in everything but the array's reason.
    let (all, bad) = squeue::parse_json(&fixture("squeue-states-all.json")).unwrap();
    assert!(bad.is_empty(), "{bad:?}");
    let (text, _) = squeue::parse_text(&fixture("squeue.txt"));
    let (mut j, mut t) = (all.cluster.clone(), text.cluster.clone());
    assert_eq!(j.pending_reasons.values().sum::<u64>(), t.pending_reasons.values().sum::<u64>());
    j.pending_reasons.clear();
    t.pending_reasons.clear();
    assert_eq!(j, t, "squeue --json --states=all and the explicit format agree");
}

#[test]
fn sdiag_text_and_json_real() {
    let text = sdiag::parse_text(&fixture("sdiag.txt")).unwrap();
    assert!(text.unknown.is_empty(), "unknown labels {:?}", text.unknown);
    let json = sdiag::parse_json(&fixture("sdiag.json")).unwrap();
    assert!(json.unknown.is_empty(), "unknown keys {:?}", json.unknown);
    for s in [&text, &json] {
        // Eight sbatch calls, the array counting its four tasks.
        assert_eq!(s.get(&JOBS_SUBMITTED), Some(11.0));
        assert_eq!(s.get(&JOBS_STARTED), Some(4.0), "two running, one completed, one failed");
        assert_eq!(s.get(&JOBS_COMPLETED), Some(2.0), "the completed and the failed job");
        assert_eq!(s.get(&JOBS_CANCELED), Some(1.0));
        assert_eq!(s.get(&JOBS_PENDING), Some(6.0));
        assert_eq!(s.get(&JOBS_RUNNING), Some(2.0));
        assert!(s.get(&MAIN_SCHED_TOTAL_CYCLES).is_some_and(|v| v > 0.0));
        assert!(s.get(&BACKFILL_TOTAL_CYCLES).is_some_and(|v| v > 0.0), "bf_interval=30 s passed");
        assert_eq!(s.pending_rpcs, Some(0));
        assert!(s.rpcs.iter().all(|r| r.count > 0 && !r.message_type.is_empty()), "{:?}", s.rpcs);
        let submit = s.rpcs.iter().find(|r| r.message_type == "REQUEST_SUBMIT_BATCH_JOB").unwrap();
        assert_eq!(submit.count, 8);
        assert!(submit.total_time > 0);
    }
    // Both forms carry the same values; the JSON, taken just after, also counts the text
    // sdiag's own REQUEST_STATS_INFO.
    sdiag_forms::assert_values_agree("24.11", &text, &json);
    let rpcs = |s: &sdiag::Sdiag| -> BTreeMap<String, (u64, u64)> {
        s.rpcs.iter().map(|r| (r.message_type.clone(), (r.count, r.total_time))).collect()
    };
    let mut j = rpcs(&json);
    assert_eq!(j.remove("REQUEST_STATS_INFO").map(|(n, _)| n), Some(1));
    assert_eq!(j, rpcs(&text));
}

#[test]
fn scontrol_show_job_real() {
    let d = job::parse(&fixture("scontrol-show-job.txt")).unwrap();
    assert!(d.job_id.parse::<u64>().is_ok_and(|id| id >= 10_000_000), "the bench's FirstJobId: {}", d.job_id);
    assert_eq!(d.account.as_deref(), Some("physics"));
    assert_eq!(d.partition.as_deref(), Some("debug"));
    assert_eq!((d.user_id, d.user_name.as_deref()), (Some(0), Some("root")));
    assert_eq!(d.state.as_deref(), Some("RUNNING"));
    assert_eq!(d.node_list.as_deref(), Some("n4"));
    assert!(d.start_time.is_some() && d.end_time.is_none(), "{d:?}");
    assert_eq!(d.gpus_on("n4"), Some(&BTreeSet::from([0])));
}

/// Every real file cut at many points: JSON gives an error, text gives what it can; no panic.
#[test]
fn truncated_real_output_never_panics() {
    for f in ["sinfo.txt", "squeue.txt", "sdiag.txt", "sinfo.json", "squeue.json", "sdiag.json"] {
        let full = fixture(f);
        for i in 1..20 {
            let mut cut = full.len() * i / 20;
            while !full.is_char_boundary(cut) {
                cut -= 1;
            }
            let part = &full[..cut];
            if f.ends_with(".json") {
                assert!(
                    sinfo::parse_json(part).is_err() && squeue::parse_json(part).is_err(),
                    "{f} at {cut}"
                );
                assert!(sdiag::parse_json(part).is_err(), "{f} at {cut}");
            } else {
                let _ = (sinfo::parse_text(part), squeue::parse_text(part), sdiag::parse_text(part));
            }
        }
    }
}
