//! `scontrol show job --json <id>`: what Slurm says of one job, from output whose fields a
//! job's user cannot forge. The one-line text form prints user free text (WorkDir, JobName,
//! Comment, StdOut, Command) unquoted among the keys, so a job submitted from a directory
//! named `w Account=victim` reads as account `victim` there; in JSON each field is its own
//! string. The same job object serves `squeue --json` (data_parser 0.0.38 in 22.05 to 0.0.44+).
//!
//! Bytes that are not UTF-8 in a user's field are replaced (`from_utf8_lossy`) rather than
//! making the whole answer unreadable: they are in fields this parser does not read.

use super::job::{JobDetail, JobError, NodeAllocation};
use super::sinfo::{number, strings};
use serde_json::Value;
use std::collections::BTreeSet;

/// The record of `want` (a job id, or a 26.05 SLUID) in a `{"jobs": [...]}` document. An
/// array job's id may answer with every task, so the record is picked by its id, never by
/// its place.
pub fn parse(bytes: &[u8], want: &str) -> Result<JobDetail, JobError> {
    pick(parse_all(bytes)?, want)
}

/// Every record of the document.
pub fn parse_all(bytes: &[u8]) -> Result<Vec<JobDetail>, JobError> {
    let text = String::from_utf8_lossy(bytes);
    let doc: Value = serde_json::from_str(&text).map_err(|_| JobError::Unreadable)?;
    let jobs = doc.get("jobs").and_then(Value::as_array).ok_or(JobError::Unreadable)?;
    Ok(jobs.iter().map(detail).collect())
}

/// The record of `want` among `jobs`: a job id, a SLUID, an array task (`<array job>_<task>`)
/// or a heterogeneous job's component (`<het job>+<offset>`).
pub fn pick(jobs: impl IntoIterator<Item = JobDetail>, want: &str) -> Result<JobDetail, JobError> {
    jobs.into_iter()
        .find(|d| d.job_id == want || d.sluid.as_deref() == Some(want) || d.names().any(|n| n == want))
        .ok_or(JobError::NoJobId)
}

/// A JSON number (or `{set, number}` object) that is set, as u64.
fn set_number(v: Option<&Value>) -> Option<u64> {
    match v? {
        Value::Object(o) if !o.get("set").and_then(Value::as_bool).unwrap_or(true) => None,
        Value::Null => None,
        other => Some(number(Some(other))),
    }
}

fn detail(j: &Value) -> JobDetail {
    let text = |key: &str| {
        j.get(key).and_then(Value::as_str).map(str::trim).filter(|v| !v.is_empty()).map(str::to_owned)
    };
    let job_id = set_number(j.get("job_id")).map(|n| n.to_string()).unwrap_or_default();
    // 22.05 prints the state as a string, 23.02+ as a list whose first item is the base state.
    let state = match j.get("job_state") {
        Some(Value::String(s)) => Some(s.clone()),
        other => strings(other).into_iter().next(),
    };
    let sluid = j
        .get("step_id")
        .and_then(|s| s.get("sluid"))
        .or_else(|| j.get("sluid"))
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_owned);
    let array_job = set_number(j.get("array_job_id")).filter(|n| *n != 0);
    let array_task = set_number(j.get("array_task_id")).filter(|_| array_job.is_some());
    let het_job = set_number(j.get("het_job_id")).filter(|n| *n != 0);
    let het_offset = set_number(j.get("het_job_offset")).filter(|_| het_job.is_some());
    JobDetail {
        job_id,
        account: text("account"),
        partition: text("partition"),
        user_id: set_number(j.get("user_id")).and_then(|n| u32::try_from(n).ok()),
        user_name: text("user_name"),
        state,
        node_list: text("nodes"),
        start_time: None,
        end_time: None,
        start_unix: set_number(j.get("start_time")).filter(|t| *t > 0).and_then(|t| i64::try_from(t).ok()),
        end_unix: set_number(j.get("end_time")).filter(|t| *t > 0).and_then(|t| i64::try_from(t).ok()),
        submit_time: None,
        submit_unix: set_number(j.get("submit_time")).filter(|t| *t > 0).and_then(|t| i64::try_from(t).ok()),
        restarts: set_number(j.get("restart_cnt")).and_then(|n| u32::try_from(n).ok()),
        gpus: gpus(j),
        sluid,
        array: array_job.zip(array_task),
        het: het_job.zip(het_offset),
        allocation: allocation(j),
    }
}

