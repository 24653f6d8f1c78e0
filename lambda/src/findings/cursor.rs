//! The findings stage's state: one small JSON event, the newest of the job log group's
//! [`CURSOR_STREAM`] stream ([`crate::state`]).

use super::{INGESTION_OVERLAP_MINUTES, LATENESS_HOURS};
use anyhow::{Context, Result};
use aws_sdk_cloudwatchlogs::Client;
use serde::{Deserialize, Serialize};

/// The log stream, in the job log group, that holds the function's cursor. No node is named so:
/// Slurm node names do not start with '_'.
pub const CURSOR_STREAM: &str = crate::state::STREAM_PREFIX;
/// The cursor record's `Type`.
pub const CURSOR_TYPE: &str = "lambda_cursor";
/// The cursor remembers at most this many RecordIds and this many bytes of them, so that it
/// stays one small log event.
pub const MAX_REMEMBERED: usize = 2_000;
const MAX_REMEMBERED_BYTES: usize = 100_000;

/// The function's progress through the findings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Cursor {
    #[serde(rename = "Type")]
    pub kind: String,
    /// Ingestion time (epoch ms) of the newest finding a finished scan read: every finding
    /// ingested before it less the overlap has been handled. (Read from an older cursor's
    /// `NotifiedUpTo`, an event time, which is no later than the ingestion of what it covered.)
    #[serde(rename = "IngestedUpTo", alias = "NotifiedUpTo")]
    pub up_to_ms: i64,
    /// (ingestion ms, RecordId) of findings notified, newest first, bounded: the second
    /// delivery of a record is skipped whenever it comes within [`LATENESS_HOURS`].
    #[serde(rename = "Notified")]
    pub notified: Vec<(i64, String)>,
    /// A scan that ran out of its run's time, for the next run to go on with.
    #[serde(rename = "Scan", default, skip_serializing_if = "Option::is_none")]
    pub scan: Option<Scan>,
}

/// One pass of FilterLogEvents over the event-time window, possibly across runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Scan {
    /// The window's start (event time, epoch ms); it runs to the present.
    #[serde(rename = "From")]
    pub from_ms: i64,
    /// Findings ingested before this (epoch ms) were handled by earlier scans.
    #[serde(rename = "Since")]
    pub since_ms: i64,
    /// The newest ingestion time read so far.
    #[serde(rename = "Newest")]
    pub newest_ms: i64,
    /// FilterLogEvents' token for the page to read next (valid 24 hours); None: the first.
    #[serde(rename = "Token", default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    /// When the scan began (epoch ms): everything ingested before it is behind the scan's
    /// position when the scan ends, whatever its event time. (None: a scan an older function
    /// began.)
    #[serde(rename = "Started", default, skip_serializing_if = "Option::is_none")]
    pub started_ms: Option<i64>,
}

impl Scan {
    /// Where the cursor goes when the scan ends: the newest ingestion time it read, but never
    /// past its own start. A scan over several runs reads pages in event-time order, so a
    /// finding ingested meanwhile with an older event time (a node's spool after an outage) lands
    /// behind its position, unread; the next scan must still take it, though newer findings
    /// were read after it was ingested.
    pub fn covered_to(&self) -> i64 {
        self.started_ms.map_or(self.newest_ms, |s| self.newest_ms.min(s))
    }
}

impl Cursor {
    /// A start with no cursor: findings ingested in the overlap before `now_ms`.
    pub fn fresh(now_ms: i64) -> Cursor {
        Cursor { kind: CURSOR_TYPE.into(), up_to_ms: now_ms, notified: Vec::new(), scan: None }
    }

    /// The scan in progress, or a new one over the findings of [`LATENESS_HOURS`] before
    /// `now_ms` ingested since the cursor less the overlap.
    pub fn scan(&mut self, now_ms: i64) -> Scan {
        self.scan.take().unwrap_or(Scan {
            from_ms: now_ms - LATENESS_HOURS * 3_600_000,
            since_ms: self.up_to_ms - INGESTION_OVERLAP_MINUTES * 60_000,
            newest_ms: self.up_to_ms,
            token: None,
            started_ms: Some(now_ms),
        })
    }
}

/// The RecordIds to keep: every one ingested since `need_from` (the next scan reads those
/// again), then the newest of the rest within [`LATENESS_HOURS`] of `now_ms`, bounded.
pub fn remember(mut notified: Vec<(i64, String)>, need_from: i64, now_ms: i64) -> Vec<(i64, String)> {
    let oldest = now_ms - LATENESS_HOURS * 3_600_000;
    notified.retain(|(t, _)| *t >= oldest);
    notified.sort_by(|a, b| b.cmp(a));
    let mut ids = std::collections::HashSet::new();
    notified.retain(|(_, id)| ids.insert(id.clone()));
    let (mut bytes, mut kept) = (0, 0);
    for (t, id) in &notified {
        bytes += id.len() + 20;
        if kept == MAX_REMEMBERED || bytes > MAX_REMEMBERED_BYTES {
            if *t >= need_from {
                tracing::warn!(
                    dropped = notified.len() - kept,
                    "more findings in the ingestion overlap than the cursor remembers; those may be notified again"
                );
            }
            break;
        }
        kept += 1;
    }
    notified.truncate(kept);
    notified
}

