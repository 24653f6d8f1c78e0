//! Launch failures from AWS PCS's scaling logs: where PCS delivers `PCS_SCALING_LOGS` to a
//! CloudWatch Logs group (the `pcs_scaling_log_group` key), each record of a node whose launch
//! failed (`status_code` `LAUNCH_FAILED`, with its `reason_code`, description and EC2's error
//! code) goes out once as an EventBridge event beside the backlog events (same source, detail-type
//! [`LAUNCH_FAILED_DETAIL_TYPE`]): the autoscaler learns that capacity is not coming, and why,
//! from PCS's own record rather than from a guess on node states.
//!
//! **Reading.** FilterLogEvents with the pattern `{ $.status_code = "LAUNCH_FAILED" }` over the
//! event-time window of the last [`LOOKBACK_MINUTES`], at most [`MAX_PAGES`] pages of
//! [`PAGE_LIMIT`] events a run: a scan cut there is kept (FilterLogEvents' token) and the next run
//! goes on with it. (Logs Insights would answer the same question in one query, but it is billed
//! per byte scanned and LocalStack, which the tests run against, does not emulate it.)
//!
//! **Once.** The cursor, one event in the job log group's [`CURSOR_STREAM`] ([`crate::state`]),
//! remembers the log events read within the window (by event id); a record delivered more than
//! [`LOOKBACK_MINUTES`] after its event time is not reported. Events are sent before the cursor
//! moves: a run that fails in between sends them again (at least once, never lost). When
//! EventBridge refuses a chunk, the cursor still records those it took, so that only the rest
//! go again. A saved scan token FilterLogEvents no longer takes (they expire) starts the window
//! again, once, instead of failing every later run.
//!
//! **This cluster's.** Only records whose `resource_id` is the configured `pcs_cluster_id` are
//! sent: another cluster delivering to the same group is counted and skipped.
//!
//! **Malformed records.** A record that matches the pattern but lacks a documented field (or is
//! not a JSON object) is counted in the run's summary and logged, never fatal.

use crate::cw::rfc3339_ms;
use anyhow::{Context, Result};
use aws_sdk_cloudwatchlogs::Client;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use slurm_cw_catalog::pcs::{LAUNCH_FAILED_DETAIL_TYPE, event, scaling as f};
use std::collections::HashSet;

/// The stream of the job log group that holds this stage's cursor.
pub const CURSOR_STREAM: &str = "_lambda-pcs-scaling";
/// The cursor record's `Type`.
pub const CURSOR_TYPE: &str = "lambda_pcs_scaling_cursor";
/// How far back (event time) each run reads.
pub const LOOKBACK_MINUTES: i64 = 60;
/// Events per FilterLogEvents page...
pub const PAGE_LIMIT: i32 = 1_000;
/// ...and pages a run reads at most.
pub const MAX_PAGES: u32 = 3;
/// Event ids the cursor remembers at most.
const MAX_SEEN: usize = 5_000;

/// This stage's state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Cursor {
    #[serde(rename = "Type")]
    pub kind: String,
    /// (event time ms, log event id) of the records read within the window.
    #[serde(rename = "Seen")]
    pub seen: Vec<(i64, String)>,
    /// A scan cut by [`MAX_PAGES`], for the next run to go on with.
    #[serde(rename = "Scan", default, skip_serializing_if = "Option::is_none")]
    pub scan: Option<Scan>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Scan {
    #[serde(rename = "From")]
    pub from_ms: i64,
    #[serde(rename = "Token")]
    pub token: String,
}

/// A node whose launch failed, as PCS recorded it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LaunchFailure {
    /// The event's `detail`: the record's fields under their PCS names, and `time`.
    pub detail: Map<String, Value>,
    #[serde(skip)]
    pub event_ms: i64,
}

impl LaunchFailure {
    pub fn field(&self, name: &str) -> &str {
        self.detail.get(name).and_then(Value::as_str).unwrap_or_default()
    }
}

/// What one scaling record is.
#[derive(Debug, PartialEq)]
pub enum Record {
    LaunchFailure(LaunchFailure),
    /// Another transition (the pattern selects launch failures; a record naming LAUNCH_FAILED
    /// elsewhere lands here).
    Other,
    /// Not what PCS documents, and why.
    Malformed(String),
}

