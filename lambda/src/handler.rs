//! One invocation, in stages that each run and report on their own: cluster figures (GPU-hours
//! idle, CPU efficiency, backlog events, and publishing the derived datums), job findings,
//! launch failures from AWS PCS's scaling logs (where configured), alarm upkeep. Each stage has
//! its own time budget ([`Budgets`]), together under the
//! function's default 60 s timeout: a stage past its budget is stopped and counts as failed,
//! so one slow stage never leaves the next without time. The findings stage stops itself
//! between pages and keeps its place in its cursor, so a backlog larger than one run drains
//! over the next ones. A stage that fails is logged and named in the summary; the others still
//! run (alarm upkeep too), and only then does the invocation fail, so that Lambda counts it
//! (and its dead-letter queue sees it). The metrics come from CloudWatch; the state (the minutes
//! derived, how far findings were notified, ...) is kept in the job log group ([`crate::state`]).

use crate::alarms::{self, SyncReport, Target};
use crate::cluster;
use crate::config::Config;
use crate::cw::Cw;
use crate::findings::{self, Finding};
use crate::scaling;
use anyhow::Result;
use serde::Serialize;
use std::time::{Duration, SystemTime};

/// Minutes between a minute and the invocation that derives it, besides the shippers' flush
/// interval (each node flushes at a random offset within it): the minute itself, and one for
/// ingestion.
pub const DELAY_BEYOND_FLUSH_MINUTES: i64 = 2;
/// [`DELAY_BEYOND_FLUSH_MINUTES`] with the shipper's default `flush_interval` of two minutes.
pub const DELAY_MINUTES: i64 =
    crate::config::DEFAULT_SHIPPER_FLUSH_MINUTES as i64 + DELAY_BEYOND_FLUSH_MINUTES;

/// Each stage's time. Their sum (55 s) stays under the function's default timeout (60 s).
/// (The cluster stage gave 3 s of its 15 to account budgets.)
#[derive(Debug, Clone, Copy)]
pub struct Budgets {
    /// Cluster figures and publishing them.
    pub cluster: Duration,
    /// Findings: no FilterLogEvents page is started after this...
    pub findings: Duration,
    /// ...and the stage is stopped after this (a page or a notice that hangs).
    pub findings_limit: Duration,
    /// Events a FilterLogEvents page holds.
    pub findings_page_limit: i32,
    /// Launch failures from PCS's scaling logs (a few pages at most, see [`scaling::MAX_PAGES`]).
    pub scaling: Duration,
    /// Events a scaling FilterLogEvents page holds.
    pub scaling_page_limit: i32,
    /// Account budgets: a GetMetricData, and on a crossing a few calls more.
    pub spend: Duration,
    pub alarms: Duration,
}

impl Default for Budgets {
    fn default() -> Self {
        Budgets {
            cluster: Duration::from_secs(12),
            findings: Duration::from_secs(15),
            findings_limit: Duration::from_secs(20),
            findings_page_limit: findings::PAGE_LIMIT,
            scaling: Duration::from_secs(5),
            scaling_page_limit: scaling::PAGE_LIMIT,
            spend: Duration::from_secs(3),
            alarms: Duration::from_secs(15),
        }
    }
}

/// `stage` within `budget`: an error, naming the budget, when it is not done in time.
async fn within<T>(budget: Duration, stage: impl std::future::Future<Output = Result<T>>) -> Result<T> {
    // Boxed: the invocation's future stays shallow enough for the compiler's layout limit.
    match tokio::time::timeout(budget, Box::pin(stage)).await {
        Ok(r) => r,
        Err(_) => anyhow::bail!("not done within its budget of {budget:?}; stopped"),
    }
}

/// The AWS clients the function uses.
pub struct Clients {
    pub cloudwatch: aws_sdk_cloudwatch::Client,
    pub logs: aws_sdk_cloudwatchlogs::Client,
    pub sns: aws_sdk_sns::Client,
    pub eventbridge: aws_sdk_eventbridge::Client,
}

impl Clients {
    /// The clients from the Lambda's environment; fails when there is no CA certificate to
    /// reach AWS with (the SDK would panic).
    pub async fn from_env() -> Result<Clients, slurm_cw_sink::aws::NoCaCertificates> {
        slurm_cw_sink::aws::ca_certificates()?;
        let sdk = aws_config::defaults(aws_config::BehaviorVersion::latest()).load().await;
        Ok(Clients {
            cloudwatch: aws_sdk_cloudwatch::Client::new(&sdk),
            logs: aws_sdk_cloudwatchlogs::Client::new(&sdk),
            sns: aws_sdk_sns::Client::new(&sdk),
            eventbridge: aws_sdk_eventbridge::Client::new(&sdk),
        })
    }
}

