//! squeue: every job slurmctld still holds (pending array tasks one by one), summed per state,
//! pending reason and partition as it is read, so 100,000 jobs cost one pass and no per-job
//! allocation.
//!
//! The collector asks for an explicit `-O` format; [`parse_json`] reads `squeue --json` of
//! every version too, for fixtures and as a fallback.

use super::gres;
pub use super::reason::{OTHER, reason_code, startable};
use super::sinfo::{BadLine, number};
use super::state::{flag_of_state, job_state, job_state_list};
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};

/// The argv the collector runs (after the program name). `--array` lists each pending array
/// task on its own line; `--states=all` includes jobs that ended within MinJobAge. GPUs come
/// from the GRES request (per job, node and task): the allocated TRES string names GPUs only
/// where accounting tracks gres/gpu. Fields end with `|`, which no field here can hold, so a
/// reason's commas stay in it.
pub const ARGS: &[&str] = &[
    "--noheader",
    "--all",
    "--array",
    "--states=all",
    "--Format=Partition:|,State:|,Reason:|,NumCPUs:|,NumNodes:|,NumTasks:|,tres-per-job:|,tres-per-node:|,tres-per-task:|",
];

/// The argv of the `--json` fallback. `--states=all` as in [`ARGS`]: from 24.05.1 `squeue
/// --json` applies the default state filter too (before, it ignored it and listed all).
pub const JSON_ARGS: &[&str] = &["--json", "--all", "--states=all"];

/// Counts and demand of a set of jobs (the cluster, or one partition).
#[derive(Debug, Default, Clone, PartialEq)]
pub struct JobStats {
    /// Jobs by state (one of [`super::state::JOB_STATES`]).
    pub states: BTreeMap<&'static str, u64>,
    /// Jobs by state flag (one of [`super::state::JOB_FLAGS`]).
    pub flags: BTreeMap<&'static str, u64>,
    /// Pending jobs by reason code ([`reason_code`]).
    pub pending_reasons: HashMap<String, u64>,
    pub pending_cpus: u64,
    pub pending_gpus: u64,
    pub pending_nodes: u64,
    pub running_cpus: u64,
    pub running_gpus: u64,
}

/// One job as the parsers see it.
pub struct Job<'a> {
    /// Comma-separated when a pending job may run in several.
    pub partitions: &'a str,
    /// Lowercase state from the documented list; `other` when unknown.
    pub state: &'static str,
    /// Its state flags (`completing`, `configuring`...), from [`super::state::JOB_FLAGS`].
    pub flags: Vec<&'static str>,
    /// The reason as squeue printed it: a code, or a description in squeue's text.
    pub reason: &'a str,
    pub cpus: u64,
    pub nodes: u64,
    pub gpus: u64,
}

fn bump<K: Ord>(map: &mut BTreeMap<K, u64>, key: K, n: u64) {
    let e = map.entry(key).or_default();
    *e = e.saturating_add(n);
}

impl JobStats {
    /// Adds `n` jobs like `job` (a pending array record stands for its tasks), pending for
    /// `reason` (a code). Sums saturate: absurd counts in damaged output must not wrap around.
    fn add(&mut self, job: &Job, reason: &str, n: u64) {
        bump(&mut self.states, job.state, n);
        for f in &job.flags {
            bump(&mut self.flags, *f, n);
        }
        match job.state {
            "pending" => {
                if startable(reason) {
                    self.pending_cpus = self.pending_cpus.saturating_add(job.cpus.saturating_mul(n));
                    self.pending_gpus = self.pending_gpus.saturating_add(job.gpus.saturating_mul(n));
                    self.pending_nodes = self.pending_nodes.saturating_add(job.nodes.saturating_mul(n));
                }
                match self.pending_reasons.get_mut(reason) {
                    Some(c) => *c = c.saturating_add(n),
                    None => {
                        self.pending_reasons.insert(reason.to_owned(), n);
                    }
                }
            }
            "running" => {
                self.running_cpus = self.running_cpus.saturating_add(job.cpus.saturating_mul(n));
                self.running_gpus = self.running_gpus.saturating_add(job.gpus.saturating_mul(n));
            }
            _ => {}
        }
    }
}

/// The whole queue: the cluster once per job, each partition a job may run in once.
#[derive(Debug, Default)]
pub struct Queue {
    pub cluster: JobStats,
    pub partitions: BTreeMap<String, JobStats>,
    /// Jobs in a state this version does not know (shipped as `other`).
    pub unknown_states: u64,
    /// Pending jobs whose reason squeue printed as a description not known here (shipped as
    /// [`OTHER`]), and the first such description.
    pub unknown_reasons: u64,
    pub first_unknown_reason: Option<String>,
}

impl Queue {
    pub fn add(&mut self, job: &Job) {
        self.add_n(job, 1);
    }

