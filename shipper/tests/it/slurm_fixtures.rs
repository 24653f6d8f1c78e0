//! The head collector's parsers against Slurm output of every version we support:
//! real 22.05 captures (and real 21.08/23.02 from another project), and 23.02-25.11 outputs
//! built from Slurm's source (see formats/tests/fixtures/slurm/README.md). Malformed and truncated
//! output must give errors or partial results, never a panic.

use crate::common::sdiag_forms;
use crate::common::sinfo_rows;

use sinfo_rows::{cluster_sum, node_states};
use slurm_cw_catalog::Metric;
use slurm_cw_catalog::metrics::*;
use slurm_cw_shipper::sources::head::sdiag::{self, Sdiag};
use slurm_cw_shipper::sources::head::sinfo;
use slurm_cw_shipper::sources::head::squeue::{self, Queue};
use std::collections::BTreeMap;
use std::path::PathBuf;

fn fixture(rel: &str) -> String {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../formats/tests/fixtures/slurm").join(rel);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

const BUILT: &[&str] = &["23.02", "23.11", "24.05", "24.11", "25.05", "25.11"];

fn states(q: &Queue) -> BTreeMap<&'static str, u64> {
    q.cluster.states.clone()
}

#[test]
fn slurm_22_05_text_formats_real() {
    let (rows, bad) = sinfo::parse_text(&fixture("22.05/sinfo.txt"));
    assert!(bad.is_empty(), "{bad:?}");
    assert_eq!(node_states(&rows), BTreeMap::from([("down", 1), ("drained", 1), ("mixed", 2)]));
    assert_eq!(rows.iter().filter(|r| r.partition == "debug").count(), 2);
    assert_eq!(cluster_sum(&rows, |r| r.gpus_total), 2);
    assert_eq!(cluster_sum(&rows, |r| r.gpus_alloc), 1);
    assert_eq!(cluster_sum(&rows, |r| r.cpus_other), 4);

    let (q, bad) = squeue::parse_text(&fixture("22.05/squeue.txt"));
    assert!(bad.is_empty(), "{bad:?}");
    assert_eq!(
        states(&q),
        BTreeMap::from([("cancelled", 1), ("completed", 1), ("failed", 1), ("pending", 6), ("running", 2)])
    );
    // The Resources job and the four array tasks, whose reason squeue prints as the description
    // slurmctld set with Resources ("Nodes required for job are DOWN, DRAINED or reserved for
    // jobs in higher priority partitions"); it used to be cut at its comma into a reason of its own.
    assert_eq!(q.cluster.pending_reasons["Resources"], 5, "array tasks one by one");
    assert_eq!(q.cluster.pending_reasons["Dependency"], 1);
    assert_eq!(q.cluster.pending_reasons.len(), 2, "{:?}", q.cluster.pending_reasons);
    assert_eq!(q.unknown_reasons, 0);
    assert_eq!((q.cluster.pending_gpus, q.cluster.running_gpus), (1, 1));
    // Demand: the Resources job (2) and the four array tasks (2 each); not the dependent job.
    assert_eq!((q.cluster.pending_cpus, q.cluster.running_cpus), (10, 2));

    let s = sdiag::parse_text(&fixture("22.05/sdiag.txt")).unwrap();
    assert!(s.unknown.is_empty(), "{:?}", s.unknown);
    assert!(s.get(&JOBS_SUBMITTED).is_some() && !s.rpcs.is_empty());
    assert_eq!(s.pending_rpcs, Some(0));
}

#[test]
fn slurm_22_05_json_agrees_with_text() {
    let (text_rows, _) = sinfo::parse_text(&fixture("22.05/sinfo.txt"));
    let (json_rows, bad) = sinfo::parse_json(&fixture("22.05/sinfo.json")).unwrap();
    assert!(bad.is_empty(), "{bad:?}");
    sinfo_rows::assert_json_agrees_with_text(&json_rows, &text_rows);
    let (tq, _) = squeue::parse_text(&fixture("22.05/squeue.txt"));
    let (jq, bad) = squeue::parse_json(&fixture("22.05/squeue.json")).unwrap();
    assert!(bad.is_empty(), "{bad:?}");
    // The JSON has one record for the pending array, with the record's own reason code; the
    // text lists each task with the description in place of that code. They agree, reasons too.
    let (j, t) = (jq.cluster.clone(), tq.cluster.clone());
    assert_eq!(j.pending_reasons.values().sum::<u64>(), t.pending_reasons.values().sum::<u64>());
    assert_eq!(j, t, "squeue --json and the explicit format agree");
    assert_eq!(jq.partitions, tq.partitions);
}

