//! Job findings: the nodes decide them (idle GPUs, low CPU efficiency, memory far over the
//! request) and write one `job_finding` record per job and kind to the job log group; this
//! module reads them and sends each to the SNS topic once.
//!
//! **Why FilterLogEvents and a cursor, not a subscription filter.** A subscription filter would
//! push each finding to the function as it arrives, but it takes one of the group's two
//! subscription slots, needs a second entry point (and permission) on the function, and a
//! delivery the function fails ends, after Lambda's asynchronous retries (none, as deployed), in
//! the dead-letter queue, from which nothing replays it. Polling on the schedule the function
//! already has keeps one entry point, and its only state, a cursor, lives where the findings are.
//!
//! **Read by ingestion.** A node's spool delivers records late after an outage (hours, up to the
//! spool's 14 days), with their own event times: a cursor on event time would pass them by. So
//! the cursor is on ingestion time, which FilterLogEvents returns with each event: each run
//! reads (pattern `{ $.Type = "job_finding" }`) the event-time window of the last
//! [`LATENESS_HOURS`], keeps the findings ingested since the cursor less
//! [`INGESTION_OVERLAP_MINUTES`] (an event can become searchable a little after its ingestion
//! time), skips those it notified already (by RecordId, remembered in the cursor), publishes
//! the rest, and moves the cursor to the newest ingestion time read, but never past the scan's
//! start ([`Scan::covered_to`]: a scan over several runs leaves behind it what was ingested
//! meanwhile with an older event time).
//!
//! **The bound and its cost.** A finding delivered more than [`LATENESS_HOURS`] after its event
//! time is not notified (it stays in the group; `slurm-cw-shipper report` shows the job). The
//! window is what FilterLogEvents scans each run: the group's last day of job records, every
//! minute. The scan is not billed (FilterLogEvents is a free API call) but takes time and calls:
//! it reads the day's events, a page at a time, to find the few findings. That time is bounded
//! by the stage's budget: a scan the budget cuts short is kept in the cursor (FilterLogEvents'
//! token) and the next run goes on with it, so a backlog drains over runs and never holds up
//! the other stages. A day is long enough for an outage of a node or of the function over a
//! night; a longer lateness would multiply every run's scan for records that rarely come.
//!
//! A run that fails before the cursor moves leaves the findings to the next run, so a notice sent
//! just before a failure may go out again: at least once, never lost.

mod cursor;

pub use cursor::{
    CURSOR_STREAM, CURSOR_TYPE, Cursor, MAX_REMEMBERED, Scan, read_cursor, remember, write_cursor,
};

use crate::cw::rfc3339_ms;
use anyhow::{Context, Result};
use aws_sdk_cloudwatchlogs::Client;
use serde::Serialize;
use serde_json::Value;
use slurm_cw_catalog::records;
use std::collections::HashSet;

/// How long after its event time a finding is still read (see the module's notes).
pub const LATENESS_HOURS: i64 = 24;
/// How far before the cursor's ingestion time each run reads again.
pub const INGESTION_OVERLAP_MINUTES: i64 = 10;
/// Events per FilterLogEvents page (its largest).
pub const PAGE_LIMIT: i32 = 10_000;

/// How long the stage may read, and how many events a page holds.
#[derive(Debug, Clone, Copy)]
pub struct Budget {
    /// No page is started after this; the scan goes on in the next run. One page is read
    /// whatever the budget, so every run makes progress.
    pub until: tokio::time::Instant,
    pub page_limit: i32,
}

/// A finding, as a node recorded it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Finding {
    /// idle_gpu, low_cpu_efficiency or memory_over_requested (records::findings).
    pub kind: String,
    pub job: String,
    pub user: String,
    pub account: String,
    pub partition: String,
    pub node: String,
    /// What was measured, in words.
    pub detail: String,
    pub record_id: String,
    /// The record's event time, RFC 3339.
    pub time: String,
    #[serde(skip)]
    pub event_ms: i64,
    /// When CloudWatch Logs took it in (epoch ms).
    #[serde(skip)]
    pub ingested_ms: i64,
}

/// What the findings stage did, filled in as it goes (so that a failed run still reports it).
#[derive(Debug, Default, Serialize)]
pub struct Progress {
    /// The event-time window read, RFC 3339: [from, the present).
    pub window: Option<(String, String)>,
    /// Findings ingested before this (RFC 3339) were handled by earlier runs.
    pub ingested_since: Option<String>,
    /// FilterLogEvents pages read.
    pub filter_log_events_pages: u32,
    /// Findings sent (or, with no topic, found) this run.
    pub notified: Vec<Finding>,
    /// Findings read again and skipped: notified by an earlier run, or a second delivery.
    pub already_notified: usize,
    /// The run's budget ran out before the scan's end: the next run goes on with it.
    pub scan_continues: bool,
    /// The cursor after the run (ingestion time, epoch ms), when it was written.
    pub cursor_ms: Option<i64>,
}

