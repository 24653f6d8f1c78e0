//! Alarms, cluster figures and the autoscaling signal against LocalStack: rules become alarms
//! with the rule's settings (idempotently), an alarm fed breaching data reaches ALARM, the
//! nodes' job totals become GpuHoursIdle and ClusterCpuEfficiency, and a backlog change goes to
//! EventBridge.

use crate::common;

use aws_sdk_cloudwatch::types::{ComparisonOperator, StateValue};
use common::*;
use slurm_cw_catalog::alarms::{Rule, default_rules};
use slurm_cw_catalog::events::{self, backlog};
use slurm_cw_catalog::metrics::*;
use slurm_cw_lambda::config::Config;
use slurm_cw_lambda::handler::handle;
use std::time::{Duration, Instant, SystemTime};

fn with_rules(ns: &str, cluster: &str, topic: &str, rules: &[Rule], extra: &str) -> Config {
    Config::from_json(&format!(
        r#"{{"namespace": "{ns}", "cluster_name": "{cluster}", "sns_topic_arn": "{topic}", "rules": {}{extra}}}"#,
        serde_json::to_string(rules).unwrap()
    ))
    .unwrap()
}

#[ignore = "needs LocalStack: scripts/test.sh runs it"]
#[tokio::test]
async fn rules_become_alarms_idempotently_and_reach_alarm() {
    let Some(url) = localstack() else { return };
    let (ns, cluster) = (unique("AlarmTest"), unique("c"));
    let clients = clients(&url).await;
    let topic = topic(&clients, "alarms").await;
    job_group(&clients, &cluster).await;
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
    assert_eq!(down.metric_name(), Some(NODES_DOWN_UNPLANNED.name));
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
    assert_eq!(dims, vec![("ClusterName".to_owned(), cluster.clone())]);
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
    put(&url, &ns, series(&cluster, &NODES_DOWN_UNPLANNED, &[], &points)).await;
    let name = format!("{prefix}nodes-down");
    let start = Instant::now();
    let state = loop {
        let a = clients.cloudwatch.describe_alarms().alarm_names(&name).send().await.unwrap();
        let state = a.metric_alarms()[0].state_value().cloned();
        if state == Some(StateValue::Alarm) || start.elapsed() > Duration::from_secs(150) {
            break state;
        }
        // Keep the data current while LocalStack's evaluator comes round.
        put(&url, &ns, series(&cluster, &NODES_DOWN_UNPLANNED, &[], &[(minute_ago(0), 2.0)])).await;
        tokio::time::sleep(Duration::from_secs(5)).await;
    };
    eprintln!("nodes-down reached {state:?} after {:?}", start.elapsed());
    assert_eq!(state, Some(StateValue::Alarm));
}

