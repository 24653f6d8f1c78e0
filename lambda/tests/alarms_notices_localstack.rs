//! Alarms, notices and the autoscaling signal against LocalStack: rules become alarms with the
//! rule's settings (idempotently), an alarm fed breaching data reaches ALARM, a notice about an
//! idle-GPU job reaches an SQS queue subscribed to the topic (once), and a backlog change goes
//! to EventBridge.

mod common;

use aws_sdk_cloudwatch::types::{ComparisonOperator, StateValue};
use common::*;
use slurm_cw_catalog::alarms::{Rule, default_rules};
use slurm_cw_catalog::metrics::*;
use slurm_cw_lambda::config::Config;
use slurm_cw_lambda::handler::{Clients, handle};
use std::time::{Duration, Instant};

async fn queue(url: &str, name: &str) -> (aws_sdk_sqs::Client, String, String) {
    let sqs = aws_sdk_sqs::Client::new(&sdk(url).await);
    let q = sqs.create_queue().queue_name(name).send().await.unwrap();
    let q_url = q.queue_url().unwrap().to_owned();
    let attrs = sqs
        .get_queue_attributes()
        .queue_url(&q_url)
        .attribute_names(aws_sdk_sqs::types::QueueAttributeName::QueueArn)
        .send()
        .await
        .unwrap();
    let arn = attrs.attributes().unwrap()[&aws_sdk_sqs::types::QueueAttributeName::QueueArn].clone();
    (sqs, q_url, arn)
}

async fn messages(sqs: &aws_sdk_sqs::Client, q: &str, wait: Duration) -> Vec<String> {
    let start = Instant::now();
    let mut out = Vec::new();
    while start.elapsed() < wait {
        let r = sqs
            .receive_message()
            .queue_url(q)
            .max_number_of_messages(10)
            .wait_time_seconds(1)
            .send()
            .await
            .unwrap();
        for m in r.messages() {
            out.push(m.body().unwrap_or("").to_owned());
        }
        if !out.is_empty() {
            break;
        }
    }
    out
}

fn with_rules(ns: &str, cluster: &str, topic: &str, rules: &[Rule], extra: &str) -> Config {
    Config::from_json(&format!(
        r#"{{"namespace": "{ns}", "cluster_name": "{cluster}", "sns_topic_arn": "{topic}", "rules": {}{extra}}}"#,
        serde_json::to_string(rules).unwrap()
    ))
    .unwrap()
}

/// A new SNS topic's ARN.
async fn topic(clients: &Clients, name: &str) -> String {
    let out = clients.sns.create_topic().name(unique(name)).send().await.unwrap();
    out.topic_arn().unwrap().to_owned()
}

