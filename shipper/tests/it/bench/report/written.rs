//! Records written by hand: a two-node job, the answers when there is nothing to read, and
//! who may read whose jobs.

use super::*;

/// A summary as the shipper writes it (transforms/jobs.rs `summary`).
fn summary(job: &str, node: &str, cpu: f64, cores: f64, elapsed: f64, peak: f64, req: f64) -> Value {
    let mut m = serde_json::Map::new();
    let now = now_rfc3339();
    for (f, v) in [
        (&r::TYPE, json!(kinds::JOB_SUMMARY)),
        (&r::RECORD_ID, json!(format!("{node}:{job}:summary"))),
        (&r::TIME, json!(now)),
        (&r::NODE_NAME, json!(node)),
        (&r::JOB_ID, json!(job)),
        (&r::USER, json!("alice")),
        (&r::ACCOUNT, json!("physics")),
        (&r::PARTITION, json!("batch")),
        (&r::SAMPLES, json!(10)),
        (&r::ELAPSED_SECONDS, json!(elapsed)),
        (&r::CPU_SECONDS, json!(cpu)),
        (&r::CORES_ALLOCATED, json!(cores)),
        (&r::CPU_EFFICIENCY, json!(cpu / (cores * elapsed) * 100.0)),
        (&r::MEMORY_PEAK, json!(peak)),
        (&r::MEMORY_REQUESTED, json!(req)),
        (&r::MEMORY_PEAK_PERCENT, json!(peak / req * 100.0)),
        (&r::FIRST_SEEN, json!(now)),
        (&r::LAST_SEEN, json!(now)),
        (&r::ENDED_BY, json!("cgroup_gone")),
    ] {
        m.insert(f.name.into(), v);
    }
    Value::Object(m)
}

async fn put(logs: &aws_sdk_cloudwatchlogs::Client, group: &str, stream: &str, rec: &Value) {
    logs.create_log_stream()
        .log_group_name(group)
        .log_stream_name(stream)
        .send()
        .await
        .expect("CreateLogStream");
    let ms = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default().as_millis() as i64;
    let event = aws_sdk_cloudwatchlogs::types::InputLogEvent::builder()
        .timestamp(ms)
        .message(rec.to_string())
        .build()
        .expect("an event");
    logs.put_log_events()
        .log_group_name(group)
        .log_stream_name(stream)
        .log_events(event)
        .send()
        .await
        .expect("PutLogEvents");
}