/// A stage that failed, and why.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FailedStage {
    pub stage: String,
    pub error: String,
}

/// What an invocation did (the function's response, and a log line).
#[derive(Debug, Default, Serialize)]
pub struct Summary {
    /// The newest minute this run could derive (its data complete), RFC 3339.
    pub minute: String,
    /// Minutes whose cluster figures this run published: those since the last run's, up to
    /// `minute` ([`crate::minutes`]).
    pub figure_minutes: u32,
    /// Minutes left out after a gap longer than a run catches up
    /// ([`crate::minutes::MAX_CATCH_UP_MINUTES`]).
    pub minutes_left_out: u32,
    pub datums_published: usize,
    pub datums_dropped: usize,
    /// Findings notified this run (or found, where no topic is configured).
    pub findings: Vec<Finding>,
    /// Findings read again and skipped: notified before, or delivered twice.
    pub findings_already_notified: usize,
    /// The event-time window of the job records read for findings, [from, to), RFC 3339.
    pub findings_window: Option<(String, String)>,
    /// Findings ingested before this (RFC 3339) were handled by earlier runs.
    pub findings_ingested_since: Option<String>,
    /// The findings scan ran out of its budget; the next run goes on with it.
    pub findings_scan_continues: bool,
    pub filter_log_events_pages: u32,
    pub backlog_events: usize,
    /// Launch failures from PCS's scaling logs sent this run (each once).
    pub launch_failures: Vec<scaling::LaunchFailure>,
    /// Scaling records that match a launch failure but are not as PCS documents them: skipped.
    pub pcs_scaling_malformed: usize,
    /// Launch failures of another PCS cluster in the group, skipped.
    pub pcs_scaling_other_cluster: usize,
    pub pcs_scaling_pages: u32,
    /// The scaling scan ran out of its pages; the next run goes on with it.
    pub pcs_scaling_scan_continues: bool,
    /// Accounts that passed a share of their monthly budget, told this run.
    pub budget_crossings: Vec<crate::budgets::Crossing>,
    pub alarms: SyncReport,
    pub get_metric_data_calls: u32,
    pub metrics_read: u32,
    pub list_metrics_calls: u32,
    pub failed_stages: Vec<FailedStage>,
}

impl Summary {
    /// Ok when every stage ran through, else an error naming the stages that failed.
    pub fn into_result(self) -> Result<Summary> {
        if self.failed_stages.is_empty() {
            return Ok(self);
        }
        let what: Vec<String> =
            self.failed_stages.iter().map(|f| format!("{}: {}", f.stage, f.error)).collect();
        anyhow::bail!("{} stage(s) failed: {}", what.len(), what.join("; "))
    }

    fn record<T>(&mut self, stage: &str, r: Result<T>) -> Option<T> {
        match r {
            Ok(v) => Some(v),
            Err(e) => {
                let error = format!("{e:#}");
                tracing::error!(stage, error = %error, "stage failed");
                self.failed_stages.push(FailedStage { stage: stage.into(), error });
                None
            }
        }
    }
}

/// The newest minute (epoch seconds) an invocation at `now` derives, where the nodes flush every
/// `flush_minutes`.
pub fn minute_for(now: SystemTime, flush_minutes: u32) -> i64 {
    let secs = crate::cw::epoch(now);
    secs - secs.rem_euclid(60) - (i64::from(flush_minutes) + DELAY_BEYOND_FLUSH_MINUTES) * 60
}

/// One invocation; an error when any stage failed, after all of them ran.
pub async fn handle(cfg: &Config, clients: &Clients, now: SystemTime) -> Result<Summary> {
    run(cfg, clients, now).await.into_result()
}

/// One invocation, every stage, whatever fails: the summary names the failed stages.
pub async fn run(cfg: &Config, clients: &Clients, now: SystemTime) -> Summary {
    // Boxed: the runtime's future stays within the compiler's layout depth.
    Box::pin(run_within(cfg, clients, now, Budgets::default())).await
}

