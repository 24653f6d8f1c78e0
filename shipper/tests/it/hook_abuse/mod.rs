//! The hook socket under abuse, as a job user could try it: thousands of idle connections
//! held against a daemon with the common limit of 1,024 open files, then a flood of requests
//! from one uid. The daemon's collections must keep every job figure meanwhile, and the job's
//! own user must still get its final sample.
//!
//! Runs without Slurm, on the cgroup v2 fixture (job 1001) and its fake /proc, as root (the
//! test process is the attacker, uid 0; the job belongs to uid 1000, the real uid in its task
//! processes' status files). Skipped when not root.
//!
//! The second test (`many_users`) floods from several uids at once (this test binary run again as each
//! abusing user, see `flood_child`): unknown job ids, another user's job, and one abuser's own
//! running job (1002, a copy of 1001 with its processes owned by that abuser). The honest user
//! must still get every final sample of its job, and the summaries written stay one a job.

mod many_users;

use crate::common;

use crate::common::{Running, copy_tree, shipper};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The fixture job's user.
const JOB_USER: u32 = 1000;
const IDLE_CONNECTIONS: usize = 2000;
const IDLE_FOR: Duration = Duration::from_secs(10);
/// A flood of at least this many requests, for at least FLOOD_FOR.
const FLOOD: usize = 5000;
const FLOOD_FOR: Duration = Duration::from_secs(6);
const FLUSH_SECS: f64 = 2.0;

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// Lines of a stream with the time each arrived.
type Lines = Arc<Mutex<Vec<(Instant, String)>>>;

fn read_lines(stream: impl Read + Send + 'static) -> Lines {
    let lines: Lines = Arc::default();
    let sink = lines.clone();
    std::thread::spawn(move || {
        for line in BufReader::new(stream).lines() {
            let Ok(line) = line else { break };
            sink.lock().unwrap().push((Instant::now(), line));
        }
    });
    lines
}

/// Samples in one datum: 1 for a value, the count of a statistic set or of values.
fn samples(d: &serde_json::Value) -> f64 {
    if let Some(s) = d.get("stats") {
        return s["count"].as_f64().unwrap_or(0.0);
    }
    if let Some(c) = d.get("counts").and_then(|c| c.as_array()) {
        return c.iter().filter_map(|v| v.as_f64()).sum();
    }
    if d.get("values").is_some() { 1.0 } else { f64::from(u8::from(d.get("value").is_some())) }
}

/// One flush as it reached standard output.
#[derive(Debug, Default, Clone)]
struct Flush {
    at: Option<Instant>,
    /// Node collections in it.
    collections: f64,
    /// JobsOnNode: samples and the smallest.
    jobs_samples: f64,
    jobs_min: f64,
    /// Samples of job 1001's MemoryUsage and ProcessCount (cgroup and /proc figures).
    memory: f64,
    processes: f64,
}

/// Datum lines grouped into flushes: a flush's lines come in one write, flushes 2 s apart.
fn flushes(lines: &[(Instant, String)]) -> Vec<Flush> {
    let mut out: Vec<Flush> = Vec::new();
    let mut last: Option<Instant> = None;
    for (at, line) in lines {
        let Ok(d) = serde_json::from_str::<serde_json::Value>(line) else { continue };
        let Some(metric) = d.get("metric").and_then(|m| m.as_str()) else { continue };
        if last.is_none_or(|l| at.duration_since(l) > Duration::from_millis(500)) {
            out.push(Flush { at: Some(*at), jobs_min: f64::NAN, ..Flush::default() });
        }
        last = Some(*at);
        let f = out.last_mut().unwrap();
        let dim = |k: &str| d["dimensions"].get(k).and_then(|v| v.as_str()).map(str::to_owned);
        let job = dim("JobId");
        match metric {
            "ShipperCollectionDuration" if dim("Collector").as_deref() == Some("node") => {
                f.collections += samples(&d)
            }
            "JobsOnNode" => {
                f.jobs_samples += samples(&d);
                let min = d["stats"]["min"].as_f64().or(d["value"].as_f64()).unwrap_or(f64::NAN);
                f.jobs_min = if f.jobs_min.is_nan() { min } else { f.jobs_min.min(min) };
            }
            "MemoryUsage" if job.as_deref() == Some("1001") => f.memory += samples(&d),
            "ProcessCount" if job.as_deref() == Some("1001") => f.processes += samples(&d),
            _ => {}
        }
    }
    out
}

