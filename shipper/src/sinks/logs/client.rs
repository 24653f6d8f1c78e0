//! The CloudWatch Logs sink: job records as log events, through PutLogEvents.
//!
//! Like the metrics sink it retries throttling, 5xx and network errors itself with full-jitter
//! backoff and splits a request refused as invalid until only the bad record is left out. The
//! node's stream is created on first use; a missing log group is a persistent failure (the
//! records wait in the spool) with a message that says what to create.

use super::batch;
use aws_sdk_cloudwatchlogs::Client;
use aws_sdk_cloudwatchlogs::types::InputLogEvent;
use rand::SeedableRng;
use rand::rngs::StdRng;
use slurm_cw_formats::record::Record;
use slurm_cw_sink::failure::{Failure, classify, code};
use slurm_cw_sink::outcome::Outcome;
use slurm_cw_sink::retry::Backoff;
use std::time::{Duration, SystemTime};

/// CloudWatch Logs refuses events older than this (or than the group's retention).
pub const MAX_AGE: Duration = Duration::from_secs(14 * 24 * 3600);
/// ...and events further ahead than this.
pub const MAX_AHEAD: Duration = Duration::from_secs(2 * 3600);

#[derive(Debug, Clone)]
pub struct Settings {
    /// The log group records go to (`/slurm-cw/<cluster>/jobs` by default).
    pub group: String,
    /// This node's stream in it.
    pub stream: String,
    pub region: Option<String>,
    pub endpoint: Option<String>,
    pub backoff: Backoff,
    pub attempt_timeout: Duration,
}

pub struct LogsSink {
    client: Client,
    settings: Settings,
    rng: StdRng,
    /// Streams known to exist (group, stream).
    streams: std::collections::HashSet<(String, String)>,
}

/// Why a record cannot be sent as it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unsendable {
    /// Older than 14 days, or more than 2 hours ahead.
    Timestamp,
    /// Longer than one event may be.
    TooLarge,
}

/// Checks a record against PutLogEvents' limits.
pub fn check(r: &Record, now: SystemTime) -> Result<(), Unsendable> {
    if r.message.len() > batch::MAX_MESSAGE_BYTES {
        return Err(Unsendable::TooLarge);
    }
    let old = now.checked_sub(MAX_AGE).is_some_and(|limit| r.time < limit);
    let ahead = r.time.duration_since(now).is_ok_and(|d| d > MAX_AHEAD);
    if old || ahead { Err(Unsendable::Timestamp) } else { Ok(()) }
}

impl LogsSink {
    /// Builds the client from the default AWS configuration chain (`AWS_ENDPOINT_URL_CLOUDWATCH_LOGS`
    /// and `AWS_ENDPOINT_URL` redirect it, as in every AWS SDK).
    pub async fn new(settings: Settings) -> Result<Self, slurm_cw_sink::aws::NoCaCertificates> {
        let sdk = slurm_cw_sink::aws::sdk_config(settings.region.as_deref()).await?;
        let mut conf = aws_sdk_cloudwatchlogs::config::Builder::from(&sdk);
        if let Some(url) = &settings.endpoint {
            conf = conf.endpoint_url(url);
        }
        let conf = conf
            .retry_config(aws_sdk_cloudwatchlogs::config::retry::RetryConfig::disabled())
            .timeout_config(
                aws_sdk_cloudwatchlogs::config::timeout::TimeoutConfig::builder()
                    .operation_attempt_timeout(settings.attempt_timeout)
                    .connect_timeout(settings.attempt_timeout.min(Duration::from_secs(5)))
                    .build(),
            )
            .build();
        Ok(Self::from_client(Client::from_conf(conf), settings))
    }

    pub fn from_client(client: Client, settings: Settings) -> Self {
        LogsSink { client, settings, rng: StdRng::from_os_rng(), streams: Default::default() }
    }

    pub fn group(&self) -> &str {
        &self.settings.group
    }

    /// Sends `records` (already checked) to this node's stream of `group`.
    pub async fn put_in(&mut self, group: &str, records: Vec<Record>) -> Outcome<Record> {
        slurm_cw_sink::send::send_all(self, group, batch::requests(records)).await
    }
}

impl slurm_cw_sink::send::Requests<Record> for LogsSink {
    const SERVICE: &'static str = "CloudWatch Logs";

    fn size(r: &Record) -> usize {
        batch::size(r)
    }

