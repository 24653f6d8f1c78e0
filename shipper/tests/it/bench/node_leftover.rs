//! A job cgroup that outlives its job on real Slurm (cgroup v1 here): what a job whose
//! processes Slurm could not kill ("Kill task failed"), or a slurmd that died before cleaning
//! up, leaves. The job is over in Slurm; its directory, with a process in it, stays. The node
//! role must not read it as a running job (its figures, its cost), while the jobs that do run
//! are read as before. Nor a job's leftover cgroup here once Slurm runs the job on another node
//! (requeued after a node failure): it would be billed twice.

use super::node_slurm::{once_node_run, sample_of};
use crate::common::*;
use std::path::PathBuf;
use std::time::Duration;

/// Directories the test made and a process it put in them, taken away however it ends: the
/// process first, so that the directories are empty.
struct Leftover {
    made: Vec<PathBuf>,
    stuck: std::process::Child,
}

impl Drop for Leftover {
    fn drop(&mut self) {
        let _ = self.stuck.kill();
        let _ = self.stuck.wait();
        self.made.iter().rev().for_each(|d| drop(std::fs::remove_dir(d)));
    }
}

/// Job `job`'s v1 cgroup on `node` as Slurm makes it for root's batch step, with a process in
/// it that never leaves.
fn leftover(node: &str, job: &str) -> Leftover {
    let stuck = std::process::Command::new("sleep").arg("300").spawn().unwrap();
    let mut left = Leftover { made: Vec::new(), stuck };
    for controller in ["cpuacct", "memory", "freezer"] {
        let mut dir = PathBuf::from(format!("/sys/fs/cgroup/{controller}/slurm_{node}"));
        for part in ["uid_0".to_owned(), format!("job_{job}"), "step_batch".to_owned()] {
            dir.push(part);
            if !dir.exists() {
                std::fs::create_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
                left.made.push(dir.clone());
            }
        }
        std::fs::write(dir.join("cgroup.procs"), left.stuck.id().to_string()).unwrap();
    }
    left
}

/// One `--once` run of the node role (stdout, stderr) beside a job that runs here (physics, on
/// the first node: read as before, which it checks) and job `second` (`sbatch --wrap` on node
/// `on`, waited for until `state`), whose cgroup the test leaves on the first node. Returns
/// the run's output and `second`'s id.
fn beside_a_leftover(conf: &std::path::Path, on: &str, wrap: &str, state: &str) -> (String, String, String) {
    let _lock = SLURM_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let (running, node) = memory_job(conf);
    let on = if on.is_empty() { node.clone() } else { on.to_owned() };
    let second = sbatch(&["-p", "batch", "-w", &on, "--wrap", wrap]);
    let _cleanup = SlurmCleanup { jobs: vec![second.clone(), running.clone()], nodes: Vec::new() };
    wait_until(&format!("the second job to be {state}"), Duration::from_secs(60), || {
        job_state(&second) == state
    });
    // Its cgroup as Slurm made it (root's job: uid_0), with a process that never left.
    let left = leftover(&node, &second);
    let run = once_node_run("leftovertest");
    drop(left);
    let (stdout, stderr) = (String::from_utf8_lossy(&run.stdout), String::from_utf8_lossy(&run.stderr));
    assert_eq!(
        sample_of(&stdout, &running)["Account"],
        "physics",
        "the running job is read as before: {stdout}"
    );
    (stdout.into_owned(), stderr.into_owned(), second)
}

#[ignore = "needs the Slurm bench: scripts/test.sh runs it"]
#[test]
fn a_cgroup_left_behind_by_an_ended_job_is_not_a_running_job() {
    let Some(conf) = slurm() else { return };
    let (stdout, stderr, ended) = beside_a_leftover(&conf, "", "true", "COMPLETED");
    // The ended job appears nowhere, and the log says why.
    assert!(!stdout.contains(&format!(r#""JobId":"{ended}""#)), "the ended job was read: {stdout}");
    let said = stderr.lines().any(|l| l.contains("but its cgroup is still here") && l.contains(&ended));
    assert!(said, "{stderr}");
}

#[ignore = "needs the Slurm bench: scripts/test.sh runs it"]
#[test]
fn a_cgroup_left_here_by_a_job_that_now_runs_on_another_node_is_not_read_here() {
    let Some(conf) = slurm() else { return };
    // The job here confirms that this node's name is Slurm's; the other runs on the next node.
    let other = nodes()[1].clone();
    let (stdout, stderr, moved) = beside_a_leftover(&conf, &other, "sleep 300", "RUNNING");
    let nodes_of_moved: Vec<String> = stdout
        .lines()
        .filter_map(|l| slurm_cw_formats::record::Record::from_json_line(l).ok())
        .filter_map(|r| serde_json::from_str::<serde_json::Value>(&r.message).ok())
        .filter(|v| v["JobId"] == moved.as_str() && v["Type"] == "job_sample")
        .map(|v| v["NodeName"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(nodes_of_moved, [other.as_str()], "read on {other} only, where Slurm runs it: {stdout}");
    let said = stderr
        .lines()
        .any(|l| l.contains("but its cgroup is still here") && l.contains(&format!("runs on {other}")));
    assert!(said, "{stderr}");
}