/// [`run`] with other budgets (tests).
pub async fn run_within(cfg: &Config, clients: &Clients, now: SystemTime, budgets: Budgets) -> Summary {
    let at = minute_for(now, cfg.shipper_flush_minutes);
    let mut cw = Cw::new(clients.cloudwatch.clone(), cfg.namespace.clone(), cfg.cluster_name.clone());
    let mut summary = Summary {
        minute: slurm_cw_sink::datum::format_timestamp(crate::cw::at_epoch(at)),
        ..Summary::default()
    };

    let group = cfg.job_log_group();
    match within(budgets.cluster, async { Ok(cluster::stage(cfg, clients, &mut cw, at, &group).await) }).await
    {
        Ok(done) => {
            summary.figure_minutes = done.figure_minutes;
            summary.minutes_left_out = done.left_out;
            if let Some(events) = summary.record("cluster", done.events) {
                summary.backlog_events = events;
            }
            if let Some((sent, dropped)) = summary.record("publish", done.published) {
                (summary.datums_published, summary.datums_dropped) = (sent, dropped);
            }
            summary.record("minutes", done.state);
        }
        Err(e) => {
            summary.record::<()>("cluster", Err(e));
        }
    }

    let target =
        findings::Target { group: &group, cluster: &cfg.cluster_name, topic: cfg.sns_topic_arn.as_deref() };
    let mut progress = findings::Progress::default();
    let now_ms = now.duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64);
    let budget = findings::Budget {
        until: tokio::time::Instant::now() + budgets.findings,
        page_limit: budgets.findings_page_limit,
    };
    let found = within(
        budgets.findings_limit,
        findings::run(&clients.logs, &clients.sns, &target, now_ms, budget, &mut progress),
    )
    .await;
    summary.record("findings", found);
    summary.findings = progress.notified;
    summary.findings_already_notified = progress.already_notified;
    summary.findings_window = progress.window;
    summary.findings_ingested_since = progress.ingested_since;
    summary.findings_scan_continues = progress.scan_continues;
    summary.filter_log_events_pages = progress.filter_log_events_pages;

    if let Some(scaling_group) = &cfg.pcs_scaling_log_group {
        let target = scaling::Target {
            scaling_group,
            state_group: &group,
            cluster: &cfg.cluster_name,
            // The configuration requires it with the group; none matches no record.
            pcs_cluster_id: cfg.pcs_cluster_id.as_deref().unwrap_or_default(),
            bus: &cfg.event_bus,
            page_limit: budgets.scaling_page_limit,
        };
        let mut progress = scaling::Progress::default();
        let done = within(
            budgets.scaling,
            scaling::run(&clients.logs, &clients.eventbridge, &target, now_ms, &mut progress),
        )
        .await;
        summary.record("pcs_scaling", done);
        summary.launch_failures = progress.launch_failures;
        summary.pcs_scaling_malformed = progress.malformed;
        summary.pcs_scaling_other_cluster = progress.other_cluster;
        summary.pcs_scaling_pages = progress.filter_log_events_pages;
        summary.pcs_scaling_scan_continues = progress.scan_continues;
    }

    if !cfg.budgets.is_empty() {
        let target = crate::budgets::Target {
            group: &group,
            cluster: &cfg.cluster_name,
            bus: &cfg.event_bus,
            topic: cfg.sns_topic_arn.as_deref(),
            budgets: &cfg.budgets,
        };
        let told = within(
            budgets.spend,
            crate::budgets::run(&mut cw, &clients.logs, &clients.sns, &clients.eventbridge, &target, now),
        )
        .await;
        if let Some(told) = summary.record("budgets", told) {
            summary.budget_crossings = told;
        }
    }

    let prefix = cfg.alarm_prefix();
    let target = Target {
        namespace: &cfg.namespace,
        cluster: &cfg.cluster_name,
        prefix: &prefix,
        topic: cfg.sns_topic_arn.as_deref(),
    };
    if let Some(report) = summary.record(
        "alarms",
        within(budgets.alarms, alarms::sync(&clients.cloudwatch, &cfg.rules, &target)).await,
    ) {
        summary.alarms = report;
    }
    summary.get_metric_data_calls = cw.calls;
    summary.metrics_read = cw.queries;
    summary.list_metrics_calls = cw.list_calls;
    summary
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_minute_derived_lags_the_invocation() {
        let now = crate::cw::at_epoch(1_800_000_000 + 45);
        assert_eq!(minute_for(now, 2), (1_800_000_000 - 240));
        assert_eq!(minute_for(now, 2) % 60, 0);
        // Nodes that flush every five minutes: their minutes are complete seven minutes later.
        assert_eq!(minute_for(now, 5), (1_800_000_000 - 420));
    }
}