#[ignore = "needs LocalStack: scripts/test.sh runs it"]
#[tokio::test]
async fn job_totals_become_cluster_figures_and_backlog_goes_to_eventbridge() {
    let Some(url) = localstack() else { return };
    let (ns, cluster) = (unique("FiguresTest"), unique("c"));
    let clients = clients(&url).await;
    // Backlog events to a queue through an EventBridge rule.
    let (sqs, ev_url) = rule_to_queue(
        &url,
        &clients,
        None,
        "backlog",
        // Backlog events alone: the tests beside it may send other slurm-cw events.
        &serde_json::json!({ "source": [events::SOURCE], "detail-type": [backlog::DETAIL_TYPE] }).to_string(),
    )
    .await;

    let at = minute_ago(8);
    let cfg = config(&ns, &cluster);
    // Another cluster whose nodes send cluster totals alone: LocalStack matches a query's
    // dimensions as a subset, so a cluster-wide read there would take in the partitions' series.
    let whole = unique("w");
    let mut data = Vec::new();
    // Two nodes' totals for the minute, each at its own flush offset: node a runs partition p's
    // jobs, node b partition q's.
    let node = |c: &str, offset: i64, m: &'static slurm_cw_catalog::Metric, dims: &[(&str, &str)], v: f64| {
        let dims: Vec<(String, String)> = dims.iter().map(|(k, v)| ((*k).into(), (*v).into())).collect();
        slurm_cw_lambda::cw::datum(c, m, &dims, at + offset, v)
    };
    for (offset, part, used) in [(12, "p", 10.0), (47, "q", 20.0)] {
        data.push(node(&cluster, offset, &JOB_CORES_USED, &[("Partition", part)], used));
        data.push(node(&cluster, offset, &JOB_CORES_ALLOCATED, &[("Partition", part)], 40.0));
        data.push(node(&whole, offset, &JOB_CORES_USED, &[], used));
        data.push(node(&whole, offset, &JOB_CORES_ALLOCATED, &[], 40.0));
        data.push(node(&whole, offset, &JOB_GPUS_IDLE, &[], 3.0));
    }
    // The head node's autoscaling signal through the run's window (the default five minutes)
    // and the minute before it: partition p's backlog grew from 0 to 2 nodes in the last minute
    // (an event), q's stayed at 1 (none).
    let (p, q) = ([("Partition", "p")], [("Partition", "q")]);
    let minutes = |last: f64, before: f64| -> Vec<(i64, f64)> {
        (0..=i64::from(cfg.every_minutes))
            .map(|k| (at - 60 * k, if k == 0 { last } else { before }))
            .collect()
    };
    data.extend(series(&cluster, &BACKLOG_NODES, &p, &minutes(2.0, 0.0)));
    data.extend(series(&cluster, &IDLE_NODES, &p, &minutes(0.0, 1.0)));
    data.extend(series(&cluster, &BACKLOG_NODES, &q, &minutes(1.0, 1.0)));
    data.extend(series(&cluster, &IDLE_NODES, &q, &minutes(0.0, 0.0)));
    put(&url, &ns, data).await;

    // No job log group for this cluster: the findings stage fails, and so does keeping the
    // minutes derived (in that group); the figures do not.
    let s = slurm_cw_lambda::handler::run(&cfg, &clients, invocation_for(at)).await;
    assert_eq!(s.failed_stages.iter().map(|f| f.stage.as_str()).collect::<Vec<_>>(), ["minutes", "findings"]);

    let s = slurm_cw_lambda::handler::run(&config(&ns, &whole), &clients, invocation_for(at)).await;
    assert_eq!(s.failed_stages.iter().map(|f| f.stage.as_str()).collect::<Vec<_>>(), ["minutes", "findings"]);

    let w = |c: &str, m: &'static slurm_cw_catalog::Metric, dims: &'static [(&'static str, &'static str)]| {
        let (cw, ns, c) = (clients.cloudwatch.clone(), ns.clone(), c.to_owned());
        async move { read(&cw, &ns, &c, m, dims, at, at).await.get(&at).copied() }
    };
    // 6 GPUs idle through the minute: 6 GPU-minutes, 0.1 GPU-hours.
    let hours = w(&whole, &GPU_HOURS_IDLE, &[]).await.unwrap();
    assert!((hours - 0.1).abs() < 1e-9, "{hours}");
    // 30 of 80 cores busy over the cluster; 10 of 40 in p, 20 of 40 in q.
    assert_eq!(w(&whole, &CLUSTER_CPU_EFFICIENCY, &[]).await, Some(37.5));
    let w = |m, dims| w(&cluster, m, dims);
    assert_eq!(w(&GPU_HOURS_IDLE, &[]).await, None, "no node's jobs hold GPUs: no series of zeros");
    assert_eq!(w(&CLUSTER_CPU_EFFICIENCY, &[("Partition", "p")]).await, Some(25.0));
    assert_eq!(w(&CLUSTER_CPU_EFFICIENCY, &[("Partition", "q")]).await, Some(50.0));
    let events = messages(&sqs, &ev_url, Duration::from_secs(20)).await;
    assert_eq!(events.len(), 1, "{events:?}");
    let ev: serde_json::Value = serde_json::from_str(&events[0]).unwrap();
    assert_eq!(ev["detail-type"], backlog::DETAIL_TYPE);
    let detail = &ev["detail"];
    assert_eq!(detail[events::CLUSTER], cluster.as_str());
    assert_eq!(detail[backlog::PARTITION], "p");
    assert_eq!(detail[backlog::BACKLOG_NODES], 2.0);
    assert_eq!(detail[backlog::PREVIOUS_BACKLOG_NODES], 0.0);
}