/// The newest cursor and its event's time (ms); None when the stream is missing or empty.
pub async fn read_cursor(logs: &Client, group: &str) -> Result<Option<(Cursor, i64)>> {
    let Some((msg, t)) = crate::state::read_newest(logs, group, CURSOR_STREAM).await? else {
        return Ok(None);
    };
    match serde_json::from_str::<Cursor>(&msg) {
        Ok(c) if c.kind == CURSOR_TYPE => Ok(Some((c, t))),
        _ => {
            // Starting over costs at most the findings of the overlap, not a stuck function.
            tracing::warn!(
                message = msg,
                "the newest event in the cursor stream is not a cursor; starting afresh"
            );
            Ok(None)
        }
    }
}

/// Writes `cursor` as the newest event of the cursor stream, creating the stream if missing.
/// `after_ms`: the previous cursor's event time, which this one must follow.
pub async fn write_cursor(logs: &Client, group: &str, cursor: &Cursor, after_ms: i64) -> Result<()> {
    let message = serde_json::to_string(cursor).context("cursor as JSON")?;
    crate::state::append(logs, group, CURSOR_STREAM, message, after_ms).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cursor_keeps_the_overlap_then_the_newest_within_the_lateness_bounded() {
        let now = 100 * 3_600_000;
        let need = now - 600_000;
        let ids = vec![
            (now - 25 * 3_600_000, "too old".to_owned()),
            (now - 3_600_000, "older".to_owned()),
            (now - 100, "recent".to_owned()),
            (now - 100, "recent".to_owned()),
        ];
        let kept = remember(ids, need, now);
        assert_eq!(kept, vec![(now - 100, "recent".to_owned()), (now - 3_600_000, "older".to_owned())]);
        let many: Vec<(i64, String)> = (0..5_000).map(|i| (now - i, format!("r{i}"))).collect();
        let kept = remember(many, need, now);
        assert_eq!(kept.len(), MAX_REMEMBERED);
        assert_eq!(kept[0].1, "r0", "the newest are kept");
        let line = serde_json::to_string(&Cursor { notified: kept, ..Cursor::fresh(now) }).unwrap();
        assert!(line.len() < 200_000, "one small log event");
    }

    #[test]
    fn a_scan_goes_on_where_it_stopped_and_an_older_cursor_is_read() {
        let now = 100 * 3_600_000;
        let mut c = Cursor::fresh(now - 60_000);
        let s = c.scan(now);
        assert_eq!((s.from_ms, s.since_ms, s.newest_ms), (now - 24 * 3_600_000, now - 660_000, now - 60_000));
        c.scan = Some(Scan { token: Some("t".into()), ..s.clone() });
        let line = serde_json::to_string(&c).unwrap();
        let mut back: Cursor = serde_json::from_str(&line).unwrap();
        assert_eq!(back.scan(now + 600_000).token.as_deref(), Some("t"), "the same scan, not a new one");
        assert!(back.scan.is_none());
        // A scan over runs: a finding ingested at its start plus 30 minutes was read; one ingested
        // 5 minutes in, with an older event time, fell behind it. The next scan reads from the
        // scan's start less the overlap, so it takes the second.
        let scan = Scan { newest_ms: now + 1_800_000, started_ms: Some(now), ..s.clone() };
        assert_eq!(scan.covered_to(), now);
        let next = Cursor { up_to_ms: scan.covered_to(), ..Cursor::fresh(0) }.scan(now + 3_600_000);
        assert!(next.since_ms <= now + 300_000, "{}", next.since_ms);
        // One run's scan, nothing newer than its start read: as far as it read.
        assert_eq!(Scan { newest_ms: now - 5, started_ms: Some(now), ..s.clone() }.covered_to(), now - 5);
        // A scan an older function began: as before.
        assert_eq!(Scan { newest_ms: now + 9, started_ms: None, ..s.clone() }.covered_to(), now + 9);
        let old: Cursor =
            serde_json::from_str(r#"{"Type":"lambda_cursor","NotifiedUpTo":5,"Notified":[[4,"A"]]}"#)
                .unwrap();
        assert_eq!((old.up_to_ms, old.scan), (5, None));
    }
}
