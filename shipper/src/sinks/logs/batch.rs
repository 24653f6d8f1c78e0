//! Cuts records into PutLogEvents requests: in time order, at most 10,000 events and 1 MiB
//! (each message's bytes plus 26), and all of one request's events within 24 hours.

use slurm_cw_formats::record::Record;
use std::time::Duration;

pub const MAX_EVENTS: usize = 10_000;
/// The request limit, counting each event's message bytes plus [`EVENT_OVERHEAD`].
pub const MAX_REQUEST_BYTES: usize = 1_048_576;
pub const EVENT_OVERHEAD: usize = 26;
/// One event's message can be at most this long (it must fit a request alone).
pub const MAX_MESSAGE_BYTES: usize = MAX_REQUEST_BYTES - EVENT_OVERHEAD;
/// The events of one request must lie within this span.
pub const MAX_SPAN: Duration = Duration::from_secs(24 * 3600);

pub fn size(r: &Record) -> usize {
    r.message.len() + EVENT_OVERHEAD
}

/// Splits `records` into requests, sorted by time first (PutLogEvents wants them in order).
pub fn requests(mut records: Vec<Record>) -> Vec<Vec<Record>> {
    records.sort_by_key(|r| r.time);
    let mut out = Vec::new();
    let mut current: Vec<Record> = Vec::new();
    let mut bytes = 0;
    for r in records {
        let n = size(&r);
        let too_far =
            current.first().is_some_and(|f| r.time.duration_since(f.time).unwrap_or_default() > MAX_SPAN);
        if !current.is_empty() && (current.len() == MAX_EVENTS || bytes + n > MAX_REQUEST_BYTES || too_far) {
            out.push(std::mem::take(&mut current));
            bytes = 0;
        }
        bytes += n;
        current.push(r);
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::SystemTime;

    fn rec(secs: u64, len: usize) -> Record {
        Record {
            time: SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000 + secs),
            message: "x".repeat(len),
        }
    }

    #[test]
    fn requests_respect_count_bytes_span_and_order() {
        let many: Vec<Record> = (0..25_000).map(|i| rec(i % 100, 10)).collect();
        let r = requests(many);
        assert_eq!(r.iter().map(Vec::len).collect::<Vec<_>>(), vec![10_000, 10_000, 5_000]);
        assert!(r[0].windows(2).all(|w| w[0].time <= w[1].time), "sorted");

        let big: Vec<Record> = (0..5).map(|i| rec(i, 400_000)).collect();
        let r = requests(big);
        assert!(r.iter().all(|c| c.iter().map(size).sum::<usize>() <= MAX_REQUEST_BYTES));
        assert_eq!(r.len(), 3);

        let span = vec![rec(0, 10), rec(3600, 10), rec(25 * 3600, 10)];
        assert_eq!(requests(span).len(), 2, "a day apart: two requests");
    }
}