#[ignore = "needs LocalStack: scripts/test.sh runs it"]
#[tokio::test]
async fn one_partition_is_read_and_published_as_the_cluster_alone() {
    let Some(url) = localstack() else { return };
    let (ns, cluster) = (unique("OnePartition"), unique("c"));
    let clients = clients(&url).await;
    let at = minute_ago(8);
    let part = [("Partition", "p")];
    let node = |m: &'static slurm_cw_catalog::Metric, dims: &[(&str, &str)], v: f64| {
        let dims: Vec<(String, String)> = dims.iter().map(|(k, v)| ((*k).into(), (*v).into())).collect();
        slurm_cw_lambda::cw::datum(&cluster, m, &dims, at + 12, v)
    };
    let mut data = vec![
        node(&JOB_CORES_USED, &[], 10.0),
        node(&JOB_CORES_ALLOCATED, &[], 40.0),
        node(&JOB_CORES_USED, &part, 10.0),
        node(&JOB_CORES_ALLOCATED, &part, 40.0),
    ];
    // Two minutes earlier, in the same run's window: half the cores busy.
    let earlier = |m: &'static slurm_cw_catalog::Metric, v: f64| {
        slurm_cw_lambda::cw::datum(&cluster, m, &[], at - 120 + 30, v)
    };
    data.extend([earlier(&JOB_CORES_USED, 20.0), earlier(&JOB_CORES_ALLOCATED, 40.0)]);
    data.extend(series(&cluster, &BACKLOG_NODES, &part, &[(at - 60, 0.0), (at, 0.0)]));
    data.extend(series(&cluster, &IDLE_NODES, &part, &[(at - 60, 1.0), (at, 1.0)]));
    put(&url, &ns, data).await;

    let s = slurm_cw_lambda::handler::run(&config(&ns, &cluster), &clients, invocation_for(at)).await;
    // One listing finds the partitions of both stages; the one partition's cores are the
    // cluster's: JobGpusIdle, the cluster's two cores series, the backlog's two.
    assert_eq!((s.list_metrics_calls, s.metrics_read), (1, 5), "{s:?}");
    let w = |dims: &'static [(&'static str, &'static str)]| {
        let (cw, ns, c) = (clients.cloudwatch.clone(), ns.clone(), cluster.clone());
        async move { read(&cw, &ns, &c, &CLUSTER_CPU_EFFICIENCY, dims, at, at).await.get(&at).copied() }
    };
    assert_eq!(w(&[]).await, Some(25.0));
    assert_eq!(w(&[("Partition", "p")]).await, None, "no copy of the cluster's figure");
    // One run (every five minutes) derived each minute of its window, at the price of one read.
    let before =
        read(&clients.cloudwatch, &ns, &cluster, &CLUSTER_CPU_EFFICIENCY, &[], at - 120, at - 120).await;
    assert_eq!(before.get(&(at - 120)).copied(), Some(50.0), "{before:?}");
}

/// A `job_summary` record with the cost a node counted for a job's first run.
fn summary(job: &str, node: &str, account: &str, usd: f64, ms: i64) -> (i64, String) {
    summary_of_run(job, node, 1_800_000_000, account, usd, ms)
}

/// The same for the job's run that Slurm started at `run` (epoch seconds).
fn summary_of_run(job: &str, node: &str, run: u64, account: &str, usd: f64, ms: i64) -> (i64, String) {
    use slurm_cw_catalog::records as r;
    let v = serde_json::json!({
        r::TYPE.name: r::kinds::JOB_SUMMARY,
        r::RECORD_ID.name: format!("{node}:{job}:{run}:summary"),
        r::JOB_ID.name: job,
        r::USER.name: "alice",
        r::ACCOUNT.name: account,
        r::PARTITION.name: "gpu",
        r::NODE_NAME.name: node,
        r::COST_USD.name: usd,
    });
    (ms, v.to_string())
}

