//! squeue: every job slurmctld still holds (pending array tasks one by one), summed per state,
//! pending reason and partition as it is read, so 100,000 jobs cost one pass and no per-job
//! allocation.
//!
//! The collector asks for an explicit `-O` format; [`parse_json`] reads `squeue --json` of
//! every version too, for fixtures and as a fallback.

use super::gres;
use super::sinfo::{BadLine, number};
use super::state::job_state;
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};

/// The argv the collector runs (after the program name). `--array` lists each pending array
/// task on its own line; `--states=all` includes jobs that ended within MinJobAge. GPUs come
/// from the GRES request (per job, node and task): the allocated TRES string names GPUs only
/// where accounting tracks gres/gpu.
pub const ARGS: &[&str] = &[
    "--noheader",
    "--all",
    "--array",
    "--states=all",
    "--Format=Partition:|,State:|,Reason:|,NumCPUs:|,NumNodes:|,NumTasks:|,tres-per-job:|,tres-per-node:|,tres-per-task:|",
];

/// Counts and demand of a set of jobs (the cluster, or one partition).
#[derive(Debug, Default, Clone, PartialEq)]
pub struct JobStats {
    pub states: BTreeMap<&'static str, u64>,
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
    pub reason: &'a str,
    pub cpus: u64,
    pub nodes: u64,
    pub gpus: u64,
}

impl JobStats {
    /// Adds `n` jobs like `job` (a pending array record stands for its tasks). Sums saturate:
    /// absurd counts in damaged output must not wrap around.
    fn add(&mut self, job: &Job, n: u64) {
        let e = self.states.entry(job.state).or_default();
        *e = e.saturating_add(n);
        match job.state {
            "pending" => {
                let reason = short_reason(job.reason);
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
        self.cluster.add(job, n);
        for p in job.partitions.split(',').filter(|p| !p.is_empty()) {
            match self.partitions.get_mut(p) {
                Some(s) => s.add(job, n),
                None => {
                    let mut s = JobStats::default();
                    s.add(job, n);
                    self.partitions.insert(p.to_owned(), s);
                }
            }
        }
    }
}

/// Whether a pending job with this (short) reason would start if nodes were free: not held,
/// not waiting for a dependency, a begin time, licenses, a limit (QOS, association, partition)
/// or a partition that is down. This is the demand that more nodes would serve.
pub fn startable(reason: &str) -> bool {
    const WAITING: &[&str] = &[
        "Dependency",
        "DependencyNeverSatisfied",
        "JobHeldUser",
        "JobHeldAdmin",
        "BeginTime",
        "Licenses",
        "Reservation",
        "JobArrayTaskLimit",
    ];
    !(WAITING.contains(&reason)
        || reason.contains("Limit")
        || reason.starts_with("Partition")
        || reason.starts_with("Invalid"))
}

/// `ReqNodeNotAvail, UnavailableNodes:c[1-2]` -> `ReqNodeNotAvail`; `(Priority)` -> `Priority`.
/// The node list would make every value a new CloudWatch metric.
pub fn short_reason(r: &str) -> &str {
    let r = r.trim().trim_start_matches('(').trim_end_matches(')');
    let r = r.split(',').next().unwrap_or("").trim();
    let r = if r.len() > 200 { r.get(..200).unwrap_or("Other") } else { r };
    if r.is_empty() || r == "None" || r == "(null)" { "None" } else { r }
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
            Err(reason) => bad.push(BadLine { line: i + 1, reason }),
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
    Ok(Job {
        partitions,
        state: job_state(state_text).unwrap_or("other"),
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
/// data_parser v0.0.39+ (`job_state` an array from 23.11, numbers as `{set, infinite, number}`).
pub fn parse_json(text: &str) -> Result<(Queue, Vec<BadLine>), String> {
    let doc: Value = serde_json::from_str(text).map_err(|e| format!("squeue --json: {e}"))?;
    let jobs = doc.get("jobs").and_then(Value::as_array).ok_or("squeue --json: no `jobs` array")?;
    let mut q = Queue::default();
    let mut bad = Vec::new();
    for (i, j) in jobs.iter().enumerate() {
        let state = match j.get("job_state") {
            Some(Value::String(s)) => job_state(s),
            Some(Value::Array(a)) => a.first().and_then(Value::as_str).and_then(job_state),
            _ => {
                bad.push(BadLine { line: i + 1, reason: "job without job_state".into() });
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
            (Some("pending"), Some(s)) if !s.is_empty() => count_tasks(s).max(1),
            _ => 1,
        };
        let job = Job { partitions, state: state.unwrap_or("other"), reason, cpus, nodes, gpus };
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

    #[test]
    fn reasons_lose_node_lists_and_parentheses() {
        assert_eq!(short_reason("(Priority)"), "Priority");
        assert_eq!(short_reason("((ReqNodeNotAvail, UnavailableNodes:cs[100,101]))"), "ReqNodeNotAvail");
        assert_eq!(short_reason("None"), "None");
        assert_eq!(short_reason(""), "None");
    }

    #[test]
    fn gpu_requests_per_job_node_and_task() {
        assert_eq!(requested_gpus("gres:gpu:2", "N/A", "N/A", 3, 6), 2);
        assert_eq!(requested_gpus("N/A", "gres:gpu:2", "N/A", 3, 6), 6);
        assert_eq!(requested_gpus("N/A", "N/A", "gres/gpu:1", 3, 6), 6);
        assert_eq!(requested_gpus("", "gres/gpu:a100:4", "", 2, 1), 8);
    }

    #[test]
    fn demand_counts_only_jobs_that_could_start() {
        for r in ["Resources", "Priority", "ReqNodeNotAvail", "None", "Nodes required for job are DOWN"] {
            assert!(startable(r), "{r}");
        }
        for r in [
            "Dependency",
            "JobHeldUser",
            "BeginTime",
            "QOSMaxJobsPerUserLimit",
            "AssocGrpCpuLimit",
            "PartitionDown",
            "InvalidAccount",
        ] {
            assert!(!startable(r), "{r}");
        }
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
