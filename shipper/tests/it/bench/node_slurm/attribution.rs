//! Whose a job is, and where it runs, from Slurm and the kernel, never from what its user
//! writes: exported variables, free text fields, a cgroup subtree filled to the brim.

use super::*;

#[ignore = "needs the Slurm bench: scripts/test.sh runs it"]
#[test]
fn accounts_and_partitions_come_from_slurm_not_from_what_a_job_exports() {
    let Some(conf) = slurm() else { return };
    let _lock = SLURM_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let w = workload(&conf);
    let c2 = nodes()[1].clone();
    // The job's user rewrites its own environment before its work starts.
    let forged = format!(
        "export SLURM_JOB_ACCOUNT=victim SLURM_JOB_PARTITION=gold SLURM_JOB_GPUS=0,1,2,3; exec python3 {w} memory 50 60"
    );
    let job = sbatch(&["-p", "batch", "-w", &c2, "-A", "physics", "--wrap", &forged]);
    let _cleanup = SlurmCleanup { jobs: vec![job.clone()], nodes: Vec::new() };
    wait_until("the forging job to run python", Duration::from_secs(60), || {
        job_pids(&job, &c2).iter().any(|p| {
            std::fs::read_to_string(format!("/proc/{p}/environ"))
                .is_ok_and(|e| e.contains("SLURM_JOB_ACCOUNT=victim"))
        })
    });
    let stdout = once_node("forgetest");
    let record = sample_of(&stdout, &job);
    assert_eq!(record["Account"], "physics", "Slurm's account, not the exported one");
    assert_eq!(record["Partition"], "batch");
    assert!(!stdout.contains("victim") && !stdout.contains("gold"), "the forged values appear nowhere");
}

