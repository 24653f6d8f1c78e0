//! The function's state between runs: one small JSON event per run, appended to a stream of the
//! job log group and read back as that stream's newest event (GetLogEvents, newest first, limit
//! 1). Each stage with state has its own stream ([`crate::findings::CURSOR_STREAM`],
//! [`crate::scaling::CURSOR_STREAM`], [`crate::budgets::STATE_STREAM`],
//! [`crate::minutes::STATE_STREAM`]); all start with [`STREAM_PREFIX`], which no node's stream
//! does (Slurm node names do not start with '_'), and the instances' policy denies them.

use anyhow::{Context, Result};
use aws_sdk_cloudwatchlogs::Client;
use aws_sdk_cloudwatchlogs::types::InputLogEvent;
use std::time::SystemTime;

/// Every state stream's name starts with this.
pub const STREAM_PREFIX: &str = "_lambda";
/// GetLogEvents may answer with no events and a token to go on; this many pages at most.
const MAX_PAGES: usize = 10;

/// The newest event of `stream`: (message, event time ms); None when the stream is missing or
/// empty.
pub async fn read_newest(logs: &Client, group: &str, stream: &str) -> Result<Option<(String, i64)>> {
    let mut token: Option<String> = None;
    for _ in 0..MAX_PAGES {
        let resp = match logs
            .get_log_events()
            .log_group_name(group)
            .log_stream_name(stream)
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
            Err(e) => return Err(e).context(format!("GetLogEvents {group} {stream}")),
        };
        if let Some(ev) = resp.events().last() {
            return Ok(Some((ev.message().unwrap_or_default().to_owned(), ev.timestamp().unwrap_or(0))));
        }
        let next = resp.next_backward_token().map(str::to_owned);
        if next.is_none() || next == token {
            return Ok(None);
        }
        token = next;
    }
    Ok(None)
}

/// Appends `message` as the newest event of `stream`, creating the stream if missing.
/// `after_ms`: the previous state's event time, which this one must follow.
pub async fn append(logs: &Client, group: &str, stream: &str, message: String, after_ms: i64) -> Result<()> {
    // Newest by event time is what the next run reads: never behind the previous state.
    let now_ms = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64);
    let event = InputLogEvent::builder()
        .timestamp(now_ms.max(after_ms + 1))
        .message(message)
        .build()
        .context("state event")?;
    for attempt in 0..2 {
        match logs
            .put_log_events()
            .log_group_name(group)
            .log_stream_name(stream)
            .log_events(event.clone())
            .send()
            .await
        {
            Ok(resp) => {
                if let Some(r) = resp.rejected_log_events_info() {
                    anyhow::bail!("PutLogEvents {group} {stream}: the state was rejected: {r:?}");
                }
                return Ok(());
            }
            Err(e)
                if attempt == 0
                    && e.as_service_error().is_some_and(|s| s.is_resource_not_found_exception()) =>
            {
                match logs.create_log_stream().log_group_name(group).log_stream_name(stream).send().await {
                    Ok(_) => {}
                    // Another run made it in between.
                    Err(e)
                        if e.as_service_error().is_some_and(|s| s.is_resource_already_exists_exception()) => {
                    }
                    Err(e) => return Err(e).context(format!("CreateLogStream {group} {stream}")),
                }
            }
            Err(e) => return Err(e).context(format!("PutLogEvents {group} {stream}")),
        }
    }
    anyhow::bail!("PutLogEvents {group} {stream}: the stream is still missing after creating it")
}
