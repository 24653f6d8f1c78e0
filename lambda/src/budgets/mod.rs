//! Account budgets: each account's spend this month (UTC) is the `Sum` of the nodes' `JobCost`
//! for that account since the month began; when it passes 80 % and then 100 % of the account's
//! monthly budget (`budgets` in the configuration), an EventBridge event and an SNS notice go
//! out, once each a month, naming the jobs that spent most (from the job summaries' `CostUsd`).
//! What was sent this month is the stage's state, in its own stream of the job log group; a
//! notice is sent before its state is written, so a failed write repeats a notice rather than
//! losing one.

use crate::cw::{Cw, Series};
use crate::state;
use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use slurm_cw_catalog::dims::ACCOUNT;
use slurm_cw_catalog::events::{self, budget};
use slurm_cw_catalog::metrics::JOB_COST;
use std::collections::BTreeMap;
use std::time::SystemTime;
use top_jobs::{MAX_PAGES, TopJobs, top_jobs};

pub mod top_jobs;

/// The stage's state stream in the job log group.
pub const STATE_STREAM: &str = "_lambda-budgets";
/// Shares of a budget that are told, in percent.
pub const THRESHOLDS: [u32; 2] = [80, 100];
/// The time the stage gives to reading the costliest jobs, over every account told this run:
/// its budget (3 s) less the reads before and the events and notices after.
const TOP_JOBS_TIME: std::time::Duration = std::time::Duration::from_millis(1_500);

/// What was sent in a month: account -> thresholds.
#[derive(Debug, Default, Serialize, Deserialize, PartialEq)]
struct Sent {
    month: String,
    sent: BTreeMap<String, Vec<u32>>,
}

/// One threshold an account passed, as told.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Crossing {
    pub account: String,
    pub month: String,
    pub threshold_percent: u32,
    pub spent_usd: f64,
    pub budget_usd: f64,
    /// (job, user, dollars), most first...
    pub top_jobs: Vec<(String, String, f64)>,
    /// ...of the jobs whose summaries since this time (epoch ms) were all read: the month's
    /// start when every one was; None when not even the last day's were.
    pub top_jobs_since_ms: Option<i64>,
}

/// `YYYY-MM` of `now` (UTC) and the month's first second, epoch seconds.
pub fn month_of(now: SystemTime) -> (String, i64) {
    let secs = crate::cw::epoch(now);
    let days = secs.div_euclid(86_400);
    // Civil date from days (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (format!("{year:04}-{month:02}"), (days - (day - 1)) * 86_400)
}

/// The thresholds `spent` passes of `budget` that `already` does not hold.
pub fn newly_crossed(spent: f64, budget: f64, already: &[u32]) -> Vec<u32> {
    THRESHOLDS
        .into_iter()
        .filter(|t| spent >= budget * f64::from(*t) / 100.0 && !already.contains(t))
        .collect()
}

pub struct Target<'a> {
    pub group: &'a str,
    pub cluster: &'a str,
    pub bus: &'a str,
    pub topic: Option<&'a str>,
    pub budgets: &'a BTreeMap<String, f64>,
}