/// Where findings go; `None` topic: they are only reported in the run's summary.
pub struct Target<'a> {
    pub group: &'a str,
    pub cluster: &'a str,
    pub topic: Option<&'a str>,
}

/// The FilterLogEvents pattern that selects findings.
pub fn filter_pattern() -> String {
    format!(r#"{{ $.{} = "{}" }}"#, records::TYPE.name, records::kinds::JOB_FINDING)
}

fn text(v: &Value, field: &records::Field) -> String {
    match v.get(field.name) {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Null) | None => String::new(),
        Some(other) => other.to_string(),
    }
}

/// A finding from one log event; None when the message is not a finding record.
pub fn parse(message: &str, event_ms: i64, event_id: &str) -> Option<Finding> {
    let v: Value = serde_json::from_str(message).ok()?;
    if v.get(records::TYPE.name).and_then(Value::as_str) != Some(records::kinds::JOB_FINDING) {
        return None;
    }
    // A record without its id is keyed by its event, so it is at least not notified twice from
    // one delivery.
    let record_id = Some(text(&v, &records::RECORD_ID)).filter(|s| !s.is_empty());
    Some(Finding {
        kind: text(&v, &records::FINDING),
        job: text(&v, &records::JOB_ID),
        user: text(&v, &records::USER),
        account: text(&v, &records::ACCOUNT),
        partition: text(&v, &records::PARTITION),
        node: text(&v, &records::NODE_NAME),
        detail: text(&v, &records::DETAIL),
        record_id: record_id.unwrap_or_else(|| format!("event:{event_id}")),
        time: rfc3339_ms(event_ms),
        event_ms,
        ingested_ms: event_ms,
    })
}

/// One page of findings of `scan`: the findings, and the token of the next page (None: the
/// scan is over).
async fn read_page(
    logs: &Client,
    group: &str,
    scan: &Scan,
    limit: i32,
    p: &mut Progress,
) -> Result<(Vec<Finding>, Option<String>)> {
    p.filter_log_events_pages += 1;
    // No end time: the window runs to the present (a node's clock a little ahead included).
    let resp = logs
        .filter_log_events()
        .log_group_name(group)
        .filter_pattern(filter_pattern())
        .start_time(scan.from_ms)
        .limit(limit)
        .set_next_token(scan.token.clone())
        .send()
        .await
        .with_context(|| format!("FilterLogEvents {group}"))?;
    let mut out = Vec::new();
    for ev in resp.events() {
        let (Some(msg), Some(t)) = (ev.message(), ev.timestamp()) else { continue };
        match parse(msg, t, ev.event_id().unwrap_or_default()) {
            Some(mut f) => {
                f.ingested_ms = ev.ingestion_time().unwrap_or(t);
                out.push(f);
            }
            None => tracing::warn!(
                stream = ev.log_stream_name().unwrap_or_default(),
                "a log event matched the finding pattern but is not a finding record"
            ),
        }
    }
    let next = resp.next_token().map(str::to_owned);
    Ok((out, next.filter(|n| scan.token.as_ref() != Some(n))))
}