/// One scaling record from its log event's message.
pub fn parse(message: &str) -> Record {
    let v: Value = match serde_json::from_str(message) {
        Ok(v) => v,
        Err(e) => return Record::Malformed(format!("not JSON: {e}")),
    };
    let Some(obj) = v.as_object() else { return Record::Malformed("not a JSON object".into()) };
    match obj.get(f::STATUS_CODE).and_then(Value::as_str) {
        Some(f::LAUNCH_FAILED) => {}
        Some(_) => return Record::Other,
        None => return Record::Malformed(format!("no {}", f::STATUS_CODE)),
    }
    let Some(ms) = obj.get(f::EVENT_TIMESTAMP).and_then(Value::as_i64) else {
        return Record::Malformed(format!("no {} (epoch ms)", f::EVENT_TIMESTAMP));
    };
    let mut detail = Map::new();
    for key in
        [f::RESOURCE_ID, f::COMPUTE_NODE_GROUP_ID, f::SCHEDULER_NODE_ID, f::REASON_CODE, f::DESCRIPTION]
    {
        match obj.get(key).and_then(Value::as_str) {
            Some(s) => detail.insert(key.into(), s.into()),
            None => return Record::Malformed(format!("no {key}")),
        };
    }
    match obj.get(f::DETAILS) {
        None | Some(Value::Null) => {}
        Some(Value::Object(d)) => {
            for key in [
                f::details::EC2_ERROR_CODE,
                f::details::INSTANCE_TYPE,
                f::details::SUBNET_ID,
                f::details::INSTANCE_ID,
            ] {
                if let Some(s) = d.get(key).and_then(Value::as_str) {
                    detail.insert(key.into(), s.into());
                }
            }
        }
        Some(_) => return Record::Malformed(format!("{} is not an object", f::DETAILS)),
    }
    detail.insert(event::TIME.into(), rfc3339_ms(ms).into());
    Record::LaunchFailure(LaunchFailure { detail, event_ms: ms })
}

/// The pattern that selects launch failures.
pub fn filter_pattern() -> String {
    format!(r#"{{ $.{} = "{}" }}"#, f::STATUS_CODE, f::LAUNCH_FAILED)
}

/// What the stage did, filled in as it goes.
#[derive(Debug, Default, Serialize)]
pub struct Progress {
    /// Launch failures sent this run.
    pub launch_failures: Vec<LaunchFailure>,
    /// Records read again and skipped (reported by an earlier run).
    pub already_reported: usize,
    /// Records that match the pattern but are not what PCS documents.
    pub malformed: usize,
    /// Launch failures of another PCS cluster (another `resource_id`), skipped.
    pub other_cluster: usize,
    pub filter_log_events_pages: u32,
    /// The page bound cut the scan: the next run goes on with it.
    pub scan_continues: bool,
}

/// Where the stage reads, keeps its cursor and sends.
pub struct Target<'a> {
    /// The group PCS delivers the scaling logs to.
    pub scaling_group: &'a str,
    /// The job log group, where the cursor lives.
    pub state_group: &'a str,
    pub cluster: &'a str,
    /// This cluster's PCS id: records with another `resource_id` are skipped.
    pub pcs_cluster_id: &'a str,
    pub bus: &'a str,
    /// Events per page ([`PAGE_LIMIT`] but in tests).
    pub page_limit: i32,
}

/// An id for a log event that came without one (LocalStack, older APIs): its time and message.
fn fallback_id(t: i64, msg: &str) -> String {
    use std::hash::{Hash, Hasher};
    // DefaultHasher::new() has fixed keys: the same id in every run.
    let mut h = std::collections::hash_map::DefaultHasher::new();
    msg.hash(&mut h);
    format!("{t}-{:016x}", h.finish())
}

async fn read_cursor(logs: &Client, group: &str) -> Result<(Cursor, i64)> {
    let fresh = Cursor { kind: CURSOR_TYPE.into(), seen: Vec::new(), scan: None };
    let Some((msg, t)) = crate::state::read_newest(logs, group, CURSOR_STREAM).await? else {
        return Ok((fresh, 0));
    };
    match serde_json::from_str::<Cursor>(&msg) {
        Ok(c) if c.kind == CURSOR_TYPE => Ok((c, t)),
        _ => {
            tracing::warn!(
                message = msg,
                "the newest event in the scaling cursor stream is not a cursor; starting afresh"
            );
            Ok((fresh, t))
        }
    }
}

/// One page of the scan from `from_ms`: `token`'s page, or the first.
async fn read_page(
    logs: &Client,
    t: &Target<'_>,
    from_ms: i64,
    token: Option<String>,
) -> Result<aws_sdk_cloudwatchlogs::operation::filter_log_events::FilterLogEventsOutput> {
    logs.filter_log_events()
        .log_group_name(t.scaling_group)
        .filter_pattern(filter_pattern())
        .start_time(from_ms)
        .limit(t.page_limit)
        .set_next_token(token)
        .send()
        .await
        .with_context(|| format!("FilterLogEvents {}", t.scaling_group))
}

