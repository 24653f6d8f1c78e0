//! `slurm-cw-shipper --once --role head` against the real Slurm and LocalStack: what lands in
//! CloudWatch equals what sinfo says.

use crate::common;

use common::*;
use slurm_cw_catalog::metrics::{NODE_COUNT, SLURMCTLD_UP};
use std::collections::BTreeMap;
use std::time::Duration;

/// Each node once, by its long state as sinfo prints it (`drained`, `idle`, `mixed`...).
fn node_states() -> BTreeMap<String, f64> {
    let mut seen = std::collections::HashSet::new();
    let mut counts = BTreeMap::new();
    for line in cmd("sinfo", &["-h", "-N", "-o", "%N %T"]).lines() {
        let mut f = line.split_whitespace();
        let (Some(node), Some(state)) = (f.next(), f.next()) else {
            continue;
        };
        if seen.insert(node.to_owned()) {
            let state = state.trim_end_matches(['*', '~', '#', '!', '%', '$', '@', '^', '-']);
            *counts.entry(state.to_lowercase()).or_insert(0.0) += 1.0;
        }
    }
    counts
}

pub fn cluster_name() -> String {
    cmd("scontrol", &["show", "config"])
        .lines()
        .find_map(|l| l.strip_prefix("ClusterName"))
        .and_then(|rest| rest.split('=').nth(1))
        .map(|v| v.trim().to_owned())
        .expect("ClusterName in scontrol show config")
}

