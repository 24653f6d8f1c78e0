//! Where data goes. Two destinations, each with its own [`delivery`] and spool directory:
//! datums to CloudWatch metrics ([`MetricSink`]) and job records to CloudWatch Logs
//! ([`RecordSink`]), or both to standard output. [`delivery`] sits in front of each: checks,
//! the count of what was sent and dropped, and the backlog of what could not be sent yet.

pub mod config;
pub mod delivery;
pub mod pacing;
pub mod route;
pub mod spool;
pub mod stdout;

pub use slurm_cw_sink::{cloudwatch, logs, validate};

use crate::datum::Datum;
use delivery::Destination;
use slurm_cw_formats::record::Record;
use slurm_cw_sink::outcome::Outcome;
use stdout::StdoutSink;

pub enum MetricSink {
    CloudWatch(cloudwatch::CloudWatchSink),
    Stdout(StdoutSink),
}

pub enum RecordSink {
    Logs(logs::LogsSink),
    Stdout(StdoutSink),
}

/// What a failed write to standard output means: a closed pipe ends the sink for good.
fn stdout_failed<T>(items: Vec<T>, e: std::io::Error) -> Outcome<T> {
    let msg = format!("cannot write to standard output: {e}");
    let gone = e.kind() == std::io::ErrorKind::BrokenPipe;
    Outcome {
        undelivered: items,
        fatal: gone.then(|| msg.clone()),
        last_error: Some(msg),
        ..Outcome::default()
    }
}

fn to_stdout<T>(s: &mut StdoutSink, items: Vec<T>, line: impl Fn(&T) -> String) -> Outcome<T> {
    match s.write_lines(items.iter().map(line)) {
        Ok(()) => Outcome { sent: items.len(), ..Outcome::default() },
        Err(e) => stdout_failed(items, e),
    }
}

impl Destination for MetricSink {
    type Item = Datum;

    fn label(&self) -> &str {
        match self {
            MetricSink::CloudWatch(s) => s.namespace(),
            MetricSink::Stdout(s) => s.label(),
        }
    }

    async fn put_in(&mut self, namespace: &str, datums: Vec<Datum>) -> Outcome<Datum> {
        match self {
            MetricSink::CloudWatch(s) => s.put_in(namespace, datums).await,
            MetricSink::Stdout(s) => to_stdout(s, datums, |d| d.to_json_line(namespace)),
        }
    }
}

impl Destination for RecordSink {
    type Item = Record;

    fn label(&self) -> &str {
        match self {
            RecordSink::Logs(s) => s.group(),
            RecordSink::Stdout(s) => s.label(),
        }
    }

    async fn put_in(&mut self, group: &str, records: Vec<Record>) -> Outcome<Record> {
        match self {
            RecordSink::Logs(s) => s.put_in(group, records).await,
            RecordSink::Stdout(s) => to_stdout(s, records, Record::to_json_line),
        }
    }
}
