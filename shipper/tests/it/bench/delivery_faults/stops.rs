//! The daemon stopped hard (kill -9 with a request in flight), stopped while CloudWatch cannot
//! be reached (SIGTERM), and a full disk under its spool.

use super::*;

#[ignore = "needs LocalStack: scripts/test.sh runs it"]
#[tokio::test]
async fn kill_9_during_a_flush_loses_nothing_flushed_and_repeats_at_most_the_batch_in_flight_cloudwatch() {
    kill_9_during_a_flush_loses_nothing_flushed_and_repeats_at_most_the_batch_in_flight(Dest::CloudWatch)
        .await;
}

#[ignore = "needs LocalStack: scripts/test.sh runs it"]
#[tokio::test]
async fn kill_9_during_a_flush_loses_nothing_flushed_and_repeats_at_most_the_batch_in_flight_emf() {
    kill_9_during_a_flush_loses_nothing_flushed_and_repeats_at_most_the_batch_in_flight(Dest::Emf).await;
}

async fn kill_9_during_a_flush_loses_nothing_flushed_and_repeats_at_most_the_batch_in_flight(dest: Dest) {
    let Some(url) = localstack() else { return };
    let (ns, cluster) = (unique_namespace("crash"), dest.cluster("crash"));
    dest.prepare(&url, &cluster).await;
    let root = fixture_root();
    let spool = root.path().join("spool");
    // The first requests go through; from the fourth on, requests are held (in flight) for 4 s.
    let proxy = Proxy::start(
        upstream(&url),
        Box::new(|n| if n < 3 { Fault::Forward } else { Fault::Hold(Duration::from_secs(4)) }),
    );
    let run = start(dest, &proxy.url(), &ns, &cluster, &spool, root.path());
    let held = || proxy.counts.held.load(std::sync::atomic::Ordering::Relaxed);
    wait_until("a request in flight", Duration::from_secs(30), || held() > 0);
    // kill -9 while CloudWatch has the batch and the shipper has not heard back.
    let mut dead = run.child;
    dead.child().kill().unwrap();
    let _ = dead.child().wait();
    run.reader.join().unwrap();
    let first = Run::count_flushed(&run.log.lock().unwrap());
    let per_flush_max = 3;
    // The held request reaches LocalStack anyway, with nobody left to hear the answer.
    wait_until("the held request to reach LocalStack", Duration::from_secs(60), || held() == 0);

    // Restarted on the same spool: it sends what the dead one had not been told was delivered.
    proxy.set_plan(Box::new(|_| Fault::Forward));
    let run = start(dest, &proxy.url(), &ns, &cluster, &spool, root.path());
    // Running (its SIGTERM handler in place) once it has flushed.
    wait_until("the restarted shipper's first flush", Duration::from_secs(60), || run.flushed() >= 1);
    wait_for_empty_spool(&dest.spool(&spool), Duration::from_secs(60));
    let second = run.stop();
    let got = dest.samples(&url, &ns, &cluster).await;
    let flushed = (first + second) as f64;
    eprintln!("flushed {flushed} samples over both runs; CloudWatch holds {got}");
    assert!(got >= flushed, "nothing flushed is lost: {got} < {flushed}");
    assert!(
        got <= flushed + per_flush_max as f64,
        "only the batch in flight is repeated: {got} > {flushed} + {per_flush_max}"
    );
}

#[ignore = "needs LocalStack: scripts/test.sh runs it"]
#[tokio::test]
async fn sigterm_while_cloudwatch_cannot_be_reached_exits_0_in_bounded_time_and_loses_nothing_cloudwatch() {
    sigterm_while_cloudwatch_cannot_be_reached_exits_0_in_bounded_time_and_loses_nothing(Dest::CloudWatch)
        .await;
}

#[ignore = "needs LocalStack: scripts/test.sh runs it"]
#[tokio::test]
async fn sigterm_while_cloudwatch_cannot_be_reached_exits_0_in_bounded_time_and_loses_nothing_emf() {
    sigterm_while_cloudwatch_cannot_be_reached_exits_0_in_bounded_time_and_loses_nothing(Dest::Emf).await;
}

