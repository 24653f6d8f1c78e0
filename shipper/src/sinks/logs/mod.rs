//! `logs`: job records to CloudWatch Logs with PutLogEvents, the client being the slurm-cw-sink
//! crate's. Records go wherever CloudWatch's metrics go (`sink` names `cloudwatch`), or to
//! standard output with `stdout`.

pub mod config;

pub mod batch;
mod client;

pub use client::*;

use crate::sinks::Context;
use crate::sinks::cloudwatch::config::CloudWatchConfig;
use crate::sinks::delivery::{Checks, Destination, StatsHandle};
use crate::sinks::stdout::{StdoutSink, to_stdout};
use crate::sinks::validate::{DropReason, Validator};
use slurm_cw_formats::record::Record;
use slurm_cw_sink::aws::NoCaCertificates;
use slurm_cw_sink::outcome::Outcome;

pub enum RecordSink {
    Logs(LogsSink),
    Stdout(StdoutSink),
}

/// PutLogEvents' rules: an event's age and size.
#[derive(Debug, Default)]
pub struct PutLogEventsRules(Validator);

impl Checks<Record> for PutLogEventsRules {
    fn retain_sendable(&mut self, items: &mut Vec<Record>, stats: &StatsHandle) {
        let now = std::time::SystemTime::now();
        items.retain(|r| match check(r, now) {
            Ok(()) => true,
            Err(why) => {
                let (reason, detail) = match why {
                    Unsendable::Timestamp => (
                        DropReason::Timestamp,
                        "outside the 14 days to 2 hours ahead CloudWatch Logs accepts",
                    ),
                    Unsendable::TooLarge => (DropReason::TooLarge, "larger than one log event may be"),
                };
                self.0.log_once(reason, "record", detail);
                stats.count_drop(reason, 1);
                false
            }
        });
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

    fn checks(&self) -> Box<dyn Checks<Record>> {
        Box::new(PutLogEventsRules::default())
    }

    async fn put_in(&mut self, group: &str, records: Vec<Record>) -> Outcome<Record> {
        match self {
            RecordSink::Logs(s) => s.put_in(group, records).await,
            RecordSink::Stdout(s) => to_stdout(s, records, Record::to_json_line),
        }
    }
}

/// The job records' destination: CloudWatch Logs, or standard output when no destination named
/// sends them to CloudWatch Logs ([`crate::sinks::records_for`]). Fails without CA certificates.
pub async fn build(cx: &Context<'_>, group: &str) -> Result<RecordSink, NoCaCertificates> {
    Ok(if cx.records == crate::sinks::Records::Logs {
        RecordSink::Logs(LogsSink::new(settings(cx.aws, cx.logs, group, cx.node)).await?)
    } else {
        RecordSink::Stdout(StdoutSink::new(group))
    })
}

/// The client's settings: `[logs]`' endpoint and stream, `[cloudwatch]`'s region, retries and
/// time limits.
pub fn settings(cw: &CloudWatchConfig, logs: &config::LogsConfig, group: &str, node: &str) -> Settings {
    Settings {
        group: group.to_owned(),
        stream: logs.stream.clone().unwrap_or_else(|| node.to_owned()),
        region: cw.region.clone(),
        endpoint: logs.endpoint.clone(),
        backoff: crate::sinks::cloudwatch::backoff(cw),
        attempt_timeout: cw.attempt_timeout,
    }
}

/// `--check`'s row for a log group the node writes: it must exist (the Terraform module creates
/// it); the node's stream is created here if missing.
pub async fn probe_row(check: &'static str, settings: Settings) -> crate::check::Row {
    use crate::check::{Status, row};
    let (group, stream) = (settings.group.clone(), settings.stream.clone());
    let mut sink = match LogsSink::new(settings).await {
        Ok(sink) => sink,
        Err(e) => return row(check, Status::Fail, e.to_string()),
    };
    match tokio::time::timeout(std::time::Duration::from_secs(15), sink.probe()).await {
        Ok(Ok(())) => row(check, Status::Ok, format!("{group} (stream {stream})")),
        Ok(Err(e)) => row(check, Status::Fail, e),
        Err(_) => row(check, Status::Fail, format!("{group}: no answer in 15 s")),
    }
}