    /// Adds `n` jobs like `job`.
    pub fn add_n(&mut self, job: &Job, n: u64) {
        if job.state == "other" {
            self.unknown_states = self.unknown_states.saturating_add(n);
        }
        let reason = if job.state == "pending" { reason_code(job.reason) } else { "None" };
        if reason == OTHER && job.reason.trim() != OTHER {
            self.unknown_reasons = self.unknown_reasons.saturating_add(n);
            if self.first_unknown_reason.is_none() {
                self.first_unknown_reason = Some(job.reason.chars().take(200).collect());
            }
        }
        self.cluster.add(job, reason, n);
        for p in job.partitions.split(',').filter(|p| !p.is_empty()) {
            match self.partitions.get_mut(p) {
                Some(s) => s.add(job, reason, n),
                None => {
                    let mut s = JobStats::default();
                    s.add(job, reason, n);
                    self.partitions.insert(p.to_owned(), s);
                }
            }
        }
    }
}

/// A state word as squeue's text (and 22.05/23.02 JSON) print it: the state, and the flag it
/// stands for when Slurm printed a flag in place of the base state.
fn text_state(s: &str) -> (&'static str, Vec<&'static str>) {
    let state = job_state(s).unwrap_or("other");
    (state, flag_of_state(state).into_iter().collect())
}

/// Parses the output of [`ARGS`] into the queue summary. Bad lines are skipped and returned.
pub fn parse_text(out: &str) -> (Queue, Vec<BadLine>) {
    let mut q = Queue::default();
    let mut bad = Vec::new();
    for (i, line) in out.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match parse_line(line) {
            Ok(job) => q.add(&job),
            Err(reason) => bad.push(BadLine::new(i + 1, reason)),
        }
    }
    (q, bad)
}

fn parse_line(line: &str) -> Result<Job<'_>, String> {
    let mut f = line.split('|');
    let mut next = |what: &str| f.next().ok_or_else(|| format!("no {what} field: {line:?}"));
    let partitions = next("Partition")?.trim();
    let state_text = next("State")?;
    let reason = next("Reason")?;
    let cpus = next("NumCPUs")?;
    let nodes = next("NumNodes")?;
    let tasks = next("NumTasks")?;
    let per_job = next("tres-per-job")?;
    let per_node = next("tres-per-node")?;
    let per_task = next("tres-per-task")?;
    let cpus = cpus.trim().parse::<u64>().map_err(|_| format!("NumCPUs {cpus:?} is not a number"))?;
    let nodes = parse_nodes(nodes).ok_or_else(|| format!("NumNodes {nodes:?} is not a number"))?;
    // N/A for jobs that did not say, NO_VAL (4294967294) for some held jobs: one task then.
    let tasks = tasks.trim().parse::<u64>().ok().filter(|t| *t < NO_VAL).unwrap_or(1);
    let (state, flags) = text_state(state_text);
    Ok(Job {
        partitions,
        state,
        flags,
        reason,
        cpus,
        nodes,
        gpus: requested_gpus(per_job, per_node, per_task, nodes, tasks),
    })
}

/// GPUs a job asked for: per job, plus per node times nodes, plus per task times tasks.
pub fn requested_gpus(per_job: &str, per_node: &str, per_task: &str, nodes: u64, tasks: u64) -> u64 {
    gres::gpus_in_tres(per_job)
        .saturating_add(gres::gpus_in_tres(per_node).saturating_mul(nodes.max(1)))
        .saturating_add(gres::gpus_in_tres(per_task).saturating_mul(tasks.max(1)))
}

/// Slurm's "not set" values start here (NO_VAL is 0xfffffffe).
const NO_VAL: u64 = 0xffff_fff0;

/// `2`, or a range `2-4` (the minimum counts).
fn parse_nodes(s: &str) -> Option<u64> {
    s.trim().split('-').next()?.trim().parse().ok()
}