#[tokio::test]
async fn rules_become_alarms_idempotently_and_reach_alarm() {
    let Some(url) = localstack() else { return };
    let (ns, cluster) = (unique("AlarmTest"), unique("c"));
    let clients = clients(&url).await;
    let topic = topic(&clients, "alarms").await;
    let mut rules = default_rules();
    let cfg = with_rules(&ns, &cluster, &topic, &rules, "");
    let prefix = cfg.alarm_prefix();

    let s = handle(&cfg, &clients, invocation_for(minute_ago(1))).await.unwrap();
    assert_eq!(s.alarms.created_or_updated.len(), rules.len());
    let described = clients.cloudwatch.describe_alarms().alarm_name_prefix(&prefix).send().await.unwrap();
    assert_eq!(described.metric_alarms().len(), rules.len());
    let down = described
        .metric_alarms()
        .iter()
        .find(|a| a.alarm_name() == Some(&format!("{prefix}nodes-down")))
        .unwrap();
    assert_eq!(down.metric_name(), Some(NODE_COUNT.name));
    assert_eq!(down.namespace(), Some(ns.as_str()));
    assert_eq!(down.threshold(), Some(0.0));
    assert_eq!(down.evaluation_periods(), Some(5));
    assert_eq!(down.comparison_operator(), Some(&ComparisonOperator::GreaterThanThreshold));
    assert_eq!(down.treat_missing_data(), Some("notBreaching"));
    assert_eq!(down.alarm_actions(), std::slice::from_ref(&topic));
    let mut dims: Vec<(String, String)> = down
        .dimensions()
        .iter()
        .map(|d| (d.name().unwrap().to_owned(), d.value().unwrap().to_owned()))
        .collect();
    dims.sort();
    assert_eq!(
        dims,
        vec![("ClusterName".to_owned(), cluster.clone()), ("State".to_owned(), "down".to_owned())]
    );
    let ctld = described
        .metric_alarms()
        .iter()
        .find(|a| a.alarm_name() == Some(&format!("{prefix}slurmctld-not-reporting")))
        .unwrap();
    assert_eq!(ctld.treat_missing_data(), Some("breaching"), "missing data is breaching");
    let growing = described
        .metric_alarms()
        .iter()
        .find(|a| a.alarm_name() == Some(&format!("{prefix}pending-jobs-growing")))
        .unwrap();
    assert!(!growing.metrics().is_empty(), "a metric-math alarm");

    // Idempotent: nothing written again; a changed rule is rewritten; a removed one deleted.
    let s = handle(&cfg, &clients, invocation_for(minute_ago(1))).await.unwrap();
    assert_eq!((s.alarms.created_or_updated.len(), s.alarms.unchanged), (0, rules.len()));
    rules[0].evaluation_periods = 1;
    let removed = rules.pop().unwrap();
    let cfg = with_rules(&ns, &cluster, &topic, &rules, "");
    let s = handle(&cfg, &clients, invocation_for(minute_ago(1))).await.unwrap();
    assert_eq!(s.alarms.created_or_updated, vec![format!("{prefix}nodes-down")]);
    assert_eq!(s.alarms.deleted, vec![format!("{prefix}{}", removed.name)]);

    // Breaching data: two nodes down for the last minutes; LocalStack evaluates alarms itself.
    let points: Vec<(i64, f64)> = (0..4).map(|k| (minute_ago(k), 2.0)).collect();
    put(&url, &ns, series(&cluster, &NODE_COUNT, &[("State", "down")], &points)).await;
    let name = format!("{prefix}nodes-down");
    let start = Instant::now();
    let state = loop {
        let a = clients.cloudwatch.describe_alarms().alarm_names(&name).send().await.unwrap();
        let state = a.metric_alarms()[0].state_value().cloned();
        if state == Some(StateValue::Alarm) || start.elapsed() > Duration::from_secs(150) {
            break state;
        }
        // Keep the data current while LocalStack's evaluator comes round.
        put(&url, &ns, series(&cluster, &NODE_COUNT, &[("State", "down")], &[(minute_ago(0), 2.0)])).await;
        tokio::time::sleep(Duration::from_secs(5)).await;
    };
    eprintln!("nodes-down reached {state:?} after {:?}", start.elapsed());
    assert_eq!(state, Some(StateValue::Alarm));
}

