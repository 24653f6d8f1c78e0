//! Each minute's cluster figures are derived once, whatever the runs' timing: a scheduled event
//! delivered twice publishes nothing again (GpuHoursIdle's Sum would double), a skipped run's
//! minutes come with the next, an old event late derives nothing, and a backlog move is told
//! once. (A part that failed while the other went through is `minutes::tests`: LocalStack's
//! EventBridge takes events for any bus, so no part can be made to fail here alone.)

use crate::common;

use common::*;
use slurm_cw_catalog::events::{self, backlog};
use slurm_cw_catalog::metrics::*;
use slurm_cw_lambda::config::Config;
use slurm_cw_lambda::handler::{Summary, run};
use slurm_cw_lambda::minutes;
use std::time::Duration;

fn stages(s: &Summary) -> Vec<&str> {
    s.failed_stages.iter().map(|f| f.stage.as_str()).collect()
}

#[ignore = "needs LocalStack: scripts/test.sh runs it"]
#[tokio::test]
async fn each_minute_is_derived_once_however_the_runs_come() {
    let Some(url) = localstack() else { return };
    let (ns, cluster) = (unique("MinutesTest"), unique("c"));
    let clients = clients(&url).await;
    let group = job_group(&clients, &cluster).await;
    let cfg = config(&ns, &cluster);
    assert_eq!(cfg.every_minutes, 5);
    // Fifteen minutes of one node's totals: 6 GPUs idle (0.1 GPU-hours a minute), 12 of 48
    // cores busy.
    let base = minute_ago(30);
    let minutes: Vec<(i64, f64)> = (-4..=10).map(|k| (base + 60 * k, 6.0)).collect();
    let at = |v: f64| minutes.iter().map(|(m, _)| (*m, v)).collect::<Vec<_>>();
    put(
        &url,
        &ns,
        [
            series(&cluster, &JOB_GPUS_IDLE, &[], &minutes),
            series(&cluster, &JOB_CORES_USED, &[], &at(12.0)),
            series(&cluster, &JOB_CORES_ALLOCATED, &[], &at(48.0)),
        ]
        .concat(),
    )
    .await;

    // A first run: its own five minutes.
    let s = run(&cfg, &clients, invocation_for(base)).await;
    assert_eq!(stages(&s), Vec::<&str>::new(), "{s:?}");
    assert_eq!((s.figure_minutes, s.datums_published), (5, 10), "{s:?}");
    // The same event again: nothing published twice.
    let s = run(&cfg, &clients, invocation_for(base)).await;
    assert_eq!((s.figure_minutes, s.datums_published), (0, 0), "{s:?}");
    // The run at base + 5 minutes never came: the next one derives its minutes too.
    let s = run(&cfg, &clients, invocation_for(base + 600)).await;
    assert_eq!(stages(&s), Vec::<&str>::new(), "{s:?}");
    assert_eq!((s.figure_minutes, s.datums_published, s.minutes_left_out), (10, 20, 0), "{s:?}");
    // The skipped run's event, late: nothing.
    let s = run(&cfg, &clients, invocation_for(base + 300)).await;
    assert_eq!((s.figure_minutes, s.datums_published), (0, 0), "{s:?}");

    // Every minute once: one value of 0.1 GPU-hours, and an efficiency of 25 %.
    let (first, last) = (base - 240, base + 600);
    let read = |m, stat| read_stat(&clients.cloudwatch, &ns, &cluster, m, &[], (first, last), stat);
    let counts = read(&GPU_HOURS_IDLE, "SampleCount").await;
    let want: Vec<(i64, f64)> = (0..15).map(|k| (first + 60 * k, 1.0)).collect();
    assert_eq!(counts.into_iter().collect::<Vec<_>>(), want, "one GpuHoursIdle a minute");
    let sums = read(&GPU_HOURS_IDLE, "Sum").await;
    assert!(sums.len() == 15 && sums.values().all(|v| (v - 0.1).abs() < 1e-9), "{sums:?}");
    let eff = read(&CLUSTER_CPU_EFFICIENCY, "SampleCount").await;
    assert_eq!(eff.len(), 15, "{eff:?}");
    assert!(eff.values().all(|n| *n == 1.0), "{eff:?}");

    // The mark, as the next run reads it.
    let (marks, _) = minutes::read(&clients.logs, &group).await.unwrap().expect("the minutes kept");
    assert_eq!((marks.figures_to, marks.backlog_to), (last, last));
}

#[ignore = "needs LocalStack: scripts/test.sh runs it"]
#[tokio::test]
async fn a_backlog_move_is_told_once_however_often_its_minute_is_run() {
    let Some(url) = localstack() else { return };
    let (ns, cluster) = (unique("MinutesBacklog"), unique("c"));
    let clients = clients(&url).await;
    job_group(&clients, &cluster).await;
    let bus = unique("bus");
    clients.eventbridge.create_event_bus().name(&bus).send().await.expect("CreateEventBus");
    let pattern =
        serde_json::json!({ "source": [events::SOURCE], "detail-type": [backlog::DETAIL_TYPE] }).to_string();
    let (sqs, q) = rule_to_queue(&url, &clients, Some(&bus), "minutes", &pattern).await;
    let cfg = Config::from_json(&format!(
        r#"{{"namespace": "{ns}", "cluster_name": "{cluster}", "event_bus": "{bus}"}}"#
    ))
    .unwrap();
    // Partition p's backlog grows from 0 to 3 nodes at `base` and stays.
    let base = minute_ago(16);
    let p = [("Partition", "p")];
    let window: Vec<i64> = (-5..=5).map(|k| base + 60 * k).collect();
    let backlog: Vec<(i64, f64)> = window.iter().map(|m| (*m, if *m >= base { 3.0 } else { 0.0 })).collect();
    let idle: Vec<(i64, f64)> = window.iter().map(|m| (*m, 0.0)).collect();
    put(
        &url,
        &ns,
        [series(&cluster, &BACKLOG_NODES, &p, &backlog), series(&cluster, &IDLE_NODES, &p, &idle)].concat(),
    )
    .await;

    let s = run(&cfg, &clients, invocation_for(base)).await;
    assert_eq!((stages(&s), s.backlog_events), (Vec::<&str>::new(), 1), "{s:?}");
    // The event again, and the next run: the move was told.
    let s = run(&cfg, &clients, invocation_for(base)).await;
    assert_eq!(s.backlog_events, 0, "{s:?}");
    let s = run(&cfg, &clients, invocation_for(base + 300)).await;
    assert_eq!((stages(&s), s.backlog_events), (Vec::<&str>::new(), 0), "{s:?}");
    let told = messages(&sqs, &q, Duration::from_secs(20)).await;
    assert_eq!(told.len(), 1, "{told:?}");
    let ev: serde_json::Value = serde_json::from_str(&told[0]).unwrap();
    assert_eq!(ev["detail"][backlog::BACKLOG_NODES], 3.0);
    assert_eq!(ev["detail"][backlog::PREVIOUS_BACKLOG_NODES], 0.0);
}