/// Parses `squeue --json` of any version: openapi v0.0.37/38 (`job_state` a string) and
/// data_parser v0.0.39+ (`job_state` an array from 23.11: the base state and the flags;
/// numbers as `{set, infinite, number}`). The reason is `state_reason`, the code.
pub fn parse_json(text: &str) -> Result<(Queue, Vec<BadLine>), String> {
    let doc: Value = serde_json::from_str(text).map_err(|e| format!("squeue --json: {e}"))?;
    let jobs = doc.get("jobs").and_then(Value::as_array).ok_or("squeue --json: no `jobs` array")?;
    let mut q = Queue::default();
    let mut bad = Vec::new();
    for (i, j) in jobs.iter().enumerate() {
        let (state, flags) = match j.get("job_state") {
            Some(Value::String(s)) => text_state(s),
            Some(Value::Array(a)) => job_state_list(a.iter().filter_map(Value::as_str)),
            _ => {
                bad.push(BadLine::new(i + 1, "job without job_state"));
                continue;
            }
        };
        let partitions = j.get("partition").and_then(Value::as_str).unwrap_or("");
        let reason = j.get("state_reason").and_then(Value::as_str).unwrap_or("None");
        let cpus = number(j.get("cpus"));
        let nodes = number(j.get("node_count"));
        let tasks = number(j.get("tasks"));
        let text = |key: &str| j.get(key).and_then(Value::as_str).unwrap_or("");
        let gpus =
            requested_gpus(text("tres_per_job"), text("tres_per_node"), text("tres_per_task"), nodes, tasks);
        // A pending array in one record: array_task_string "5-10" or "1,3,7-9%2".
        let tasks = match (state, j.get("array_task_string").and_then(Value::as_str)) {
            ("pending", Some(s)) if !s.is_empty() => count_tasks(s).max(1),
            _ => 1,
        };
        let job = Job { partitions, state, flags, reason, cpus, nodes, gpus };
        q.add_n(&job, tasks);
    }
    Ok((q, bad))
}

/// Array tasks in `1-10`, `1,3,7-9`, `0-99:2`, `1-100%5` (the throttle does not change the count).
pub fn count_tasks(s: &str) -> u64 {
    let s = s.split('%').next().unwrap_or("");
    s.split(',')
        .filter(|p| !p.is_empty())
        .map(|part| {
            let (range, step) = match part.split_once(':') {
                Some((r, st)) => (r, st.parse::<u64>().unwrap_or(1).max(1)),
                None => (part, 1),
            };
            match range.split_once('-') {
                Some((a, b)) => match (a.parse::<u64>(), b.parse::<u64>()) {
                    (Ok(a), Ok(b)) if b >= a => (b - a) / step + 1,
                    _ => 0,
                },
                None => u64::from(range.parse::<u64>().is_ok()),
            }
        })
        .fold(0u64, u64::saturating_add)
}

#[cfg(test)]
mod tests {
    use super::*;

    // Written in real 22.05 shapes (`gres:gpu:N` in the per-node/job/task fields, N/A when
    // absent): every state, several pending reasons, one unknown state.
    const OUT: &str = include_str!("../../tests/fixtures/squeue-22.05-states.txt");

    #[test]
    fn sums_states_reasons_and_demand() {
        let (q, bad) = parse_text(OUT);
        assert!(bad.is_empty(), "{bad:?}");
        let c = &q.cluster;
        assert_eq!(c.states["pending"], 5);
        assert_eq!(c.states["running"], 1);
        assert_eq!(c.states["completed"], 1);
        assert_eq!(c.states["failed"], 1);
        assert_eq!(c.states["cancelled"], 1);
        assert_eq!(c.states["out_of_memory"], 1);
        assert_eq!(c.states["other"], 1);
        assert_eq!(q.unknown_states, 1);
        assert_eq!(c.pending_reasons["Resources"], 2);
        assert_eq!(c.pending_reasons["ReqNodeNotAvail"], 1);
        // The Dependency job (1 CPU, 1 node) could not start on free nodes: not demand.
        assert_eq!((c.pending_cpus, c.pending_nodes, c.pending_gpus), (9, 5, 2));
        assert_eq!((c.running_cpus, c.running_gpus), (2, 2), "one GPU per task, two tasks");
        // A job pending in two partitions counts in each, and once for the cluster.
        assert_eq!(q.partitions["batch"].pending_reasons["Priority"], 1);
        assert_eq!(q.partitions["debug"].pending_reasons["Priority"], 1);
        assert_eq!(q.partitions["debug"].states["pending"], 3);
    }

    #[test]
    fn bad_lines_are_skipped_with_their_number() {
        let out = "batch|RUNNING|None|2|1|1|N/A|N/A|N/A|\nbatch|RUNNING|None|many|1|1|N/A|N/A|N/A|\nbatch|RUNNING\n\n";
        let (q, bad) = parse_text(out);
        assert_eq!(q.cluster.states["running"], 1);
        assert_eq!(bad.iter().map(|b| b.line).collect::<Vec<_>>(), vec![2, 3]);
    }

