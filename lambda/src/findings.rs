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
//! Each run reads, with FilterLogEvents (pattern `{ $.Type = "job_finding" }`), the findings
//! whose event time lies in [cursor - [`LATENESS_MINUTES`], now - DELAY): the allowance takes in
//! records that arrive late (nodes flush at a random offset in the minute, and spool records
//! through an outage). Those it already notified it skips: the cursor keeps the RecordIds it
//! notified within the allowance. It publishes the rest, then writes the new cursor (one small
//! event in the group's [`CURSOR_STREAM`] stream; read back with GetLogEvents, newest first,
//! limit 1). A run that fails before the cursor moves leaves the findings to the next run, so a
//! notice sent just before a failure may go out again: at least once, never lost. The window is
//! time, never jobs: what a run reads does not grow with the jobs that finished.

use crate::cw::at_epoch;
use anyhow::{Context, Result};
use aws_sdk_cloudwatchlogs::Client;
use aws_sdk_cloudwatchlogs::types::InputLogEvent;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use slurm_cw_catalog::records;
use std::collections::HashSet;
use std::time::SystemTime;

/// The log stream, in the job log group, that holds the function's cursor. No node is named so:
/// Slurm node names do not start with '_'.
pub const CURSOR_STREAM: &str = "_lambda";
/// The cursor record's `Type`.
pub const CURSOR_TYPE: &str = "lambda_cursor";
/// How far before the cursor each run looks again, for records that arrive late.
pub const LATENESS_MINUTES: i64 = 10;
/// The longest event-time window one run reads: after an outage of the function, runs catch up
/// an hour at a time rather than reading the whole outage at once.
pub const MAX_WINDOW_MINUTES: i64 = 60;
/// The cursor remembers at most this many RecordIds (newest kept) and this many bytes of them,
/// so that it stays one small log event; more findings than that within the allowance could be
/// notified twice.
pub const MAX_REMEMBERED: usize = 2_000;
const MAX_REMEMBERED_BYTES: usize = 100_000;
/// GetLogEvents may answer with no events and a token to go on; this many pages at most.
const MAX_CURSOR_PAGES: usize = 10;

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
}

/// Epoch milliseconds as RFC 3339.
fn rfc3339_ms(ms: i64) -> String {
    let t = at_epoch(ms.div_euclid(1000)) + std::time::Duration::from_millis(ms.rem_euclid(1000) as u64);
    slurm_cw_sink::datum::format_timestamp(t)
}

/// The function's progress through the findings: one JSON log event in [`CURSOR_STREAM`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Cursor {
    #[serde(rename = "Type")]
    pub kind: String,
    /// Every finding with an earlier event time (epoch milliseconds) has been handled.
    #[serde(rename = "NotifiedUpTo")]
    pub up_to_ms: i64,
    /// (event time ms, RecordId) of the findings notified within the allowance before
    /// `up_to_ms`, and any notified beyond it by a run that failed part way.
    #[serde(rename = "Notified")]
    pub notified: Vec<(i64, String)>,
}

/// What the findings stage did, filled in as it goes (so that a failed run still reports it).
#[derive(Debug, Default, Serialize)]
pub struct Progress {
    /// The event-time window read, RFC 3339, [from, to).
    pub window: Option<(String, String)>,
    /// FilterLogEvents pages read.
    pub filter_log_events_pages: u32,
    /// Findings sent (or, with no topic, found) this run.
    pub notified: Vec<Finding>,
    /// Findings read again and skipped: notified by an earlier run, or a second delivery.
    pub already_notified: usize,
    /// The cursor after the run (epoch ms), when it was written.
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

/// The window a run for minute `at` (epoch seconds) reads, in epoch ms: from the cursor less the
/// allowance (or, with no cursor, the minute before `at`) up to `at`, at most
/// [`MAX_WINDOW_MINUTES`] long. None when the cursor is already at or past `at`.
pub fn window(cursor_ms: Option<i64>, at: i64) -> Option<(i64, i64)> {
    let to = at * 1000;
    let from = match cursor_ms {
        Some(c) if c >= to => return None,
        Some(c) => c - LATENESS_MINUTES * 60_000,
        None => to - 60_000,
    };
    Some((from, to.min(from + MAX_WINDOW_MINUTES * 60_000)))
}

/// The RecordIds to remember after moving the cursor to `up_to_ms`: those within the allowance
/// before it (a later run reads them again), newest first, bounded.
pub fn remember(mut notified: Vec<(i64, String)>, up_to_ms: i64) -> Vec<(i64, String)> {
    let keep_from = up_to_ms - LATENESS_MINUTES * 60_000;
    notified.retain(|(t, _)| *t >= keep_from);
    notified.sort_by(|a, b| b.cmp(a));
    notified.dedup_by(|a, b| a.1 == b.1);
    let mut bytes = 0;
    let mut kept = 0;
    for (_, id) in &notified {
        bytes += id.len() + 20;
        if kept == MAX_REMEMBERED || bytes > MAX_REMEMBERED_BYTES {
            tracing::warn!(
                dropped = notified.len() - kept,
                "more findings within the lateness allowance than the cursor remembers; those may be notified again"
            );
            break;
        }
        kept += 1;
    }
    notified.truncate(kept);
    notified
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
    })
}

