//! What a job's user does to its own processes (names, count, the uid they run as) changes
//! neither whose job it is nor what is counted; captured and documented fixtures, as in
//! `node_fixtures`.

use crate::node_fixtures::{V2_JOB, collect, collector, job_value, shaped, v2_job_tree};
use slurm_cw_catalog::metrics::*;
use slurm_cw_shipper::sample::Batch;
use slurm_cw_shipper::sources::Errors;
use std::time::{Duration, SystemTime};

#[test]
fn a_process_named_outside_ascii_is_shipped_under_an_escaped_name_never_dropped() {
    let (_tmp, cg, proc) = v2_job_tree();
    // The kernel keeps whatever bytes a process names itself: UTF-8 ö, a bell, a stray byte.
    let original = |pid: &str| std::fs::read(proc.join(pid).join("stat")).unwrap();
    let originals = [original("4242"), original("4243")];
    let rename = |pid: &str, ticks: &[u8]| {
        let stat = &originals[usize::from(pid == "4243")];
        let at = stat.windows(8).position(|w| w == b"(solver)").unwrap();
        let mut bytes = stat[..at].to_vec();
        bytes.extend_from_slice(b"(s\xc3\xb6lver\x07\xff)");
        let rest = String::from_utf8_lossy(&stat[at + 8..])
            .replace(" 5000 200 ", &format!(" {} 200 ", String::from_utf8_lossy(ticks)));
        bytes.extend_from_slice(rest.as_bytes());
        std::fs::write(proc.join(pid).join("stat"), bytes).unwrap();
    };
    rename("4242", b"5000");
    rename("4243", b"5000");
    let mut c = collector(&cg, &proc);
    collect(&mut c);
    rename("4242", b"5090");
    std::thread::sleep(Duration::from_millis(200));
    let (b, _) = collect(&mut c);
    let mut agg = slurm_cw_shipper::aggregate::Aggregator::new("t");
    agg.extend(b.samples);
    let mut datums: Vec<_> =
        agg.drain().iter().map(slurm_cw_shipper::aggregate::Aggregate::to_datum).collect();
    let before = datums.len();
    let dropped =
        slurm_cw_shipper::sinks::validate::Validator::new().retain_valid(&mut datums, SystemTime::now());
    assert!(dropped.is_empty(), "{dropped:?}");
    assert_eq!(datums.len(), before);
    let names: Vec<&str> = datums
        .iter()
        .filter(|d| d.metric == PROCESS_CPU_USAGE.name)
        .filter_map(|d| d.dimension("Executable"))
        .collect();
    assert!(names.contains(&"s\\u{f6}lver\\u{7}\\u{fffd}"), "{names:?}");
}

/// Any user can name a process `slurmstepd` (prctl PR_SET_NAME, or exec of a file so named).
/// Only root's slurmstepd is Slurm's: a job process named so stays the job's work, counted,
/// and cannot hide from the job's figures.
#[test]
fn a_job_process_that_names_itself_slurmstepd_is_still_the_jobs() {
    let (_tmp, cg, proc) = v2_job_tree();
    let solver = proc.join("4243");
    let renamed = |f: &str, from: &str, to: &str| {
        let text = std::fs::read_to_string(solver.join(f)).unwrap().replacen(from, to, 1);
        std::fs::write(solver.join(f), text).unwrap();
    };
    renamed("comm", "solver", "slurmstepd");
    renamed("stat", "(solver)", "(slurmstepd)");
    renamed("status", "solver", "slurmstepd");
    let mut c = collector(&cg, &proc);
    let (b, _) = collect(&mut c);
    assert_eq!(
        job_value(&b, &PROCESS_COUNT, "1001", &[]),
        Some(4.0),
        "root's slurmstepd (4239) only is left out"
    );
}

#[test]
fn a_job_with_more_processes_than_are_read_a_cycle_is_counted_whole_and_bounded() {
    use slurm_cw_shipper::sources::node::procs::JOB_PROCS_MAX;
    let (_tmp, cg, proc) = v2_job_tree();
    // The job's user starts many more processes (copies of its solver 4243's stat).
    let more: Vec<u32> = (10_000..10_000 + JOB_PROCS_MAX as u32 + 10).collect();
    let task = cg.join(V2_JOB).join("step_0/user/task_0/cgroup.procs");
    let mut listed = std::fs::read_to_string(&task).unwrap();
    let stat = std::fs::read(proc.join("4243/stat")).unwrap();
    for pid in &more {
        std::fs::create_dir(proc.join(pid.to_string())).unwrap();
        std::fs::write(proc.join(pid.to_string()).join("stat"), &stat).unwrap();
        listed += &format!("{pid}\n");
    }
    std::fs::write(&task, listed).unwrap();
    let mut c = collector(&cg, &proc);
    let (mut b, mut e) = (Batch::new(SystemTime::now()), Errors::new());
    let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    rt.block_on(slurm_cw_shipper::sources::Collector::collect(&mut c, &mut b, &mut e));
    assert_eq!(
        job_value(&shaped(b, false), &PROCESS_COUNT, "1001", &[]),
        Some(4.0 + more.len() as f64),
        "every process counted, though only {JOB_PROCS_MAX} are read"
    );
    assert_eq!(e.total(), 1, "the bounded job counted in CollectorErrors");
}

