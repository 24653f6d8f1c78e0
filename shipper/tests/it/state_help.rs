//! The catalog's help texts name every state and flag value the shipper can ship, so the
//! docs (generated from them) and the code cannot drift apart: every value of the parsers' lists,
//! and every value the head collector emitted from every fixture of every Slurm version and
//! from every combination of node state and flags.

use slurm_cw_catalog::Metric;
use slurm_cw_catalog::dims::{FLAG, STATE};
use slurm_cw_catalog::metrics::*;
use slurm_cw_formats::slurm::state::{
    JOB_BASE_STATES, JOB_FLAGS, NODE_FLAGS, NODE_STATES, NodeState, job_state_list, job_states,
};
use slurm_cw_shipper::sample::Batch;
use slurm_cw_shipper::sources::head::{sinfo, squeue};
use slurm_cw_shipper::sources::node::procs::THREAD_STATES;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The words of a help text: runs of lowercase letters, digits and `_`.
fn words(help: &str) -> BTreeSet<&str> {
    help.split(|c: char| !(c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'))
        .filter(|w| !w.is_empty())
        .collect()
}

fn assert_named(m: &Metric, values: impl IntoIterator<Item = impl AsRef<str>>) {
    let w = words(m.help);
    let missing: Vec<String> =
        values.into_iter().map(|v| v.as_ref().to_owned()).filter(|v| !w.contains(v.as_str())).collect();
    assert!(missing.is_empty(), "{}'s help does not name {missing:?}: {}", m.name, m.help);
}

#[test]
fn every_listed_value_is_in_its_help_text() {
    assert_named(&NODE_COUNT, NODE_STATES);
    assert_named(&NODE_FLAG_COUNT, NODE_FLAGS);
    assert_named(&JOB_COUNT, job_states());
    assert_named(&JOB_FLAG_COUNT, JOB_FLAGS);
    assert_named(&THREAD_COUNT, THREAD_STATES);
    // The lists agree with each other.
    for s in JOB_BASE_STATES.iter().chain(JOB_FLAGS) {
        assert!(job_states().any(|j| j == *s), "{s}");
    }
}

/// Every `State` and `Flag` value each metric got in `batch`.
fn emitted(batch: &Batch, into: &mut BTreeMap<&'static str, BTreeSet<String>>) {
    for s in &batch.samples {
        for dim in [STATE, FLAG] {
            if let Some(v) = s.dims.get(dim) {
                into.entry(s.metric.name).or_default().insert(v.to_owned());
            }
        }
    }
}

fn fixtures() -> Vec<(String, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../formats/tests/fixtures/slurm");
    let mut out = Vec::new();
    for dir in std::fs::read_dir(&root).unwrap().flatten().filter(|d| d.path().is_dir()) {
        for f in std::fs::read_dir(dir.path()).unwrap().flatten() {
            let name = f.file_name().to_string_lossy().into_owned();
            if let Ok(text) = std::fs::read_to_string(f.path()) {
                out.push((format!("{}/{name}", dir.file_name().to_string_lossy()), text));
            }
        }
    }
    assert!(out.len() >= 30, "{} fixture files", out.len());
    out
}

#[test]
fn every_value_emitted_from_any_output_is_in_its_help_text() {
    let mut seen: BTreeMap<&'static str, BTreeSet<String>> = BTreeMap::new();
    let mut batch = Batch::new(std::time::SystemTime::UNIX_EPOCH);
    // Every fixture through every parser that takes it.
    for (name, text) in fixtures() {
        if name.contains("sinfo") {
            let rows = if name.ends_with(".json") {
                sinfo::parse_json(&text).unwrap().0
            } else {
                sinfo::parse_text(&text).0
            };
            sinfo::emit(&rows, true, &mut batch);
        }
        if name.contains("squeue") {
            let q = if name.ends_with(".json") {
                squeue::parse_json(&text).unwrap().0
            } else {
                squeue::parse_text(&text).0
            };
            squeue::emit(&q, true, 100, &mut batch);
        }
    }
    // Every base state with every flag Slurm knows (one at a time and in pairs), unknown ones,
    // and sinfo's compact names with every suffix.
    let bases = ["allocated", "mixed", "idle", "down", "error", "future", "unknown", "hibernating"];
    let flags: Vec<&str> = NODE_FLAGS.iter().copied().chain(["frobnicated"]).collect();
    let mut lines = String::new();
    for base in bases {
        for a in &flags {
            for b in &flags {
                lines.push_str(&format!("n|p|{base}+{a}+{b}|0/1/0/1|1|0|(null)|(null)|\n"));
            }
        }
    }
    for compact in [
        "alloc",
        "mix",
        "idle",
        "down",
        "drain",
        "drng",
        "comp",
        "maint",
        "resv",
        "plnd",
        "fail",
        "failg",
        "inval",
        "unk",
        "err",
        "futr",
        "pow_up",
        "pow_dn",
        "powered_dn",
        "powring_dn",
        "boot",
        "block",
        "cloud",
        "resm",
    ] {
        for suffix in ["", "*", "~", "#", "!", "%", "$", "@", "^", "-"] {
            lines.push_str(&format!("n|p|{compact}{suffix}|0/1/0/1|1|0|(null)|(null)|\n"));
        }
    }
    // Each line as a node of its own (a node counts once for the cluster).
    let mut rows = sinfo::parse_text(&lines).0;
    for (i, r) in rows.iter_mut().enumerate() {
        r.name = format!("n{i}");
    }
    sinfo::emit(&rows, true, &mut batch);
    // Every job state squeue's text can print, and JSON lists of every base state and flag.
    let mut text = String::new();
    for s in job_states().chain(["FROBNICATED", "CANCELLED by 0", "CG", "RQ"]) {
        text.push_str(&format!("p|{}|Resources|1|1|1|N/A|N/A|N/A|\n", s.to_uppercase()));
    }
    squeue::emit(&squeue::parse_text(&text).0, true, 100, &mut batch);
    let jobs: Vec<serde_json::Value> = JOB_BASE_STATES
        .iter()
        .chain(&["weird"])
        .flat_map(|b| {
            JOB_FLAGS.iter().chain(&["weird_flag"]).map(move |f| {
                serde_json::json!({"job_state": [b.to_uppercase(), f.to_uppercase()], "partition": "p"})
            })
        })
        .collect();
    let doc = serde_json::json!({ "jobs": jobs }).to_string();
    squeue::emit(&squeue::parse_json(&doc).unwrap().0, true, 100, &mut batch);
    emitted(&batch, &mut seen);

    for m in [&NODE_COUNT, &NODE_FLAG_COUNT, &JOB_COUNT, &JOB_FLAG_COUNT] {
        let values = seen.get(m.name).unwrap_or_else(|| panic!("{} never emitted", m.name));
        assert_named(m, values);
    }
    // What was emitted covers the lists (nothing listed is dead).
    let all_job_states: Vec<&str> = job_states().collect();
    for (m, list) in [
        (&NODE_COUNT, NODE_STATES),
        (&NODE_FLAG_COUNT, NODE_FLAGS),
        (&JOB_COUNT, all_job_states.as_slice()),
        (&JOB_FLAG_COUNT, JOB_FLAGS),
    ] {
        let got = &seen[m.name];
        let dead: Vec<&&str> = list.iter().filter(|v| !got.contains(**v)).collect();
        assert!(dead.is_empty(), "{} never emitted {dead:?}", m.name);
    }
    // The parsers' own answers stay in their lists.
    assert!(NODE_STATES.contains(&NodeState::parse("weird+stuff").primary));
    assert!(job_states().any(|s| s == job_state_list(["??"]).0));
}