/// The newest cursor and its event's time (ms); None when the stream is missing or empty.
pub async fn read_cursor(logs: &Client, group: &str) -> Result<Option<(Cursor, i64)>> {
    let mut token: Option<String> = None;
    for _ in 0..MAX_CURSOR_PAGES {
        let resp = match logs
            .get_log_events()
            .log_group_name(group)
            .log_stream_name(CURSOR_STREAM)
            .start_from_head(false)
            .limit(1)
            .set_next_token(token.clone())
            .send()
            .await
        {
            Ok(r) => r,
            Err(e) if e.as_service_error().is_some_and(|s| s.is_resource_not_found_exception()) => {
                return Ok(None);
            }
            Err(e) => return Err(e).context(format!("GetLogEvents {group} {CURSOR_STREAM}")),
        };
        if let Some(ev) = resp.events().last() {
            let msg = ev.message().unwrap_or_default();
            return match serde_json::from_str::<Cursor>(msg) {
                Ok(c) if c.kind == CURSOR_TYPE => Ok(Some((c, ev.timestamp().unwrap_or(0)))),
                _ => {
                    // Starting over costs at most the findings of the allowance, not a stuck function.
                    tracing::warn!(
                        message = msg,
                        "the newest event in the cursor stream is not a cursor; starting afresh"
                    );
                    Ok(None)
                }
            };
        }
        let next = resp.next_backward_token().map(str::to_owned);
        if next.is_none() || next == token {
            return Ok(None);
        }
        token = next;
    }
    Ok(None)
}

/// Writes `cursor` as the newest event of the cursor stream, creating the stream if missing.
/// `after_ms`: the previous cursor's event time, which this one must follow.
pub async fn write_cursor(logs: &Client, group: &str, cursor: &Cursor, after_ms: i64) -> Result<()> {
    let message = serde_json::to_string(cursor).context("cursor as JSON")?;
    // Newest by event time is what the next run reads: never behind the previous cursor.
    let now_ms = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64);
    let event = InputLogEvent::builder()
        .timestamp(now_ms.max(after_ms + 1))
        .message(message)
        .build()
        .context("cursor event")?;
    for attempt in 0..2 {
        match logs
            .put_log_events()
            .log_group_name(group)
            .log_stream_name(CURSOR_STREAM)
            .log_events(event.clone())
            .send()
            .await
        {
            Ok(resp) => {
                if let Some(r) = resp.rejected_log_events_info() {
                    anyhow::bail!("PutLogEvents {group} {CURSOR_STREAM}: the cursor was rejected: {r:?}");
                }
                return Ok(());
            }
            Err(e)
                if attempt == 0
                    && e.as_service_error().is_some_and(|s| s.is_resource_not_found_exception()) =>
            {
                match logs
                    .create_log_stream()
                    .log_group_name(group)
                    .log_stream_name(CURSOR_STREAM)
                    .send()
                    .await
                {
                    Ok(_) => {}
                    // Another run made it in between.
                    Err(e)
                        if e.as_service_error().is_some_and(|s| s.is_resource_already_exists_exception()) => {
                    }
                    Err(e) => return Err(e).context(format!("CreateLogStream {group} {CURSOR_STREAM}")),
                }
            }
            Err(e) => return Err(e).context(format!("PutLogEvents {group} {CURSOR_STREAM}")),
        }
    }
    anyhow::bail!("PutLogEvents {group} {CURSOR_STREAM}: the stream is still missing after creating it")
}

/// Every finding with an event time in [from_ms, to_ms), all pages.
async fn read_findings(
    logs: &Client,
    group: &str,
    from_ms: i64,
    to_ms: i64,
    p: &mut Progress,
) -> Result<Vec<Finding>> {
    let mut out = Vec::new();
    let mut token: Option<String> = None;
    loop {
        p.filter_log_events_pages += 1;
        let resp = logs
            .filter_log_events()
            .log_group_name(group)
            .filter_pattern(filter_pattern())
            .start_time(from_ms)
            // Both ends are inclusive in FilterLogEvents.
            .end_time(to_ms - 1)
            .set_next_token(token.clone())
            .send()
            .await
            .with_context(|| format!("FilterLogEvents {group}"))?;
        for ev in resp.events() {
            let (Some(msg), Some(t)) = (ev.message(), ev.timestamp()) else { continue };
            match parse(msg, t, ev.event_id().unwrap_or_default()) {
                Some(f) => out.push(f),
                None => tracing::warn!(
                    stream = ev.log_stream_name().unwrap_or_default(),
                    "a log event matched the finding pattern but is not a finding record"
                ),
            }
        }
        let next = resp.next_token().map(str::to_owned);
        if next.is_none() || next == token {
            return Ok(out);
        }
        token = next;
    }
}

