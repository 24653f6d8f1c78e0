//! The node collector on fixture trees: a cgroup v2 job written from the kernel's documented
//! formats with a fake /proc, and a cgroup v1 job captured from the real Slurm 22.05 here.
//! Values must equal the files; rates must follow counter changes; missing files and
//! vanishing jobs and processes only leave figures out.

use crate::common::copy_tree;
use slurm_cw_catalog::Metric;
use slurm_cw_catalog::metrics::*;
use slurm_cw_shipper::sample::{Batch, Observed};
use slurm_cw_shipper::settings::NodeConfig;
use slurm_cw_shipper::sources::Errors;
use slurm_cw_shipper::sources::node::NodeCollector;
use slurm_cw_shipper::transforms::job_series;
use slurm_cw_shipper::transforms::shape::{JobMetrics, Shape};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

pub(crate) fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// A collector that reads processes every `process_every`th cycle.
pub(crate) fn collector_every(cgroup_root: &Path, proc_root: &Path, process_every: u32) -> NodeCollector {
    let cfg = NodeConfig {
        cgroup_root: cgroup_root.to_owned(),
        proc_root: proc_root.to_owned(),
        top_executables: 3,
        process_every,
        ..NodeConfig::default()
    };
    NodeCollector::new(cfg, "n1".into())
}

/// A collector that reads everything every cycle.
pub(crate) fn collector(cgroup_root: &Path, proc_root: &Path) -> NodeCollector {
    collector_every(cgroup_root, proc_root, 1)
}

pub(crate) fn collect(c: &mut NodeCollector) -> (Batch, Errors) {
    collect_shaped(c, false)
}

/// A collection and the instants just before and after it.
fn timed_collect(c: &mut NodeCollector) -> (Instant, (Batch, Errors), Instant) {
    let before = Instant::now();
    let out = collect(c);
    (before, out, Instant::now())
}

/// Asserts a rate of `delta` over the collector's interval between two collections: however
/// slow this machine, that interval lies between the end of the first and the start of the
/// last (`first.2` to `last.0`) and the start of the first and the end of the last.
fn rate(got: Option<f64>, delta: f64, first: (Instant, Instant), last: (Instant, Instant), what: &str) {
    let got = got.unwrap_or_else(|| panic!("{what} missing"));
    let (shortest, longest) = ((last.0 - first.1).as_secs_f64(), (last.1 - first.0).as_secs_f64());
    let (low, high) = (delta / longest * (1.0 - 1e-9), delta / shortest * (1.0 + 1e-9));
    assert!(got >= low && got <= high, "{what}: {got} outside {low}..{high}");
}

/// One collection, shaped as per-job metrics would be shipped (`node.job_metrics = "metrics"`,
/// per-node detail as asked), the jobs' series made from their readings; host figures keep
/// their node.
fn collect_shaped(c: &mut NodeCollector, per_node: bool) -> (Batch, Errors) {
    let mut b = Batch::new(SystemTime::now());
    let mut e = Errors::new();
    c.collect_jobs(None, &mut b, &mut e);
    (shaped(b, per_node), e)
}

pub(crate) fn shaped(mut b: Batch, per_node: bool) -> Batch {
    let shape = Shape::CloudWatch {
        job_metrics: JobMetrics::Metrics,
        per_node_job_dimensions: per_node,
        per_node_self_metrics: true,
        all_self_metrics: true,
    };
    let mut out = Vec::new();
    shape.apply(std::mem::take(&mut b.samples), &mut out);
    job_series::push(shape, &b.jobs, b.time, |_| true, &mut out);
    b.samples = out;
    b
}

/// The one value of `m` for job `job` (default dimension set), other dimensions as given.
pub(crate) fn job_value(b: &Batch, m: &'static Metric, job: &str, extra: &[(&str, &str)]) -> Option<f64> {
    let mut found = b.of(m).filter(|s| {
        s.dims.get("JobId") == Some(job)
            && s.dims.get("NodeName").is_none()
            && extra.iter().all(|(k, v)| s.dims.get(k) == Some(*v))
    });
    let v = found.next()?.scalar();
    assert!(found.next().is_none(), "{} has several samples for {extra:?}", m.name);
    v
}

fn set(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
}

pub(crate) const V2_JOB: &str = "system.slice/slurmstepd.scope/job_1001";

/// A copy of the cgroup v2 fixture (job 1001) and its /proc: (the directory, cgroup root, proc root).
pub(crate) fn v2_job_tree() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let (cg, proc) = (tmp.path().join("cg"), tmp.path().join("proc"));
    copy_tree(&fixtures().join("cgroup/v2-kernel-docs"), &cg);
    copy_tree(&fixtures().join("proc/slurm-job-1001"), &proc);
    (tmp, cg, proc)
}