/// The stage: the crossings told this run.
pub async fn run(
    cw: &mut Cw,
    logs: &aws_sdk_cloudwatchlogs::Client,
    sns: &aws_sdk_sns::Client,
    eb: &aws_sdk_eventbridge::Client,
    t: &Target<'_>,
    now: SystemTime,
) -> Result<Vec<Crossing>> {
    if t.budgets.is_empty() {
        return Ok(Vec::new());
    }
    let (month, start) = month_of(now);
    let previous = state::read_newest(logs, t.group, STATE_STREAM).await?;
    let after_ms = previous.as_ref().map_or(0, |(_, ms)| *ms);
    // Another month's state, or one that cannot be read, starts the month afresh.
    let mut sent = previous
        .and_then(|(m, _)| serde_json::from_str::<Sent>(&m).ok())
        .filter(|s| s.month == month)
        .unwrap_or(Sent { month: month.clone(), sent: BTreeMap::new() });
    let accounts: Vec<(&String, &f64)> = t.budgets.iter().collect();
    let series: Vec<Series> = accounts
        .iter()
        .map(|(a, _)| Series {
            metric: &JOB_COST,
            dims: vec![(ACCOUNT.to_owned(), (*a).clone())],
            stat: "Sum",
        })
        .collect();
    let end = crate::cw::epoch(now);
    let period = month_period(end - start);
    let points = cw.fetch(&series, crate::cw::at_epoch(start), now, period).await?;
    let crossing: Vec<(&String, f64, f64, Vec<u32>)> = accounts
        .into_iter()
        .zip(points)
        .filter_map(|((account, budget), p)| {
            let spent: f64 = p.values().sum();
            let already = sent.sent.get(account).cloned().unwrap_or_default();
            let crossed = newly_crossed(spent, *budget, &already);
            (!crossed.is_empty()).then_some((account, spent, *budget, crossed))
        })
        .collect();
    let mut told = Vec::new();
    let share = TOP_JOBS_TIME / crossing.len().max(1) as u32;
    let now_ms = end * 1000;
    for (account, spent, budget, crossed) in crossing {
        let until = tokio::time::Instant::now() + share;
        let read = top_jobs(logs, t.group, account, (start * 1000, now_ms), until, MAX_PAGES).await;
        let top = read.unwrap_or_else(|e| {
            tracing::warn!(account, error = %format!("{e:#}"), "the budget notice names no jobs");
            TopJobs::default()
        });
        for threshold_percent in crossed {
            told.push(Crossing {
                account: account.clone(),
                month: month.clone(),
                threshold_percent,
                spent_usd: spent,
                budget_usd: budget,
                top_jobs: top.jobs.clone(),
                top_jobs_since_ms: top.since_ms,
            });
        }
    }
    if told.is_empty() {
        return Ok(told);
    }
    let details = told.iter().map(|c| {
        serde_json::json!({
            events::CLUSTER: t.cluster,
            budget::ACCOUNT: c.account,
            budget::MONTH: c.month,
            budget::THRESHOLD_PERCENT: c.threshold_percent,
            budget::SPENT_USD: c.spent_usd,
            budget::BUDGET_USD: c.budget_usd,
            budget::TOP_JOBS: c.top_jobs.iter().map(|(j, u, d)| serde_json::json!({"job": j, "user": u, "cost_usd": d})).collect::<Vec<_>>(),
            budget::TOP_JOBS_SINCE: c.top_jobs_since_ms.map(crate::cw::rfc3339_ms),
        })
    });
    crate::notify::put_events(eb, t.bus, budget::DETAIL_TYPE, details).await?;
    if let Some(topic) = t.topic {
        for c in &told {
            let (subject, body) = notice(t.cluster, c);
            crate::notify::publish(sns, topic, &subject, &body).await?;
        }
    }
    for c in &told {
        sent.sent.entry(c.account.clone()).or_default().push(c.threshold_percent);
    }
    let text = serde_json::to_string(&sent).context("budget state")?;
    state::append(logs, t.group, STATE_STREAM, text, after_ms).await?;
    Ok(told)
}

/// The SNS notice of a crossing: (subject, body).
pub fn notice(cluster: &str, c: &Crossing) -> (String, String) {
    let subject = format!(
        "[{cluster}] account {} passed {}% of its {} budget",
        c.account, c.threshold_percent, c.month
    );
    let mut body = format!(
        "Account {} has spent ${:.2} of its ${:.2} budget for {} on cluster {cluster} ({:.0}%).\n",
        c.account,
        c.spent_usd,
        c.budget_usd,
        c.month,
        c.spent_usd / c.budget_usd * 100.0
    );
    if !c.top_jobs.is_empty() {
        // Read since a month's first second: all of it.
        let whole_month = |ms: i64| month_of(crate::cw::at_epoch(ms.div_euclid(1000))).1 * 1000 == ms;
        body.push_str(&match c.top_jobs_since_ms {
            Some(ms) if whole_month(ms) => "\nThe jobs that spent most this month:\n".to_owned(),
            Some(ms) => format!(
                "\nThe jobs that spent most among those that ended since {} (the summaries before were \
                 not read in time):\n",
                crate::cw::rfc3339_ms(ms)
            ),
            None => "\nThe jobs that spent most among the last day's summaries read in time (not all of \
                     them):\n"
                .to_owned(),
        });
        for (job, user, usd) in &c.top_jobs {
            body.push_str(&format!("  job {job} ({user}): ${usd:.2}\n"));
        }
    }
    body.push_str("\n`slurm-cw-shipper report <job>` shows a job's cost and waste per node.\n");
    // SNS subjects: at most 100 characters.
    (subject.chars().take(100).collect(), body)
}

