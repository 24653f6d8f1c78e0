//! Slurm 26.05 names a job's cgroup v2 directory by its SLUID (`slurmstepd.scope/
//! s5F1M87GJ0R200/`, as seen on 26.05.5) unless cgroup.conf sets `CgroupJobIdPaths=yes`. The
//! node collector finds such a job, ships it under the job id Slurm gives for the SLUID (never
//! the SLUID, never the job's environment), with the SLUID as a record field; until Slurm has
//! named it, the job waits and is counted; one Slurm never names (it forgot the job first)
//! ends, is left out and no longer counted. The real 26.05.5 run is tests/vm_cgroup_v2.rs.

use crate::common::copy_tree;
use slurm_cw_formats::slurm::job::JobDetail;
use slurm_cw_shipper::sample::Batch;
use slurm_cw_shipper::settings::NodeConfig;
use slurm_cw_shipper::sources::Errors;
use slurm_cw_shipper::sources::head::command::SlurmCommands;
use slurm_cw_shipper::sources::node::NodeCollector;
use slurm_cw_shipper::sources::slurm_jobs::SlurmJobs;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

const SLUID: &str = "s5F1M87GJ0R200";

/// The documented v2 job 1001, its directory renamed to a SLUID as 26.05 names it.
fn sluid_tree() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let fixtures = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let tmp = tempfile::tempdir().unwrap();
    let (cg, proc) = (tmp.path().join("cg"), tmp.path().join("proc"));
    copy_tree(&fixtures.join("cgroup/v2-kernel-docs"), &cg);
    copy_tree(&fixtures.join("proc/slurm-job-1001"), &proc);
    let scope = cg.join("system.slice/slurmstepd.scope");
    std::fs::rename(scope.join("job_1001"), scope.join(SLUID)).unwrap();
    (tmp, cg, proc)
}

fn collector(cg: &Path, proc: &Path, answered: Vec<JobDetail>) -> NodeCollector {
    let cfg = NodeConfig { cgroup_root: cg.to_owned(), proc_root: proc.to_owned(), ..NodeConfig::default() };
    let slurm = SlurmJobs::answered(SlurmCommands::new(None, Duration::from_secs(1)), answered);
    NodeCollector::new(cfg, "n1".into()).with_slurm(slurm)
}

fn collect(c: &mut NodeCollector) -> (Batch, Errors) {
    let mut b = Batch::new(SystemTime::now());
    let mut e = Errors::new();
    c.collect_jobs(None, &mut b, &mut e);
    (b, e)
}

#[test]
fn a_sluid_directory_ships_under_the_job_id_slurm_gives() {
    let (_tmp, cg, proc) = sluid_tree();
    let detail = JobDetail {
        job_id: "1001".into(),
        sluid: Some(SLUID.into()),
        account: Some("physics".into()),
        partition: Some("batch".into()),
        ..JobDetail::default()
    };
    let mut c = collector(&cg, &proc, vec![detail]);
    let (b, e) = collect(&mut c);
    assert_eq!(e.total(), 0);
    assert_eq!(b.jobs.len(), 1);
    let job = &b.jobs[0].info;
    assert_eq!((job.id.as_str(), job.names.sluid.as_deref()), ("1001", Some(SLUID)));
    assert_eq!((job.account.as_str(), job.partition.as_str()), ("physics", "batch"));
    assert_eq!(
        b.jobs[0].job.memory_usage,
        Some(2147483648.0),
        "the SLUID directory's memory.current, under the job id"
    );
}

#[test]
fn a_sluid_slurm_has_not_named_waits_and_is_counted() {
    let (_tmp, cg, proc) = sluid_tree();
    // Processes in that job claim an id and account in their environment: not believed.
    let mut c = collector(&cg, &proc, Vec::new());
    let (b, e) = collect(&mut c);
    assert!(b.jobs.is_empty(), "{:?}", b.jobs);
    assert_eq!(e.iter().find(|(k, _)| *k == "cgroup"), Some(("cgroup", 1)));
}

/// An unreachable slurmctld (here a `scontrol` that hangs past its 20 s timeout) must not stall
/// collection: the lookups run on their own thread, and a collection waits a bounded time for
/// new jobs' answers, then ships them as `unknown` (never from their environment). Before,
/// 16 lookups of 20 s ran one after another on the collection thread.
#[test]
fn a_hanging_scontrol_does_not_stall_collection() {
    use std::os::unix::fs::PermissionsExt;
    let fixtures = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let tmp = tempfile::tempdir().unwrap();
    let (cg, proc, bin) = (tmp.path().join("cg"), tmp.path().join("proc"), tmp.path().join("bin"));
    copy_tree(&fixtures.join("cgroup/v2-kernel-docs"), &cg);
    copy_tree(&fixtures.join("proc/slurm-job-1001"), &proc);
    let scope = cg.join("system.slice/slurmstepd.scope");
    // 16 jobs: the old per-collection bound of lookups.
    for id in 1002..1017 {
        copy_tree(&scope.join("job_1001"), &scope.join(format!("job_{id}")));
    }
    std::fs::create_dir_all(&bin).unwrap();
    let scontrol = bin.join("scontrol");
    std::fs::write(&scontrol, "#!/bin/sh\nexec sleep 60\n").unwrap();
    std::fs::set_permissions(&scontrol, std::fs::Permissions::from_mode(0o755)).unwrap();
    let cfg = NodeConfig { cgroup_root: cg.clone(), proc_root: proc.clone(), ..NodeConfig::default() };
    let slurm = SlurmJobs::new(SlurmCommands::new(Some(bin), Duration::from_secs(20)));
    let mut c = NodeCollector::new(cfg, "n1".into()).with_slurm(slurm);
    for round in 0..2 {
        let started = std::time::Instant::now();
        let (b, _) = collect(&mut c);
        let took = started.elapsed();
        assert_eq!(b.jobs.len(), 16, "round {round}");
        assert!(
            b.jobs.iter().all(|j| j.info.account == "unknown" && j.info.partition == "unknown"),
            "{:?}",
            b.jobs
        );
        // Far under one lookup's 20 s timeout, let alone 16 of them; the second round asks
        // nothing again and waits for nothing.
        assert!(took < Duration::from_secs(10), "round {round} took {took:?}");
    }
}

