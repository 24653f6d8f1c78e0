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

#[ignore = "needs the Slurm bench: scripts/test.sh runs it"]
#[test]
fn a_cgroup_left_behind_by_an_ended_job_is_not_a_running_job() {
    let Some(conf) = slurm() else { return };
    let _lock = SLURM_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    // A job that runs (physics, on the first node), and one that ended there.
    let (running, node) = memory_job(&conf);
    let ended = sbatch(&["-p", "batch", "-w", &node, "--wrap", "true"]);
    let _cleanup = SlurmCleanup { jobs: vec![ended.clone(), running.clone()], nodes: Vec::new() };
    wait_until("the second job to complete", Duration::from_secs(60), || job_state(&ended) == "COMPLETED");
    // Its cgroup as Slurm made it (root's job: uid_0), with a process that never left.
    let left = leftover(&node, &ended);
    let run = once_node_run("leftovertest");
    let (stdout, stderr) = (String::from_utf8_lossy(&run.stdout), String::from_utf8_lossy(&run.stderr));
    drop(left);
    // The running job is read as before; the ended one appears nowhere, and the log says why.
    assert_eq!(sample_of(&stdout, &running)["Account"], "physics", "{stdout}");
    assert!(!stdout.contains(&format!(r#""JobId":"{ended}""#)), "the ended job was read: {stdout}");
    let said = stderr.lines().any(|l| l.contains("but its cgroup is still here") && l.contains(&ended));
    assert!(said, "{stderr}");
}

#[ignore = "needs the Slurm bench: scripts/test.sh runs it"]
#[test]
fn a_cgroup_left_here_by_a_job_that_now_runs_on_another_node_is_not_read_here() {
    let Some(conf) = slurm() else { return };
    let _lock = SLURM_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    // A job that runs here (Slurm lists it on this node: its name is Slurm's), and one that
    // runs on the next node and left its cgroup here.
    let (here, node) = memory_job(&conf);
    let other = nodes()[1].clone();
    let moved = sbatch(&["-p", "batch", "-w", &other, "--wrap", "sleep 300"]);
    let _cleanup = SlurmCleanup { jobs: vec![moved.clone(), here.clone()], nodes: Vec::new() };
    wait_until("the second job to run", Duration::from_secs(60), || job_state(&moved) == "RUNNING");
    let left = leftover(&node, &moved);

    let run = once_node_run("movedtest");
    let (stdout, stderr) = (String::from_utf8_lossy(&run.stdout), String::from_utf8_lossy(&run.stderr));
    drop(left);
    assert_eq!(sample_of(&stdout, &here)["Account"], "physics", "{stdout}");
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
