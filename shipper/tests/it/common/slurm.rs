//! The bench's Slurm: found, asked (argv, no shell), given jobs, and cleaned up after.

use super::*;

#[allow(dead_code)]
pub const MIB: f64 = 1024.0 * 1024.0;

/// A job on the first node that holds 300 MiB of anonymous memory for two minutes, account
/// `physics`, partition `batch`: (job id, node), returned once its processes hold it.
#[allow(dead_code)]
pub fn memory_job(conf: &Path) -> (String, String) {
    let node = nodes()[0].clone();
    let w = workload(conf);
    let job = sbatch(&[
        "-p",
        "batch",
        "-w",
        &node,
        "-A",
        "physics",
        "--mem=600M",
        "--wrap",
        &format!("python3 {w} memory 300 120"),
    ]);
    wait_until("the memory job to hold 300 MiB", Duration::from_secs(90), || {
        job_state(&job) == "RUNNING" && job_rss_bytes(&job, &node) >= 300.0 * MIB
    });
    (job, node)
}

/// What a destination read back of a real job's memory: see [`job_memory_read_back`].
#[allow(dead_code)]
pub struct ReadBack {
    pub job: String,
    pub node: String,
    /// The series PromQL answered for the job's `slurm_memory_rss_bytes`.
    pub series: Vec<(serde_json::Value, f64)>,
    /// The job's processes' resident memory when it answered.
    pub truth: f64,
    pub daemon: Running,
}

/// A 300 MiB job ([`memory_job`], pushed to `cleanup`) and the node role beside it sending to
/// `sink` alone (cluster `<sink>test`; `env`, the destination's settings; a collection a second,
/// a flush every two), until PromQL at `query_url` answers the job's memory. The daemon's log
/// stays in the bench directory, named when nothing answers.
#[allow(dead_code)]
pub fn job_memory_read_back(
    conf: &Path,
    sink: &str,
    env: &[(&str, &std::ffi::OsStr)],
    query_url: &str,
    cleanup: &mut SlurmCleanup,
) -> ReadBack {
    let (job, node) = memory_job(conf);
    cleanup.jobs.push(job.clone());
    let log = bench_dir(conf).join(format!("{sink}-sink-test.log"));
    let daemon = shipper()
        .args(["--role", "node", "--sink", sink])
        .env("SLURM_CW_CLUSTER_NAME", format!("{sink}test"))
        .env("SLURM_CW_COLLECT_INTERVAL", "1s")
        .env("SLURM_CW_FLUSH_INTERVAL", "2s")
        .env("SLURM_CW_DELIVERY__FLUSH_JITTER", "false")
        .env("SLURM_CW_NODE__HOOK_SOCKET", bench_dir(conf).join(format!("hook-{sink}-test.sock")))
        .envs(env.iter().copied())
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&log).expect("the daemon's log"))
        .spawn()
        .map(Running::new)
        .expect("the shipper starts");
    let query = format!("slurm_memory_rss_bytes{{job_id=\"{job}\"}}");
    let mut series = Vec::new();
    let what =
        format!("{query} at {query_url} to answer the job's memory (the daemon's log: {})", log.display());
    // The first answers may be low: on cgroup v1 the kernel updates memory.stat's counters
    // lazily (a CI run read total_rss 1.2 MiB beside usage_in_bytes 323 MB right after the
    // job allocated), and a period's mean carries such a reading. The job's memory no longer
    // changes: wait for the answer to reach it, as the callers then assert.
    wait_until(&what, Duration::from_secs(60), || {
        series = promql(query_url, &query);
        let truth = job_rss_bytes(&job, &node);
        !series.is_empty()
            && series.iter().all(|(_, v)| *v >= 300.0 * MIB && (v - truth).abs() <= truth * 0.05)
    });
    let truth = job_rss_bytes(&job, &node);
    eprintln!(
        "{sink}: PromQL {query}: {:?} MiB; the job's processes in /proc: {:.1} MiB",
        series.iter().map(|(_, v)| (v / MIB * 10.0).round() / 10.0).collect::<Vec<_>>(),
        truth / MIB
    );
    ReadBack { job, node, series, truth, daemon }
}

/// The resident memory of a job's processes, from Slurm's own list of them and /proc.
#[allow(dead_code)]
pub fn job_rss_bytes(job: &str, node: &str) -> f64 {
    job_pids(job, node).iter().map(|p| proc_status(*p, "VmRSS")).sum::<u64>() as f64 * 1024.0
}

/// The bench slurm.conf, or None (outside CI) when the bench Slurm is not running.
pub fn slurm() -> Option<PathBuf> {
    match std::env::var("BENCH_SLURM_CONF") {
        Ok(p) if !p.is_empty() => Some(PathBuf::from(p)),
        _ => {
            missing("the bench Slurm", "run `eval \"$(scripts/bench/slurm.sh start)\"` as root");
            None
        }
    }
}

