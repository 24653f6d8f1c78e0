//! Job findings against LocalStack: a node's `job_finding` records (PutLogEvents, as a shipper
//! writes them) reach the SNS topic once each across consecutive runs, each in the run whose
//! window holds its event time, a late one within the allowance included; a failed stage (no log group, a topic that refuses) leaves alarm upkeep
//! and the rates running, and the next good run notifies what was missed.

mod common;

use common::*;
use slurm_cw_catalog::alarms::default_rules;
use slurm_cw_catalog::metrics::{CLUSTER_CPU_EFFICIENCY, JOB_CORES_ALLOCATED, JOB_CORES_USED};
use slurm_cw_lambda::config::Config;
use slurm_cw_lambda::findings::{CURSOR_STREAM, Cursor};
use slurm_cw_lambda::handler::{Summary, handle, run};
use std::collections::BTreeSet;
use std::time::Duration;

fn cfg(ns: &str, cluster: &str, topic: &str, extra: &str) -> Config {
    Config::from_json(&format!(
        r#"{{"namespace": "{ns}", "cluster_name": "{cluster}", "sns_topic_arn": "{topic}"{extra}}}"#
    ))
    .unwrap()
}

fn ids(s: &Summary) -> BTreeSet<String> {
    s.findings.iter().map(|f| f.record_id.clone()).collect()
}

fn set(ids: &[&str]) -> BTreeSet<String> {
    ids.iter().map(|s| (*s).to_owned()).collect()
}

/// Jobs named in notices, each as often as it is named.
fn jobs_in(notices: &[String]) -> Vec<String> {
    let mut out: Vec<String> = notices
        .iter()
        .flat_map(|n| {
            n.lines().filter_map(|l| l.strip_prefix("- job ")?.split(' ').next().map(str::to_owned))
        })
        .collect();
    out.sort();
    out
}

#[ignore = "needs LocalStack: scripts/test.sh runs it"]
#[tokio::test]
async fn findings_are_notified_once_across_runs_late_ones_within_the_allowance_too() {
    let Some(url) = localstack() else { return };
    let (ns, cluster) = (unique("FindingsTest"), unique("c"));
    let clients = clients(&url).await;
    let group = job_group(&clients, &cluster).await;
    let (topic, sqs, q) = subscribed_topic(&url, &clients, "findings").await;
    let cfg = cfg(&ns, &cluster, &topic, "");
    let at = minute_ago(20);
    let ms = |secs: i64| secs * 1000;

    // Before the first run, which has no cursor and reads the minute before `at`: findings A
    // (delivered twice: same RecordId) and B from two nodes, a sample (not a finding), and a
    // finding from long before (outside every window the runs read).
    put_records(
        &clients.logs,
        &group,
        "n1",
        &[
            finding("A", "101", "n1", "idle_gpu", ms(at - 30)),
            finding("A", "101", "n1", "idle_gpu", ms(at - 29)),
            sample("s1", "101", "n1", ms(at - 25)),
            finding("OLD", "100", "n1", "idle_gpu", ms(at - 15 * 60)),
        ],
    )
    .await;
    // D, already there, lies after the first window: the second run's.
    put_records(
        &clients.logs,
        &group,
        "n2",
        &[
            finding("B", "102", "n2", "low_cpu_efficiency", ms(at - 45)),
            finding("D", "104", "n2", "idle_gpu", ms(at + 20)),
        ],
    )
    .await;

    let s1 = handle(&cfg, &clients, invocation_for(at)).await.expect("first run");
    assert_eq!(ids(&s1), set(&["A", "B"]));
    assert_eq!(s1.findings_already_notified, 1, "A's second delivery");
    assert!(s1.filter_log_events_pages >= 1);
    let n1 = notices(&sqs, &q, Duration::from_secs(20)).await;
    assert_eq!(n1.len(), 1, "{n1:?}");
    assert_eq!(jobs_in(&n1), ["101", "102"]);
    assert!(
        n1[0].contains("(user alice, account physics, partition gpu, node n2): low_cpu_efficiency"),
        "{}",
        n1[0]
    );

    // Between the runs: C arrives late (before the cursor, within the allowance), E later
    // than the allowance allows.
    put_records(
        &clients.logs,
        &group,
        "n3",
        &[
            finding("E", "105", "n3", "idle_gpu", ms(at - 11 * 60)),
            finding("C", "103", "n3", "memory_over_requested", ms(at - 120)),
        ],
    )
    .await;
    let s2 = handle(&cfg, &clients, invocation_for(at + 60)).await.expect("second run");
    assert_eq!(ids(&s2), set(&["C", "D"]), "A and B once only; E too late");
    assert_eq!(s2.findings_already_notified, 3, "A twice and B, read again within the allowance");
    let n2 = notices(&sqs, &q, Duration::from_secs(20)).await;
    assert_eq!(jobs_in(&n2), ["103", "104"]);

    // Nothing new: no notice.
    let s3 = handle(&cfg, &clients, invocation_for(at + 120)).await.expect("third run");
    assert!(s3.findings.is_empty(), "{:?}", s3.findings);
    assert!(notices(&sqs, &q, Duration::from_secs(3)).await.is_empty());

    // The cursor: newest event of the `_lambda` stream, at the end of the last window, holding
    // the ids of the allowance.
    let ev = clients
        .logs
        .get_log_events()
        .log_group_name(&group)
        .log_stream_name(CURSOR_STREAM)
        .start_from_head(false)
        .limit(1)
        .send()
        .await
        .unwrap();
    let cursor: Cursor = serde_json::from_str(ev.events()[0].message().unwrap()).unwrap();
    assert_eq!(cursor.up_to_ms, ms(at + 120));
    let remembered: BTreeSet<String> = cursor.notified.iter().map(|(_, id)| id.clone()).collect();
    assert_eq!(remembered, set(&["A", "B", "C", "D"]));
}