#[test]
fn cgroup_v2_job_values_equal_the_files() {
    let (_tmp, cg, proc) = v2_job_tree();
    let mut c = collector(&cg, &proc);
    let (b, e) = collect(&mut c);
    assert_eq!(e.total(), 0);
    let want: &[(&'static Metric, f64)] = &[
        (&MEMORY_USAGE, 2147483648.0),
        (&MEMORY_MAX, 3221225472.0),
        (&MEMORY_LIMIT, 4294967296.0),
        (&MEMORY_RSS, 1879048192.0),
        (&MEMORY_CACHE, 251658240.0),
        (&MEMORY_RSS_HUGE, 1073741824.0),
        (&MEMORY_MAPPED_FILE, 33554432.0),
        (&MEMORY_ACTIVE_FILE, 83886080.0),
        (&MEMORY_INACTIVE_FILE, 167772160.0),
        (&MEMORY_UNEVICTABLE, 4096.0),
        (&MEMORY_SWAP, 16777216.0),
        (&OOM_KILLS, 2.0),
        (&CPUS_ALLOCATED, 4.0),
        (&PROCESS_COUNT, 4.0),
        (&OPEN_FILES, 21.0),
    ];
    for (m, v) in want {
        assert_eq!(job_value(&b, m, "1001", &[]), Some(*v), "{}", m.name);
    }
    assert_eq!(job_value(&b, &THREAD_COUNT, "1001", &[("ThreadState", "running")]), Some(3.0));
    assert_eq!(job_value(&b, &THREAD_COUNT, "1001", &[("ThreadState", "sleeping")]), Some(4.0));
    // Seen once: no rates yet, and v2 has no per-CPU figure at all.
    for m in [&CPU_USAGE, &CPU_UTILIZATION, &READ_BYTES, &PROCESS_CPU_USAGE, &CPU_CORE_UTILIZATION] {
        assert!(b.of(m).next().is_none(), "{} before a second sample", m.name);
    }
    let s = b.of(&MEMORY_USAGE).next().unwrap();
    assert_eq!(s.dims.get("Account"), Some("chemistry"), "from SLURM_JOB_ACCOUNT of a job process");
    assert!(s.dims.get("User").is_some_and(|u| !u.is_empty()));
    assert_eq!(b.value(&JOBS_ON_NODE, &[("NodeName", "n1")]), Some(1.0));
    for s in &b.samples {
        assert!(
            s.metric.accepts_dimensions(s.dims.names().chain(["ClusterName"])),
            "{} {:?}",
            s.metric.name,
            s.dims
        );
    }
}

#[test]
fn cgroup_v2_rates_from_consecutive_samples() {
    let (_tmp, cg, proc) = v2_job_tree();
    let mut c = collector(&cg, &proc);
    let (t0, _, t1) = timed_collect(&mut c);
    // Time for the figures below to be rates of (the bounds narrow as it grows).
    std::thread::sleep(Duration::from_millis(500));
    let job = cg.join(V2_JOB);
    // +1 CPU-second, +0.1 s throttled, +1 MiB read, +2 MiB written, +100 and +200 ops.
    set(
        &job.join("cpu.stat"),
        "usage_usec 7201000000\nuser_usec 7000000000\nsystem_usec 201000000\nnr_periods 1000\nnr_throttled 26\nthrottled_usec 1600000\n",
    );
    set(
        &job.join("io.stat"),
        "259:0 rbytes=2097152 wbytes=6291456 rios=356 wios=1224 dbytes=0 dios=0\n8:0 rbytes=4096 wbytes=0 rios=1 wios=0 dbytes=0 dios=0\n",
    );
    // solver 4242 used 50 more ticks (0.5 s at 100 Hz).
    let stat = std::fs::read_to_string(proc.join("4242/stat")).unwrap();
    set(&proc.join("4242/stat"), &stat.replace(" 5000 200 ", " 5050 200 "));
    let (t2, (b, _), t3) = timed_collect(&mut c);
    let near = |got: Option<f64>, delta: f64, what: &str| rate(got, delta, (t0, t1), (t2, t3), what);
    near(job_value(&b, &CPU_USAGE, "1001", &[]), 1.0, "CpuUsage");
    near(job_value(&b, &CPU_UTILIZATION, "1001", &[]), 100.0 / 4.0, "CpuUtilization");
    near(job_value(&b, &CPU_THROTTLED_TIME, "1001", &[]), 0.1, "CpuThrottledTime");
    near(job_value(&b, &READ_BYTES, "1001", &[]), 1048576.0, "ReadBytes");
    near(job_value(&b, &WRITE_BYTES, "1001", &[]), 2097152.0, "WriteBytes");
    near(job_value(&b, &READ_OPS, "1001", &[]), 100.0, "ReadOps");
    near(job_value(&b, &WRITE_OPS, "1001", &[]), 200.0, "WriteOps");
    let ticks = procfs::ticks_per_second() as f64;
    near(
        job_value(&b, &PROCESS_CPU_USAGE, "1001", &[("Executable", "solver")]),
        50.0 / ticks,
        "ProcessCpuUsage solver",
    );
    assert!(b.of(&CPU_CORE_UTILIZATION).next().is_none(), "cgroup v2 has no per-CPU usage: not invented");
}

#[test]
fn processes_are_read_every_other_cycle_when_asked_and_rates_span_the_readings() {
    let (_tmp, cg, proc) = v2_job_tree();
    // The default reads them every 10th cycle and on a change of the process set.
    assert_eq!(NodeConfig::default().process_every, 10);
    let mut c = collector_every(&cg, &proc, 2);
    // A new job is read whole at once: its owner and processes are known from its first cycle.
    let (t0, (b, _), t1) = timed_collect(&mut c);
    assert_eq!(job_value(&b, &PROCESS_COUNT, "1001", &[]), Some(4.0));
    let owner = |b: &Batch| {
        let s = b.of(&MEMORY_USAGE).next().unwrap();
        (s.dims.get("User").map(str::to_owned), s.dims.get("Account").map(str::to_owned))
    };
    let first_owner = owner(&b);
    assert_eq!(first_owner.1.as_deref(), Some("chemistry"));
    let stat = std::fs::read_to_string(proc.join("4242/stat")).unwrap();
    set(&proc.join("4242/stat"), &stat.replace(" 5000 200 ", " 5030 200 "));
    std::thread::sleep(Duration::from_millis(300));
    // Second cycle: cgroup figures only, under the same owner (v2 paths carry no uid).
    let (b, _) = collect(&mut c);
    assert!(job_value(&b, &CPU_USAGE, "1001", &[]).is_some());
    for m in [&PROCESS_COUNT, &OPEN_FILES, &THREAD_COUNT, &PROCESS_CPU_USAGE] {
        assert!(b.of(m).next().is_none(), "{} on a cgroup-only cycle", m.name);
    }
    assert_eq!(owner(&b), first_owner);
    set(&proc.join("4242/stat"), &stat.replace(" 5000 200 ", " 5060 200 "));
    std::thread::sleep(Duration::from_millis(300));
    // Third: processes again; the solver's 60 ticks are spread over both intervals.
    let (t2, (b, _), t3) = timed_collect(&mut c);
    assert_eq!(job_value(&b, &PROCESS_COUNT, "1001", &[]), Some(4.0));
    assert_eq!(job_value(&b, &THREAD_COUNT, "1001", &[("ThreadState", "running")]), Some(3.0));
    let got = job_value(&b, &PROCESS_CPU_USAGE, "1001", &[("Executable", "solver")]);
    rate(got, 60.0 / procfs::ticks_per_second() as f64, (t0, t1), (t2, t3), "ProcessCpuUsage");
    assert_eq!(owner(&b), first_owner);
    // A job's final sample (from the epilog hook) always reads its processes.
    let mut b = Batch::new(SystemTime::now());
    c.collect_jobs(Some("1001"), &mut b, &mut Errors::new());
    assert_eq!(job_value(&shaped(b, false), &PROCESS_COUNT, "1001", &[]), Some(4.0));
}

#[test]
fn vanishing_processes_files_and_jobs_leave_figures_out() {
    let (_tmp, cg, proc) = v2_job_tree();
    let mut c = collector(&cg, &proc);
    collect(&mut c);
    // A process exits between reading cgroup.procs and /proc; a file goes missing.
    std::fs::remove_dir_all(proc.join("4243")).unwrap();
    std::fs::remove_file(cg.join(V2_JOB).join("memory.stat")).unwrap();
    let (b, e) = collect(&mut c);
    assert_eq!(e.total(), 0, "a job changing under us is not an error");
    assert_eq!(job_value(&b, &PROCESS_COUNT, "1001", &[]), Some(4.0), "cgroup.procs still lists it");
    assert_eq!(job_value(&b, &OPEN_FILES, "1001", &[]), Some(16.0), "its files are gone with it");
    assert_eq!(job_value(&b, &MEMORY_RSS, "1001", &[]), None);
    assert_eq!(job_value(&b, &MEMORY_USAGE, "1001", &[]), Some(2147483648.0));
    // The job ends: nothing of it, zero jobs on the node.
    std::fs::remove_dir_all(cg.join(V2_JOB)).unwrap();
    let (b, e) = collect(&mut c);
    assert_eq!(e.total(), 0);
    assert!(b.of(&MEMORY_USAGE).next().is_none());
    assert_eq!(b.value(&JOBS_ON_NODE, &[("NodeName", "n1")]), Some(0.0));
}

#[test]
fn no_cgroup_hierarchy_is_one_counted_error_not_a_crash() {
    let tmp = tempfile::tempdir().unwrap();
    let mut c = collector(&tmp.path().join("nothing"), tmp.path());
    let (b, e) = collect(&mut c);
    assert_eq!(e.total(), 1);
    assert!(b.samples.is_empty());
}

pub(crate) const V1_JOB: &str = "slurm_c3/uid_0/job_85";

#[test]
fn cgroup_v1_job_captured_from_real_slurm() {
    let tmp = tempfile::tempdir().unwrap();
    let cg = tmp.path().join("cg");
    copy_tree(&fixtures().join("cgroup/v1-slurm-22.05"), &cg);
    let empty_proc = tmp.path().join("proc");
    std::fs::create_dir(&empty_proc).unwrap();
    let mut c = collector(&cg, &empty_proc);
    let (t0, (b, _), t1) = timed_collect(&mut c);
    let read = |rel: &str| -> f64 { std::fs::read_to_string(cg.join(rel)).unwrap().trim().parse().unwrap() };
    assert_eq!(
        job_value(&b, &MEMORY_USAGE, "85", &[]),
        Some(read(&format!("memory/{V1_JOB}/memory.usage_in_bytes")))
    );
    assert_eq!(
        job_value(&b, &MEMORY_MAX, "85", &[]),
        Some(read(&format!("memory/{V1_JOB}/memory.max_usage_in_bytes")))
    );
    assert_eq!(job_value(&b, &MEMORY_LIMIT, "85", &[]), Some(300.0 * 1024.0 * 1024.0), "--mem=300M");
    let stat = std::fs::read_to_string(cg.join(format!("memory/{V1_JOB}/memory.stat"))).unwrap();
    let total_rss: f64 = stat.lines().find_map(|l| l.strip_prefix("total_rss ")).unwrap().parse().unwrap();
    assert_eq!(job_value(&b, &MEMORY_RSS, "85", &[]), Some(total_rss));
    assert!(total_rss > 100e6, "the job held 100 MB: {total_rss}");
    assert_eq!(job_value(&b, &CPUS_ALLOCATED, "85", &[]), Some(2.0), "cpuset 0-1");
    // The batch shell and python; slurmstepd, in the job's freezer directory too, is not counted.
    assert_eq!(job_value(&b, &PROCESS_COUNT, "85", &[]), Some(2.0));
    assert_eq!(job_value(&b, &OOM_KILLS, "85", &[]), Some(0.0));
    assert_eq!(b.value(&JOBS_ON_NODE, &[("NodeName", "c3")]), Some(1.0), "node from slurm_c3");
    assert_eq!(b.of(&MEMORY_USAGE).next().unwrap().dims.get("User"), Some("root"), "uid_0");

    // Two CPU-seconds more, split 1.5 / 0.5 over the two CPUs.
    std::thread::sleep(Duration::from_millis(500));
    let acct = cg.join(format!("cpuacct/{V1_JOB}"));
    let usage = read(&format!("cpuacct/{V1_JOB}/cpuacct.usage")) as u64;
    let percpu: Vec<u64> = std::fs::read_to_string(acct.join("cpuacct.usage_percpu"))
        .unwrap()
        .split_whitespace()
        .map(|x| x.parse().unwrap())
        .collect();
    set(&acct.join("cpuacct.usage"), &format!("{}\n", usage + 2_000_000_000));
    set(
        &acct.join("cpuacct.usage_percpu"),
        &format!("{} {} \n", percpu[0] + 1_500_000_000, percpu[1] + 500_000_000),
    );
    let (t2, (b, _), t3) = timed_collect(&mut c);
    rate(job_value(&b, &CPU_USAGE, "85", &[]), 2.0, (t0, t1), (t2, t3), "CpuUsage");
    let dist: Vec<f64> = match &b.of(&CPU_CORE_UTILIZATION).next().unwrap().value {
        Observed::Distribution(v) => v.clone(),
        other => panic!("{other:?}"),
    };
    assert_eq!(dist.len(), 2, "one value per allocated core");
    assert!(dist[0] > dist[1] && dist[0] <= 100.0, "{dist:?}");
}

#[test]
fn a_missing_v1_controller_disables_only_its_metrics() {
    let tmp = tempfile::tempdir().unwrap();
    let cg = tmp.path().join("cg");
    copy_tree(&fixtures().join("cgroup/v1-slurm-22.05"), &cg);
    std::fs::remove_dir_all(cg.join("memory")).unwrap();
    let mut c = collector(&cg, tmp.path());
    let (b, e) = collect(&mut c);
    assert_eq!(e.total(), 0);
    assert!(b.of(&MEMORY_USAGE).next().is_none());
    assert_eq!(job_value(&b, &CPUS_ALLOCATED, "85", &[]), Some(2.0));
    assert_eq!(job_value(&b, &PROCESS_COUNT, "85", &[]), Some(2.0));
}

/// AWS ParallelCluster's defaults (no ConstrainRAMSpace, no JobAcctGatherType): the job has
/// no memory or cpuacct cgroup, and its processes in /proc stand in.
#[test]
fn without_memory_and_cpuacct_cgroups_the_processes_are_measured() {
    let tmp = tempfile::tempdir().unwrap();
    let (cg, proc) = (tmp.path().join("cg"), tmp.path().join("proc"));
    copy_tree(&fixtures().join("cgroup/v1-slurm-22.05"), &cg);
    std::fs::remove_dir_all(cg.join("memory")).unwrap();
    std::fs::remove_dir_all(cg.join("cpuacct")).unwrap();
    // The job's two tasks (24202, 24203 in its cgroups) as two of the /proc fixture's solvers:
    // 2048 resident pages and 5200 and 3100 CPU ticks.
    copy_tree(&fixtures().join("proc/slurm-job-1001/4242"), &proc.join("24202"));
    copy_tree(&fixtures().join("proc/slurm-job-1001/4243"), &proc.join("24203"));
    let mut c = collector(&cg, &proc);
    let (t0, (b, e), t1) = timed_collect(&mut c);
    assert_eq!(e.total(), 0);
    let rss = 2.0 * 2048.0 * procfs::page_size() as f64;
    assert_eq!(job_value(&b, &MEMORY_USAGE, "85", &[]), Some(rss));
    assert_eq!(job_value(&b, &MEMORY_RSS, "85", &[]), Some(rss));
    let ticks = procfs::ticks_per_second() as f64;
    assert_eq!(job_value(&b, &CPU_TIME, "85", &[]), Some(8300.0 / ticks));
    assert!(job_value(&b, &MEMORY_MAX, "85", &[]).is_none(), "no peak without the cgroup: not invented");

    // 50 more ticks for one process, 100 for the other.
    std::thread::sleep(Duration::from_millis(500));
    for (pid, from, to) in [("24202", " 5000 200 ", " 5050 200 "), ("24203", " 3000 100 ", " 3100 100 ")] {
        let stat = std::fs::read_to_string(proc.join(pid).join("stat")).unwrap();
        set(&proc.join(pid).join("stat"), &stat.replace(from, to));
    }
    let (t2, (b, _), t3) = timed_collect(&mut c);
    let cores = job_value(&b, &CPU_USAGE, "85", &[]).expect("CpuUsage from the processes");
    rate(Some(cores), 150.0 / ticks, (t0, t1), (t2, t3), "CpuUsage");
    let utilisation = job_value(&b, &CPU_UTILIZATION, "85", &[]).unwrap();
    assert!((utilisation - cores / 2.0 * 100.0).abs() < 1e-9, "over the cpuset's 2 CPUs");
}

#[test]
fn per_node_detail_adds_a_node_name_set() {
    let tmp = tempfile::tempdir().unwrap();
    let cg = tmp.path().join("cg");
    copy_tree(&fixtures().join("cgroup/v1-slurm-22.05"), &cg);
    let cfg = NodeConfig {
        cgroup_root: cg,
        proc_root: tmp.path().to_owned(),
        per_node_dimensions: true,
        ..NodeConfig::default()
    };
    let mut c = NodeCollector::new(cfg, "n1".into());
    let (raw, _) = collect_shaped(&mut c, false);
    assert_eq!(raw.of(&MEMORY_USAGE).count(), 1, "one series unless per-node detail is asked for");
    let (b, _) = collect_shaped(&mut c, true);
    let usage: Vec<_> = b.of(&MEMORY_USAGE).collect();
    assert_eq!(usage.len(), 2);
    assert!(usage.iter().any(|s| s.dims.get("NodeName") == Some("c3")));
}
