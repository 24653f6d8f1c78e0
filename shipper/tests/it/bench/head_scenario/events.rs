//! The head as things happen between its reads: jobs submitted, a node down in a maintenance
//! reservation, slurmctld stopped.

use super::*;

/// The jobs submitted a stdout line says: the Sum over its flush.
fn sum_of(line: &str, metric: &Metric) -> Option<f64> {
    // The job rates are in the head's scheduler_sample record (the dashboard reads them there).
    let v: serde_json::Value = serde_json::from_str(line).ok()?;
    v.get("record")?.get(metric.name)?.as_f64()
}

/// The head role as a daemon printing to stdout: a collection and a flush every second, each
/// Slurm command at most 3 s.
fn head_daemon() -> Running {
    shipper()
        .args(["--role", "head", "--sink", "stdout"])
        .env("SLURM_CW_COLLECT_INTERVAL", "1s")
        .env("SLURM_CW_FLUSH_INTERVAL", "1s")
        .env("SLURM_CW_SLURM__COMMAND_TIMEOUT", "3s")
        .env("SLURM_CW_DELIVERY__FLUSH_JITTER", "false")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map(Running::new)
        .unwrap()
}

#[ignore = "needs the Slurm bench: scripts/test.sh runs it"]
#[test]
fn jobs_submitted_between_reads_equal_the_sum_of_their_increases() {
    let Some(_conf) = slurm() else { return };
    let _lock = SLURM_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let mut child = head_daemon();
    let (tx, rx) = std::sync::mpsc::channel::<(bool, Option<f64>)>();
    let stdout = child.child().stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send((up_value(&line).is_some(), sum_of(&line, &JOBS_SUBMITTED_RATE)));
        }
    });
    // Two flushes with SlurmctldUp: sdiag has been read at least twice.
    let mut flushes = 0;
    while flushes < 2 {
        let (up, _) = rx.recv_timeout(Duration::from_secs(30)).expect("the shipper prints its flushes");
        flushes += usize::from(up);
    }
    // Three jobs submitted between reads: the increases sent from now on add up to three.
    let long = ["--wrap", "sleep 300", "-o", "/dev/null", "--hold"];
    let jobs: Vec<String> = (0..3).map(|_| sbatch(&long)).collect();
    let mut total = 0.0;
    let start = Instant::now();
    while total < 3.0 && start.elapsed() < Duration::from_secs(120) {
        if let Ok((_, Some(v))) = rx.recv_timeout(Duration::from_millis(200)) {
            total += v;
        }
    }
    // Two more flushes (sdiag read again): nothing else was submitted, so nothing more adds up.
    let mut more = 0;
    while more < 2 {
        let (up, v) = rx.recv_timeout(Duration::from_secs(60)).expect("the shipper prints its flushes");
        more += usize::from(up);
        total += v.unwrap_or(0.0);
    }
    for j in &jobs {
        cmd("scancel", &[j]);
    }
    assert_eq!(total, 3.0, "JobsSubmittedRate summed over the run: the jobs submitted");
}

/// Takes the maintenance reservation away and the node back up, however the test ends.
struct Maintenance {
    node: String,
}

impl Drop for Maintenance {
    fn drop(&mut self) {
        let _ = try_cmd("scontrol", &["delete", "reservationname=cw-test-maint"]);
        let _ = try_cmd("scontrol", &["update", &format!("nodename={}", self.node), "state=resume"]);
    }
}

#[ignore = "needs the Slurm bench: scripts/test.sh runs it"]
#[test]
fn a_node_down_in_a_maintenance_reservation_pages_no_one() {
    let Some(_conf) = slurm() else { return };
    let _lock = SLURM_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let node = nodes()[0].clone();
    let _undo = Maintenance { node: node.clone() };
    // (NodesDownUnplanned, NodeCount down) from one head cycle printed to stdout.
    let once = || {
        let out = shipper().args(["--once", "--role", "head", "--sink", "stdout"]).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let unplanned = text.lines().find_map(|l| cluster_value(l, &NODES_DOWN_UNPLANNED, |s| s.max));
        // At rest (the bench between tests) the count by state is in the head's record.
        let down = text
            .lines()
            .find_map(|l| datum_value(l, &NODE_COUNT, &[("State", "down")], |s| s.max))
            .or_else(|| {
                text.lines().find_map(|l| {
                    let v: serde_json::Value = serde_json::from_str(l).ok()?;
                    v["record"][NODE_COUNT.name]["down"].as_f64()
                })
            });
        (unplanned, down)
    };
    cmd("scontrol", &["update", &format!("nodename={node}"), "state=down", "reason=cw-test-maint"]);
    wait_until("the node down", Duration::from_secs(30), || {
        cmd("sinfo", &["-h", "-n", &node, "-o", "%T"]).trim().starts_with("down")
    });
    assert_eq!(once(), (Some(1.0), Some(1.0)), "down, unplanned: the alarm's figure");
    cmd(
        "scontrol",
        &[
            "create",
            "reservation",
            "reservationname=cw-test-maint",
            "starttime=now",
            "duration=10",
            &format!("nodes={node}"),
            "users=root",
            "flags=maint,ignore_jobs",
        ],
    );
    wait_until("sinfo shows down$", Duration::from_secs(30), || {
        cmd("sinfo", &["-h", "-n", &node, "-o", "%T"]).trim().starts_with("down$")
    });
    assert_eq!(once(), (Some(0.0), Some(1.0)), "down in maintenance: still down, but planned");
}

/// Whether a SlurmctldUp datum line says slurmctld was down at least once in its window.
fn up_value(line: &str) -> Option<f64> {
    cluster_value(line, &SLURMCTLD_UP, |s| s.min)
}

#[ignore = "needs the Slurm bench: scripts/test.sh runs it"]
#[test]
fn slurmctld_stopped_ships_up_0_within_a_cycle_and_the_daemon_carries_on() {
    let Some(conf) = slurm() else { return };
    let _lock = SLURM_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let pidfile = bench_dir(&conf).join("run/slurmctld.pid");
    let mut child = head_daemon();
    let (tx, rx) = std::sync::mpsc::channel::<f64>();
    let stdout = child.child().stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Some(v) = up_value(&line) {
                let _ = tx.send(v);
            }
        }
    });
    let next_up = |limit: Duration, want: f64| {
        let start = Instant::now();
        while start.elapsed() < limit {
            if let Ok(v) = rx.recv_timeout(Duration::from_millis(200))
                && v == want
            {
                return start.elapsed();
            }
        }
        panic!("no SlurmctldUp={want} within {limit:?}");
    };
    next_up(Duration::from_secs(60), 1.0);

    let pid = std::fs::read_to_string(&pidfile).unwrap().trim().to_owned();
    cmd("kill", &[&pid]);
    // Gone, or a zombie (where PID 1 is slow to reap, as in some sandboxes).
    wait_until("slurmctld to exit", Duration::from_secs(30), || {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .map_or(true, |s| s.rsplit(')').next().is_some_and(|rest| rest.trim_start().starts_with('Z')))
    });
    // One cycle: a collection (up to the 3 s command limit) and the next 1 s flush, with room
    // for a loaded machine.
    let took = next_up(Duration::from_secs(20), 0.0);
    eprintln!("SlurmctldUp=0 shipped {took:?} after slurmctld stopped");
    assert!(child.child().try_wait().unwrap().is_none(), "the shipper keeps running");

    // Restart it with its saved state (no -c), as systemd would.
    cmd("slurmctld", &[]);
    next_up(Duration::from_secs(60), 1.0);
    assert!(child.child().try_wait().unwrap().is_none(), "the shipper still runs");
}
