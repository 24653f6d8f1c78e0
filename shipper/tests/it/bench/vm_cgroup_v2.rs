//! The node role on real Slurm over cgroup v2 (this host mounts v1 only): what
//! `scripts/bench/vm.sh test` left after booting Debian with Slurm 24.11 or 26.05 in a VM and
//! running scripts/bench/vm/guest.sh there. Per scenario (ConstrainRAMSpace or not; on 26.05,
//! SLUID-named job directories or `CgroupJobIdPaths=yes`): a job that holds 300 MiB and burns
//! two cores as user alice, sampled twice with `--once`, then by the daemon at a price while it
//! runs and while `scontrol suspend` holds it (billed for its memory alone); `--check`; and a
//! `sleep 2` job whose only sample comes from the TaskEpilog while the daemon collects once a
//! minute.

use crate::common;

use common::*;
use serde_json::Value;
use slurm_cw_catalog::metrics::*;
use slurm_cw_catalog::records::*;
use slurm_cw_formats::record::Record;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

const MIB: f64 = 1024.0 * 1024.0;

/// One scenario's directory, or None (outside CI) when the VM bench has not run.
fn scenario(version: &str, name: &str) -> Option<PathBuf> {
    let dir = vm_out(version)?.join(name);
    assert!(dir.is_dir(), "{} is missing: did guest.sh run scenario {name}?", dir.display());
    Some(dir)
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `key=value` lines.
fn truth(dir: &Path) -> HashMap<String, String> {
    read(&dir.join("truth.txt"))
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

fn truth_bytes(t: &HashMap<String, String>, key: &str) -> f64 {
    t.get(key).and_then(|v| v.parse::<f64>().ok()).unwrap_or_else(|| panic!("{key} in truth.txt: {t:?}"))
}

/// The job records (stdout sink lines `{"time", "record"}`) of `file` of type `kind`, with
/// their times.
fn timed_records(file: &Path, kind: &str) -> Vec<(SystemTime, Value)> {
    read(file)
        .lines()
        .filter_map(|l| Record::from_json_line(l).ok())
        .filter_map(|r| Some((r.time, serde_json::from_str::<Value>(&r.message).ok()?)))
        .filter(|(_, r)| r[TYPE.name] == kind)
        .collect()
}

fn records(file: &Path, kind: &str) -> Vec<Value> {
    timed_records(file, kind).into_iter().map(|(_, r)| r).collect()
}

fn job_id(dir: &Path, file: &str) -> String {
    read(&dir.join(file)).trim().to_owned()
}

/// The 300 MiB job's sample from one `--once` run (`once-1.jsonl`, `once-2.jsonl`).
fn memory_job_sample(dir: &Path, run: &str) -> (SystemTime, Value) {
    let job = job_id(dir, "mem-job.id");
    let file = dir.join(format!("{run}.jsonl"));
    let mut found: Vec<(SystemTime, Value)> = timed_records(&file, kinds::JOB_SAMPLE)
        .into_iter()
        .filter(|(_, r)| r[JOB_ID.name] == job.as_str())
        .collect();
    assert_eq!(
        found.len(),
        1,
        "one job_sample of job {job} in {}; stderr: {}; cgroup tree:\n{}",
        file.display(),
        read(&dir.join(format!("{run}.err"))),
        read(&dir.join("captures/cgroup-tree.txt"))
    );
    found.remove(0)
}

fn figure(r: &Value, name: &str) -> f64 {
    r[name].as_f64().unwrap_or_else(|| panic!("{name} in {r}"))
}

fn within(what: &str, got: f64, want: f64, share: f64) {
    eprintln!("{what}: {:.1} MiB, truth {:.1} MiB", got / MIB, want / MIB);
    assert!((got - want).abs() <= want * share, "{what}: {got} is not within {share} of {want}");
}

/// The daemon over the memory job's suspension (`scontrol suspend`): Slurm froze its cgroups,
/// and the daemon billed its 2 CPUs of 2 while it ran (Share 1), its 600 MB of the node's 2500
/// alone while it was suspended (Share 0.24), the cost growing by $3.60 x 0.24 x the seconds
/// suspended.
fn check_suspended(dir: &Path) {
    let frozen = read(&dir.join("frozen.txt"));
    eprintln!("frozen while suspended: {frozen:?}");
    assert!(!frozen.trim().is_empty(), "no cgroup of the suspended job said `frozen 1`");
    let job = job_id(dir, "mem-job.id");
    let samples: Vec<Value> = records(&dir.join("suspended.jsonl"), kinds::JOB_SAMPLE)
        .into_iter()
        .filter(|r| r[JOB_ID.name] == job.as_str() && r.get(SHARE.name).is_some())
        .collect();
    let err = || read(&dir.join("suspended.err"));
    let at = samples.iter().position(|r| r.get(SUSPENDED_SECONDS.name).is_some());
    let at = at.unwrap_or_else(|| panic!("no sample of job {job} suspended: {samples:?}; stderr: {}", err()));
    assert_eq!(samples[0][SHARE.name].as_f64(), Some(1.0), "running, its 2 CPUs of 2: {}", samples[0]);
    let suspended = &samples[at..];
    assert!(suspended.len() >= 3, "three samples suspended: {suspended:?}");
    for s in suspended {
        assert_eq!(s[SHARE.name].as_f64(), Some(0.24), "suspended: its 600 MB of 2500: {s}");
    }
    let (a, b) = (&suspended[1], &suspended[2]);
    let seconds = figure(b, SUSPENDED_SECONDS.name) - figure(a, SUSPENDED_SECONDS.name);
    let grown = figure(b, COST_USD.name) - figure(a, COST_USD.name);
    let want = 3.6 * 0.24 * seconds / 3600.0;
    eprintln!("suspended {seconds:.3} s more: ${grown:.7}, by hand ${want:.7}");
    assert!(seconds > 0.0 && (grown - want).abs() <= 2e-6, "cost grew ${grown} in {seconds} s, want ${want}");
}

/// What every scenario must show: the memory job measured as it says it is, its CPU use, its
/// user, `--check` passing on v2, the short job's summary from the TaskEpilog.
fn check_scenario(version: &str, name: &str) {
    let Some(dir) = scenario(version, name) else { return };
    let constrained = name.starts_with("ram");
    let t = truth(&dir);
    let (t1, first) = memory_job_sample(&dir, "once-1");
    let (t2, r) = memory_job_sample(&dir, "once-2");

    assert_eq!(r[USER.name], "alice", "the job's user, from its tasks (not slurmstepd's root): {r}");
    let allocated = truth_bytes(&t, "allocated_bytes");
    let rss = figure(&r, MEMORY_RSS.name);
    assert!(rss >= allocated, "MemoryRss {rss} below the {allocated} bytes the job holds");
    within("MemoryRss vs the job's processes' RssAnon", rss, truth_bytes(&t, "anon_bytes"), 0.05);
    within(
        "MemoryUsage vs the job cgroup's memory.current",
        figure(&r, MEMORY_USAGE.name),
        truth_bytes(&t, "memory_current"),
        0.05,
    );
    // One `--once` run is one collection: no rate. The CPU use between the two runs, from the
    // cgroup's counter, is the job's two busy processes.
    let secs = t2.duration_since(t1).map(|d| d.as_secs_f64()).unwrap_or_default();
    let cores = (figure(&r, CPU_TIME.name) - figure(&first, CPU_TIME.name)) / secs;
    eprintln!("CPU between the two samples ({secs:.1} s apart): {cores:.2} cores");
    assert!(
        secs > 0.0 && cores > 0.5 && cores <= figure(&r, CPUS_ALLOCATED.name) + 0.05,
        "{cores} cores: {first} then {r}"
    );
    let limit = r[MEMORY_LIMIT.name].as_f64();
    if constrained {
        assert_eq!(limit, Some(600.0 * MIB), "MemoryLimit with ConstrainRAMSpace=yes and --mem=600M: {r}");
    } else {
        assert!(limit.is_none_or(|l| l > 600.0 * MIB), "no 600M limit without ConstrainRAMSpace: {r}");
    }

    check_suspended(&dir);

    let check = read(&dir.join("check.txt"));
    assert_eq!(job_id(&dir, "check.rc"), "0", "--check:\n{check}");
    let row = check.lines().find(|l| l.starts_with("cgroup root")).unwrap_or_default();
    assert!(row.contains("ok") && row.contains("cgroup v2"), "--check's cgroup row: {row:?}\n{check}");

    let short = job_id(&dir, "short-job.id");
    let summaries: Vec<Value> = records(&dir.join("daemon.jsonl"), kinds::JOB_SUMMARY)
        .into_iter()
        .filter(|r| r[JOB_ID.name] == short.as_str())
        .collect();
    // Where the TaskEpilog ran and what its job's cgroup held then (guest.sh notes it).
    let epilog = read(&dir.join("../epilog.log"));
    let note: Vec<&str> = epilog.split("job=").filter(|b| b.starts_with(&format!("{short} "))).collect();
    assert_eq!(
        summaries.len(),
        1,
        "one summary of job {short}; the TaskEpilog ran as job={}; daemon stderr: {}",
        note.join(""),
        read(&dir.join("daemon.err"))
    );
    assert_eq!(summaries[0][ENDED_BY.name], endings::TASK_EPILOG, "{}", summaries[0]);
    assert_eq!(summaries[0][USER.name], "alice", "{}", summaries[0]);
}

/// 26.05 names job directories by SLUID: the job must still be found, under its numeric id,
/// its record carrying the SLUID.
fn check_sluid_layout(name: &str) {
    let Some(dir) = scenario("26.05", name) else { return };
    let sluid = read(&dir.join("captures/job-sluid.txt")).trim().to_owned();
    assert!(!sluid.is_empty(), "the job saw no SLURM_JOB_SLUID");
    let tree = read(&dir.join("captures/cgroup-tree.txt"));
    assert!(tree.contains(&format!("/{sluid}")), "job directory named {sluid}:\n{tree}");
    let (_, r) = memory_job_sample(&dir, "once-2");
    let job = job_id(&dir, "mem-job.id");
    assert!(job.parse::<u64>().is_ok(), "numeric job id {job}");
    assert_eq!(r[SLUID.name], sluid.as_str(), "the record carries the SLUID: {r}");
    check_scenario("26.05", name);
}

#[ignore = "needs the cgroup v2 VM bench: scripts/test.sh runs it"]
#[test]
fn slurm_24_11_with_constrain_ram_space() {
    check_scenario("24.11", "ram");
}

#[ignore = "needs the cgroup v2 VM bench: scripts/test.sh runs it"]
#[test]
fn slurm_24_11_without_constrain_ram_space() {
    check_scenario("24.11", "noram");
}

#[ignore = "needs the cgroup v2 VM bench: scripts/test.sh runs it"]
#[test]
fn slurm_26_05_job_id_paths_with_constrain_ram_space() {
    check_scenario("26.05", "ram-idpaths");
}

#[ignore = "needs the cgroup v2 VM bench: scripts/test.sh runs it"]
#[test]
fn slurm_26_05_sluid_dirs_with_constrain_ram_space() {
    check_sluid_layout("ram");
}

#[ignore = "needs the cgroup v2 VM bench: scripts/test.sh runs it"]
#[test]
fn slurm_26_05_sluid_dirs_without_constrain_ram_space() {
    check_sluid_layout("noram");
}