#[ignore = "needs LocalStack: scripts/test.sh runs it"]
#[tokio::test]
async fn a_two_node_job_adds_up_and_json_reads_back_field_by_field() {
    let Some(url) = localstack() else {
        return;
    };
    let logs = logs(&url).await;
    let group = job_log_group(&logs, "report-two").await;
    // No Slurm job has this id (past Slurm's largest), so the records alone speak.
    let job = "99999999";
    let a = summary(job, "c1", 3000.0, 8.0, 1000.0, 3.1 * GIB, 64.0 * GIB);
    let b = summary(job, "c2", 1000.0, 8.0, 1000.0, 5.0 * GIB, 64.0 * GIB);
    put(&logs, &group, "c1", &a).await;
    put(&logs, &group, "c2", &b).await;
    // Another job's record in the same group stays out.
    put(&logs, &group, "c3", &summary("9999999", "c3", 1.0, 1.0, 1.0, 1.0, 2.0)).await;
    let mut rep = Value::Null;
    for _ in 0..20 {
        rep = json_report(&url, &group, job);
        if rep["records"] == json!(2) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    eprintln!("{rep:#}");
    assert_eq!(rep["job_id"], json!(job));
    assert_eq!(rep["log_group"], json!(group));
    assert_eq!(rep["cluster"], json!("reporttest"));
    assert_eq!(rep["records"], json!(2));
    assert_eq!(
        (rep["user"].as_str(), rep["account"].as_str(), rep["partition"].as_str()),
        (Some("alice"), Some("physics"), Some("batch"))
    );
    assert_eq!(rep["nodes"], json!("c1,c2"));
    assert_eq!(rep["incomplete"], json!(false));
    assert_eq!(rep["cpu_seconds"], json!(4000.0), "sum of CPU-seconds");
    assert_eq!(rep["cores_allocated"], json!(16.0));
    assert_eq!(rep["cpu_efficiency_percent"], json!(25.0), "4000 / (16 x 1000)");
    assert_eq!(rep["memory_peak_bytes"], json!(5.0 * GIB), "max of peaks");
    assert_eq!(rep["memory_requested_bytes"], json!(64.0 * GIB));
    assert_eq!(rep["elapsed_seconds"], json!(1000.0));
    let rows = rep["per_node"].as_array().expect("per_node");
    assert_eq!(rows.len(), 2);
    for (row, (node, cpu, peak)) in rows.iter().zip([("c1", 3000.0, 3.1 * GIB), ("c2", 1000.0, 5.0 * GIB)]) {
        assert_eq!(row["node"], json!(node));
        assert_eq!(row["source"], json!(kinds::JOB_SUMMARY));
        assert_eq!(row["samples"], json!(10.0));
        assert_eq!(row["elapsed_seconds"], json!(1000.0));
        assert_eq!(row["cpu_seconds"], json!(cpu));
        assert_eq!(row["cores_allocated"], json!(8.0));
        assert_eq!(row["cpu_efficiency_percent"], json!(cpu / 8000.0 * 100.0));
        assert_eq!(row["memory_peak_bytes"], json!(peak));
        assert_eq!(row["memory_requested_bytes"], json!(64.0 * GIB));
        assert_eq!((row["gpus"].clone(), row["gpu_idle_percent"].clone()), (Value::Null, Value::Null));
    }
    assert_eq!(rep["gpus"], json!([]));
    let advice: Vec<&str> =
        rep["advice"].as_array().expect("advice").iter().filter_map(Value::as_str).collect();
    assert_eq!(
        advice,
        [
            "peak memory 5.0 GiB of 64.0 GiB requested: `--mem=6G` would do",
            "CPU efficiency 25% of 8 cores: try `-c 2`"
        ]
    );
}

#[ignore = "needs LocalStack: scripts/test.sh runs it"]
#[tokio::test]
async fn no_records_missing_group_and_bad_arguments() {
    let Some(url) = localstack() else {
        return;
    };
    let logs = logs(&url).await;
    let group = job_log_group(&logs, "report-empty").await;
    let (code, out, err) = report(&url, &group, &["99999998"]);
    assert_eq!((code, out.as_str()), (Some(1), ""), "{err}");
    assert!(
        err.contains("no records of job 99999998")
            && err.contains("collection interval")
            && err.contains("--cluster"),
        "{err}"
    );

    let missing = format!("/slurm-cw/{}/jobs", unique_namespace("absent").replace('/', "-"));
    let (code, _, err) = report(&url, &missing, &["99999998", "--json"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("does not exist") && err.contains(&missing), "{err}");

    for bad in [&["abc"][..], &[][..], &["1", "--bogus"][..]] {
        let (code, _, err) = report(&url, &group, bad);
        assert_eq!(code, Some(2), "{bad:?}: {err}");
    }
}

/// `report ARGS` run as `uid` (a copy of the binary it can reach, its own HOME), with `env`.
fn report_as(
    uid: u32,
    url: &str,
    group: &str,
    args: &[&str],
    env: &[(&str, &str)],
) -> (Option<i32>, String, String) {
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::process::CommandExt;
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let bin = dir.path().join("slurm-cw-shipper");
    std::fs::copy(env!("CARGO_BIN_EXE_slurm-cw-shipper"), &bin).unwrap();
    let mut cmd = std::process::Command::new(&bin);
    cmd.arg("report")
        .args(args)
        .envs(shipper_env(url, "SlurmTest/report"))
        .envs(env.iter().copied())
        .env("HOME", dir.path())
        .env("SLURM_CW_LOGS__GROUP", group)
        .env("SLURM_CW_CLUSTER_NAME", "reporttest")
        .uid(uid)
        .gid(uid);
    let out = past_etxtbsy(|| cmd.output()).expect("run the shipper as another user");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A user of the passwd database with an ordinary uid: (uid, name).
fn some_user() -> Option<(u32, String)> {
    let out = std::process::Command::new("getent").arg("passwd").output().ok()?;
    String::from_utf8_lossy(&out.stdout).lines().find_map(|l| {
        let f: Vec<&str> = l.split(':').collect();
        let uid: u32 = f.get(2)?.parse().ok()?;
        (1000..65534).contains(&uid).then(|| (uid, f[0].to_owned()))
    })
}

#[ignore = "needs LocalStack: scripts/test.sh runs it"]
#[tokio::test]
async fn a_user_reads_their_own_jobs_only_unless_configured() {
    let Some(url) = localstack() else {
        return;
    };
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("SKIPPED: needs root (to run report as other users)");
        return;
    }
    // A user the host knows (the job's user is named), and one it does not (named by uid).
    let named = some_user();
    let logs = logs(&url).await;
    let group = job_log_group(&logs, "report-access").await;
    let mut alices = summary("99999990", "c1", 100.0, 1.0, 100.0, GIB, 2.0 * GIB);
    put(&logs, &group, "c1", &alices).await;
    let mut own = alices.clone();
    own[r::JOB_ID.name] = json!("99999991");
    own[r::USER.name] = json!("4242");
    put(&logs, &group, "c2", &own).await;
    if let Some((_, name)) = &named {
        alices[r::JOB_ID.name] = json!("99999992");
        alices[r::USER.name] = json!(name);
        put(&logs, &group, "c3", &alices).await;
    }
    // Records are searchable a little after they are put: root sees them all first.
    for job in ["99999990", "99999991"] {
        wait_until(&format!("job {job}'s record"), Duration::from_secs(20), || {
            report(&url, &group, &[job, "--json"]).0 == Some(0)
        });
    }

    // Another user's job: refused, saying whose and how to open it; no report printed.
    let (code, out, err) = report_as(4242, &url, &group, &["99999990"], &[]);
    assert_eq!((code, out.as_str()), (Some(1), ""), "{err}");
    assert!(err.contains("alice's") && err.contains("logs.report_all_users"), "{err}");
    // The caller's own (the records name it by uid): shown.
    let (code, out, err) = report_as(4242, &url, &group, &["99999991", "--json"], &[]);
    assert_eq!(code, Some(0), "{err}");
    let rep: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(rep["user"], json!("4242"));
    // Configured to show everyone's.
    let all = [("SLURM_CW_LOGS__REPORT_ALL_USERS", "true")];
    let (code, out, err) = report_as(4242, &url, &group, &["99999990", "--json"], &all);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(serde_json::from_str::<Value>(&out).unwrap()["user"], json!("alice"));
    // A named user's own job, by name.
    if let Some((uid, name)) = named {
        wait_until("the named user's record", Duration::from_secs(20), || {
            report(&url, &group, &["99999992", "--json"]).0 == Some(0)
        });
        let (code, out, err) = report_as(uid, &url, &group, &["99999992", "--json"], &[]);
        assert_eq!(code, Some(0), "{name}: {err}");
        assert_eq!(serde_json::from_str::<Value>(&out).unwrap()["user"], json!(name));
    }
}