/// One run of the stage at `now_ms`.
pub async fn run(
    logs: &Client,
    eb: &aws_sdk_eventbridge::Client,
    t: &Target<'_>,
    now_ms: i64,
    p: &mut Progress,
) -> Result<()> {
    let (mut cursor, prev_ms) = read_cursor(logs, t.state_group).await?;
    let mut started = cursor.scan.take();
    let mut from_ms = started.as_ref().map_or(now_ms - LOOKBACK_MINUTES * 60_000, |s| s.from_ms);
    let mut token = started.as_ref().map(|s| s.token.clone());
    let mut seen: HashSet<String> = cursor.seen.iter().map(|(_, id)| id.clone()).collect();
    // Launch failures read, with (event time, id): remembered once EventBridge takes them.
    let mut fresh: Vec<(i64, String, LaunchFailure)> = Vec::new();
    let mut restarted = false;
    loop {
        p.filter_log_events_pages += 1;
        let resp = match read_page(logs, t, from_ms, token.clone()).await {
            Ok(r) => r,
            // A token FilterLogEvents no longer takes (expired, refused): the window from its
            // start again, once, as the findings stage does; what was sent is remembered.
            Err(e) if token.is_some() && !restarted => {
                tracing::warn!(error = %format!("{e:#}"), "a PCS scaling scan cannot go on; starting it again");
                (restarted, started, token) = (true, None, None);
                from_ms = now_ms - LOOKBACK_MINUTES * 60_000;
                read_page(logs, t, from_ms, None).await?
            }
            Err(e) => return Err(e),
        };
        for ev in resp.events() {
            let (Some(msg), Some(ts)) = (ev.message(), ev.timestamp()) else { continue };
            let id = ev.event_id().map_or_else(|| fallback_id(ts, msg), str::to_owned);
            if !seen.insert(id.clone()) {
                p.already_reported += 1;
                continue;
            }
            match parse(msg) {
                // Another cluster's record in the same group is not this cluster's news.
                Record::LaunchFailure(lf) if lf.field(f::RESOURCE_ID) != t.pcs_cluster_id => {
                    p.other_cluster += 1;
                    tracing::warn!(
                        group = t.scaling_group,
                        resource_id = lf.field(f::RESOURCE_ID),
                        expected = t.pcs_cluster_id,
                        "a PCS launch failure of another cluster; skipped"
                    );
                    cursor.seen.push((ts, id));
                }
                Record::LaunchFailure(lf) => fresh.push((ts, id, lf)),
                Record::Other => cursor.seen.push((ts, id)),
                Record::Malformed(why) => {
                    p.malformed += 1;
                    tracing::warn!(
                        group = t.scaling_group,
                        stream = ev.log_stream_name().unwrap_or_default(),
                        why,
                        "a PCS scaling record is not as documented; skipped"
                    );
                    cursor.seen.push((ts, id));
                }
            }
        }
        let next = resp.next_token().map(str::to_owned).filter(|n| token.as_ref() != Some(n));
        match next {
            None => break,
            Some(n) if p.filter_log_events_pages >= MAX_PAGES => {
                p.scan_continues = true;
                cursor.scan = Some(Scan { from_ms, token: n });
                break;
            }
            Some(n) => token = Some(n),
        }
    }
    fresh.sort_by_key(|(_, _, lf)| lf.event_ms);
    let mut taken = vec![false; fresh.len()];
    let sent = send(eb, t, fresh.iter().map(|(_, _, lf)| lf), &mut |i| taken[i] = true).await;
    for ((ts, id, lf), ok) in fresh.into_iter().zip(taken) {
        if ok {
            cursor.seen.push((ts, id));
            p.launch_failures.push(lf);
        }
    }
    if sent.is_err() {
        // The same pages again next run; those EventBridge took are remembered, not sent again.
        cursor.scan = started;
        p.scan_continues = false;
    }
    cursor.seen = remember(std::mem::take(&mut cursor.seen), now_ms);
    let message = serde_json::to_string(&cursor).context("scaling cursor as JSON")?;
    let saved = crate::state::append(logs, t.state_group, CURSOR_STREAM, message, prev_ms).await;
    match sent {
        Err(e) => {
            if let Err(w) = saved {
                tracing::warn!(error = %format!("{w:#}"), "could not record the launch failures sent before the refusal");
            }
            Err(e)
        }
        Ok(()) => saved,
    }
}