/// What the cgroup v2 VM bench (scripts/bench/vm.sh) left for a Slurm release ("24.11":
/// `BENCH_VM_OUT_24_11`), or None (outside CI) when scripts/test.sh has not run it.
pub fn vm_out(version: &str) -> Option<PathBuf> {
    let var = format!("BENCH_VM_OUT_{}", version.replace('.', "_"));
    match std::env::var(&var) {
        Ok(p) if !p.is_empty() => Some(PathBuf::from(p)),
        _ => {
            missing(
                &format!("the cgroup v2 VM bench for Slurm {version} (${var})"),
                "scripts/test.sh runs it: scripts/bench/vm.sh test, as root",
            );
            None
        }
    }
}

/// A real cgroup hierarchy this test may make directories in (v2's root, or v1's memory
/// controller), or None (outside CI) when there is none or this is not root.
pub fn cgroupfs() -> Option<PathBuf> {
    let root = Path::new("/sys/fs/cgroup");
    let hierarchy =
        if root.join("cgroup.controllers").is_file() { root.to_owned() } else { root.join("memory") };
    // One name a call: tests of one process run in parallel and would race on a shared one.
    static PROBES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = PROBES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let probe = hierarchy.join(format!("slurm-cw-probe-{}-{n}", std::process::id()));
    if std::fs::create_dir(&probe).is_ok() && std::fs::remove_dir(&probe).is_ok() {
        return Some(hierarchy);
    }
    missing("a writable cgroup hierarchy", "run as root on a host with cgroup v2 or v1's memory controller");
    None
}

/// The bench's nodes (`BENCH_SLURM_NODES`): c1..c4 on the 22.05 bench, n1..n4 on 24.11. Both
/// benches have partition `batch` = the first three and `debug` = the last two; the last one
/// has two GPUs.
pub fn nodes() -> Vec<String> {
    let listed = std::env::var("BENCH_SLURM_NODES").unwrap_or_default();
    let nodes: Vec<String> = listed.split_whitespace().map(str::to_owned).collect();
    if nodes.len() >= 4 { nodes } else { ["c1", "c2", "c3", "c4"].map(String::from).to_vec() }
}

/// The bench's Slurm release as (major, minor), from `BENCH_SLURM_VERSION` (22.05 when unset).
pub fn slurm_version() -> (u32, u32) {
    let v = std::env::var("BENCH_SLURM_VERSION").unwrap_or_default();
    let mut parts = v.split('.').map(|p| p.parse::<u32>().ok());
    match (parts.next().flatten(), parts.next().flatten()) {
        (Some(major), Some(minor)) => (major, minor),
        _ => (22, 5),
    }
}

/// The bench's directory (state, logs, the TaskEpilog), two levels above its slurm.conf. On the
/// 24.11 bench it has the same path inside the chroot the jobs run in, so files the jobs need
/// go here.
pub fn bench_dir(conf: &Path) -> PathBuf {
    conf.parent().and_then(Path::parent).expect("bench dir").to_owned()
}