/// One run of the findings stage for minute `at` (epoch seconds).
pub async fn run(
    logs: &Client,
    sns: &aws_sdk_sns::Client,
    t: &Target<'_>,
    at: i64,
    p: &mut Progress,
) -> Result<()> {
    let previous = read_cursor(logs, t.group).await?;
    let (prev_cursor, prev_event_ms) = match &previous {
        Some((c, ev)) => (Some(c), *ev),
        None => (None, 0),
    };
    let Some((from, to)) = window(prev_cursor.map(|c| c.up_to_ms), at) else { return Ok(()) };
    p.window = Some((rfc3339_ms(from), rfc3339_ms(to)));

    let mut notified: Vec<(i64, String)> = prev_cursor.map(|c| c.notified.clone()).unwrap_or_default();
    let mut seen: HashSet<String> = notified.iter().map(|(_, id)| id.clone()).collect();
    let mut fresh = Vec::new();
    for f in read_findings(logs, t.group, from, to, p).await? {
        if seen.insert(f.record_id.clone()) {
            fresh.push(f);
        } else {
            p.already_notified += 1;
        }
    }
    fresh.sort_by(|a, b| (a.event_ms, &a.job, &a.kind).cmp(&(b.event_ms, &b.job, &b.kind)));

    if let Some(topic) = t.topic {
        let mut sent = 0;
        for (subject, body, n) in crate::notify::notices(t.cluster, &fresh) {
            if let Err(e) = crate::notify::publish(sns, topic, &subject, &body).await {
                // Keep what went out, leave the cursor where it was: the next run sends the rest.
                let stay = prev_cursor.map_or(from, |c| c.up_to_ms);
                notified.extend(fresh[..sent].iter().map(|f| (f.event_ms, f.record_id.clone())));
                p.notified = fresh[..sent].to_vec();
                let cursor =
                    Cursor { kind: CURSOR_TYPE.into(), up_to_ms: stay, notified: remember(notified, stay) };
                if let Err(w) = write_cursor(logs, t.group, &cursor, prev_event_ms).await {
                    tracing::warn!(error = %w, "could not record the findings sent before the failure");
                }
                return Err(e);
            }
            sent += n;
        }
    }
    notified.extend(fresh.iter().map(|f| (f.event_ms, f.record_id.clone())));
    p.notified = fresh;
    let up_to = prev_cursor.map_or(to, |c| c.up_to_ms.max(to));
    let cursor = Cursor { kind: CURSOR_TYPE.into(), up_to_ms: up_to, notified: remember(notified, up_to) };
    write_cursor(logs, t.group, &cursor, prev_event_ms).await?;
    p.cursor_ms = Some(up_to);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_window_starts_before_the_cursor_and_is_bounded() {
        let at = 1_800_000_000;
        assert_eq!(window(None, at), Some((at * 1000 - 60_000, at * 1000)), "no cursor: the minute before");
        let c = at * 1000 - 60_000;
        assert_eq!(window(Some(c), at), Some((c - 600_000, at * 1000)));
        assert_eq!(window(Some(at * 1000), at), None, "nothing new");
        // Days behind: an hour at a time.
        let old = at * 1000 - 86_400_000;
        assert_eq!(window(Some(old), at), Some((old - 600_000, old - 600_000 + 3_600_000)));
    }

    #[test]
    fn the_cursor_remembers_only_the_allowance_and_a_bounded_number() {
        let up_to = 10_000_000;
        let ids = vec![
            (up_to - 700_000, "old".to_owned()),
            (up_to - 100, "recent".to_owned()),
            (up_to + 5, "beyond".to_owned()),
            (up_to - 100, "recent".to_owned()),
        ];
        let kept = remember(ids, up_to);
        assert_eq!(kept, vec![(up_to + 5, "beyond".to_owned()), (up_to - 100, "recent".to_owned())]);
        let many: Vec<(i64, String)> = (0..5_000).map(|i| (up_to - i, format!("r{i}"))).collect();
        let kept = remember(many, up_to);
        assert_eq!(kept.len(), MAX_REMEMBERED);
        assert_eq!(kept[0].1, "r0", "the newest are kept");
        let line =
            serde_json::to_string(&Cursor { kind: CURSOR_TYPE.into(), up_to_ms: up_to, notified: kept })
                .unwrap();
        assert!(line.len() < 200_000, "one small log event");
    }

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
