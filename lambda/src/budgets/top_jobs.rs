//! The jobs a budget notice names: the account's costliest this month, from the job summaries'
//! `CostUsd` (added over a job's nodes and runs). A busy account ends thousands of jobs a
//! month, more than the stage's few seconds can read, so the summaries are read a day at a time,
//! newest day first: the jobs that pushed the account over are read before those of the 1st,
//! and the notice says from when on every summary was read.

use anyhow::{Context, Result};
use aws_sdk_cloudwatchlogs::Client;
use slurm_cw_catalog::records as r;
use std::collections::BTreeMap;
use tokio::time::{Duration, Instant};

/// Jobs named in a notice.
const TOP: usize = 5;
/// Summaries are read this much event time at a time, newest first.
const SLICE_MS: i64 = 86_400_000;
/// FilterLogEvents pages a notice reads at most, whatever the time.
pub const MAX_PAGES: usize = 30;

/// The costliest jobs read.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TopJobs {
    /// (job, user, dollars), most first.
    pub jobs: Vec<(String, String, f64)>,
    /// Every summary since this time (epoch ms) was read: the month's start when all were; None
    /// when not even the last day's could be read in time.
    pub since_ms: Option<i64>,
}

/// The days (event time, epoch ms) read for a month that began at `from_ms`, newest first: the
/// first open-ended (a node's clock a little ahead), the last beginning at `from_ms`.
fn slices(from_ms: i64, now_ms: i64) -> impl Iterator<Item = (i64, Option<i64>)> {
    let mut end: Option<i64> = None;
    std::iter::from_fn(move || {
        let top = end.unwrap_or(now_ms);
        if end.is_some() && top <= from_ms {
            return None;
        }
        let start = (top - SLICE_MS).max(from_ms);
        let slice = (start, end);
        end = Some(start);
        Some(slice)
    })
}

/// The account's most expensive jobs since `from_ms`, read until `until` or `max_pages` pages.
pub async fn top_jobs(
    logs: &Client,
    group: &str,
    account: &str,
    (from_ms, now_ms): (i64, i64),
    until: Instant,
    max_pages: usize,
) -> Result<TopJobs> {
    let quoted = serde_json::to_string(account).context("account")?;
    let pattern = format!(
        "{{ $.{} = \"{}\" && $.{} = {quoted} }}",
        r::TYPE.name,
        r::kinds::JOB_SUMMARY,
        r::ACCOUNT.name
    );
    let mut per_job = PerJob::new();
    let mut since_ms = None;
    let mut pages = 0;
    'days: for (start, end) in slices(from_ms, now_ms) {
        let mut token = None;
        loop {
            let left = until.saturating_duration_since(Instant::now());
            if pages >= max_pages || left.is_zero() {
                break 'days;
            }
            pages += 1;
            let call = logs
                .filter_log_events()
                .log_group_name(group)
                .filter_pattern(&pattern)
                .start_time(start)
                .set_end_time(end)
                .set_next_token(token)
                .send();
            let Ok(resp) = tokio::time::timeout(left.max(Duration::from_millis(1)), call).await else {
                break 'days;
            };
            let resp = resp.with_context(|| format!("FilterLogEvents {group}"))?;
            for ev in resp.events() {
                add(&mut per_job, ev.message().unwrap_or_default(), account);
            }
            token = resp.next_token().map(str::to_owned);
            if token.is_none() {
                since_ms = Some(start);
                continue 'days;
            }
        }
    }
    let mut jobs: Vec<(String, String, f64)> =
        per_job.into_iter().map(|((j, u), runs)| (j, u, runs.values().map(|(_, usd)| usd).sum())).collect();
    jobs.sort_by(|a, b| b.2.total_cmp(&a.2).then_with(|| a.0.cmp(&b.0)));
    jobs.truncate(TOP);
    Ok(TopJobs { jobs, since_ms })
}

/// (job, user) -> run -> (its summary's LastSeen, dollars).
type PerJob = BTreeMap<(String, String), BTreeMap<String, (String, f64)>>;

/// One summary's dollars, under its job and run.
fn add(per_job: &mut PerJob, message: &str, account: &str) {
    let Ok(v) = serde_json::from_str::<serde_json::Value>(message) else { return };
    let text = |f: &r::Field| v.get(f.name).and_then(|x| x.as_str()).map(str::to_owned);
    // The pattern narrows the scan; the record itself decides (LocalStack, for one, matches
    // only part of a compound pattern).
    if text(&r::TYPE).as_deref() != Some(r::kinds::JOB_SUMMARY)
        || text(&r::ACCOUNT).as_deref() != Some(account)
    {
        return;
    }
    let (Some(job), Some(node), Some(usd)) =
        (text(&r::JOB_ID), text(&r::NODE_NAME), v.get(r::COST_USD.name).and_then(|x| x.as_f64()))
    else {
        return;
    };
    // The latest summary of a run on a node wins (by its LastSeen, not by the order read: the
    // days are read newest first, so a run's summary after its first step, days before its
    // last, comes after it): its summaries share a RecordId, and a run requeued onto the same
    // node has its own (records before runs: the node's). Read twice where two days meet, it
    // counts once.
    let user = text(&r::USER).unwrap_or_default();
    let run = text(&r::RECORD_ID).unwrap_or(node);
    let seen = text(&r::LAST_SEEN).unwrap_or_default();
    let runs = per_job.entry((job, user)).or_default();
    if runs.get(&run).is_none_or(|(old, _)| *old <= seen) {
        runs.insert(run, (seen, usd));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_month_is_read_a_day_at_a_time_newest_first() {
        let day = SLICE_MS;
        let from = 1_000 * day;
        let now = from + 2 * day + day / 2;
        let got: Vec<(i64, Option<i64>)> = slices(from, now).collect();
        assert_eq!(
            got,
            [(now - day, None), (now - 2 * day, Some(now - day)), (from, Some(now - 2 * day))],
            "open-ended first, the month's start last"
        );
        assert_eq!(slices(from, from + 5).collect::<Vec<_>>(), [(from, None)], "the month's first minutes");
    }

    #[test]
    fn a_jobs_dollars_add_over_its_nodes_and_runs_and_count_once() {
        let mut per_job = PerJob::new();
        let s = |id: &str, job: &str, node: &str, account: &str, usd: f64, seen: &str| {
            serde_json::json!({
                r::TYPE.name: r::kinds::JOB_SUMMARY, r::RECORD_ID.name: id, r::JOB_ID.name: job,
                r::USER.name: "alice", r::ACCOUNT.name: account, r::NODE_NAME.name: node, r::COST_USD.name: usd,
                r::LAST_SEEN.name: seen,
            })
            .to_string()
        };
        let (day3, day1) = ("2026-11-20T10:00:00Z", "2026-11-18T09:00:00Z");
        // Newest day first: n1's final summary of job 7, then the one after its first step.
        for m in [
            s("n1:7:1:summary", "7", "n1", "physics", 2_300.0, day3),
            s("n2:7:1:summary", "7", "n2", "physics", 5.0, day3),
            s("n2:7:1:summary", "7", "n2", "physics", 5.0, day3),
            s("n1:7:1:summary", "7", "n1", "physics", 0.5, day1),
            s("n1:9:1:summary", "9", "n1", "chem", 99.0, day3),
            "not json".into(),
        ] {
            add(&mut per_job, &m, "physics");
        }
        let sums: Vec<f64> = per_job.values().map(|runs| runs.values().map(|(_, usd)| usd).sum()).collect();
        assert_eq!((per_job.len(), sums), (1, vec![2_305.0]), "the later summary of a run, once");
    }
}
