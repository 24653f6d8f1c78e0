//! A job Slurm suspended (`scontrol suspend`, `PreemptMode=SUSPEND`) on fixture trees: the real
//! Slurm 22.05 v1 job with its step's `freezer.state` set as Slurm sets it, and the v2 job with
//! its step's `user/cgroup.events` as the kernel reports a frozen cgroup. Suspended only while
//! its CPU time stands still, and only by a freezing file root alone may write; the bench's
//! `job_cost` suspends a real job.

use super::node_fixtures::{V1_JOB, V2_JOB, collect, collector, collector_every, fixtures, v2_job_tree};
use crate::common::copy_tree;
use slurm_cw_shipper::sources::node::NodeCollector;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// Whether the one job of a collection was read as suspended.
fn suspended(c: &mut NodeCollector) -> bool {
    let (b, _) = collect(c);
    assert_eq!(b.jobs.len(), 1, "one job");
    b.jobs[0].job.suspended
}

fn set(path: &Path, text: &str, mode: u32) {
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// A copy of the captured v1 job (job 85) and an empty /proc: (the directory, cgroup root, proc
/// root).
fn v1_job_tree() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let (cg, proc) = (tmp.path().join("cg"), tmp.path().join("proc"));
    copy_tree(&fixtures().join("cgroup/v1-slurm-22.05"), &cg);
    std::fs::create_dir(&proc).unwrap();
    (tmp, cg, proc)
}

#[test]
fn a_v1_job_whose_step_slurm_froze_is_suspended_once_its_cpu_time_stands_still() {
    let (_tmp, cg, proc) = v1_job_tree();
    let state = cg.join(format!("freezer/{V1_JOB}/step_batch/freezer.state"));
    let mut c = collector(&cg, &proc);
    assert!(!suspended(&mut c), "THAWED, as captured");
    run_v1(&cg, 1_000_000_000);
    assert!(!suspended(&mut c), "it ran");
    // A freezer.state anyone may write is not Slurm's word.
    set(&state, "FROZEN\n", 0o666);
    assert!(!suspended(&mut c), "stopped, by a freezing file others may write");
    run_v1(&cg, 1_000_000_000);
    assert!(!suspended(&mut c), "it ran");
    set(&state, "FROZEN\n", 0o644);
    assert!(suspended(&mut c), "its step FROZEN, its CPU time as before");
    assert!(suspended(&mut c), "still");
    // Looked at while frozen, whatever its CPU time does (slurmstepd's, beside a frozen v2
    // step, may move).
    run_v1(&cg, 1_000_000);
    assert!(suspended(&mut c), "frozen, a blip of CPU");
    set(&state, "THAWED\n", 0o644);
    run_v1(&cg, 1_000_000_000);
    assert!(!suspended(&mut c), "resumed and ran");
    assert!(!suspended(&mut c), "resumed, stopped");
}

/// Adds `ns` to each CPU's counter of the v1 fixture job: it ran.
fn run_v1(cg: &Path, ns: u64) {
    let file = cg.join(format!("cpuacct/{V1_JOB}/cpuacct.usage_percpu"));
    let percpu = std::fs::read_to_string(&file).unwrap();
    let moved: Vec<String> =
        percpu.split_whitespace().map(|n| (n.parse::<u64>().unwrap() + ns).to_string()).collect();
    set(&file, &format!("{}\n", moved.join(" ")), 0o644);
}

#[test]
fn a_job_is_looked_at_when_first_seen_the_first_cycles_after_its_cpu_stops_and_while_frozen() {
    let (_tmp, cg, proc) = v1_job_tree();
    let state = cg.join(format!("freezer/{V1_JOB}/step_batch/freezer.state"));
    // Processes every fourth cycle, as a daemon reads them (the v1 tests above: every cycle).
    let mut c = collector_every(&cg, &proc, 4);
    assert!(!suspended(&mut c), "cycle 1: seen first, THAWED");
    set(&state, "FROZEN\n", 0o644);
    // Idle all along (its CPU time never moved since): not looked at again, not even on the
    // cycles that read its processes (a `sleep` costs no read a cycle).
    for cycle in 2..=6 {
        assert!(!suspended(&mut c), "cycle {cycle}");
    }
    // It runs, then stops: looked at the first cycle its CPU time stands still.
    set(&state, "THAWED\n", 0o644);
    run_v1(&cg, 1_000_000_000);
    assert!(!suspended(&mut c), "cycle 7: it ran");
    set(&state, "FROZEN\n", 0o644);
    for cycle in 8..=12 {
        assert!(suspended(&mut c), "cycle {cycle}: stopped and frozen, looked at while frozen");
    }
    set(&state, "THAWED\n", 0o644);
    assert!(!suspended(&mut c), "cycle 13: thawed, and its CPU time not yet moved");
    // Slurm stops the processes a second or two before the cgroup reads FROZEN: the first few
    // collections after the stop look.
    run_v1(&cg, 1_000_000_000);
    assert!(!suspended(&mut c), "cycle 14: it ran");
    assert!(!suspended(&mut c), "cycle 15: stopped, not yet frozen");
    assert!(!suspended(&mut c), "cycle 16: stopped, not yet frozen");
    set(&state, "FROZEN\n", 0o644);
    assert!(suspended(&mut c), "cycle 17: the third look");
    // Stopped three collections unfrozen: not looked at a fourth time.
    set(&state, "THAWED\n", 0o644);
    run_v1(&cg, 1_000_000_000);
    for cycle in 18..=21 {
        assert!(!suspended(&mut c), "cycle {cycle}: ran, then stopped unfrozen");
    }
    set(&state, "FROZEN\n", 0o644);
    assert!(!suspended(&mut c), "cycle 22: no fourth look");
}

#[test]
fn a_v2_job_whose_steps_user_part_is_frozen_is_suspended() {
    let (_tmp, cg, proc) = v2_job_tree();
    let user = cg.join(format!("{V2_JOB}/step_extern/user"));
    let stat = cg.join(format!("{V2_JOB}/cpu.stat"));
    // It ran: usage_usec grows by a second.
    let run = || {
        let text = std::fs::read_to_string(&stat).unwrap();
        let moved: Vec<String> = text
            .lines()
            .map(|l| match l.strip_prefix("usage_usec ") {
                Some(n) => format!("usage_usec {}", n.parse::<u64>().unwrap() + 1_000_000),
                None => l.to_owned(),
            })
            .collect();
        set(&stat, &(moved.join("\n") + "\n"), 0o644);
    };
    set(&user.join("cgroup.freeze"), "1\n", 0o644);
    set(&user.join("cgroup.events"), "populated 1\nfrozen 1\n", 0o444);
    let mut c = collector(&cg, &proc);
    assert!(suspended(&mut c), "frozen 1 when first seen");
    set(&user.join("cgroup.freeze"), "1\n", 0o646);
    assert!(!suspended(&mut c), "a cgroup.freeze others may write");
    set(&user.join("cgroup.freeze"), "1\n", 0o644);
    run();
    assert!(!suspended(&mut c), "it ran");
    assert!(suspended(&mut c), "frozen 1, its CPU time as before");
    set(&user.join("cgroup.freeze"), "0\n", 0o644);
    set(&user.join("cgroup.events"), "populated 1\nfrozen 0\n", 0o444);
    assert!(!suspended(&mut c), "thawed");
}