async fn sigterm_while_cloudwatch_cannot_be_reached_exits_0_in_bounded_time_and_loses_nothing(dest: Dest) {
    let Some(url) = localstack() else { return };
    let (ns, cluster) = (unique_namespace("sigterm"), dest.cluster("sigterm"));
    dest.prepare(&url, &cluster).await;
    let root = fixture_root();
    let spool = root.path().join("spool");
    // Every request is held for longer than the attempt timeout: a flush is always in flight.
    let proxy = Proxy::start(upstream(&url), Box::new(|_| Fault::Hold(Duration::from_secs(30))));
    let run = start(dest, &proxy.url(), &ns, &cluster, &spool, root.path());
    let held = || proxy.counts.held.load(std::sync::atomic::Ordering::Relaxed);
    wait_until("a request in flight and two flushes spooled", Duration::from_secs(60), || {
        held() > 0 && spool_files(&dest.spool(&spool)) >= 2
    });
    let asked = Instant::now();
    let first = run.stop();
    let took = asked.elapsed();
    eprintln!(
        "SIGTERM during an outage: exited 0 after {took:?} with {} flushes spooled",
        spool_files(&dest.spool(&spool))
    );
    assert!(took < slurm_cw_shipper::app::SHUTDOWN_GRACE + Duration::from_secs(5), "bounded: {took:?}");
    assert!(spool_files(&dest.spool(&spool)) >= 2, "what was not delivered waits in the spool");

    // The next start delivers it.
    proxy.set_plan(Box::new(|_| Fault::Forward));
    let run = start(dest, &proxy.url(), &ns, &cluster, &spool, root.path());
    wait_for_empty_spool(&dest.spool(&spool), Duration::from_secs(60));
    let second = run.stop();
    // Held requests time out on the shipper's side but may still reach LocalStack later; wait
    // for the held ones to be released before counting.
    wait_until("the held requests to reach LocalStack", Duration::from_secs(120), || held() == 0);
    let got = dest.samples(&url, &ns, &cluster).await;
    assert!(got >= (first + second) as f64, "nothing flushed is lost: {got} < {first} + {second}");
}

#[ignore = "needs LocalStack: scripts/test.sh runs it"]
#[tokio::test]
async fn a_full_disk_under_the_spool_keeps_the_daemon_running_and_says_why_cloudwatch() {
    a_full_disk_under_the_spool_keeps_the_daemon_running_and_says_why(Dest::CloudWatch).await;
}

#[ignore = "needs LocalStack: scripts/test.sh runs it"]
#[tokio::test]
async fn a_full_disk_under_the_spool_keeps_the_daemon_running_and_says_why_emf() {
    a_full_disk_under_the_spool_keeps_the_daemon_running_and_says_why(Dest::Emf).await;
}

async fn a_full_disk_under_the_spool_keeps_the_daemon_running_and_says_why(dest: Dest) {
    let Some(url) = localstack() else { return };
    if unsafe { libc::geteuid() } != 0 {
        assert!(std::env::var("CI").is_err(), "CI runs as root to mount a small tmpfs");
        eprintln!("SKIPPED: mounting a small tmpfs needs root");
        return;
    }
    let (ns, cluster) = (unique_namespace("fulldisk"), dest.cluster("fulldisk"));
    dest.prepare(&url, &cluster).await;
    let root = fixture_root();
    let spool = root.path().join("spool");
    std::fs::create_dir_all(&spool).unwrap();
    cmd("mount", &["-t", "tmpfs", "-o", "size=64k", "tmpfs", &spool.display().to_string()]);
    struct Unmount(PathBuf);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = Command::new("umount").arg(&self.0).status();
        }
    }
    let _unmount = Unmount(spool.clone());
    // Fill it up.
    let filler = spool.join("filler");
    let _ = std::fs::write(&filler, vec![0u8; 128 << 10]);
    let run = start(dest, &url, &ns, &cluster, &spool, root.path());
    wait_until("the shipper to say what is wrong", Duration::from_secs(60), || {
        run.log_has("No space left on device")
    });
    assert!(run.child_alive(), "the daemon keeps running");
    // Room again: the spool takes data again.
    std::fs::remove_file(&filler).unwrap();
    wait_until("the spool to take data again", Duration::from_secs(60), || {
        run.log_has("the spool takes data again")
    });
    let flushed = run.stop();
    assert_eq!(
        dest.samples(&url, &ns, &cluster).await,
        flushed as f64,
        "held in memory meanwhile, all delivered"
    );
}

impl Run {
    fn child_alive(&self) -> bool {
        let pid = self.child_pid();
        std::path::Path::new(&format!("/proc/{pid}")).exists()
    }

    fn child_pid(&self) -> u32 {
        self.child.pid()
    }
}