/// One run of the findings stage at `now_ms` (epoch ms), within `budget`.
pub async fn run(
    logs: &Client,
    sns: &aws_sdk_sns::Client,
    t: &Target<'_>,
    now_ms: i64,
    budget: Budget,
    p: &mut Progress,
) -> Result<()> {
    let (mut cursor, prev_event_ms) = match read_cursor(logs, t.group).await? {
        Some((c, ev)) => (c, ev),
        None => (Cursor::fresh(now_ms), 0),
    };
    let mut scan = cursor.scan(now_ms);
    p.window = Some((rfc3339_ms(scan.from_ms), rfc3339_ms(now_ms)));
    p.ingested_since = Some(rfc3339_ms(scan.since_ms));
    let mut seen: HashSet<String> = cursor.notified.iter().map(|(_, id)| id.clone()).collect();
    loop {
        let (page, next) = match read_page(logs, t.group, &scan, budget.page_limit, p).await {
            Ok(r) => r,
            // A token FilterLogEvents no longer takes (they last a day): the scan from its
            // start again, once; what it notified is remembered.
            Err(e) if scan.token.is_some() => {
                tracing::warn!(error = %format!("{e:#}"), "a findings scan cannot go on; starting it again");
                scan.token = None;
                scan.from_ms = now_ms - LATENESS_HOURS * 3_600_000;
                scan.started_ms = Some(now_ms);
                read_page(logs, t.group, &scan, budget.page_limit, p).await?
            }
            Err(e) => return Err(e),
        };
        let mut fresh = Vec::new();
        for f in page {
            if f.ingested_ms < scan.since_ms {
                continue;
            }
            scan.newest_ms = scan.newest_ms.max(f.ingested_ms);
            if seen.insert(f.record_id.clone()) {
                fresh.push(f);
            } else {
                p.already_notified += 1;
            }
        }
        fresh.sort_by(|a, b| (a.event_ms, &a.job, &a.kind).cmp(&(b.event_ms, &b.job, &b.kind)));
        if let Err(e) = notify(sns, t, &fresh, &mut cursor, p).await {
            // This page again next run; what went out is remembered.
            cursor.scan = Some(scan);
            save(logs, t.group, &mut cursor, now_ms, prev_event_ms).await.unwrap_or_else(
                |w| tracing::warn!(error = %w, "could not record the findings sent before the failure"),
            );
            return Err(e);
        }
        match next {
            None => {
                cursor.up_to_ms = scan.covered_to();
                break;
            }
            Some(token) => {
                scan.token = Some(token);
                if tokio::time::Instant::now() >= budget.until {
                    p.scan_continues = true;
                    cursor.scan = Some(scan);
                    break;
                }
            }
        }
    }
    save(logs, t.group, &mut cursor, now_ms, prev_event_ms).await?;
    p.cursor_ms = Some(cursor.up_to_ms);
    Ok(())
}

/// Publishes `fresh` (with no topic, only reports it); what went out is added to the cursor's
/// memory and to the progress, also when a later notice fails.
async fn notify(
    sns: &aws_sdk_sns::Client,
    t: &Target<'_>,
    fresh: &[Finding],
    cursor: &mut Cursor,
    p: &mut Progress,
) -> Result<()> {
    let mut sent = 0;
    let mut result = Ok(());
    match t.topic {
        Some(topic) => {
            for (subject, body, n) in crate::notify::notices(t.cluster, fresh) {
                if let Err(e) = crate::notify::publish(sns, topic, &subject, &body).await {
                    result = Err(e);
                    break;
                }
                sent += n;
            }
        }
        None => sent = fresh.len(),
    }
    cursor.notified.extend(fresh[..sent].iter().map(|f| (f.ingested_ms, f.record_id.clone())));
    p.notified.extend_from_slice(&fresh[..sent]);
    result
}

/// Writes the cursor, its memory trimmed to what later scans need.
async fn save(logs: &Client, group: &str, cursor: &mut Cursor, now_ms: i64, after_ms: i64) -> Result<()> {
    let need_from = match &cursor.scan {
        Some(s) => s.since_ms,
        None => cursor.up_to_ms - INGESTION_OVERLAP_MINUTES * 60_000,
    };
    cursor.notified = remember(std::mem::take(&mut cursor.notified), need_from, now_ms);
    write_cursor(logs, group, cursor, after_ms).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn findings_are_parsed_from_records_by_the_catalog_names() {
        let msg = serde_json::json!({
            "Type": "job_finding", "RecordId": "n1-7-idle_gpu", "JobId": "7", "User": "alice",
            "Account": "physics", "Partition": "gpu", "NodeName": "n1", "Finding": "idle_gpu",
            "Detail": "2 GPU(s) idle"
        })
        .to_string();
        let f = parse(&msg, 1_800_000_000_250, "e1").unwrap();
        assert_eq!(
            (f.job.as_str(), f.kind.as_str(), f.record_id.as_str()),
            ("7", "idle_gpu", "n1-7-idle_gpu")
        );
        assert_eq!((f.partition.as_str(), f.node.as_str()), ("gpu", "n1"));
        assert!(f.time.starts_with("2027-01-15T08:00:00"), "{}", f.time);
        // Numbers as they come; no id: keyed by the event.
        let f = parse(r#"{"Type": "job_finding", "JobId": 8}"#, 0, "e2").unwrap();
        assert_eq!((f.job.as_str(), f.record_id.as_str()), ("8", "event:e2"));
        assert!(parse(r#"{"Type": "job_sample", "JobId": "7"}"#, 0, "e").is_none());
        assert!(parse("not json", 0, "e").is_none());
        assert_eq!(filter_pattern(), r#"{ $.Type = "job_finding" }"#);
    }
}