/// The ids to keep: those whose event time a later window still covers, newest first, bounded.
pub fn remember(mut seen: Vec<(i64, String)>, now_ms: i64) -> Vec<(i64, String)> {
    // A little past the window: a run later than the schedule reads back a little further.
    let oldest = now_ms - (LOOKBACK_MINUTES + 10) * 60_000;
    seen.retain(|(t, _)| *t >= oldest);
    seen.sort_by(|a, b| b.cmp(a));
    seen.dedup();
    if seen.len() > MAX_SEEN {
        tracing::warn!(
            dropped = seen.len() - MAX_SEEN,
            "more scaling records in the window than the cursor remembers"
        );
        seen.truncate(MAX_SEEN);
    }
    seen
}

/// One event per launch failure; `taken` is told the index of each EventBridge took.
async fn send<'f>(
    eb: &aws_sdk_eventbridge::Client,
    t: &Target<'_>,
    failures: impl Iterator<Item = &'f LaunchFailure>,
    taken: &mut dyn FnMut(usize),
) -> Result<()> {
    let details = failures.map(|f| {
        let mut detail = f.detail.clone();
        detail.insert(event::CLUSTER.into(), t.cluster.into());
        Value::Object(detail)
    });
    crate::notify::put_events_marking(eb, t.bus, LAUNCH_FAILED_DETAIL_TYPE, details, taken).await
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/pcs");

    fn fixture(name: &str) -> String {
        std::fs::read_to_string(format!("{FIXTURES}/{name}")).unwrap()
    }

    #[test]
    fn the_documented_launch_failure_is_read_by_its_documented_fields() {
        let Record::LaunchFailure(lf) = parse(&fixture("scaling-launch-failed.json")) else { panic!() };
        assert_eq!(lf.field(f::REASON_CODE), "INSUFFICIENT_CAPACITY");
        assert_eq!(lf.field(f::SCHEDULER_NODE_ID), "compute-2");
        assert_eq!(lf.field(f::COMPUTE_NODE_GROUP_ID), "pcs_abcdef01");
        assert_eq!(lf.field(f::RESOURCE_ID), "pcs_abc123de45");
        assert_eq!(lf.field(f::details::EC2_ERROR_CODE), "InsufficientInstanceCapacity");
        assert_eq!(lf.event_ms, 1_789_179_816_460);
        assert_eq!(lf.field(event::TIME), "2026-09-12T02:23:36.46Z");
        assert!(lf.detail.get(f::details::INSTANCE_ID).is_none(), "no instance after a failed launch");
        assert_eq!(parse(&fixture("scaling-launched.json")), Record::Other);
    }

    #[test]
    fn malformed_records_say_why() {
        for (msg, why) in [
            ("not json", "not JSON"),
            ("[1]", "not a JSON object"),
            (r#"{"status_code": "LAUNCH_FAILED"}"#, "event_timestamp"),
            (r#"{"status_code": "LAUNCH_FAILED", "event_timestamp": "soon"}"#, "event_timestamp"),
            (
                r#"{"status_code": "LAUNCH_FAILED", "event_timestamp": 1, "resource_id": "r", "compute_node_group_id": "g", "scheduler_node_id": "n", "description": "d"}"#,
                "reason_code",
            ),
            (
                r#"{"status_code": "LAUNCH_FAILED", "event_timestamp": 1, "resource_id": "r", "compute_node_group_id": "g", "scheduler_node_id": "n", "reason_code": "X", "description": "d", "details": "x"}"#,
                "details",
            ),
        ] {
            match parse(msg) {
                Record::Malformed(w) => assert!(w.contains(why), "{msg}: {w}"),
                other => panic!("{msg}: {other:?}"),
            }
        }
        assert_eq!(filter_pattern(), r#"{ $.status_code = "LAUNCH_FAILED" }"#);
    }

    #[test]
    fn the_cursor_remembers_the_window_bounded() {
        let now = 100 * 3_600_000;
        let seen = vec![
            (now - 2 * 3_600_000, "old".to_owned()),
            (now - 60_000, "a".into()),
            (now - 60_000, "a".into()),
        ];
        assert_eq!(remember(seen, now), vec![(now - 60_000, "a".to_owned())]);
        let many: Vec<(i64, String)> = (0..6_000).map(|i| (now - i, format!("e{i}"))).collect();
        let kept = remember(many, now);
        assert_eq!((kept.len(), kept[0].1.as_str()), (MAX_SEEN, "e0"));
        assert_eq!(fallback_id(5, "m"), fallback_id(5, "m"));
        assert_ne!(fallback_id(5, "m"), fallback_id(5, "n"));
    }
}