#[tokio::test]
async fn idle_gpu_notice_reaches_sqs_once_and_backlog_goes_to_eventbridge() {
    let Some(url) = localstack() else { return };
    let (ns, cluster) = (unique("NoticeTest"), unique("c"));
    let clients = clients(&url).await;
    let topic = topic(&clients, "notices").await;
    let (sqs, q_url, q_arn) = queue(&url, &unique("notices")).await;
    clients.sns.subscribe().topic_arn(&topic).protocol("sqs").endpoint(&q_arn).send().await.unwrap();
    // Backlog events to another queue through an EventBridge rule.
    let (_, ev_url, ev_arn) = queue(&url, &unique("events")).await;
    let rule = unique("backlog");
    clients
        .eventbridge
        .put_rule()
        .name(&rule)
        .event_pattern(r#"{"source": ["slurm-cw"]}"#)
        .send()
        .await
        .unwrap();
    clients
        .eventbridge
        .put_targets()
        .rule(&rule)
        .targets(aws_sdk_eventbridge::types::Target::builder().id("q").arn(&ev_arn).build().unwrap())
        .send()
        .await
        .unwrap();

    // A rollup minute a little in the past, idle window of 10 minutes, rollups every 5.
    let mut at = minute_ago(8);
    at -= at.rem_euclid(300);
    let cfg = with_rules(
        &ns,
        &cluster,
        &topic,
        &[],
        r#", "rollup_minutes": 5, "thresholds": {"idle_gpu_minutes": 10}"#,
    );
    let minutes = |from: i64, to: i64| (from..=to).map(move |k| at + k * 60);
    let job = |id: &'static str| [("JobId", id), ("User", "alice"), ("Account", "physics")];
    let mut data = Vec::new();
    // Job 7: busy until 10 minutes before `at`, then idle; job 8 busy throughout.
    let util7: Vec<(i64, f64)> =
        minutes(-20, 5).map(|t| (t, if t <= at - 600 { 80.0 } else { 1.0 })).collect();
    let util8: Vec<(i64, f64)> = minutes(-20, 5).map(|t| (t, 90.0)).collect();
    let twos: Vec<(i64, f64)> = minutes(-20, 5).map(|t| (t, 2.0)).collect();
    let zeros: Vec<(i64, f64)> = minutes(-20, 5).map(|t| (t, 0.0)).collect();
    data.extend(series(&cluster, &GPU_UTILIZATION, &job("7"), &util7));
    data.extend(series(&cluster, &GPU_UTILIZATION, &job("8"), &util8));
    for j in ["7", "8"] {
        data.extend(series(&cluster, &GPU_COUNT, &job(j), &twos));
        data.extend(series(&cluster, &GPU_IDLE_COUNT, &job(j), &zeros));
    }
    // Partition p: 3 nodes asked for, 6 CPUs of 2-CPU nodes, one node idle: backlog 2.
    let p = [("Partition", "p")];
    for (m, v) in [(&PENDING_NODES, 3.0), (&PENDING_CPUS, 6.0), (&CPUS_TOTAL, 8.0), (&CPUS_ALLOCATED, 6.0)] {
        data.extend(series(&cluster, m, &p, &[(at, v)]));
    }
    data.extend(series(&cluster, &NODE_COUNT, &[("Partition", "p"), ("State", "idle")], &[(at, 1.0)]));
    data.extend(series(&cluster, &NODE_COUNT, &[("Partition", "p"), ("State", "allocated")], &[(at, 3.0)]));
    put(&url, &ns, data).await;

    let s = handle(&cfg, &clients, invocation_for(at)).await.unwrap();
    assert!(s.rollup);
    assert_eq!(s.findings.len(), 1, "{:?}", s.findings);
    assert_eq!(s.findings[0].job, "7");
    let notices = messages(&sqs, &q_url, Duration::from_secs(20)).await;
    assert_eq!(notices.len(), 1, "{notices:?}");
    assert!(
        notices[0].contains("job 7 (user alice, account physics)") && !notices[0].contains("job 8"),
        "{}",
        notices[0]
    );

    let w = |m: &'static slurm_cw_catalog::Metric, dims: &'static [(&'static str, &'static str)]| {
        let (cw, ns, cluster) = (clients.cloudwatch.clone(), ns.clone(), cluster.clone());
        async move { read(&cw, &ns, &cluster, m, dims, at, at).await.get(&at).copied() }
    };
    assert_eq!(w(&IDLE_GPU_JOBS, &[]).await, Some(1.0));
    // Job 7 idle for the 5 minutes of the rollup with 2 GPUs: 10 GPU-minutes.
    let hours = w(&GPU_HOURS_IDLE, &[]).await.unwrap();
    assert!((hours - 10.0 / 60.0).abs() < 1e-9, "{hours}");
    assert_eq!(w(&BACKLOG_NODES, &[("Partition", "p")]).await, Some(2.0));
    assert_eq!(w(&IDLE_NODES, &[("Partition", "p")]).await, Some(0.0));
    assert_eq!(w(&CLUSTER_CPU_UTILIZATION, &[("Partition", "p")]).await, Some(75.0));
    let events = messages(&sqs, &ev_url, Duration::from_secs(20)).await;
    assert_eq!(events.len(), 1, "{events:?}");
    let ev: serde_json::Value = serde_json::from_str(&events[0]).unwrap();
    assert_eq!(ev["detail-type"], "Slurm Backlog Changed");
    assert_eq!(ev["detail"]["partition"], "p");
    assert_eq!(ev["detail"]["backlog_nodes"], 2.0);

    // The next rollup: job 7 still idle, already reported: no notice.
    let s = handle(&cfg, &clients, invocation_for(at + 300)).await.unwrap();
    assert!(s.rollup && s.findings.is_empty(), "{:?}", s.findings);
    assert!(messages(&sqs, &q_url, Duration::from_secs(3)).await.is_empty(), "at most once per job");
}
