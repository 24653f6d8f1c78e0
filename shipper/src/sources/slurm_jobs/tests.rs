//! A job whose cgroup outlives it: Slurm asked again about the jobs the collector doubts, with an
//! `scontrol` that prints whatever answer the test last wrote (Slurm 24.11's JSON shapes, as
//! the bench printed them: `jobs` empty and exit 0 for a job it does not know).

use super::*;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// An scontrol that logs each call and prints the file `answer`; `ping` exits with the file
/// `ping_rc`, else 0 (slurmctld up).
fn scontrol(dir: &Path) {
    let p = dir.join("scontrol");
    let body = format!(
        "#!/bin/sh\necho \"$@\" >> {0}/calls\nif [ \"$1\" = ping ]; then exit $(cat {0}/ping_rc 2>/dev/null || echo 0); fi\ncat {0}/answer\n",
        dir.display()
    );
    std::fs::write(&p, body).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
}

fn answer(dir: &Path, jobs: &str) {
    // Written aside and renamed, so scontrol never prints half of it.
    std::fs::write(dir.join("answer.new"), format!(r#"{{"jobs": [{jobs}], "errors": []}}"#)).unwrap();
    std::fs::rename(dir.join("answer.new"), dir.join("answer")).unwrap();
}

fn job(id: u32, state: &str) -> String {
    format!(r#"{{"job_id": {id}, "account": "physics", "partition": "batch", "job_state": ["{state}"]}}"#)
}

fn calls(dir: &Path) -> usize {
    std::fs::read_to_string(dir.join("calls")).map_or(0, |c| c.lines().count())
}

fn slurm(dir: &Path, pace: Duration) -> Shared {
    slurm_asking_all(dir, pace, Duration::from_secs(3600))
}

fn slurm_asking_all(dir: &Path, pace: Duration, all: Duration) -> Shared {
    let cmds = SlurmCommands::new(Some(dir.to_owned()), Duration::from_secs(10));
    SlurmJobs::with_pace(
        SlurmJobs::new(cmds),
        Pace { doubtful: pace, all, unlisted_for: pace * 3, retry: RETRY_AFTER },
    )
}

/// Refreshes until `done`, a minute at most.
fn refresh_until(s: &Shared, keys: &[String], doubtful: &[&str], mut done: impl FnMut(&SlurmJobs) -> bool) {
    let until = Instant::now() + Duration::from_secs(60);
    loop {
        SlurmJobs::refresh(s, keys, doubtful);
        if done(&s.borrow()) {
            return;
        }
        assert!(Instant::now() < until, "timed out");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Slurm has answered that job 9 runs: (its scontrol's directory, the lookups, its key).
fn job_9_running(pace: Duration) -> (tempfile::TempDir, Shared, [String; 1]) {
    let dir = tempfile::tempdir().unwrap();
    scontrol(dir.path());
    answer(dir.path(), &job(9, "RUNNING"));
    let s = slurm(dir.path(), pace);
    let keys = ["9".to_owned()];
    refresh_until(&s, &keys, &[], |s| s.get("9").is_some());
    (dir, s, keys)
}

#[test]
fn a_doubted_job_that_slurm_says_completed_is_ended_and_one_not_doubted_is_not_asked_again() {
    let dir = tempfile::tempdir().unwrap();
    scontrol(dir.path());
    answer(dir.path(), &[job(7, "RUNNING"), job(8, "RUNNING")].join(","));
    let s = slurm(dir.path(), Duration::from_millis(50));
    let keys = ["7".to_owned(), "8".to_owned()];
    refresh_until(&s, &keys, &[], |s| s.get("7").is_some() && s.get("8").is_some());
    assert_eq!(calls(dir.path()), 2, "each new job asked once");
    assert_eq!(s.borrow().ended("7"), None);

    // Both jobs end in Slurm; only job 7 is in doubt (no process left in its cgroup).
    answer(dir.path(), &[job(7, "COMPLETED"), job(8, "COMPLETED")].join(","));
    refresh_until(&s, &keys, &["7"], |s| s.ended("7").is_some());
    assert_eq!(s.borrow().ended("7"), Some("COMPLETED"));
    assert_eq!(s.borrow().ended("8"), None, "job 8 was not asked again: it runs as far as anyone knows");
    let asked: Vec<String> =
        std::fs::read_to_string(dir.path().join("calls")).unwrap().lines().map(str::to_owned).collect();
    assert!(asked.iter().filter(|c| c.ends_with(" 8")).count() == 1, "{asked:?}");
    // Account and partition stay Slurm's.
    assert_eq!(s.borrow().get("7").and_then(|d| d.account.clone()).as_deref(), Some("physics"));
}

#[test]
fn a_job_slurm_stops_listing_ends_only_after_a_while_and_comes_back_when_listed_running() {
    let pace = Duration::from_millis(100);
    let (dir, s, keys) = job_9_running(pace);

    // Slurm 24.11 prints an empty list both when it forgot the job and when slurmctld cannot be
    // reached: the first such answer ends nothing.
    answer(dir.path(), "");
    let started = Instant::now();
    refresh_until(&s, &keys, &["9"], |s| s.unlisted_since.contains_key("9"));
    assert_eq!(s.borrow().ended("9"), None, "one empty answer is not the end");
    refresh_until(&s, &keys, &["9"], |s| s.ended("9").is_some());
    assert_eq!(s.borrow().ended("9"), Some("not listed by Slurm"));
    assert!(started.elapsed() >= pace * 3, "ended after {:?}", started.elapsed());

    // Asked still while it is taken as ended: listed running again, it is back.
    answer(dir.path(), &job(9, "RUNNING"));
    refresh_until(&s, &keys, &[], |s| s.ended("9").is_none());
    assert_eq!(s.borrow().get("9").and_then(|d| d.state.clone()).as_deref(), Some("RUNNING"));
}

#[test]
fn a_job_whose_cgroup_is_gone_is_forgotten() {
    let dir = tempfile::tempdir().unwrap();
    scontrol(dir.path());
    answer(dir.path(), &job(7, "COMPLETED"));
    let s = slurm(dir.path(), Duration::from_millis(50));
    refresh_until(&s, &["7".to_owned()], &[], |s| s.ended("7").is_some());
    SlurmJobs::refresh(&s, &[], &[]);
    assert_eq!(s.borrow().ended("7"), None);
    assert!(s.borrow().get("7").is_none());
}

#[test]
fn every_job_is_asked_again_now_and_then_and_a_requeued_one_does_not_run_here() {
    let dir = tempfile::tempdir().unwrap();
    scontrol(dir.path());
    answer(dir.path(), &[job(7, "RUNNING"), job(8, "RUNNING")].join(","));
    // Nothing in doubt: job 7 was cancelled while processes Slurm could not kill stayed, job 8
    // requeued after its node failed.
    let s = slurm_asking_all(dir.path(), Duration::from_secs(3600), Duration::from_millis(100));
    let keys = ["7".to_owned(), "8".to_owned()];
    refresh_until(&s, &keys, &[], |s| s.get("7").is_some() && s.get("8").is_some());
    answer(dir.path(), &[job(7, "CANCELLED"), job(8, "PENDING")].join(","));
    refresh_until(&s, &keys, &[], |s| s.ended("7").is_some() && s.ended("8").is_some());
    assert_eq!((s.borrow().ended("7"), s.borrow().ended("8")), (Some("CANCELLED"), Some("PENDING")));
}

#[test]
fn an_empty_answer_while_slurmctld_is_down_ends_nothing() {
    let (dir, s, keys) = job_9_running(Duration::from_millis(50));
    // What Slurm 24.11 prints when it cannot reach slurmctld; its ping says so.
    std::fs::write(dir.path().join("ping_rc"), "1").unwrap();
    answer(dir.path(), "");
    let pings = || {
        std::fs::read_to_string(dir.path().join("calls")).unwrap().lines().filter(|l| *l == "ping").count()
    };
    refresh_until(&s, &keys, &["9"], |_| pings() >= 6);
    assert_eq!(s.borrow().ended("9"), None);
    assert!(!s.borrow().unlisted_since.contains_key("9"), "the not-listed clock never started");
}

#[test]
fn the_states_of_a_job_that_no_longer_runs_here() {
    let ended: Vec<&str> =
        slurm_cw_formats::slurm::job_state::job_states().filter(|s| ended_state(s)).collect();
    assert_eq!(
        ended,
        [
            "pending",
            "completed",
            "cancelled",
            "failed",
            "timeout",
            "node_fail",
            "preempted",
            "boot_fail",
            "deadline",
            "out_of_memory",
            "completing",
            "requeue_hold",
            "requeued"
        ]
    );
    // Slurm's own spellings and codes, any case, and 22.05's "CANCELLED by <uid>".
    assert!(["PENDING", "CANCELLED by 1000", "cd", "RQ"].iter().all(|s| ended_state(s)));
    assert!(!["RUNNING", "suspended", "R", "CONFIGURING", "bogus"].iter().any(|s| ended_state(s)));
}