#[test]
fn built_sinfo_json_of_every_version() {
    for v in BUILT {
        let (rows, bad) = sinfo::parse_json(&fixture(&format!("{v}/sinfo.json"))).unwrap();
        assert!(bad.is_empty(), "{v}: {bad:?}");
        assert_eq!(
            node_states(&rows),
            BTreeMap::from([
                ("allocated", 1),
                ("down", 1),
                ("drained", 1),
                ("idle", 1),
                ("mixed", 1),
                ("powered_down", 1)
            ]),
            "{v}"
        );
        assert_eq!(cluster_sum(&rows, |r| r.gpus_total), 8, "{v}");
        assert_eq!(cluster_sum(&rows, |r| r.gpus_alloc), 2, "{v}");
        assert_eq!(cluster_sum(&rows, |r| r.cpus_total), 6 * 64, "{v}");
        assert_eq!(cluster_sum(&rows, |r| r.cpus_alloc), 84, "{v}");
        assert!(rows.iter().any(|r| r.name == "gpu-001" && r.partition == "gpu"), "{v}");
        assert!(rows.iter().any(|r| r.name == "gpu-001" && r.partition == "cpu"), "{v}");
        let flags: Vec<&str> = rows.iter().flat_map(|r| r.state.flags.iter().copied()).collect();
        for f in ["drain", "not_responding", "cloud", "powered_down"] {
            assert!(flags.contains(&f), "{v}: flag {f}");
        }
    }
}

#[test]
fn built_squeue_json_of_every_version() {
    for v in BUILT {
        let (q, bad) = squeue::parse_json(&fixture(&format!("{v}/squeue.json"))).unwrap();
        assert!(bad.is_empty(), "{v}: {bad:?}");
        assert_eq!(
            states(&q),
            BTreeMap::from([
                ("cancelled", 1),
                ("completed", 1),
                ("failed", 1),
                ("pending", 9),
                ("running", 3)
            ]),
            "{v}: the array record 5-10 counts six pending tasks"
        );
        let r = &q.cluster.pending_reasons;
        assert_eq!(
            (r.get("Resources"), r.get("Priority"), r.get("Dependency")),
            (Some(&1), Some(&7), Some(&1)),
            "{v}: {r:?}"
        );
        assert_eq!(q.cluster.pending_gpus, 4, "{v}");
        assert_eq!(q.cluster.running_gpus, 2, "{v}");
        assert!(q.partitions.contains_key("gpu") && q.partitions.contains_key("cpu"), "{v}");
    }
}

/// Values both sdiag forms of one version carry must be equal.
fn assert_agree(v: &str, text: &Sdiag, json: &Sdiag) {
    sdiag_forms::assert_values_agree(v, text, json);
    let mut t: Vec<_> = text.rpcs.iter().map(|r| (&r.message_type, r.count, r.total_time)).collect();
    let mut j: Vec<_> = json.rpcs.iter().map(|r| (&r.message_type, r.count, r.total_time)).collect();
    t.sort();
    j.sort();
    assert_eq!(t, j, "{v}: RPC statistics");
}

#[test]
fn built_sdiag_of_every_version_text_and_json() {
    let every: [&'static Metric; 6] = [
        &SERVER_THREAD_COUNT,
        &JOBS_SUBMITTED,
        &MAIN_SCHED_TOTAL_CYCLES,
        &BACKFILL_TOTAL_CYCLES,
        &BACKFILL_DEPTH_MEAN_TRY,
        &BACKFILL_QUEUE_LENGTH_MEAN,
    ];
    for v in BUILT {
        let text = sdiag::parse_text(&fixture(&format!("{v}/sdiag.txt"))).unwrap();
        assert!(text.unknown.is_empty(), "{v}: unknown labels {:?}", text.unknown);
        assert_eq!(text.values.len(), 31, "{v}: every field of the text");
        assert_eq!(text.rpcs.len(), 10, "{v}");
        assert_eq!(text.pending_rpcs, Some(4), "{v}: 2 + 1 + 1 pending RPCs");
        let json = sdiag::parse_json(&fixture(&format!("{v}/sdiag.json"))).unwrap();
        for m in every {
            assert!(json.get(m).is_some(), "{v}: {} missing from JSON", m.name);
        }
        assert_agree(v, &text, &json);
        // 24.05 added pending RPCs (and bf_cycle_max) to the JSON.
        let newer = !matches!(*v, "23.02" | "23.11");
        assert_eq!(json.pending_rpcs.is_some(), newer, "{v}");
        assert_eq!(json.get(&BACKFILL_MAX_CYCLE).is_some(), newer, "{v}");
    }
}