    /// The description squeue's text prints for a job whose code is Resources (real 22.05 and
    /// 24.11): it used to be cut at its first comma into a reason of its own.
    #[test]
    fn a_description_with_commas_is_its_code_in_text_and_json() {
        let desc =
            "Nodes required for job are DOWN, DRAINED or reserved for jobs in higher priority partitions";
        let text = format!(
            "batch|PENDING|{desc}|2|1|1|N/A|N/A|N/A|\n\
             batch|PENDING|ReqNodeNotAvail, UnavailableNodes:c[1-2]|1|1|1|N/A|N/A|N/A|\n\
             batch|PENDING|an admin's note, free text|1|1|1|N/A|N/A|N/A|\n"
        );
        let (tq, bad) = parse_text(&text);
        assert!(bad.is_empty(), "{bad:?}");
        let json = serde_json::json!({"jobs": [
            {"job_state": ["PENDING"], "partition": "batch", "state_reason": "Resources",
             "state_description": desc, "cpus": 2, "node_count": 1, "tasks": 1},
            {"job_state": ["PENDING"], "partition": "batch", "state_reason": "ReqNodeNotAvail",
             "state_description": "ReqNodeNotAvail, UnavailableNodes:c[1-2]", "cpus": 1, "node_count": 1},
            {"job_state": ["PENDING"], "partition": "batch", "state_reason": "JobHeldAdmin",
             "state_description": "an admin's note, free text", "cpus": 1, "node_count": 1},
        ]});
        let (jq, bad) = parse_json(&json.to_string()).unwrap();
        assert!(bad.is_empty(), "{bad:?}");
        let want = |third: &str| {
            HashMap::from([
                ("Resources".to_owned(), 1),
                ("ReqNodeNotAvail".to_owned(), 1),
                (third.to_owned(), 1),
            ])
        };
        assert_eq!(tq.cluster.pending_reasons, want(OTHER), "text: an unknown description is Other");
        assert_eq!(jq.cluster.pending_reasons, want("JobHeldAdmin"), "JSON: the code");
        assert_eq!(
            (tq.unknown_reasons, tq.first_unknown_reason.as_deref()),
            (1, Some("an admin's note, free text"))
        );
        assert_eq!(jq.unknown_reasons, 0);
        for q in [&tq, &jq] {
            assert!(
                q.cluster.pending_reasons.keys().all(|r| !r.contains(',')),
                "{:?}",
                q.cluster.pending_reasons
            );
        }
    }

    /// 23.11+ lists the base state first, then the flags: a job counts in its base state and
    /// in each flag. squeue's text prints the flag in place of the base state.
    #[test]
    fn job_state_lists_count_the_base_state_and_the_flags() {
        let json = serde_json::json!({"jobs": [
            {"job_state": ["COMPLETED", "COMPLETING"], "partition": "a", "cpus": 1, "node_count": 1},
            {"job_state": ["RUNNING", "CONFIGURING", "POWER_UP_NODE"], "partition": "a", "cpus": 4, "node_count": 1},
            {"job_state": ["RUNNING"], "partition": "b", "cpus": 2, "node_count": 1},
            {"job_state": ["PENDING", "REQUEUED"], "partition": "a,b", "state_reason": "BeginTime", "cpus": 1, "node_count": 1},
            {"job_state": "COMPLETING", "partition": "b", "cpus": 1, "node_count": 1},
        ]});
        let (q, bad) = parse_json(&json.to_string()).unwrap();
        assert!(bad.is_empty(), "{bad:?}");
        let c = &q.cluster;
        assert_eq!(
            c.states,
            BTreeMap::from([("completed", 1), ("running", 2), ("pending", 1), ("completing", 1)]),
            "a single string (22.05, 23.02) is what squeue printed"
        );
        assert_eq!(
            c.flags,
            BTreeMap::from([("completing", 2), ("configuring", 1), ("power_up_node", 1), ("requeued", 1)])
        );
        assert_eq!(c.running_cpus, 6, "a configuring job is running");
        assert_eq!(q.partitions["b"].flags, BTreeMap::from([("completing", 1), ("requeued", 1)]));
        assert_eq!(q.unknown_states, 0);

        let (t, _) =
            parse_text("a|COMPLETING|None|1|1|1|N/A|N/A|N/A|\na|CONFIGURING|None|4|1|1|N/A|N/A|N/A|\n");
        assert_eq!(t.cluster.states, BTreeMap::from([("completing", 1), ("configuring", 1)]));
        assert_eq!(t.cluster.flags, BTreeMap::from([("completing", 1), ("configuring", 1)]));
    }

    #[test]
    fn gpu_requests_per_job_node_and_task() {
        assert_eq!(requested_gpus("gres:gpu:2", "N/A", "N/A", 3, 6), 2);
        assert_eq!(requested_gpus("N/A", "gres:gpu:2", "N/A", 3, 6), 6);
        assert_eq!(requested_gpus("N/A", "N/A", "gres/gpu:1", 3, 6), 6);
        assert_eq!(requested_gpus("", "gres/gpu:a100:4", "", 2, 1), 8);
    }

    #[test]
    fn array_task_strings() {
        assert_eq!(count_tasks("1-10"), 10);
        assert_eq!(count_tasks("1,3,7-9"), 5);
        assert_eq!(count_tasks("0-99:2"), 50);
        assert_eq!(count_tasks("1-100%5"), 100);
        assert_eq!(count_tasks("9-1"), 0);
        assert_eq!(count_tasks(""), 0);
    }
}
