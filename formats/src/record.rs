//! A job record: one JSON object that becomes one CloudWatch Logs event. The message is kept
//! as text, made once by the shipper; the spool and the logs sink never parse it again.

use crate::datum::format_timestamp;
use serde::{Deserialize, Serialize};
use std::time::{Duration, SystemTime};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    /// The event's time.
    pub time: SystemTime,
    /// A JSON object, one line.
    pub message: String,
}

#[derive(Serialize, Deserialize)]
struct Line {
    time: String,
    record: Box<serde_json::value::RawValue>,
}

impl Record {
    /// Milliseconds since the epoch, as PutLogEvents wants them.
    pub fn millis(&self) -> i64 {
        self.time.duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
    }

    /// `{"time": RFC 3339, "record": {...}}`: the stdout sink's line and the spool's.
    pub fn to_json_line(&self) -> String {
        // A message is made by serde_json; should one not be JSON, the line carries it as text.
        let record = serde_json::value::RawValue::from_string(self.message.clone()).or_else(|_| {
            serde_json::value::RawValue::from_string(serde_json::to_string(&self.message).unwrap_or_default())
        });
        match record {
            Ok(record) => {
                serde_json::to_string(&Line { time: format_millis(self.time), record }).unwrap_or_default()
            }
            Err(_) => String::new(),
        }
    }

    /// Parses a line written by [`Record::to_json_line`].
    pub fn from_json_line(s: &str) -> Result<Record, LineError> {
        let line: Line = serde_json::from_str(s)?;
        let t =
            OffsetDateTime::parse(&line.time, &Rfc3339).map_err(|e| LineError::Time(line.time.clone(), e))?;
        Ok(Record { time: t.into(), message: line.record.get().to_owned() })
    }
}

/// Why a line is not a record; serde_json's error gives the column and the field.
#[derive(Debug, thiserror::Error)]
pub enum LineError {
    #[error("not a record line: {0}")]
    Json(#[from] serde_json::Error),
    #[error("bad time {0:?}: {1}")]
    Time(String, time::error::Parse),
}

/// RFC 3339 to the millisecond (PutLogEvents' resolution), so a record's time survives the spool.
fn format_millis(t: SystemTime) -> String {
    let whole = t.duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default();
    format_timestamp(SystemTime::UNIX_EPOCH + Duration::from_millis(whole.as_millis() as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_round_trip_to_the_millisecond() {
        let r = Record {
            time: SystemTime::UNIX_EPOCH + Duration::from_millis(1_800_000_000_123),
            message: r#"{"Type":"job_sample","JobId":"7","MemoryRss":314572800}"#.into(),
        };
        let line = r.to_json_line();
        assert!(line.contains(r#""record":{"Type":"job_sample""#), "{line}");
        assert_eq!(Record::from_json_line(&line).unwrap(), r);
        assert_eq!(r.millis(), 1_800_000_000_123);
        let e = Record::from_json_line(r#"{"time":"x","record":{}}"#).unwrap_err();
        assert!(matches!(e, LineError::Time(..)) && e.to_string().contains("bad time \"x\""), "{e}");
    }
}