#[ignore = "needs LocalStack and the Slurm bench: scripts/test.sh runs it"]
#[tokio::test]
async fn once_head_ships_node_counts_equal_to_sinfo() {
    let (Some(url), Some(_)) = (localstack(), slurm()) else {
        return;
    };
    // The Slurm that answers is the one the bench says it runs (22.05, or 24.11 in its chroot).
    let (major, minor) = slurm_version();
    let version = cmd("sinfo", &["--version"]);
    assert!(
        version.contains(&format!(" {major}.{minor:02}.")),
        "BENCH_SLURM_VERSION {major}.{minor:02}: {version}"
    );
    let ns = unique_namespace("head_once");
    let cluster = cluster_name();
    let before = node_states();
    let jobs_before = cmd("squeue", &["-h", "-t", "PD,R,S,CG", "-o", "%i"]);
    // The scheduler's detail goes to the job log group, as the Terraform module makes it.
    let logs = logs(&url).await;
    let group = job_log_group(&logs, "head_once").await;
    let out = shipper()
        .args(["--once", "--role", "head"])
        .envs(shipper_env(&url, &ns))
        .env("SLURM_CW_LOGS__GROUP", &group)
        .output()
        .unwrap();
    assert!(out.status.success(), "shipper failed: {}", String::from_utf8_lossy(&out.stderr));
    let after = node_states();
    assert_eq!(before, after, "node states changed while the test ran; run it again");
    assert!(!before.is_empty());
    let jobs_after = cmd("squeue", &["-h", "-t", "PD,R,S,CG", "-o", "%i"]);
    assert_eq!(jobs_before, jobs_after, "jobs came or went while the test ran; run it again");

    let cw = cloudwatch(&url).await;
    let window = Duration::from_secs(600);
    // At rest (no job waiting or under way, no node with work: the bench between tests), the
    // head sends what the default alarms watch and the rest in its scheduler_sample record.
    let busy = ["allocated", "mixed", "completing", "draining", "powering_up"];
    let at_rest = jobs_before.trim().is_empty() && !before.keys().any(|s| busy.contains(&s.as_str()));
    if at_rest {
        let sched = records(&logs, &group, &[("Type", "scheduler_sample")]).await;
        let record = sched.first().expect("a scheduler_sample at rest");
        for (state, n) in &before {
            let sets = dimension_sets(&cw, &ns, NODE_COUNT.name).await;
            let exact =
                vec![("ClusterName".to_owned(), cluster.clone()), ("State".to_owned(), state.clone())];
            if state != "drained" {
                assert!(!sets.contains(&exact), "at rest NodeCount State={state} is no metric: {sets:?}");
            }
            assert_eq!(
                record["NodeCount"][state.as_str()].as_f64(),
                Some(*n),
                "NodeCount State={state}: {record}"
            );
        }
        let drained = statistic(
            &cw,
            &ns,
            NODE_COUNT.name,
            &[("ClusterName", &cluster), ("State", "drained")],
            "Maximum",
            window,
        )
        .await;
        assert_eq!(drained, Some(before.get("drained").copied().unwrap_or(0.0)), "an alarm watches it");
        let up =
            statistic(&cw, &ns, SLURMCTLD_UP.name, &[("ClusterName", &cluster)], "Minimum", window).await;
        assert_eq!(up, Some(1.0), "an alarm watches it");
        return;
    }
    // At work: each state in the record (the dashboard's chart by state reads it there); a
    // metric too where an alarm watches it or a metric chart draws it (drained, draining).
    let sched = records(&logs, &group, &[("Type", "scheduler_sample")]).await;
    let record = sched.first().expect("a scheduler_sample");
    for (state, n) in &before {
        let got = statistic(
            &cw,
            &ns,
            NODE_COUNT.name,
            &[("ClusterName", &cluster), ("State", state)],
            "Maximum",
            window,
        )
        .await;
        let metric = !slurm_cw_catalog::views::state_in_record_only(&NODE_COUNT, state);
        assert_eq!(got, metric.then_some(*n), "NodeCount State={state}");
        assert_eq!(
            record["NodeCount"][state.as_str()].as_f64(),
            Some(*n),
            "NodeCount State={state}: {record}"
        );
    }
    // A state no node is in: the one an alarm watches (drained) is shipped as 0, so the alarm
    // sees a value, not a gap; the others are left out (zeros nobody watches are billed too).
    for state in
        ["allocated", "mixed", "idle", "down", "drained"].into_iter().filter(|s| !before.contains_key(*s))
    {
        let got = statistic(
            &cw,
            &ns,
            NODE_COUNT.name,
            &[("ClusterName", &cluster), ("State", state)],
            "Maximum",
            window,
        )
        .await;
        let want = (state == "drained").then_some(0.0);
        assert_eq!(got, want, "NodeCount State={state}");
    }
    let up = statistic(&cw, &ns, SLURMCTLD_UP.name, &[("ClusterName", &cluster)], "Minimum", window).await;
    assert_eq!(up, Some(1.0));
}

#[test]
fn once_fails_with_a_one_line_reason_when_cloudwatch_is_unreachable() {
    // 127.0.0.1:9 (discard) refuses connections: a network error on every attempt.
    let dir = tempfile::tempdir().unwrap();
    let out = shipper()
        .args(["--once", "--role", "node"])
        .envs(shipper_env("http://127.0.0.1:9", "SlurmTest/unreachable"))
        .env("SLURM_CW_CLUSTER_NAME", "t")
        .env("SLURM_CW_CLOUDWATCH__ENDPOINT", "http://127.0.0.1:9")
        .env("SLURM_CW_NODE__CGROUP_ROOT", dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let last = stderr.lines().last().unwrap_or("");
    assert!(last.starts_with("slurm-cw-shipper: ") && last.contains("kept in the spool"), "{stderr}");
}

#[test]
fn bad_configuration_exits_2_and_names_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("c.toml");
    std::fs::write(&cfg, "cluster_name = \"x\"\n[cloudwatch]\nmax_retry = 3\n").unwrap();
    let out = shipper().args(["--once", "--config"]).arg(&cfg).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("max_retry") && stderr.contains("c.toml"), "{stderr}");

    let out = shipper().args(["--once", "--role", "nonsense"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "clap's own errors exit 2 too");

    let out = shipper().args(["--once", "--config", "/nonexistent/c.toml"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
}