#[test]
fn rivos_real_outputs_21_08_and_23_02() {
    let s = sdiag::parse_json(&fixture("rivos/sdiag.json")).unwrap();
    assert_eq!(s.get(&JOBS_SUBMITTED), Some(5824.0));
    assert_eq!(s.get(&MAIN_SCHED_MAX_CYCLE), Some(1193926.0));
    assert_eq!(s.get(&BACKFILL_TOTAL_CYCLES), Some(72.0));
    assert_eq!(s.rpcs.len(), 3);
    let (q, bad) = squeue::parse_json(&fixture("rivos/squeue_out.json")).unwrap();
    assert!(bad.is_empty(), "{bad:?}");
    assert!(q.cluster.states.values().sum::<u64>() > 0);
    let (rows, bad) = sinfo::parse_json(&fixture("rivos/sinfo_out.json")).unwrap();
    assert!(bad.is_empty(), "{bad:?}");
    assert!(!rows.is_empty() && rows.iter().all(|r| r.state.recognised), "{rows:?}");
}

/// Every fixture cut at many points: JSON gives an error, text gives what it can; no panic.
#[test]
fn truncated_and_malformed_output_never_panics() {
    let mut files: Vec<String> = vec![
        "22.05/sinfo.txt".into(),
        "22.05/squeue.txt".into(),
        "22.05/sdiag.txt".into(),
        "22.05/sinfo.json".into(),
        "22.05/squeue.json".into(),
        "rivos/sdiag.json".into(),
    ];
    for v in BUILT {
        for f in ["sdiag.txt", "sdiag.json", "squeue.json", "sinfo.json"] {
            files.push(format!("{v}/{f}"));
        }
    }
    for f in &files {
        let full = fixture(f);
        for i in 1..20 {
            let mut cut = full.len() * i / 20;
            while !full.is_char_boundary(cut) {
                cut -= 1;
            }
            let part = &full[..cut];
            if f.ends_with(".json") {
                let errs = [
                    sinfo::parse_json(part).is_err(),
                    squeue::parse_json(part).is_err(),
                    sdiag::parse_json(part).is_err(),
                ];
                assert!(errs.iter().all(|e| *e), "{f} cut at {cut} parsed as JSON");
            } else {
                let _ = sinfo::parse_text(part);
                let _ = squeue::parse_text(part);
                let _ = sdiag::parse_text(part);
            }
        }
        // Wrong file for the parser: errors or bad lines, not a panic.
        let _ = sinfo::parse_text(&full);
        let _ = squeue::parse_text(&full);
        let _ = sdiag::parse_text(&full);
        let _ = sinfo::parse_json(&full);
        let _ = squeue::parse_json(&full);
        let _ = sdiag::parse_json(&full);
    }
    // Garbage of the right shape.
    let (rows, bad) = sinfo::parse_text("a|b|c|d|e|f|g|h|\n|||||||\n\u{0}\u{1}|x\n");
    assert!(rows.is_empty() && bad.len() == 3);
    assert!(sinfo::parse_json(r#"{"sinfo": [{"nodes": {"nodes": []}}, 3, null]}"#).unwrap().1.len() == 3);
    assert!(squeue::parse_json(r#"{"jobs": [{"job_state": 5}, {}]}"#).unwrap().1.len() == 2);
    assert!(sdiag::parse_json(r#"{"statistics": {"jobs_submitted": "many"}}"#).is_err());
}

/// Versions whose `squeue --json` lists job states and whose `sinfo --json` lists node states.
const LISTS: &[&str] = &["23.11", "24.05", "24.11", "25.05", "25.11"];

/// A built fixture with some records changed (synthetic states on real shapes).
fn edited(rel: &str, edit: impl Fn(&mut serde_json::Value)) -> String {
    let mut doc: serde_json::Value = serde_json::from_str(&fixture(rel)).unwrap();
    edit(&mut doc);
    doc.to_string()
}

/// ERROR is a state of its own; DOWN+MAINTENANCE (sinfo `down$`) is down with the maintenance
/// flag; IDLE+MAINTENANCE is maint; INVALID_REG wins over DRAIN, as sinfo prints them.
#[test]
fn synthetic_node_states_on_built_json() {
    for v in LISTS {
        let text = edited(&format!("{v}/sinfo.json"), |doc| {
            for r in doc["sinfo"].as_array_mut().unwrap() {
                let name = r["nodes"]["nodes"][0].as_str().unwrap().to_owned();
                let state = match name.as_str() {
                    "cpu-001" => serde_json::json!(["ERROR"]),
                    "cpu-002" => serde_json::json!(["IDLE", "MAINTENANCE"]),
                    "cpu-003" => serde_json::json!(["IDLE", "DRAIN", "INVALID_REG"]),
                    "cpu-004" => serde_json::json!(["DOWN", "MAINTENANCE", "NOT_RESPONDING"]),
                    "gpu-002" => serde_json::json!(["DOWN", "CLOUD", "POWERED_DOWN", "HIBERNATING"]),
                    _ => continue,
                };
                r["node"]["state"] = state;
            }
        });
        let (rows, bad) = sinfo::parse_json(&text).unwrap();
        assert!(bad.is_empty(), "{v}: {bad:?}");
        assert_eq!(
            node_states(&rows),
            BTreeMap::from([("down", 2), ("error", 1), ("inval", 1), ("maint", 1), ("mixed", 1)]),
            "{v}"
        );
        let cpu4 = rows.iter().find(|r| r.name == "cpu-004").unwrap();
        assert_eq!(cpu4.state.flags, vec!["maintenance", "not_responding"], "{v}");
        let gpu2 = rows.iter().find(|r| r.name == "gpu-002").unwrap();
        assert_eq!(gpu2.state.flags, vec!["cloud", "other", "powered_down"], "{v}: an unknown flag is other");
    }
}

/// A job counts in its base state (the first of the list) and each flag in its flags; a pending
/// job's reason is `state_reason` whatever its description says.
#[test]
fn synthetic_job_states_and_reasons_on_built_json() {
    let desc = "Nodes required for job are DOWN, DRAINED or reserved for jobs in higher priority partitions";
    for v in LISTS {
        let text = edited(&format!("{v}/squeue.json"), |doc| {
            for j in doc["jobs"].as_array_mut().unwrap() {
                match j["job_id"].as_u64().unwrap() {
                    4095 => j["job_state"] = serde_json::json!(["COMPLETED", "COMPLETING"]),
                    4102 => j["job_state"] = serde_json::json!(["RUNNING", "CONFIGURING", "POWER_UP_NODE"]),
                    4104 => {
                        j["state_reason"] = "Resources".into();
                        j["state_description"] = desc.into();
                    }
                    _ => {}
                }
            }
        });
        let (q, bad) = squeue::parse_json(&text).unwrap();
        assert!(bad.is_empty(), "{v}: {bad:?}");
        assert_eq!(
            states(&q),
            BTreeMap::from([
                ("cancelled", 1),
                ("completed", 1),
                ("failed", 1),
                ("pending", 9),
                ("running", 3)
            ]),
            "{v}: flags do not move a job out of its base state"
        );
        assert_eq!(
            q.cluster.flags,
            BTreeMap::from([("completing", 1), ("configuring", 1), ("power_up_node", 1)]),
            "{v}"
        );
        assert_eq!(q.partitions["cpu"].flags.get("configuring"), Some(&1), "{v}");
        let r = &q.cluster.pending_reasons;
        assert_eq!((r.get("Resources"), r.get("Priority")), (Some(&2), Some(&6)), "{v}: {r:?}");
        assert!(r.keys().all(|k| !k.contains(' ')), "{v}: {r:?}");
    }
}