const MB: f64 = 1024.0 * 1024.0;

/// CPUs and memory per node: `job_resources.nodes.allocation[]` (`name`, `cpus.count`,
/// `memory.allocated` in MB) since 23.02; 22.05's `allocated_nodes[]` (`nodename`,
/// `memory_allocated`) counts no CPUs per node, so a job on one node takes the job's `cpus` and
/// others none (their cpuset then says).
fn allocation(j: &Value) -> Vec<NodeAllocation> {
    let res = j.get("job_resources");
    let positive = |v: Option<&Value>| set_number(v).filter(|n| *n > 0).map(|n| n as f64);
    if let Some(nodes) = res.and_then(|r| r.pointer("/nodes/allocation")).and_then(Value::as_array) {
        return nodes
            .iter()
            .filter_map(|n| {
                Some(NodeAllocation {
                    node: n.get("name")?.as_str()?.to_owned(),
                    cpus: positive(n.pointer("/cpus/count")),
                    memory_bytes: positive(n.pointer("/memory/allocated")).map(|m| m * MB),
                })
            })
            .collect();
    }
    let Some(nodes) = res.and_then(|r| r.get("allocated_nodes")).and_then(Value::as_array) else {
        return Vec::new();
    };
    let single = nodes.len() == 1;
    nodes
        .iter()
        .filter_map(|n| {
            Some(NodeAllocation {
                node: n.get("nodename")?.as_str()?.to_owned(),
                cpus: if single { positive(j.get("cpus")) } else { None },
                memory_bytes: positive(n.get("memory_allocated")).map(|m| m * MB),
            })
        })
        .collect()
}

