//! A job requeued (its node failed, or preempted) can start again on other nodes while its old
//! cgroup stays here with processes Slurm could not kill. Slurm then lists it running, so only
//! its node list tells that it does not run here: such a cgroup is left out of figures and
//! costs, or the job would be billed twice. Only under a node name Slurm has confirmed (some
//! job here listed on it): a `node_name` that is not Slurm's must not leave out every job.
//! Slurm is a scripted `scontrol` printing 24.11's JSON shape; the job is the documented v2
//! job 1001.

use crate::common::{copy_tree, scripted_scontrol, wait_until};
use slurm_cw_shipper::sample::Batch;
use slurm_cw_shipper::settings::NodeConfig;
use slurm_cw_shipper::sources::Errors;
use slurm_cw_shipper::sources::head::command::SlurmCommands;
use slurm_cw_shipper::sources::node::NodeCollector;
use slurm_cw_shipper::sources::slurm_jobs::{Pace, Shared, SlurmJobs};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

fn running_on(nodes: &str) -> String {
    format!(
        r#"{{"jobs": [{{"job_id": 1001, "account": "physics", "partition": "batch", "job_state": ["RUNNING"], "nodes": "{nodes}"}}], "errors": []}}"#
    )
}

/// Node `n1` with job 1001's cgroup, Slurm answering `answer` and asked about every job each
/// 50 ms (the lookups returned to change that pace).
fn node(answer: &str) -> (tempfile::TempDir, PathBuf, NodeCollector, Shared) {
    let fixtures = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let tmp = tempfile::tempdir().unwrap();
    let (cg, proc, bin) = (tmp.path().join("cg"), tmp.path().join("proc"), tmp.path().join("bin"));
    copy_tree(&fixtures.join("cgroup/v2-kernel-docs"), &cg);
    copy_tree(&fixtures.join("proc/slurm-job-1001"), &proc);
    scripted_scontrol(&bin, answer);
    let every = Duration::from_millis(50);
    let pace = Pace { doubtful: every, all: every, unlisted_for: Duration::from_secs(3600), retry: every };
    let slurm = SlurmJobs::with_pace(
        SlurmJobs::new(SlurmCommands::new(Some(bin.clone()), Duration::from_secs(10))),
        pace,
    );
    let cfg = NodeConfig { cgroup_root: cg, proc_root: proc, ..NodeConfig::default() };
    (tmp, bin, NodeCollector::new(cfg, "n1".into()).with_slurm(slurm.clone()), slurm)
}

/// The jobs one collection read.
fn jobs(c: &mut NodeCollector) -> Vec<String> {
    let mut b = Batch::new(SystemTime::now());
    c.collect_jobs(None, &mut b, &mut Errors::new());
    b.jobs.iter().map(|j| j.info.id.clone()).collect()
}

fn asked(bin: &Path) -> usize {
    std::fs::read_to_string(bin.join("calls"))
        .map_or(0, |c| c.lines().filter(|l| l.starts_with("show job")).count())
}

#[test]
fn a_job_slurm_says_runs_on_other_nodes_is_left_out_and_comes_back_when_it_runs_here() {
    let (_tmp, bin, mut c, slurm) = node(&running_on("n[1-2]"));
    assert_eq!(jobs(&mut c), ["1001"], "Slurm puts it on n[1-2]: it runs here, and n1 is Slurm's name");

    // Requeued and started again on n7 while its cgroup stays here.
    scripted_scontrol(&bin, &running_on("n7"));
    wait_until("the job to be left out", Duration::from_secs(60), || jobs(&mut c).is_empty());

    // Requeued again, back here: it is read again, at the pace of the jobs in doubt (every job
    // is asked about only hourly now).
    let every = Duration::from_millis(50);
    let hour = Duration::from_secs(3600);
    SlurmJobs::with_pace(slurm, Pace { doubtful: every, all: hour, unlisted_for: hour, retry: every });
    scripted_scontrol(&bin, &running_on("n1"));
    wait_until("the job to come back", Duration::from_secs(60), || jobs(&mut c) == ["1001"]);
}

#[test]
fn under_a_node_name_slurm_never_gave_no_job_is_left_out() {
    // Slurm names this host queue1-st-c5-1; the daemon was told n1.
    let (_tmp, bin, mut c, _) = node(&running_on("queue1-st-c5-1"));
    wait_until("Slurm asked about the job three times", Duration::from_secs(60), || {
        assert_eq!(jobs(&mut c), ["1001"], "read at every collection");
        asked(&bin) >= 3
    });
}

/// Requeued and started again here between two collections: another cgroup directory under the
/// same path, where no collection saw the job gone. Slurm is asked about it again at the next
/// collection, which reads the new run's start (the start names the run in the records, and
/// the job table ends the last run there); before, what Slurm said of the first run stood
/// until it was asked about every job again, an hour later.
#[test]
fn a_job_whose_cgroup_directory_is_another_is_asked_about_again() {
    let started = |t: u64| {
        format!(
            r#"{{"jobs": [{{"job_id": 1001, "account": "physics", "partition": "batch", "job_state": ["RUNNING"], "nodes": "n1", "start_time": {{"set": true, "infinite": false, "number": {t}}}}}], "errors": []}}"#
        )
    };
    let (tmp, bin, mut c, slurm) = node(&started(1_000));
    let hour = Duration::from_secs(3600);
    SlurmJobs::with_pace(slurm, Pace { doubtful: hour, all: hour, unlisted_for: hour, retry: hour });
    let start = |c: &mut NodeCollector| {
        let mut b = Batch::new(SystemTime::now());
        c.collect_jobs(None, &mut b, &mut Errors::new());
        b.jobs.first().and_then(|j| j.held.started)
    };
    let at = |s: u64| Some(SystemTime::UNIX_EPOCH + Duration::from_secs(s));
    assert_eq!(start(&mut c), at(1_000));
    let before = asked(&bin);
    scripted_scontrol(&bin, &started(2_000));
    assert_eq!(start(&mut c), at(1_000), "the same directory: not asked again");
    assert_eq!(asked(&bin), before);
    // Its directory is another one now, as Slurm makes it for the job's next run.
    let job = tmp.path().join("cg/system.slice/slurmstepd.scope/job_1001");
    let next = tmp.path().join("cg/system.slice/slurmstepd.scope/next");
    copy_tree(&job, &next);
    std::fs::remove_dir_all(&job).unwrap();
    std::fs::rename(&next, &job).unwrap();
    start(&mut c);
    assert_eq!(start(&mut c), at(2_000), "the new run's start");
    assert_eq!(asked(&bin), before + 1, "asked once more");
}