/// A short job's TaskEpilog can ask for its final sample before Slurm has named its SLUID: the
/// answer is `busy` (the client asks again while the name comes), not `denied`; once Slurm has
/// named it, its owner gets the sample and another user is denied.
#[test]
fn a_final_sample_of_a_job_slurm_has_not_named_yet_is_asked_again() {
    use slurm_cw_shipper::sources::{Collector, FinalSample};
    let (_tmp, cg, proc) = sluid_tree();
    let mut c = collector(&cg, &proc, Vec::new());
    let mut b = Batch::new(SystemTime::now());
    assert_eq!(c.final_sample("1001", 1000, &mut b), Some(FinalSample::Busy));

    let detail = JobDetail { job_id: "1001".into(), sluid: Some(SLUID.into()), ..JobDetail::default() };
    let mut c = collector(&cg, &proc, vec![detail]);
    assert_eq!(c.final_sample("1001", 1001, &mut b), Some(FinalSample::Denied), "not the job's user");
    assert!(matches!(c.final_sample("1001", 1000, &mut b), Some(FinalSample::Sampled(1))));
}

/// A SLUID cgroup left behind by a job slurmctld forgot before it was asked about (processes
/// Slurm could not kill, past MinJobAge): Slurm never names it. It used to be counted in
/// CollectorErrors every cycle for as long as it stayed (an alarm on that metric would fire),
/// and made every final sample of a job the table does not know wait for it (`busy`). Once
/// Slurm has not listed it for the unlisted wait, it is left out like an ended job, and comes
/// back if Slurm names it running.
#[test]
fn a_sluid_slurm_never_names_ends_and_is_no_longer_counted() {
    use slurm_cw_shipper::sources::slurm_jobs::Pace;
    use slurm_cw_shipper::sources::{Collector, FinalSample};
    let (tmp, cg, proc) = sluid_tree();
    let bin = tmp.path().join("bin");
    crate::common::scripted_scontrol(&bin, r#"{"jobs": [], "errors": []}"#);
    let cmds = SlurmCommands::new(Some(bin.clone()), Duration::from_secs(10));
    let pace = Pace {
        doubtful: Duration::from_millis(50),
        all: Duration::from_secs(3600),
        unlisted_for: Duration::from_millis(300),
        retry: Duration::from_millis(50),
    };
    let slurm = SlurmJobs::with_pace(SlurmJobs::new(cmds), pace);
    let cfg = NodeConfig { cgroup_root: cg.clone(), proc_root: proc.clone(), ..NodeConfig::default() };
    let mut c = NodeCollector::new(cfg, "n1".into()).with_slurm(slurm.clone());
    let cgroup_errors = |e: &Errors| e.iter().find(|(k, _)| *k == "cgroup").map_or(0, |(_, n)| n);

    let (b, e) = collect(&mut c);
    assert!(b.jobs.is_empty());
    assert_eq!(cgroup_errors(&e), 1, "waiting for Slurm to name it: counted");
    let started = std::time::Instant::now();
    crate::common::wait_until("the SLUID to count as ended", Duration::from_secs(60), || {
        slurm.borrow().ended(SLUID).is_some() || cgroup_errors(&collect(&mut c).1) == 0
    });
    assert!(started.elapsed() >= pace.unlisted_for, "not before the unlisted wait: {:?}", started.elapsed());
    let (b, e) = collect(&mut c);
    assert!(b.jobs.is_empty(), "{:?}", b.jobs);
    assert_eq!(cgroup_errors(&e), 0, "left out, no longer counted");
    assert_eq!(slurm.borrow().ended(SLUID), Some("not listed by Slurm"));
    let mut out = Batch::new(SystemTime::now());
    assert_eq!(
        c.final_sample("1002", 1000, &mut out),
        Some(FinalSample::Denied),
        "an unknown job waits for nothing"
    );

    // Slurm names it after all, running: it ships under its job id again.
    let named = format!(
        r#"{{"jobs": [{{"job_id": 1001, "sluid": "{SLUID}", "job_state": ["RUNNING"]}}], "errors": []}}"#
    );
    crate::common::scripted_scontrol(&bin, &named);
    crate::common::wait_until("the named job to ship", Duration::from_secs(60), || {
        collect(&mut c).0.jobs.iter().any(|j| j.info.id == "1001")
    });
    assert_eq!(slurm.borrow().ended(SLUID), None);
}