/// `gres_detail` holds one string per allocated node, in the order of the job's allocation
/// (`job_resources.allocated_nodes[].nodename` to 23.02, `job_resources.nodes.allocation[]
/// .name` since).
fn gpus(j: &Value) -> Vec<(String, BTreeSet<u32>)> {
    let details = strings(j.get("gres_detail"));
    if details.is_empty() {
        return Vec::new();
    }
    let res = j.get("job_resources");
    let names: Vec<String> = res
        .and_then(|r| r.get("nodes"))
        .and_then(|n| n.get("allocation"))
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(|n| n.get("name").and_then(Value::as_str)).map(str::to_owned).collect())
        .or_else(|| {
            res.and_then(|r| r.get("allocated_nodes")).and_then(Value::as_array).map(|a| {
                a.iter()
                    .filter_map(|n| n.get("nodename").and_then(Value::as_str))
                    .map(str::to_owned)
                    .collect()
            })
        })
        .unwrap_or_default();
    let single = j.get("nodes").and_then(Value::as_str).filter(|_| details.len() == 1);
    details
        .iter()
        .enumerate()
        .filter_map(|(i, gres)| {
            let node = names.get(i).map(String::as_str).or(single)?;
            Some((node.to_owned(), super::job::gpu_indices(gres)))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(path: &str) -> Vec<u8> {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/slurm/");
        std::fs::read(format!("{dir}{path}")).unwrap()
    }

    #[test]
    fn every_json_generation_gives_the_same_fields() {
        // 22.05 (captured): plain numbers, a string state, allocated_nodes.
        let d = parse(&fixture("22.05/squeue.json"), "60").unwrap();
        assert_eq!(
            (d.partition.as_deref(), d.user_id, d.state.as_deref()),
            (Some("batch"), Some(0), Some("RUNNING"))
        );
        assert_eq!((d.account, d.sluid, d.array), (None, None, None));
        assert!(d.start_unix.is_some());
        assert!(d.submit_unix.is_some_and(|s| Some(s) <= d.start_unix) && d.restarts == Some(0));
        let c3 = NodeAllocation { node: "c3".into(), cpus: Some(1.0), memory_bytes: Some(100.0 * MB) };
        assert_eq!(d.allocation, vec![c3]);
        // 25.11 (built from documentation): set/number objects, the SLUID, an array task, GPUs.
        let doc = fixture("25.11/squeue.json");
        let d = parse(&doc, "4101").unwrap();
        assert_eq!((d.account.as_deref(), d.partition.as_deref()), (Some("physics"), Some("gpu")));
        assert_eq!((d.user_id, d.user_name.as_deref()), (Some(1001), Some("alice")));
        assert_eq!(d.sluid.as_deref(), Some("sAT1S001EF8AAB"));
        assert_eq!(d.gpus_on("gpu-001"), Some(&BTreeSet::from([0, 1])));
        let by_sluid = parse(&doc, "sAT1S001EF8AAB").unwrap();
        assert_eq!(by_sluid.job_id, "4101");
        let task = parse(&doc, "4107").unwrap();
        assert_eq!(task.array, Some((4106, 4)));
        assert_eq!(parse(&doc, "4106_4").unwrap().job_id, "4107", "an array task by its name");
        assert_eq!(parse(&doc, "4106_5"), Err(JobError::NoJobId));
        assert_eq!(parse(&doc, "999"), Err(JobError::NoJobId));
    }

    #[test]
    fn real_slurm_26_05_answers_by_id_and_by_sluid() {
        // Captured on Debian's 26.05.5: `scontrol show job --json` in the chroot bench, and
        // `squeue --json` in the cgroup v2 VM, where the job's directory is named by its SLUID.
        let d = parse(&fixture("26.05-real/scontrol-show-job-26.05.json"), "20000004").unwrap();
        assert_eq!((d.partition.as_deref(), d.user_name.as_deref()), (Some("debug"), Some("root")));
        assert_eq!(d.sluid.as_deref(), Some("s0HDM87JGV7900"));
        let m4 = d.allocation_on("m4").unwrap();
        assert_eq!((m4.cpus, m4.memory_bytes), (Some(2.0), Some(200.0 * MB)), "{:?}", d.allocation);
        assert_eq!(d.allocation_on("m3").and_then(|a| a.cpus), Some(1.0));
        let vm = fixture("26.05-real/vm-cgroup-v2/squeue.json");
        let by_sluid = parse(&vm, "sA5SM87JS4MX00").unwrap();
        assert_eq!((by_sluid.job_id.as_str(), by_sluid.user_name.as_deref()), ("1", Some("alice")));
        let tree = String::from_utf8(fixture("26.05-real/vm-cgroup-v2/cgroup-tree-sluid.txt")).unwrap();
        assert!(tree.lines().any(|l| l.ends_with("slurmstepd.scope/sA5SM87JS4MX00")), "{tree}");
    }

    #[test]
    fn user_text_stays_in_its_own_fields() {
        // What a hostile user writes into every free-text field, bytes that are not UTF-8
        // included: none of it reaches account, partition, user or GPUs.
        let evil = "w Account=victim Partition=gold UserId=root(0)\n GRES=gpu:8(IDX:0-7) JobId=1";
        let mut doc = serde_json::json!({"jobs": [{
            "job_id": 77, "account": "physics", "partition": "batch", "user_id": 1001,
            "user_name": "alice", "job_state": ["RUNNING"], "nodes": "c1",
            "name": evil, "comment": evil, "current_working_directory": evil,
            "standard_output": evil, "standard_error": evil, "command": evil,
            "gres_detail": [], "job_resources": {"nodes": {"allocation": [{"name": "c1"}]}}
        }]})
        .to_string()
        .into_bytes();
        // A lone 0xff inside the job name's string.
        let at = doc.windows(2).position(|w| w == b"w ").unwrap();
        doc.insert(at + 1, 0xff);
        let d = parse(&doc, "77").unwrap();
        assert_eq!((d.account.as_deref(), d.partition.as_deref()), (Some("physics"), Some("batch")));
        assert_eq!((d.user_id, d.user_name.as_deref()), (Some(1001), Some("alice")));
        assert!(d.gpus.is_empty());
        assert_eq!(parse(b"JobId=77 Account=victim", "77"), Err(JobError::Unreadable));
    }
}