/// One period over the whole month so far, `secs` long: a whole number of hours. CloudWatch
/// returns no data points for a period that is not a multiple of 300 s once the start is
/// over 15 days ago, or of 3600 s past 63 days ("MetricStat.Period" in the GetMetricData
/// reference): a multiple of 60 s would blind every notice from the 16th of the month on.
fn month_period(secs: i64) -> i32 {
    const HOUR: i64 = 3600;
    let hours = (secs.max(0) / HOUR + 1).min(i64::from(i32::MAX) / HOUR);
    i32::try_from(hours * HOUR).unwrap_or(i32::MAX / 3600 * 3600)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_month_so_far_is_one_period_cloudwatch_answers_at_any_age() {
        // 2026-11-20T10:02:30Z, 19 days 10 h 2 min 30 s into the month: the 60 s multiple the
        // code used before (1_677_780 s) is no multiple of 300, and CloudWatch returned nothing.
        let (_, start) = month_of(crate::cw::at_epoch(1_795_168_950));
        let period = month_period(1_795_168_950 - start);
        assert_eq!(period, 1_681_200, "467 whole hours");
        for secs in [0, 59, 3599, 3600, 1_677_750, 31 * 86_400 - 1] {
            let p = i64::from(month_period(secs));
            assert!(p > secs && p % 3600 == 0 && p - secs <= 3600, "{secs} s gives {p}");
        }
    }

    #[test]
    fn months_begin_on_the_first_utc() {
        // 2026-11-26T19:30:00Z
        let (m, start) = month_of(crate::cw::at_epoch(1_795_721_400));
        assert_eq!((m.as_str(), start), ("2026-11", 1_793_491_200), "2026-11-01T00:00:00Z");
        assert_eq!(month_of(crate::cw::at_epoch(1_793_491_200)).0, "2026-11");
        assert_eq!(month_of(crate::cw::at_epoch(1_793_491_199)).0, "2026-10");
        assert_eq!(month_of(crate::cw::at_epoch(951_782_400)).0, "2000-02", "2000-02-29");
    }

    #[test]
    fn each_threshold_is_told_once() {
        assert_eq!(newly_crossed(79.9, 100.0, &[]), Vec::<u32>::new());
        assert_eq!(newly_crossed(80.0, 100.0, &[]), vec![80]);
        assert_eq!(newly_crossed(130.0, 100.0, &[]), vec![80, 100]);
        assert_eq!(newly_crossed(130.0, 100.0, &[80]), vec![100]);
        assert_eq!(newly_crossed(130.0, 100.0, &[80, 100]), Vec::<u32>::new());
    }

    #[test]
    fn the_notice_says_the_dollars_and_the_jobs() {
        let c = Crossing {
            account: "physics".into(),
            month: "2026-11".into(),
            threshold_percent: 80,
            spent_usd: 812.5,
            budget_usd: 1000.0,
            top_jobs: vec![("4242".into(), "alice".into(), 310.25)],
            // 2026-11-01T00:00:00Z: every summary of the month read.
            top_jobs_since_ms: Some(1_793_491_200_000),
        };
        let (subject, body) = notice("hpc", &c);
        assert_eq!(subject, "[hpc] account physics passed 80% of its 2026-11 budget");
        assert!(
            body.contains("$812.50 of its $1000.00 budget")
                && body.contains("The jobs that spent most this month:\n  job 4242 (alice): $310.25"),
            "{body}"
        );
        // Only the summaries since the 20th read in time: the notice says so.
        let part = Crossing { top_jobs_since_ms: Some(1_795_132_800_000), ..c.clone() };
        let (_, body) = notice("hpc", &part);
        assert!(body.contains("among those that ended since 2026-11-20T00:00:00"), "{body}");
        let none = Crossing { top_jobs_since_ms: None, ..c };
        assert!(notice("hpc", &none).1.contains("not all of them"));
    }
}