    /// One request, retried; returns the indices of events the service refused by time.
    async fn request(
        &mut self,
        group: &str,
        chunk: &[Record],
        outcome: &mut Outcome<Record>,
    ) -> Result<Vec<usize>, Failure> {
        let events: Vec<InputLogEvent> = chunk
            .iter()
            .filter_map(|r| InputLogEvent::builder().timestamp(r.millis()).message(&r.message).build().ok())
            .collect();
        let stream = self.settings.stream.clone();
        let mut attempt = 0;
        let mut created = false;
        loop {
            outcome.requests += 1;
            let result = self
                .client
                .put_log_events()
                .log_group_name(group)
                .log_stream_name(&stream)
                .set_log_events(Some(events.clone()))
                .send()
                .await;
            let failure = match result {
                Ok(out) => {
                    self.streams.insert((group.to_owned(), stream.clone()));
                    return Ok(refused_indices(out.rejected_log_events_info(), chunk.len()));
                }
                Err(e) if code(&e) == Some("ResourceNotFoundException") && !created => {
                    created = true;
                    self.create_stream(group, &stream, outcome).await?;
                    continue;
                }
                Err(e) => classify("PutLogEvents", &e),
            };
            match failure {
                Failure::Transient(msg) if attempt < self.settings.backoff.max_retries => {
                    let delay = self.settings.backoff.delay(attempt, &mut self.rng);
                    tracing::debug!(attempt, ?delay, error = %msg, "PutLogEvents failed; retrying");
                    outcome.retries += 1;
                    attempt += 1;
                    tokio::time::sleep(delay).await;
                }
                other => return Err(other),
            }
        }
    }
}

impl LogsSink {
    async fn create_stream(
        &mut self,
        group: &str,
        stream: &str,
        outcome: &mut Outcome<Record>,
    ) -> Result<(), Failure> {
        outcome.requests += 1;
        let result =
            self.client.create_log_stream().log_group_name(group).log_stream_name(stream).send().await;
        match result {
            Ok(_) => Ok(()),
            Err(e) if code(&e) == Some("ResourceAlreadyExistsException") => Ok(()),
            Err(e) if code(&e) == Some("ResourceNotFoundException") => Err(Failure::Persistent(format!(
                "log group {group} does not exist: create it (the Terraform module does) or set logs.group"
            ))),
            Err(e) => Err(classify("CreateLogStream", &e)),
        }
    }

    /// Whether the group can be written: for `--check`. Creates this node's stream if missing.
    pub async fn probe(&mut self) -> Result<(), String> {
        let group = self.settings.group.clone();
        let stream = self.settings.stream.clone();
        let mut outcome = Outcome::default();
        self.create_stream(&group, &stream, &mut outcome).await.map_err(|f| f.message().to_owned())
    }
}

/// Events PutLogEvents accepted the request with but refused by time (too new, too old, expired).
fn refused_indices(
    info: Option<&aws_sdk_cloudwatchlogs::types::RejectedLogEventsInfo>,
    n: usize,
) -> Vec<usize> {
    let Some(info) = info else { return Vec::new() };
    let clamp = |i: i32| (i.max(0) as usize).min(n);
    let mut out = Vec::new();
    let old_end = info.too_old_log_event_end_index().map(clamp).unwrap_or(0);
    let expired_end = info.expired_log_event_end_index().map(clamp).unwrap_or(0);
    out.extend(0..old_end.max(expired_end));
    if let Some(start) = info.too_new_log_event_start_index() {
        out.extend(clamp(start).max(old_end.max(expired_end))..n);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_cloudwatchlogs::types::RejectedLogEventsInfo;

    #[test]
    fn refused_events_by_index() {
        let info = RejectedLogEventsInfo::builder()
            .too_old_log_event_end_index(2)
            .too_new_log_event_start_index(8)
            .build();
        assert_eq!(refused_indices(Some(&info), 10), vec![0, 1, 8, 9]);
        assert_eq!(refused_indices(None, 10), Vec::<usize>::new());
    }

    #[test]
    fn checks_size_and_time() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let ok = Record { time: now, message: "{}".into() };
        assert_eq!(check(&ok, now), Ok(()));
        let old = Record { time: now - MAX_AGE - Duration::from_secs(1), ..ok.clone() };
        assert_eq!(check(&old, now), Err(Unsendable::Timestamp));
        let ahead = Record { time: now + Duration::from_secs(3 * 3600), ..ok.clone() };
        assert_eq!(check(&ahead, now), Err(Unsendable::Timestamp));
        let big = Record { message: "x".repeat(batch::MAX_MESSAGE_BYTES + 1), ..ok };
        assert_eq!(check(&big, now), Err(Unsendable::TooLarge));
    }
}