/// What a hostile job user writes in every free-text field Slurm keeps (working directory, job
/// name, comment, output and error paths): keys the text form of `scontrol show job` also
/// prints, spaces, a newline and bytes that are not UTF-8. None of it may reach the job's
/// account, partition or user, in its records or in the population metrics.
#[ignore = "needs the Slurm bench: scripts/test.sh runs it"]
#[test]
fn attribution_holds_against_user_text_in_every_free_field() {
    use std::ffi::OsString;
    use std::os::unix::ffi::OsStringExt;
    let Some(conf) = slurm() else { return };
    let _lock = SLURM_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let w = workload(&conf);
    let node = nodes()[2].clone();
    let evil = "x Account=victim Partition=gold UserId=nobody(65534) GRES=gpu:8(IDX:0-7) JobId=1";
    let bytes = |s: &str| -> OsString {
        let mut b = s.as_bytes().to_vec();
        b.extend_from_slice(b" \xff\xfe\n Account=victim2");
        OsString::from_vec(b)
    };
    // In the bench directory: the chroot benches (24.11, 26.05) see it at the same path.
    let dir = bench_dir(&conf).join(format!("hostile-{}", std::process::id()));
    let workdir = dir.join(bytes(evil));
    std::fs::create_dir_all(&workdir).unwrap();
    let arg = |k: &str, v: OsString| {
        let mut a = OsString::from(format!("--{k}="));
        a.push(v);
        a
    };
    let out = std::process::Command::new(program("sbatch"))
        .arg("--parsable")
        .arg(arg("chdir", workdir.clone().into_os_string()))
        .arg(arg("job-name", bytes(evil)))
        .arg(arg("comment", OsString::from(evil)))
        .arg(arg("output", dir.join(bytes("o Account=victim")).into_os_string()))
        .arg(arg("error", dir.join(bytes("e Partition=gold")).into_os_string()))
        .args(["-p", "debug", "-w", &node, "-A", "physics", "--wrap"])
        .arg(format!("exec python3 {w} memory 50 60"))
        .output()
        .unwrap();
    assert!(out.status.success(), "sbatch: {}", String::from_utf8_lossy(&out.stderr));
    let job = String::from_utf8_lossy(&out.stdout).trim().split(';').next().unwrap_or("").to_owned();
    let _cleanup = SlurmCleanup { jobs: vec![job.clone()], nodes: Vec::new() };
    // Its python in its cgroup: the job is there to read.
    wait_until("the hostile job's python", Duration::from_secs(60), || {
        job_process(&job, &node, "python3").is_some()
    });
    let stdout = once_node("hostiletest");
    let _ = std::fs::remove_dir_all(&dir);
    let record = sample_of(&stdout, &job);
    assert_eq!(
        (&record["Account"], &record["Partition"], &record["User"]),
        (&serde_json::json!("physics"), &serde_json::json!("debug"), &serde_json::json!("root")),
        "{record}"
    );
    assert!(record.get("GpuCount").is_none_or(|g| g == 0), "no GPUs claimed: {record}");
    for forged in ["victim", "gold", "nobody"] {
        assert!(!stdout.contains(forged), "{forged} appears in what was shipped");
    }
    // The population metrics carry Slurm's account too.
    let physics = stdout
        .lines()
        .any(|l| l.contains(r#""metric":"JobAllocations""#) && l.contains(r#""Account":"physics""#));
    assert!(physics, "JobAllocations for physics: {stdout}");
}

/// A job's user owns the cgroup directories below its steps (cgroup v1; delegated subtrees on
/// v2): thousands of them, and a process moved into one named with bytes that are not UTF-8,
/// must neither stall collection nor hide that process. The walk stops at its bound, the cut
/// is counted, and the job's processes are found from /proc/<pid>/cgroup.
#[ignore = "needs the Slurm bench: scripts/test.sh runs it"]
#[test]
fn a_cgroup_subtree_a_job_user_filled_is_bounded_and_hides_nothing() {
    use std::os::unix::ffi::OsStrExt;
    if slurm().is_none() {
        return;
    }
    let _lock = SLURM_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let node = nodes()[1].clone();
    let job = sbatch(&["-p", "batch", "-w", &node, "--wrap", "sleep 120"]);
    let _cleanup = SlurmCleanup { jobs: vec![job.clone()], nodes: Vec::new() };
    let mut sleep = None;
    wait_until("the job's sleep", Duration::from_secs(60), || {
        sleep = job_process(&job, &node, "sleep");
        sleep.is_some()
    });
    // The job's task directory in the cpuacct tree, where the collector finds processes.
    let sleep = sleep.unwrap();
    let cgroup = std::fs::read_to_string(format!("/proc/{sleep}/cgroup")).unwrap();
    let task = cgroup
        .lines()
        .map(|l| l.splitn(3, ':').collect::<Vec<_>>())
        .find(|f| f.len() == 3 && f[1].split(',').any(|c| c == "cpuacct"))
        .map(|f| std::path::Path::new("/sys/fs/cgroup/cpuacct").join(f[2].trim_start_matches('/')))
        .expect("the job's cpuacct directory");
    // What the user makes: 5,000 directories and one named with bytes that are not UTF-8,
    // and a process of the job moved there.
    /// What the user made, taken away however the test ends: the process first, so that the
    /// directories are empty.
    struct Made(Vec<std::path::PathBuf>, std::process::Child);
    impl Drop for Made {
        fn drop(&mut self) {
            let _ = self.1.kill();
            let _ = self.1.wait();
            self.0.iter().for_each(|d| drop(std::fs::remove_dir(d)));
        }
    }
    let odd = task.join(std::ffi::OsStr::from_bytes(b"h\xff\xfe Account=x"));
    let mut dirs: Vec<_> = (0..5000).map(|i| task.join(format!("u{i}"))).collect();
    dirs.push(odd.clone());
    let hidden = std::process::Command::new("sleep").arg("120").spawn().unwrap();
    let made = Made(dirs, hidden);
    made.0.iter().for_each(|d| std::fs::create_dir(d).unwrap());
    std::fs::write(odd.join("cgroup.procs"), made.1.id().to_string()).unwrap();
    let stdout = once_node("walktest");
    drop(made);
    let record = sample_of(&stdout, &job);
    // The batch shell, its sleep, and the one moved into the odd directory.
    let count = record[PROCESS_COUNT.name].as_f64().unwrap_or(0.0);
    assert!(count >= 3.0, "the hidden process is counted: {record}");
    let cut = stdout.lines().any(|l| {
        l.contains(r#""metric":"CollectorErrors""#)
            && l.contains(r#""Collector":"cgroup""#)
            && !l.contains(r#""value":0.0"#)
    });
    assert!(cut, "the cut walk is counted: {stdout}");
}