/// Raises this process's open-file limit to its hard limit; false when it stays too low for
/// the attack.
fn raise_nofile(want: u64) -> bool {
    // SAFETY: getrlimit/setrlimit on a local struct.
    unsafe {
        let mut l: libc::rlimit = std::mem::zeroed();
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut l) != 0 {
            return false;
        }
        l.rlim_cur = l.rlim_max;
        libc::setrlimit(libc::RLIMIT_NOFILE, &l) == 0 && l.rlim_cur >= want
    }
}

/// `slurm-cw-shipper --job-ended JOB` as the job's user (what the TaskEpilog runs): how long
/// it took and what it printed (nothing on success).
fn epilog_as_job_user(socket: &Path, job: &str) -> (Duration, String) {
    // A copy beside the socket: the build's own target directory may sit under a directory the
    // job's user cannot enter (a fresh clone in a private temporary directory, as in CI).
    let bin = socket.with_file_name("slurm-cw-shipper");
    if !bin.exists() {
        std::fs::copy(env!("CARGO_BIN_EXE_slurm-cw-shipper"), &bin)
            .expect("copy the binary for the job user");
    }
    let started = Instant::now();
    let mut cmd = std::process::Command::new(&bin);
    cmd.args(["--job-ended", job]).env("SLURM_CW_NODE__HOOK_SOCKET", socket).uid(JOB_USER).gid(JOB_USER);
    let out = crate::common::past_etxtbsy(|| cmd.output()).expect("run the hook as the job user");
    assert_eq!(out.status.code(), Some(0), "the hook always exits 0");
    (started.elapsed(), String::from_utf8_lossy(&out.stderr).trim().to_owned())
}