#[ignore = "needs LocalStack: scripts/test.sh runs it"]
#[tokio::test]
async fn an_account_passing_its_budget_is_told_once_per_threshold_with_its_costliest_jobs() {
    use slurm_cw_catalog::events::budget;
    let Some(url) = localstack() else { return };
    let (ns, cluster) = (unique("BudgetTest"), unique("c"));
    let clients = clients(&url).await;
    let group = job_group(&clients, &cluster).await;
    let (topic, sqs, notice_q) = subscribed_topic(&url, &clients, "budget").await;
    // A bus of its own: the other tests here read the default bus's slurm-cw events.
    let bus = unique("budget-bus");
    clients.eventbridge.create_event_bus().name(&bus).send().await.unwrap();
    let pattern = serde_json::json!({ "source": [events::SOURCE], "detail-type": [budget::DETAIL_TYPE] });
    let (eb_sqs, ev_q) = rule_to_queue(&url, &clients, Some(&bus), "budget", &pattern.to_string()).await;
    let cfg = Config::from_json(&format!(
        r#"{{"namespace": "{ns}", "cluster_name": "{cluster}", "sns_topic_arn": "{topic}", "event_bus": "{bus}",
             "budgets": {{"physics": 100, "chem": 100}}}}"#
    ))
    .unwrap();
    // What the nodes added this month: physics $50 + $35, chem $10.
    let (a, b) = (minute_ago(3), minute_ago(2));
    let mut data = series(&cluster, &JOB_COST, &[("Account", "physics")], &[(a, 50.0), (b, 35.0)]);
    data.extend(series(&cluster, &JOB_COST, &[("Account", "chem")], &[(a, 10.0)]));
    put(&url, &ns, data).await;
    // Its jobs' summaries: job 4242 on two nodes ($60 + $15), job 7 ($10, then $5 for a run
    // after Slurm requeued it onto the same node), chem's job 9.
    let ms = a * 1000;
    put_records(
        &clients.logs,
        &group,
        "n1",
        &[summary("4242", "n1", "physics", 60.0, ms), summary("9", "n1", "chem", 99.0, ms)],
    )
    .await;
    put_records(
        &clients.logs,
        &group,
        "n2",
        &[
            summary("4242", "n2", "physics", 15.0, ms),
            summary("7", "n2", "physics", 10.0, ms),
            summary_of_run("7", "n2", 1_800_003_600, "physics", 5.0, ms + 1),
        ],
    )
    .await;

    let s = handle(&cfg, &clients, SystemTime::now()).await.unwrap();
    let told: Vec<(&str, u32)> =
        s.budget_crossings.iter().map(|c| (c.account.as_str(), c.threshold_percent)).collect();
    assert_eq!(told, vec![("physics", 80)], "{:?}", s.budget_crossings);
    let events = drained(&eb_sqs, &ev_q, Duration::from_secs(10)).await;
    assert_eq!(events.len(), 1, "{events:?}");
    let detail = &serde_json::from_str::<serde_json::Value>(&events[0]).unwrap()["detail"];
    assert_eq!(
        (detail[events::CLUSTER].as_str(), detail[budget::ACCOUNT].as_str()),
        (Some(cluster.as_str()), Some("physics"))
    );
    assert_eq!(
        (detail[budget::SPENT_USD].as_f64(), detail[budget::BUDGET_USD].as_f64()),
        (Some(85.0), Some(100.0))
    );
    assert_eq!(detail[budget::THRESHOLD_PERCENT], 80);
    assert_eq!(
        detail[budget::TOP_JOBS][0],
        serde_json::json!({"job": "4242", "user": "alice", "cost_usd": 75.0})
    );
    assert_eq!(
        detail[budget::TOP_JOBS][1],
        serde_json::json!({"job": "7", "user": "alice", "cost_usd": 15.0}),
        "chem's job is not physics', and each run of job 7 on n2 counts"
    );
    // Every summary of the month was read.
    let (_, month_start) = slurm_cw_lambda::budgets::month_of(SystemTime::now());
    assert_eq!(detail[budget::TOP_JOBS_SINCE], slurm_cw_lambda::cw::rfc3339_ms(month_start * 1000));
    let notes = notices(&sqs, &notice_q, Duration::from_secs(10)).await;
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert!(
        notes[0].contains("$85.00 of its $100.00 budget") && notes[0].contains("job 4242 (alice): $75.00"),
        "{}",
        notes[0]
    );

    // Again: nothing new. Then $20 more: the 100 % threshold, alone.
    let s = handle(&cfg, &clients, SystemTime::now()).await.unwrap();
    assert!(s.budget_crossings.is_empty(), "{:?}", s.budget_crossings);
    put(&url, &ns, series(&cluster, &JOB_COST, &[("Account", "physics")], &[(minute_ago(1), 20.0)])).await;
    let s = handle(&cfg, &clients, SystemTime::now()).await.unwrap();
    let told: Vec<(&str, u32)> =
        s.budget_crossings.iter().map(|c| (c.account.as_str(), c.threshold_percent)).collect();
    assert_eq!(told, vec![("physics", 100)]);
    let events = drained(&eb_sqs, &ev_q, Duration::from_secs(10)).await;
    assert_eq!(events.len(), 1, "one event for the second threshold, none again for the first: {events:?}");
    assert_eq!(notices(&sqs, &notice_q, Duration::from_secs(5)).await.len(), 1);
}