#[ignore = "needs LocalStack: scripts/test.sh runs it"]
#[tokio::test]
async fn a_failed_stage_leaves_the_others_running_and_the_next_run_notifies() {
    let Some(url) = localstack() else { return };
    let (ns, cluster) = (unique("FailingTest"), unique("c"));
    let clients = clients(&url).await;
    let (topic, sqs, q) = subscribed_topic(&url, &clients, "failing").await;
    let group = format!("/slurm-cw-test/{}/jobs", unique("g"));
    let rules = serde_json::to_string(&default_rules()).unwrap();
    let extra = format!(r#", "job_log_group": "{group}", "rules": {rules}"#);
    let cfg = cfg(&ns, &cluster, &topic, &extra);
    let at = minute_ago(20);
    put(
        &url,
        &ns,
        [
            series(&cluster, &JOB_CORES_USED, &[], &[(at, 12.0)]),
            series(&cluster, &JOB_CORES_ALLOCATED, &[], &[(at, 48.0)]),
        ]
        .concat(),
    )
    .await;

    // The job log group does not exist: the findings stage fails, nothing else does.
    let s = run(&cfg, &clients, invocation_for(at)).await;
    assert_eq!(s.failed_stages.len(), 1, "{:?}", s.failed_stages);
    assert_eq!(s.failed_stages[0].stage, "findings");
    assert!(s.failed_stages[0].error.contains("FilterLogEvents"), "{}", s.failed_stages[0].error);
    assert_eq!(s.alarms.created_or_updated.len(), default_rules().len(), "alarm upkeep ran");
    let efficiency = read(&clients.cloudwatch, &ns, &cluster, &CLUSTER_CPU_EFFICIENCY, &[], at, at).await;
    assert_eq!(efficiency.get(&at), Some(&25.0), "the cluster figures were published");
    let e = handle(&cfg, &clients, invocation_for(at)).await.unwrap_err();
    assert!(format!("{e:#}").contains("findings"), "the invocation fails, naming the stage: {e:#}");

    // The group appears with a finding: the next run notifies it.
    log_group(&clients.logs, &group).await;
    let at2 = at + 60;
    put_records(&clients.logs, &group, "n1", &[finding("F", "201", "n1", "idle_gpu", at2 * 1000 - 30_000)])
        .await;
    let s = handle(&cfg, &clients, invocation_for(at2)).await.expect("the group is there now");
    assert_eq!(ids(&s), set(&["F"]));
    assert_eq!(jobs_in(&notices(&sqs, &q, Duration::from_secs(20)).await), ["201"]);

    // The topic refuses the notice: the cursor stays, and the run after with a working topic
    // sends the finding, once.
    let at3 = at2 + 60;
    put_records(&clients.logs, &group, "n1", &[finding("G", "202", "n1", "idle_gpu", at3 * 1000 - 20_000)])
        .await;
    let gone = format!("{topic}-gone");
    let broken = self::cfg(&ns, &cluster, &gone, &extra);
    let s = run(&broken, &clients, invocation_for(at3)).await;
    assert_eq!(s.failed_stages.iter().map(|f| f.stage.as_str()).collect::<Vec<_>>(), ["findings"]);
    assert!(s.findings.is_empty());
    let s = handle(&cfg, &clients, invocation_for(at3 + 60)).await.expect("working topic again");
    assert_eq!(ids(&s), set(&["G"]), "F was notified already, G not yet");
    assert_eq!(jobs_in(&notices(&sqs, &q, Duration::from_secs(20)).await), ["202"]);
    let s = handle(&cfg, &clients, invocation_for(at3 + 120)).await.unwrap();
    assert!(s.findings.is_empty(), "{:?}", s.findings);
    assert!(notices(&sqs, &q, Duration::from_secs(3)).await.is_empty());
}