/// Holds `n` idle connections until `until`, opening again every one the daemon closes;
/// returns the connections opened and the connects that failed.
fn hold_idle(socket: &Path, n: usize, until: Instant) -> (usize, usize) {
    let (mut opened, mut failed) = (0, 0);
    let mut held: Vec<Option<UnixStream>> = (0..n).map(|_| None).collect();
    while Instant::now() < until {
        for slot in held.iter_mut() {
            let closed = match slot {
                None => true,
                Some(s) => {
                    let mut b = [0u8; 16];
                    // Non-blocking: an answer or end of file means the daemon let go.
                    !matches!(s.read(&mut b), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
                }
            };
            if closed {
                *slot = match connect_nonblocking(socket) {
                    Ok(s) => {
                        opened += 1;
                        Some(s)
                    }
                    Err(_) => {
                        failed += 1;
                        None
                    }
                };
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    (opened, failed)
}

/// A non-blocking connection: a full listen queue fails at once instead of blocking.
fn connect_nonblocking(socket: &Path) -> std::io::Result<UnixStream> {
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::io::FromRawFd;
    // SAFETY: a fresh socket, owned by the UnixStream (closed on drop or error); the address
    // is a zeroed sockaddr_un with a path shorter than its buffer.
    unsafe {
        let fd = libc::socket(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let stream = UnixStream::from_raw_fd(fd);
        let mut addr: libc::sockaddr_un = std::mem::zeroed();
        addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
        let path = socket.as_os_str().as_bytes();
        assert!(path.len() < addr.sun_path.len());
        for (d, s) in addr.sun_path.iter_mut().zip(path) {
            *d = *s as libc::c_char;
        }
        let len = std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t;
        if libc::connect(fd, (&raw const addr).cast(), len) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(stream)
    }
}

/// One request as root: the answer line, or why there was none.
fn ask(socket: &Path, job: &str) -> String {
    let Ok(mut s) = UnixStream::connect(socket) else { return "connect failed".into() };
    let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
    let _ = s.write_all(format!("{job}\n").as_bytes());
    let mut line = String::new();
    match BufReader::new(s).read_line(&mut line) {
        Ok(_) if line.ends_with('\n') => line.trim().to_owned(),
        Ok(_) => "closed".into(),
        Err(e) => format!("error: {}", e.kind()),
    }
}

#[test]
fn idle_connections_and_a_request_flood_leave_collections_and_the_job_user_alone() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("SKIPPED: needs root (to run the hook as another user)");
        return;
    }
    assert!(raise_nofile(IDLE_CONNECTIONS as u64 + 200), "this test needs {IDLE_CONNECTIONS}+ open files");

    let tmp = tempfile::tempdir().unwrap();
    let (cg, proc) = (tmp.path().join("cg"), tmp.path().join("proc"));
    copy_tree(&fixtures().join("cgroup/v2-kernel-docs"), &cg);
    copy_tree(&fixtures().join("proc/slurm-job-1001"), &proc);
    // The job's user must reach the socket.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let socket = tmp.path().join("hook.sock");

    let mut cmd = shipper();
    cmd.args(["--role", "node", "--sink", "stdout"])
        .env("SLURM_CW_CLUSTER_NAME", "hook-abuse")
        .env("SLURM_CW_COLLECT_INTERVAL", "1s")
        .env("SLURM_CW_FLUSH_INTERVAL", format!("{FLUSH_SECS}s"))
        .env("SLURM_CW_CLOUDWATCH__FLUSH_JITTER", "false")
        .env("SLURM_CW_NODE__CGROUP_ROOT", &cg)
        .env("SLURM_CW_NODE__PROC_ROOT", &proc)
        .env("SLURM_CW_NODE__HOOK_SOCKET", &socket)
        .env("SLURM_CW_NODE__JOB_METRICS", "both")
        .env("SLURM_CW_NODE__PROCESS_EVERY", "1")
        .env("SLURM_CW_GPU__ENABLED", "off")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // SAFETY: only setrlimit, which is async-signal-safe, between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            let l = libc::rlimit { rlim_cur: 1024, rlim_max: 1024 };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &l) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = Running::new(cmd.spawn().unwrap());
    let stdout = read_lines(child.child().stdout.take().unwrap());
    let stderr = read_lines(child.child().stderr.take().unwrap());
    common::wait_until("the hook socket", Duration::from_secs(10), || socket.exists());

    // Before: three flushes undisturbed.
    let flushed = || flushes(&stdout.lock().unwrap()).len();
    common::wait_until("three flushes", Duration::from_secs(60), || flushed() >= 3);

    // Idle connections, held for IDLE_FOR: those the daemon closes are opened again.
    let attack = Instant::now();
    let holder = {
        let socket = socket.clone();
        std::thread::spawn(move || hold_idle(&socket, IDLE_CONNECTIONS, attack + IDLE_FOR))
    };
    std::thread::sleep(Duration::from_secs(4));
    let during_idle = epilog_as_job_user(&socket, "1001");
    let (connects, failed) = holder.join().unwrap();
    let attack_end = Instant::now();

    // A flood from one uid (root, the test), for a job that is not here, 8 at a time, as
    // fast as answers come, once a flush has followed the idle attack.
    let before_flood = flushed();
    common::wait_until("a flush after the idle attack", Duration::from_secs(60), || flushed() > before_flood);
    let flood = Instant::now();
    let answers: Arc<Mutex<std::collections::BTreeMap<String, usize>>> = Arc::default();
    let mid_flood = std::thread::scope(|s| {
        for _ in 0..8 {
            let (socket, answers) = (&socket, answers.clone());
            s.spawn(move || {
                let mut sent = 0;
                while sent < FLOOD / 8 || flood.elapsed() < FLOOD_FOR {
                    let a = ask(socket, "999");
                    *answers.lock().unwrap().entry(a).or_default() += 1;
                    sent += 1;
                }
            });
        }
        std::thread::sleep(FLOOD_FOR / 2);
        epilog_as_job_user(&socket, "1001")
    });
    let flood_took = flood.elapsed();
    let flood_end = Instant::now();
    let at_flood_end = flushed();
    common::wait_until("two flushes after the flood", Duration::from_secs(60), || {
        flushed() >= at_flood_end + 2
    });
    let after = epilog_as_job_user(&socket, "1001");
    let out = child.stop();
    assert!(out.status.success());

    let lines = stdout.lock().unwrap().clone();
    let err: Vec<String> = stderr.lock().unwrap().iter().map(|(_, l)| l.clone()).collect();
    let fl = flushes(&lines);
    let answers = answers.lock().unwrap().clone();
    let phase = |f: &Flush| {
        let at = f.at.unwrap();
        // A flush holds the collections of the FLUSH_SECS before it.
        let covers =
            |from: Instant, to: Instant| at >= from && at <= to + Duration::from_secs_f64(FLUSH_SECS);
        if at < attack {
            "before"
        } else if covers(attack, attack_end) {
            "idle attack"
        } else if covers(flood, flood_end) {
            "flood"
        } else {
            "after"
        }
    };
    eprintln!(
        "idle attack: {IDLE_CONNECTIONS} held for {IDLE_FOR:?}: {connects} connections opened, {failed} connects failed"
    );
    let total: usize = answers.values().sum();
    eprintln!("flood: {total} requests in {flood_took:?}: {answers:?}");
    eprintln!(
        "job user's hook: during the idle attack {during_idle:?}, mid-flood {mid_flood:?}, after {after:?}"
    );
    eprintln!("flush (s from start)  phase        collections  JobsOnNode(n,min)  MemoryUsage  ProcessCount");
    let t0 = fl.first().and_then(|f| f.at).unwrap_or(attack);
    for f in &fl {
        eprintln!(
            "{:>6.1}                {:<12} {:>4}         {:>3} {:>3}            {:>4}         {:>4}",
            f.at.unwrap().duration_since(t0).as_secs_f64(),
            phase(f),
            f.collections,
            f.jobs_samples,
            f.jobs_min,
            f.memory,
            f.processes
        );
    }
    let stderr_text = err.join("\n");
    eprintln!("daemon stderr ({} lines):\n{stderr_text}", err.len());

    assert!(!stderr_text.contains("Too many open files"), "{stderr_text}");
    assert!(fl.len() >= 12, "{} flushes", fl.len());
    let in_phase = |p: &str| fl.iter().filter(|f| phase(f) == p).count();
    assert!(in_phase("idle attack") >= 5 && in_phase("flood") >= 3, "{fl:?}");
    // Every flush after the first: each collection saw the job and read its cgroup and /proc.
    for f in &fl[1..] {
        let what = format!("{} flush {f:?}", phase(f));
        assert!(f.collections >= 1.0, "{what}");
        assert_eq!(f.jobs_samples, f.collections, "{what}");
        assert_eq!(f.jobs_min, 1.0, "a collection lost the job: {what}");
        // More only with a final sample in the flush.
        assert!(f.memory >= f.collections && f.memory <= f.collections + 1.0, "{what}");
        assert!(f.processes >= f.collections && f.processes <= f.collections + 1.0, "{what}");
    }
    // Collections were not delayed: one a second from the second flush to the last.
    let (first, last) = (&fl[1], fl.last().unwrap());
    let secs = last.at.unwrap().duration_since(first.at.unwrap()).as_secs_f64();
    let collections: f64 = fl[2..].iter().map(|f| f.collections).sum();
    assert!(collections >= secs * 0.8, "{collections} collections in {secs:.1} s");

    // The flood was answered, quickly, and mostly refused.
    assert!(total >= FLOOD, "{total}");
    let refused: usize =
        answers.iter().filter(|(a, _)| *a == "busy" || *a == "too-many").map(|(_, n)| n).sum();
    let served: usize =
        answers.iter().filter(|(a, _)| a.starts_with("ok") || *a == "too-soon").map(|(_, n)| n).sum();
    assert_eq!(refused + served, total, "every request got an answer: {answers:?}");
    let budget = 20.0 + 10.0 * flood_took.as_secs_f64() + 1.0;
    assert!(served as f64 <= budget, "{served} served, budget {budget}");
    assert!(flood_took < FLOOD_FOR + Duration::from_secs(10), "{flood_took:?}");

    // The job's user kept its final sample throughout.
    for (when, (took, said)) in [("idle attack", &during_idle), ("flood", &mid_flood), ("after", &after)] {
        assert_eq!(said, "", "{when}: the hook said {said:?}");
        assert!(*took < Duration::from_secs(3), "{when}: {took:?}");
    }
}