#[ignore = "needs LocalStack: scripts/test.sh runs it"]
#[tokio::test]
async fn a_budget_notice_reads_the_newest_days_first_and_says_how_far_it_read() {
    use slurm_cw_lambda::budgets::top_jobs::{TopJobs, top_jobs};
    let Some(url) = localstack() else { return };
    let clients = clients(&url).await;
    let group = job_group(&clients, &unique("c")).await;
    let now_ms = slurm_cw_lambda::cw::epoch(SystemTime::now()) * 1000;
    let day = 86_400_000;
    // Job 1 ($500) ended four days ago, job 2 ($40) an hour ago, job 3 ($30) a day and a half ago.
    put_records(&clients.logs, &group, "n1", &[summary("1", "n1", "physics", 500.0, now_ms - 4 * day)]).await;
    put_records(&clients.logs, &group, "n2", &[summary("3", "n2", "physics", 30.0, now_ms - day - day / 2)])
        .await;
    put_records(&clients.logs, &group, "n2", &[summary("2", "n2", "physics", 40.0, now_ms - 3_600_000)])
        .await;
    let span = (now_ms - 5 * day, now_ms);
    let later = tokio::time::Instant::now() + Duration::from_secs(30);
    let jobs = |t: &TopJobs| t.jobs.iter().map(|(j, _, usd)| (j.clone(), *usd)).collect::<Vec<_>>();

    // Time for one page: the last day, and the notice knows it read from a day ago on.
    let one = top_jobs(&clients.logs, &group, "physics", span, later, 1).await.unwrap();
    assert_eq!(jobs(&one), [("2".to_owned(), 40.0)]);
    assert_eq!(one.since_ms, Some(now_ms - day));
    // Two: the day before too.
    let two = top_jobs(&clients.logs, &group, "physics", span, later, 2).await.unwrap();
    assert_eq!(jobs(&two), [("2".to_owned(), 40.0), ("3".to_owned(), 30.0)]);
    assert_eq!(two.since_ms, Some(now_ms - 2 * day));
    // Time for all: the month's costliest first, every summary since the start read.
    let all = top_jobs(&clients.logs, &group, "physics", span, later, 30).await.unwrap();
    assert_eq!(jobs(&all), [("1".to_owned(), 500.0), ("2".to_owned(), 40.0), ("3".to_owned(), 30.0)]);
    assert_eq!(all.since_ms, Some(span.0));
    // No time at all: nothing read, and nothing claimed.
    let none =
        top_jobs(&clients.logs, &group, "physics", span, tokio::time::Instant::now(), 30).await.unwrap();
    assert_eq!(none, TopJobs::default());
}
