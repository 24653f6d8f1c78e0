//! Which minutes a run derives: every minute after the last one derived, up to the newest
//! whose data is complete. The last minute derived is kept as one event in the job log group's
//! [`STATE_STREAM`] ([`crate::state`]), so a run that comes late, is skipped (throttled, a
//! failed run) or comes twice (EventBridge delivers a scheduled event at least once) neither
//! derives a minute twice (`GpuHoursIdle`'s Sum would double, a backlog event repeat) nor leaves
//! one out. The figures and the backlog events keep a mark each: the part that failed derives
//! its minutes again at the next run, the other does not.

use anyhow::{Context, Result};
use aws_sdk_cloudwatchlogs::Client;
use serde::{Deserialize, Serialize};

/// The stream, in the job log group, that holds the minutes derived.
pub const STATE_STREAM: &str = "_lambda-minutes";
/// The state record's `Type`.
pub const STATE_TYPE: &str = "lambda_minutes";
/// A run after a gap derives at most this many minutes (the newest): a day's outage is not
/// published a day late in one run's time budget. Minutes before are left out, and counted.
pub const MAX_CATCH_UP_MINUTES: i64 = 60;

/// The last minute (epoch seconds) whose figures were published and whose backlog moves were
/// told.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Marks {
    #[serde(rename = "Type")]
    kind: &'static str,
    #[serde(rename = "FiguresTo")]
    pub figures_to: i64,
    #[serde(rename = "BacklogTo")]
    pub backlog_to: i64,
}

/// The state as read: its marks, where they could be read.
#[derive(Debug, Deserialize)]
struct Read {
    #[serde(rename = "Type")]
    kind: String,
    #[serde(rename = "FiguresTo")]
    figures_to: i64,
    #[serde(rename = "BacklogTo")]
    backlog_to: i64,
}

impl Marks {
    pub fn new(figures_to: i64, backlog_to: i64) -> Marks {
        Marks { kind: STATE_TYPE, figures_to, backlog_to }
    }
}

/// Minutes from `first` to `last` (epoch seconds, whole minutes), both included; none when
/// `first` is after `last`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    pub first: i64,
    pub last: i64,
}

impl Span {
    /// The minutes a run at `at` (the newest minute complete) derives after `done`, the last
    /// minute derived: `every` minutes up to `at` when none is known, at most
    /// [`MAX_CATCH_UP_MINUTES`]. Also the minutes left out between `done` and the span.
    pub fn after(done: Option<i64>, at: i64, every: u32) -> (Span, u32) {
        let fresh = at - 60 * (i64::from(every.max(1)) - 1);
        let oldest = at - 60 * (MAX_CATCH_UP_MINUTES - 1);
        match done {
            // A mark ahead of any run's minute by more than a catch-up cannot be a run's (a clock
            // set wrong once): it must not stop the figures for good.
            Some(d) if d > at + 60 * MAX_CATCH_UP_MINUTES => (Span { first: fresh, last: at }, 0),
            Some(d) => {
                let first = d - d.rem_euclid(60) + 60;
                let skipped = ((oldest - first) / 60).max(0) as u32;
                (Span { first: first.max(oldest), last: at }, skipped)
            }
            None => (Span { first: fresh, last: at }, 0),
        }
    }

    /// The mark after a part of a run went through `done` of this span: the span's last minute,
    /// the minute before the first not done, or the mark before the span (nothing done: the
    /// next run derives it all again).
    pub fn mark(self, done: Done) -> i64 {
        let before = self.first - 60;
        match done {
            Done::All => self.last.max(before),
            Done::Before(t) => (t - t.rem_euclid(60) - 60).clamp(before, self.last.max(before)),
            Done::Nothing => before,
        }
    }

    pub fn minutes(self) -> impl Iterator<Item = i64> {
        (self.first..=self.last).step_by(60)
    }

    pub fn is_empty(self) -> bool {
        self.first > self.last
    }

    pub fn len(self) -> u32 {
        if self.is_empty() { 0 } else { ((self.last - self.first) / 60 + 1) as u32 }
    }
}

