//! Job findings against LocalStack: a node's `job_finding` records (PutLogEvents, as a shipper
//! writes them) reach the SNS topic once each across consecutive runs, read by ingestion time:
//! records put after the cursor moved, with event times 20 minutes and hours old (a node's spool
//! after an outage), are notified once, a record a day and more late is not, a second delivery
//! is skipped. A failed stage (no log group, a topic that refuses) leaves alarm upkeep and the
//! rates running, and the next good run notifies what was missed. A backlog larger than one
//! run's budget drains over runs while alarm upkeep runs in each, and a findings stage past its
//! time limit is stopped without taking alarm upkeep with it.

use crate::common;

use common::*;
use slurm_cw_catalog::alarms::default_rules;
use slurm_cw_catalog::metrics::{CLUSTER_CPU_EFFICIENCY, JOB_CORES_ALLOCATED, JOB_CORES_USED};
use slurm_cw_lambda::config::Config;
use slurm_cw_lambda::findings::{CURSOR_STREAM, Cursor};
use slurm_cw_lambda::handler::{Budgets, Summary, handle, run, run_within};
use std::collections::BTreeSet;
use std::time::{Duration, SystemTime};

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

fn now_ms() -> i64 {
    SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap().as_millis() as i64
}

/// The cursor the last run wrote.
async fn cursor(clients: &slurm_cw_lambda::handler::Clients, group: &str) -> Cursor {
    let ev = clients
        .logs
        .get_log_events()
        .log_group_name(group)
        .log_stream_name(CURSOR_STREAM)
        .start_from_head(false)
        .limit(1)
        .send()
        .await
        .unwrap();
    serde_json::from_str(ev.events()[0].message().unwrap()).unwrap()
}

#[ignore = "needs LocalStack: scripts/test.sh runs it"]
#[tokio::test]
async fn findings_are_notified_once_by_ingestion_late_ones_from_a_spool_too() {
    let Some(url) = localstack() else { return };
    let (ns, cluster) = (unique("FindingsTest"), unique("c"));
    let clients = clients(&url).await;
    let group = job_group(&clients, &cluster).await;
    let (topic, sqs, q) = subscribed_topic(&url, &clients, "findings").await;
    let cfg = cfg(&ns, &cluster, &topic, "");
    const MIN: i64 = 60_000;
    const HOUR: i64 = 60 * MIN;

    // Before the first run, which has no cursor and takes what was ingested in the overlap:
    // findings A (delivered twice: same RecordId) and B from two nodes, a sample (not a
    // finding), and a finding more than a day old (beyond the lateness bound).
    let t0 = now_ms();
    put_records(
        &clients.logs,
        &group,
        "n1",
        &[
            finding("OLD", "100", "n1", "idle_gpu", t0 - 25 * HOUR),
            finding("A", "101", "n1", "idle_gpu", t0 - 30_000),
            finding("A", "101", "n1", "idle_gpu", t0 - 29_000),
            sample("s1", "101", "n1", t0 - 25_000),
        ],
    )
    .await;
    put_records(&clients.logs, &group, "n2", &[finding("B", "102", "n2", "low_cpu_efficiency", t0 - 45_000)])
        .await;
    let s1 = handle(&cfg, &clients, SystemTime::now()).await.expect("first run");
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
    let c1 = cursor(&clients, &group).await;
    assert!(c1.up_to_ms >= t0 && c1.scan.is_none(), "{c1:?}");

    // After the cursor moved: node n3 comes back from an outage and its spool delivers records
    // 20 minutes and 3 hours old, and one 26 hours old; D is new.
    let t1 = now_ms();
    put_records(
        &clients.logs,
        &group,
        "n3",
        &[
            finding("E", "105", "n3", "idle_gpu", t1 - 26 * HOUR),
            finding("H", "106", "n3", "idle_gpu", t1 - 3 * HOUR),
            finding("C", "103", "n3", "memory_over_requested", t1 - 20 * MIN),
        ],
    )
    .await;
    put_records(&clients.logs, &group, "n2", &[finding("D", "104", "n2", "idle_gpu", t1)]).await;
    let s2 = handle(&cfg, &clients, SystemTime::now()).await.expect("second run");
    assert_eq!(ids(&s2), set(&["C", "D", "H"]), "A and B once only; E beyond the bound");
    assert_eq!(s2.findings_already_notified, 3, "A twice and B, read again within the overlap");
    let n2 = notices(&sqs, &q, Duration::from_secs(20)).await;
    assert_eq!(jobs_in(&n2), ["103", "104", "106"]);

    // The spool sends C once more (its acknowledgement was lost): skipped. Nothing else new.
    put_records(
        &clients.logs,
        &group,
        "n3",
        &[finding("C", "103", "n3", "memory_over_requested", t1 - 20 * MIN)],
    )
    .await;
    let s3 = handle(&cfg, &clients, SystemTime::now()).await.expect("third run");
    assert!(s3.findings.is_empty(), "{:?}", s3.findings);
    assert!(s3.findings_already_notified >= 1, "C again");
    assert!(notices(&sqs, &q, Duration::from_secs(3)).await.is_empty());

    // The cursor: on the ingestion time of the newest finding read, remembering every id.
    let c3 = cursor(&clients, &group).await;
    assert!(c3.up_to_ms >= t1 && c3.up_to_ms <= now_ms(), "{c3:?}");
    let remembered: BTreeSet<String> = c3.notified.iter().map(|(_, id)| id.clone()).collect();
    assert_eq!(remembered, set(&["A", "B", "C", "D", "H"]));
}

