//! Several users flooding the hook at once: each abuser is this test binary run again as
//! that user (`flood_child`); the honest user must still get its samples.

use super::*;

/// The abusing users; 2001 runs job 1002. Any uid works with setuid: none need exist.
const ABUSERS: [u32; 4] = [2001, 2002, 2003, 2004];
const RUNNING_JOB_USER: u32 = 2001;
/// Threads per abuser, each asking as fast as answers come.
const FLOOD_THREADS: usize = 6;
/// Final samples the honest user asks for during the flood (its job's tasks ending).
const HONEST_TRIES: usize = 4;

/// Not a test of its own: the flood of one abusing user, when the test below runs this binary
/// as that user (HOOK_ABUSE_FLOOD = "socket seconds"). Prints its answers, by what it asked
/// for and what it was told, as one JSON line.
#[test]
fn flood_child() {
    let Ok(spec) = std::env::var("HOOK_ABUSE_FLOOD") else { return };
    let (socket, secs) = spec.rsplit_once(' ').unwrap();
    let (socket, until) =
        (PathBuf::from(socket), Instant::now() + Duration::from_secs(secs.parse().unwrap()));
    let counts: Arc<Mutex<std::collections::BTreeMap<String, usize>>> = Arc::default();
    std::thread::scope(|s| {
        for thread in 0..FLOOD_THREADS {
            let (socket, counts) = (&socket, counts.clone());
            s.spawn(move || {
                let mut n = 0u64;
                while Instant::now() < until {
                    n += 1;
                    // Unknown ids, a new one each time, and the running job 1002.
                    let (what, job) = if thread % 2 == 0 {
                        ("unknown", format!("77{thread}{n}"))
                    } else {
                        ("1002", "1002".into())
                    };
                    let a = ask(socket, &job);
                    *counts.lock().unwrap().entry(format!("{what} {a}")).or_default() += 1;
                }
            });
        }
    });
    println!("FLOOD {}", serde_json::to_string(&*counts.lock().unwrap()).unwrap());
}

/// Job 1002: job 1001's cgroup and processes again, under other pids, owned by `uid`.
fn add_running_job(cg: &Path, proc: &Path, uid: u32) {
    let scope = cg.join("system.slice/slurmstepd.scope");
    copy_tree(&scope.join("job_1001"), &scope.join("job_1002"));
    let moved = |pid: &str| (pid.trim().parse::<u32>().unwrap() + 1000).to_string();
    let mut dirs = vec![scope.join("job_1002")];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.file_name().is_some_and(|n| n == "cgroup.procs") {
                let pids: Vec<String> = std::fs::read_to_string(&p)
                    .unwrap()
                    .lines()
                    .filter(|l| !l.is_empty())
                    .map(moved)
                    .collect();
                std::fs::write(&p, pids.join("\n") + "\n").unwrap();
            }
        }
    }
    for e in std::fs::read_dir(fixtures().join("proc/slurm-job-1001")).unwrap() {
        let e = e.unwrap();
        let name = e.file_name().to_string_lossy().into_owned();
        let Ok(pid) = name.parse::<u32>() else { continue };
        let to = proc.join((pid + 1000).to_string());
        copy_tree(&e.path(), &to);
        let status = std::fs::read_to_string(to.join("status")).unwrap();
        if status.contains("Uid:\t1000") {
            let owned = status
                .replace("Uid:\t1000\t1000\t1000\t1000", &format!("Uid:\t{uid}\t{uid}\t{uid}\t{uid}"))
                .replace("Gid:\t1000\t1000\t1000\t1000", &format!("Gid:\t{uid}\t{uid}\t{uid}\t{uid}"));
            std::fs::write(to.join("status"), owned).unwrap();
        }
    }
}

/// The job records on the daemon's standard output: (Type, JobId, EndedBy).
fn records(lines: &[(Instant, String)]) -> Vec<(String, String, String)> {
    let mut out = Vec::new();
    for (_, line) in lines {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else { continue };
        let Some(r) = v.get("record") else { continue };
        let r = match r.as_str() {
            Some(s) => serde_json::from_str(s).unwrap_or_default(),
            None => r.clone(),
        };
        let field = |k: &str| r.get(k).and_then(|v| v.as_str()).unwrap_or_default().to_owned();
        out.push((field("Type"), field("JobId"), field("EndedBy")));
    }
    out
}

