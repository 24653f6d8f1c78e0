//! A read that hangs (here a FIFO nobody writes, where the node collector expects a cgroup
//! file: what an NFS-backed /proc or a GPU that does not answer looks like to the daemon)
//! stalls only collection: flushes spooled before are still delivered, the hook answers at
//! once, the log says a collection hangs, SIGTERM still stops the daemon, and the collections
//! skipped meanwhile are counted.

use crate::common;

use common::*;
use slurm_cw_catalog::metrics::{JOBS_ON_NODE, SHIPPER_COLLECTIONS_MISSED};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// One hook request: the answer line and how long it took.
fn ask(socket: &Path, job: &str) -> (String, Duration) {
    let started = Instant::now();
    let Ok(mut s) = UnixStream::connect(socket) else { return ("connect failed".into(), started.elapsed()) };
    let _ = s.set_read_timeout(Some(Duration::from_secs(10)));
    let _ = s.write_all(format!("{job}\n").as_bytes());
    let mut line = String::new();
    let _ = BufReader::new(s).read_line(&mut line);
    (line.trim().to_owned(), started.elapsed())
}

#[ignore = "needs LocalStack: scripts/test.sh runs it"]
#[tokio::test]
async fn a_hung_read_stalls_collection_only() {
    let Some(url) = localstack() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let (cg, proc, spool) = (tmp.path().join("cg"), tmp.path().join("proc"), tmp.path().join("spool"));
    // No Slurm commands: the job's account comes from its environment.
    let bin = tmp.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    copy_tree(&fixtures().join("cgroup/v2-kernel-docs"), &cg);
    copy_tree(&fixtures().join("proc/slurm-job-1001"), &proc);
    let ns = unique_namespace("slow_read");
    let base = |c: &mut std::process::Command| {
        c.args(["--role", "node"])
            .envs(shipper_env(&url, &ns))
            .env("SLURM_CW_CLUSTER_NAME", "slow")
            .env("SLURM_CW_GPU__ENABLED", "off")
            .env("SLURM_CW_SPOOL__DIR", &spool)
            .env("SLURM_CW_NODE__CGROUP_ROOT", &cg)
            .env("SLURM_CW_NODE__PROC_ROOT", &proc)
            .env("SLURM_CW_SLURM__BIN_DIR", &bin);
    };

    // A flush CloudWatch could not take: it waits in the spool.
    let mut once = shipper();
    base(&mut once);
    let out = once.arg("--once").env("AWS_ENDPOINT_URL", "http://127.0.0.1:9").output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("kept in the spool"));

    // Now the job's memory.current hangs whoever opens it.
    let hung = cg.join("system.slice/slurmstepd.scope/job_1001/memory.current");
    std::fs::remove_file(&hung).unwrap();
    let made = std::process::Command::new("mkfifo").arg(&hung).status().unwrap();
    assert!(made.success());
    let socket = tmp.path().join("hook.sock");
    let mut daemon = shipper();
    base(&mut daemon);
    let mut child = daemon
        .env("SLURM_CW_COLLECT_INTERVAL", "1s")
        .env("SLURM_CW_FLUSH_INTERVAL", "2s")
        .env("SLURM_CW_DELIVERY__FLUSH_JITTER", "false")
        .env("SLURM_CW_NODE__HOOK_SOCKET", &socket)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(tmp.path().join("daemon.log")).unwrap())
        .spawn()
        .map(Running::new)
        .unwrap();

    // The spooled flush reaches CloudWatch while collection hangs.
    let cw = cloudwatch(&url).await;
    let window = Duration::from_secs(600);
    let dims = [("ClusterName", "slow")];
    let delivered = statistic(&cw, &ns, JOBS_ON_NODE.name, &dims, "Maximum", window).await;
    assert_eq!(delivered, Some(1.0), "the fixture's one job, from the spooled flush");

    // The hook answers at once (busy) instead of keeping the job's epilog waiting.
    wait_until("the hook socket", Duration::from_secs(60), || socket.exists());
    // Until the first collection is stuck the main loop may take a request (and time out on it).
    wait_until("the hook to answer busy", Duration::from_secs(60), || ask(&socket, "1001").0 == "busy");
    let (answer, took) = ask(&socket, "1001");
    assert_eq!(answer, "busy", "a collection is stuck: no sample to take");
    assert!(took < Duration::from_secs(2), "answered in {took:?}");

    // The log says so while it hangs: each flush it holds up names it.
    let log = tmp.path().join("daemon.log");
    let said = || std::fs::read_to_string(&log).unwrap_or_default().contains("a collection is still running");
    wait_until("the log to say a collection hangs", Duration::from_secs(60), said);

    // The read returns: collection goes on, and the collections it skipped are counted.
    let mut writer = std::fs::OpenOptions::new().write(true).open(&hung).unwrap();
    writer.write_all(b"1073741824\n").unwrap();
    drop(writer);
    let mut missed = None;
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(120) {
        missed = statistic(&cw, &ns, SHIPPER_COLLECTIONS_MISSED.name, &dims, "Sum", window).await;
        if missed.is_some_and(|m| m >= 1.0) {
            break;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    assert!(missed.is_some_and(|m| m >= 1.0), "collections skipped while stuck: {missed:?}");

    // SIGTERM still stops it cleanly.
    let pid = child.child().id().to_string();
    cmd("kill", &["-TERM", &pid]);
    let mut status = None;
    wait_until("the daemon to stop after SIGTERM", Duration::from_secs(90), || {
        status = child.child().try_wait().unwrap();
        status.is_some()
    });
    assert_eq!(status.and_then(|s| s.code()), Some(0));
}