#[test]
fn cgroup_v2_jobs_belong_to_their_task_processes_not_to_slurmstepd() {
    use slurm_cw_shipper::sources::Collector;
    use slurm_cw_shipper::sources::FinalSample;
    let (_tmp, cg, proc) = v2_job_tree();
    let step_daemon = cg.join(V2_JOB).join("step_0/slurm/cgroup.procs");
    assert_eq!(
        std::fs::read_to_string(&step_daemon).unwrap().trim(),
        "4239",
        "the real layout: slurmstepd in slurm/"
    );
    let mut c = collector(&cg, &proc);
    let (b, _) = collect(&mut c);
    let user = b.of(&MEMORY_USAGE).next().and_then(|s| s.dims.get("User")).map(str::to_owned);
    let by_uid_1000 =
        slurm_cw_shipper::sources::node::owner::user_name(1000).unwrap_or_else(|| "1000".into());
    assert_eq!(user.as_deref(), Some(by_uid_1000.as_str()), "the tasks' real uid, not root's");
    assert_eq!(job_value(&b, &PROCESS_COUNT, "1001", &[]), Some(4.0), "slurmstepd is not the job's work");

    // Whose jobs run here, for the hook socket's shares: the task's uid, not root's.
    let owners = slurm_cw_shipper::sources::JobOwners::default();
    let mut c = c.publishing_owners(owners.clone());
    collect(&mut c);
    assert_eq!(*owners.lock().unwrap(), std::collections::HashSet::from([1000]));
    let mut out = Batch::new(SystemTime::now());
    assert_eq!(c.final_sample("1001", 1001, &mut out), Some(FinalSample::Denied), "another user");
    assert_eq!(c.final_sample("1001", 1000, &mut out), Some(FinalSample::Sampled(1)), "the job's own user");
    // Within the second after: "too soon" to its user alone; another user learns nothing of
    // when its tasks ended.
    assert_eq!(c.final_sample("1001", 1001, &mut out), Some(FinalSample::Denied), "another user, just after");
    assert_eq!(c.final_sample("1001", 1000, &mut out), Some(FinalSample::TooSoon));
    std::thread::sleep(Duration::from_millis(1100));
    assert_eq!(c.final_sample("1001", 0, &mut out), Some(FinalSample::Sampled(1)), "root");
}

/// A process can rename itself every cycle (prctl PR_SET_NAME, a fresh exec). Where per-job
/// metrics are on, each new name would be a new `Executable` series, a custom metric billed a
/// whole hour: a job's names past 4 x `node.top_executables` are summed as `(others)`.
#[test]
fn a_process_renaming_itself_each_cycle_makes_a_bounded_number_of_executable_series() {
    use slurm_cw_shipper::sources::node::{NAMES_PER_TOP, OTHER_EXECUTABLES};
    let (_tmp, cg, proc) = v2_job_tree();
    let stat = std::fs::read_to_string(proc.join("4242/stat")).unwrap();
    let mut c = collector(&cg, &proc);
    let cap = 3 * NAMES_PER_TOP; // the fixtures' collector ships the 3 busiest executables
    let mut names = std::collections::BTreeSet::new();
    let mut last = Vec::new();
    for cycle in 0..(cap as u32 + 8) {
        // A new name, and 100 more ticks of CPU, each cycle.
        let renamed = stat.replacen("(solver)", &format!("(step{cycle})"), 1).replacen(
            " 5000 200 ",
            &format!(" {} 200 ", 5000 + 100 * cycle),
            1,
        );
        std::fs::write(proc.join("4242/stat"), renamed).unwrap();
        let (b, _) = collect(&mut c);
        last = shaped(b, false)
            .of(&PROCESS_CPU_USAGE)
            .filter_map(|s| Some((s.dims.get("Executable")?.to_owned(), s.scalar()?)))
            .collect();
        names.extend(last.iter().map(|(n, _)| n.clone()));
    }
    assert!(names.len() <= cap + 1, "{} names: {names:?}", names.len());
    assert!(names.contains("step1"), "the first names are kept: {names:?}");
    // The renaming process's CPU is still counted, under (others).
    let others = last.iter().find(|(n, _)| n == OTHER_EXECUTABLES).map(|(_, c)| *c);
    assert!(others.is_some_and(|c| c > 0.0), "{last:?}");
}

/// A job whose user made more directories than the walk's bound: its walk is cut, and its
/// processes then come from every process's /proc/<pid>/cgroup on the node. Its user can ask
/// for a final sample once a second (`--job-ended`); a final sample walks it again only 30 s
/// after the last walk, so they cannot keep the collection thread walking for them.
#[test]
fn a_final_sample_of_a_job_past_the_walks_bounds_does_not_walk_it_again_at_once() {
    use slurm_cw_shipper::sources::Collector;
    let (_tmp, cg, proc) = v2_job_tree();
    let mine = cg.join(V2_JOB).join("step_0/user/task_0");
    for i in 0..4_200 {
        std::fs::create_dir_all(mine.join(format!("u{i}"))).unwrap();
    }
    // Processes every 10th cycle: the next collection does not walk for its own sake.
    let mut c = crate::node_fixtures::collector_every(&cg, &proc, 10);
    let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    let collect = |c: &mut slurm_cw_shipper::sources::node::NodeCollector| {
        let (mut b, mut e) = (Batch::new(SystemTime::now()), Errors::new());
        rt.block_on(c.collect(&mut b, &mut e));
        (b, e)
    };
    let (_, e) = collect(&mut c);
    let cgroup = |e: &Errors| e.iter().find(|(part, _)| *part == "cgroup").map_or(0, |(_, n)| n);
    assert_eq!(cgroup(&e), 1, "the walk was cut: {e:?}");
    let mut out = Batch::new(SystemTime::now());
    assert_eq!(
        c.final_sample("1001", 1000, &mut out),
        Some(slurm_cw_shipper::sources::FinalSample::Sampled(1))
    );
    let (_, e) = collect(&mut c);
    assert_eq!(cgroup(&e), 0, "no walk since, the final sample's included: {e:?}");
}