#[test]
fn several_users_flooding_leave_the_honest_user_its_samples_and_write_one_summary_a_job() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("SKIPPED: needs root (to run the hook as other users)");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let (cg, proc) = (tmp.path().join("cg"), tmp.path().join("proc"));
    copy_tree(&fixtures().join("cgroup/v2-kernel-docs"), &cg);
    copy_tree(&fixtures().join("proc/slurm-job-1001"), &proc);
    add_running_job(&cg, &proc, RUNNING_JOB_USER);
    let me = common::exe_for_others(tmp.path());
    let socket = tmp.path().join("hook.sock");

    let mut cmd = shipper();
    cmd.args(["--role", "node", "--sink", "stdout"])
        .env("SLURM_CW_CLUSTER_NAME", "hook-fair")
        .env("SLURM_CW_COLLECT_INTERVAL", "1s")
        .env("SLURM_CW_FLUSH_INTERVAL", "2s")
        .env("SLURM_CW_CLOUDWATCH__FLUSH_JITTER", "false")
        .env("SLURM_CW_NODE__CGROUP_ROOT", &cg)
        .env("SLURM_CW_NODE__PROC_ROOT", &proc)
        .env("SLURM_CW_NODE__HOOK_SOCKET", &socket)
        .env("SLURM_CW_GPU__ENABLED", "off")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = Running::new(cmd.spawn().unwrap());
    let stdout = read_lines(child.child().stdout.take().unwrap());
    let stderr = read_lines(child.child().stderr.take().unwrap());
    common::wait_until("the hook socket", Duration::from_secs(10), || socket.exists());
    // Both jobs known before the flood: a collection's samples of each.
    common::wait_until("samples of jobs 1001 and 1002", Duration::from_secs(20), || {
        let recs = records(&stdout.lock().unwrap());
        ["1001", "1002"].iter().all(|j| recs.iter().any(|(t, id, _)| t == "job_sample" && id == j))
    });

    let flood_secs = 3 * HONEST_TRIES as u64 + 3;
    let started = Instant::now();
    let floods: Vec<std::process::Child> = ABUSERS
        .iter()
        .map(|uid| {
            std::process::Command::new(&me)
                .args(["hook_abuse::many_users::flood_child", "--exact", "--nocapture", "--test-threads=1"])
                .env("HOOK_ABUSE_FLOOD", format!("{} {flood_secs}", socket.display()))
                .uid(*uid)
                .gid(*uid)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    // The flood under way: every abuser has been answered.
    std::thread::sleep(Duration::from_secs(2));
    // The honest user's job ends task by task; a second apart at least (one final sample a
    // second per job).
    let mut honest = Vec::new();
    for _ in 0..HONEST_TRIES {
        honest.push(epilog_as_job_user(&socket, "1001"));
        std::thread::sleep(Duration::from_millis(1200));
    }
    let mut answers = std::collections::BTreeMap::<String, usize>::new();
    for f in floods {
        let out = f.wait_with_output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        let line =
            text.lines().find_map(|l| l.split_once("FLOOD ").map(|(_, counts)| counts)).unwrap_or_else(
                || panic!("no counts from a flood: {text}\n{}", String::from_utf8_lossy(&out.stderr)),
            );
        let counts: std::collections::BTreeMap<String, usize> = serde_json::from_str(line).unwrap();
        for (k, n) in counts {
            *answers.entry(k).or_default() += n;
        }
    }
    let flood_took = started.elapsed();
    // The honest job ends: its cgroup goes, and the next collection writes its last summary.
    std::fs::remove_dir_all(cg.join("system.slice/slurmstepd.scope/job_1001")).unwrap();
    common::wait_until("job 1001's last summary", Duration::from_secs(20), || {
        records(&stdout.lock().unwrap())
            .iter()
            .any(|(t, id, by)| t == "job_summary" && id == "1001" && by == "cgroup_gone")
    });
    let out = child.stop();
    assert!(out.status.success());

    let recs = records(&stdout.lock().unwrap());
    let summaries = |job: &str| -> Vec<String> {
        recs.iter()
            .filter(|(t, id, _)| t == "job_summary" && id == job)
            .map(|(_, _, by)| by.clone())
            .collect()
    };
    let total: usize = answers.values().sum();
    let err: Vec<String> = stderr.lock().unwrap().iter().map(|(_, l)| l.clone()).collect();
    eprintln!("flood of {} uids: {total} requests in {flood_took:?}: {answers:?}", ABUSERS.len());
    eprintln!("honest user's hooks: {honest:?}");
    eprintln!("summaries: 1001 {:?}, 1002 {:?}", summaries("1001"), summaries("1002"));
    eprintln!("daemon stderr ({} lines):\n{}", err.len(), err.join("\n"));

    let n = |k: &str| answers.get(k).copied().unwrap_or(0);
    assert!(total >= 1000, "a flood: {answers:?}");
    // Job 1002's user had its running job sampled, again and again; others were denied it.
    assert!(n("1002 ok 1") >= 2, "{answers:?}");
    assert!(n("1002 denied") >= 1, "{answers:?}");
    // Unknown ids: each answered `denied` cost one listing of the jobs, at most one per
    // LOOKUP_EVERY; the rest were told to ask again.
    let listings = n("unknown denied");
    let bound = flood_took.as_secs_f64() / slurm_cw_shipper::sources::node::LOOKUP_EVERY.as_secs_f64() + 1.0;
    assert!(listings >= 1 && listings as f64 <= bound, "{listings} listings, bound {bound}: {answers:?}");
    let unknown: usize = answers.iter().filter(|(k, _)| k.starts_with("unknown ")).map(|(_, n)| n).sum();
    assert_eq!(unknown, listings + n("unknown busy") + n("unknown too-many"), "{answers:?}");
    // The honest user: every final sample, within the hook's 3 s (the hook said nothing).
    let served = honest.iter().filter(|(_, said)| said.is_empty()).count();
    assert_eq!(served, HONEST_TRIES, "{honest:?}");
    // One summary for the flooded running job; for the honest job, its first final sample's
    // and its end's.
    assert_eq!(summaries("1002"), ["task_epilog"]);
    assert_eq!(summaries("1001"), ["task_epilog", "cgroup_gone"]);
}