/// How far a part of a run went through its span.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Done {
    All,
    /// Every minute before this one (epoch seconds): a publish whose later requests failed.
    Before(i64),
    Nothing,
}

/// The marks and their event's time (ms); None when the stream is missing, empty or holds
/// something else (a warning: the next run derives its usual window, as a first run does).
pub async fn read(logs: &Client, group: &str) -> Result<Option<(Marks, i64)>> {
    let Some((msg, t)) = crate::state::read_newest(logs, group, STATE_STREAM).await? else {
        return Ok(None);
    };
    match serde_json::from_str::<Read>(&msg) {
        Ok(r) if r.kind == STATE_TYPE => Ok(Some((Marks::new(r.figures_to, r.backlog_to), t))),
        _ => {
            tracing::warn!(
                message = msg,
                "the newest event of the minutes' stream is not theirs; starting afresh"
            );
            Ok(None)
        }
    }
}

/// Writes `marks` as the newest event of the stream; `after_ms`: the previous state's time.
pub async fn write(logs: &Client, group: &str, marks: Marks, after_ms: i64) -> Result<()> {
    let message = serde_json::to_string(&marks).context("the minutes' state as JSON")?;
    crate::state::append(logs, group, STATE_STREAM, message, after_ms).await
}

#[cfg(test)]
mod tests {
    use super::*;

    // A whole minute (1,800,000,000 is one).
    const AT: i64 = 1_800_000_000;

    #[test]
    fn a_run_derives_every_minute_since_the_last_once() {
        // No state: the run's own minutes.
        assert_eq!(Span::after(None, AT, 5), (Span { first: AT - 240, last: AT }, 0));
        // On time: the five minutes after the last run's.
        assert_eq!(Span::after(Some(AT - 300), AT, 5), (Span { first: AT - 240, last: AT }, 0));
        // A run skipped: ten minutes, none derived twice or left out.
        let (late, skipped) = Span::after(Some(AT - 600), AT, 5);
        assert_eq!((late.len(), skipped), (10, 0));
        assert_eq!(late.minutes().next(), Some(AT - 540));
        // The same event twice, or an older one late: nothing again.
        let (again, _) = Span::after(Some(AT), AT, 5);
        assert!(again.is_empty() && again.minutes().next().is_none());
        assert_eq!(again.len(), 0);
        assert!(Span::after(Some(AT), AT - 300, 5).0.is_empty());
        // A day without runs: the newest hour, the rest counted as left out.
        let (back, skipped) = Span::after(Some(AT - 86_400), AT, 5);
        assert_eq!((back.len(), skipped), (60, 1_440 - 60));
        // A mark from a clock far ahead does not stop the figures.
        assert_eq!(Span::after(Some(AT + 86_400), AT, 5).0.len(), 5);
    }

    #[test]
    fn a_mark_moves_past_what_was_done_alone() {
        let (span, _) = Span::after(Some(AT - 300), AT, 5);
        assert_eq!(span.mark(Done::All), AT);
        assert_eq!(span.mark(Done::Nothing), AT - 300, "all of it again next time");
        // The datums of AT - 120 onwards not delivered: the two minutes before were.
        assert_eq!(span.mark(Done::Before(AT - 120 + 30)), AT - 180);
        assert_eq!(span.mark(Done::Before(AT - 240)), AT - 300);
        assert_eq!(span.mark(Done::Before(AT - 3_600)), AT - 300, "never back before the span");
        // Nothing to derive: the mark stays.
        let (none, _) = Span::after(Some(AT), AT, 5);
        assert_eq!([none.mark(Done::All), none.mark(Done::Nothing)], [AT, AT]);
    }

    #[test]
    fn the_state_reads_back_and_names_its_type() {
        let line = serde_json::to_string(&Marks::new(AT, AT - 60)).unwrap();
        assert_eq!(line, format!(r#"{{"Type":"lambda_minutes","FiguresTo":{AT},"BacklogTo":{}}}"#, AT - 60));
        let r: Read = serde_json::from_str(&line).unwrap();
        assert_eq!((r.kind.as_str(), r.figures_to, r.backlog_to), (STATE_TYPE, AT, AT - 60));
    }
}