#[ignore = "needs LocalStack: scripts/test.sh runs it"]
#[tokio::test]
async fn a_backlog_over_the_budget_drains_over_runs_and_alarm_upkeep_runs_in_each() {
    let Some(url) = localstack() else { return };
    let (ns, cluster) = (unique("BacklogTest"), unique("c"));
    let clients = clients(&url).await;
    let group = job_group(&clients, &cluster).await;
    let (topic, sqs, q) = subscribed_topic(&url, &clients, "backlog").await;
    let rules = serde_json::to_string(&default_rules()).unwrap();
    let cfg = cfg(&ns, &cluster, &topic, &format!(r#", "rules": {rules}"#));
    let first = handle(&cfg, &clients, SystemTime::now()).await.expect("a first run sets the cursor");
    assert_eq!(first.alarms.created_or_updated.len(), default_rules().len());

    // A node's spool delivers 35 findings of hours ago; each run may read one page of 10.
    let t = now_ms();
    let backlog: Vec<(i64, String)> = (0..35)
        .map(|i| {
            finding(
                &format!("late{i}"),
                &format!("{}", 300 + i),
                "n9",
                "idle_gpu",
                t - 5 * 3_600_000 + i * 1000,
            )
        })
        .collect();
    put_records(&clients.logs, &group, "n9", &backlog).await;
    let budgets = Budgets { findings: Duration::ZERO, findings_page_limit: 10, ..Budgets::default() };
    let mut notified = Vec::new();
    let mut runs = 0;
    loop {
        runs += 1;
        assert!(runs <= 10, "the backlog drains: {} notified in {runs} runs", notified.len());
        let s = run_within(&cfg, &clients, SystemTime::now(), budgets).await;
        assert!(s.failed_stages.is_empty(), "{:?}", s.failed_stages);
        assert_eq!(
            s.alarms.created_or_updated.len() + s.alarms.unchanged,
            default_rules().len(),
            "upkeep ran"
        );
        assert!(s.findings.len() <= 10, "one page a run: {}", s.findings.len());
        notified.extend(s.findings.iter().map(|f| f.record_id.clone()));
        if !s.findings_scan_continues {
            break;
        }
    }
    assert!(runs >= 4, "more than one run's budget: {runs} runs");
    notified.sort();
    let mut want: Vec<String> = (0..35).map(|i| format!("late{i}")).collect();
    want.sort();
    assert_eq!(notified, want, "each once");
    let jobs = jobs_in(&notices(&sqs, &q, Duration::from_secs(20)).await);
    let mut once = jobs.clone();
    once.dedup();
    assert_eq!((jobs.len(), once.len()), (35, 35), "each job in one notice: {jobs:?}");

    // A findings stage past its time limit is stopped; alarm upkeep still runs.
    put_records(&clients.logs, &group, "n9", &[finding("slow", "400", "n9", "idle_gpu", now_ms())]).await;
    let stopped = Budgets { findings_limit: Duration::ZERO, ..Budgets::default() };
    let s = run_within(&cfg, &clients, SystemTime::now(), stopped).await;
    assert_eq!(s.failed_stages.iter().map(|f| f.stage.as_str()).collect::<Vec<_>>(), ["findings"]);
    assert!(s.failed_stages[0].error.contains("budget"), "{}", s.failed_stages[0].error);
    assert_eq!(s.alarms.created_or_updated.len() + s.alarms.unchanged, default_rules().len(), "upkeep ran");
    let s = handle(&cfg, &clients, SystemTime::now()).await.expect("in time again");
    assert_eq!(ids(&s), set(&["slow"]));
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

    // The job log group does not exist: the findings stage fails, and keeping the minutes
    // derived (in that group); nothing else does.
    let s = run(&cfg, &clients, invocation_for(at)).await;
    assert_eq!(s.failed_stages.len(), 2, "{:?}", s.failed_stages);
    assert_eq!(s.failed_stages[0].stage, "minutes");
    assert!(s.failed_stages[0].error.contains("_lambda-minutes"), "{}", s.failed_stages[0].error);
    assert_eq!(s.failed_stages[1].stage, "findings");
    assert!(s.failed_stages[1].error.contains("FilterLogEvents"), "{}", s.failed_stages[1].error);
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