/// `from` copied to `to` by a new name and a rename, so a job never runs half a file.
fn put(from: &Path, to: &Path) {
    let tmp = to.with_extension(format!("new-{}", std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    // A hard link where it can (the 60 MiB shipper), else a copy.
    if std::fs::hard_link(from, &tmp).is_err() {
        std::fs::copy(from, &tmp)
            .unwrap_or_else(|e| panic!("copy {} to {}: {e}", from.display(), tmp.display()));
    }
    std::fs::rename(&tmp, to).unwrap_or_else(|e| panic!("rename to {}: {e}", to.display()));
    // rename(2) leaves both names when they were links to one file already.
    let _ = std::fs::remove_file(&tmp);
}

/// scripts/bench/workload.py where the bench's jobs can run it (the bench directory: a 24.11
/// job runs in the chroot, which sees no checkout).
pub fn workload(conf: &Path) -> String {
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../scripts/bench/workload.py");
    let dst = bench_dir(conf).join("workload.py");
    put(&src, &dst);
    dst.display().to_string()
}

/// Puts the binary under test where the bench's TaskEpilog runs it (`$bench/shipper`): the
/// file itself, not a link, as the 24.11 bench's epilog runs in the chroot.
pub fn install_hook(conf: &Path) {
    put(Path::new(env!("CARGO_BIN_EXE_slurm-cw-shipper")), &bench_dir(conf).join("shipper"));
}

/// The Slurm commands tests run: taken from the bench's `BENCH_SLURM_BIN_DIR` (client
/// commands) or `BENCH_SLURM_SBIN_DIR` (daemons), so each bench's own Slurm answers.
const SLURM_PROGRAMS: &[&str] =
    &["sinfo", "squeue", "sdiag", "scontrol", "sbatch", "scancel", "srun", "sacct", "slurmctld", "slurmd"];

/// Where `program` is: a Slurm command in the bench's directories, else `program` as given.
pub fn program(program: &str) -> PathBuf {
    if SLURM_PROGRAMS.contains(&program) {
        for var in ["BENCH_SLURM_BIN_DIR", "BENCH_SLURM_SBIN_DIR"] {
            if let Ok(dir) = std::env::var(var)
                && !dir.is_empty()
                && Path::new(&dir).join(program).is_file()
            {
                return Path::new(&dir).join(program);
            }
        }
        if program.starts_with("slurm") {
            return Path::new("/usr/sbin").join(program);
        }
    }
    PathBuf::from(program)
}

/// Runs a command (argv, no shell; a Slurm command from the bench, see [`program`]) and returns
/// its standard output; panics with stderr on failure.
pub fn cmd(program: &str, args: &[&str]) -> String {
    let out =
        Command::new(self::program(program)).args(args).output().unwrap_or_else(|e| panic!("{program}: {e}"));
    assert!(out.status.success(), "{program} {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Runs a command and returns (success, stdout, stderr) without judging.
pub fn try_cmd(program: &str, args: &[&str]) -> (bool, String, String) {
    match Command::new(self::program(program)).args(args).output() {
        Ok(o) => (
            o.status.success(),
            String::from_utf8_lossy(&o.stdout).into_owned(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        ),
        Err(e) => (false, String::new(), e.to_string()),
    }
}

/// `sbatch --parsable ARGS`; returns the job id.
pub fn sbatch(args: &[&str]) -> String {
    let mut full = vec!["--parsable", "--output=/dev/null"];
    full.extend_from_slice(args);
    let out = cmd("sbatch", &full);
    out.trim().split(';').next().unwrap_or("").to_owned()
}

/// The state of one job, as squeue prints %T (empty once slurmctld forgot it).
pub fn job_state(id: &str) -> String {
    let (_, out, _) = try_cmd("squeue", &["-h", "-j", id, "-t", "all", "-o", "%T"]);
    out.lines().next().unwrap_or("").trim().to_owned()
}

/// The pending reason of one job.
pub fn job_reason(id: &str) -> String {
    let (_, out, _) = try_cmd("squeue", &["-h", "-j", id, "-t", "all", "-o", "%r"]);
    out.lines().next().unwrap_or("").trim().to_owned()
}

/// Leaves the bench Slurm as it found it: cancels this test's jobs and waits (at most a minute)
/// until none is pending, running or completing, so that the next test's daemon does not see
/// them (a daemon prices a job it first sees from its Slurm start); resumes nodes it took out.
pub struct SlurmCleanup {
    pub jobs: Vec<String>,
    pub nodes: Vec<String>,
}

impl Drop for SlurmCleanup {
    fn drop(&mut self) {
        if !self.jobs.is_empty() {
            let mut args: Vec<&str> = vec!["--quiet"];
            args.extend(self.jobs.iter().map(String::as_str));
            let _ = try_cmd("scancel", &args);
            let ids = self.jobs.join(",");
            let deadline = std::time::Instant::now() + Duration::from_secs(60);
            while std::time::Instant::now() < deadline {
                let (ok, out, _) = try_cmd("squeue", &["-h", "-j", &ids, "-t", "PD,R,CG,CF,S", "-o", "%i"]);
                if !ok || out.trim().is_empty() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(200));
            }
        }
        for n in &self.nodes {
            let _ = try_cmd("scontrol", &["update", &format!("nodename={n}"), "state=resume"]);
        }
    }
}

/// The pids Slurm itself lists for a job on a node (`scontrol listpids JOB NODE`): an
/// independent view of a job's processes.
pub fn job_pids(job: &str, node: &str) -> Vec<u32> {
    let (_, out, _) = try_cmd("scontrol", &["listpids", job, node]);
    out.lines().skip(1).filter_map(|l| l.split_whitespace().next()?.parse().ok()).collect()
}

/// An `scontrol` in `dir` that logs each call to `calls`, prints `answer` (exit 0, as 24.11 and
/// 26.05 print an unknown job) and answers `ping` with 0 (slurmctld up); called again, it
/// changes the answer.
pub fn scripted_scontrol(dir: &Path, answer: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(dir).unwrap();
    let d = dir.display();
    // Written once: written again while the daemon runs it, it is busy (ETXTBSY); made under
    // another name and renamed, so never run half written.
    if !dir.join("scontrol").exists() {
        let body =
            format!("#!/bin/sh\necho \"$@\" >> {d}/calls\n[ \"$1\" = ping ] && exit 0\ncat {d}/answer\n");
        std::fs::write(dir.join("scontrol.new"), body).unwrap();
        std::fs::set_permissions(dir.join("scontrol.new"), std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::rename(dir.join("scontrol.new"), dir.join("scontrol")).unwrap();
    }
    std::fs::write(dir.join("answer.new"), answer).unwrap();
    std::fs::rename(dir.join("answer.new"), dir.join("answer")).unwrap();
}
