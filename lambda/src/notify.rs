//! Notices: job findings to the SNS topic, autoscaling signals to EventBridge.

use crate::cluster::Backlog;
use crate::jobs::Finding;
use anyhow::{Context, Result};
use aws_sdk_eventbridge::types::PutEventsRequestEntry;
use std::fmt::Write;

/// The `source` of autoscaling events.
pub const EVENT_SOURCE: &str = "slurm-cw";
/// Their `detail-type`.
pub const BACKLOG_DETAIL_TYPE: &str = "Slurm Backlog Changed";

/// The subject and body of the notice about `findings`.
pub fn notice(cluster: &str, findings: &[Finding]) -> (String, String) {
    let subject = format!("Slurm {cluster}: {} job finding(s)", findings.len());
    let mut body = format!("Cluster {cluster}: jobs that are wasting what they hold.\n\n");
    for f in findings {
        let _ = writeln!(
            body,
            "- job {} (user {}, account {}): {:?}: {}",
            f.job, f.user, f.account, f.kind, f.detail
        );
    }
    body.push_str(
        "\nEach job is reported once when a finding starts; see the per-job metrics for its figures.\n",
    );
    // SNS subjects are at most 100 characters.
    (subject.chars().take(100).collect(), body)
}

pub async fn publish(sns: &aws_sdk_sns::Client, topic: &str, subject: &str, body: &str) -> Result<()> {
    sns.publish().topic_arn(topic).subject(subject).message(body).send().await.context("SNS Publish")?;
    Ok(())
}

/// One event per partition whose backlog changed.
pub async fn backlog_events(
    eb: &aws_sdk_eventbridge::Client,
    bus: &str,
    cluster: &str,
    changed: &[&Backlog],
) -> Result<()> {
    for chunk in changed.chunks(10) {
        let entries: Vec<PutEventsRequestEntry> = chunk
            .iter()
            .map(|b| {
                let detail = serde_json::json!({
                    "cluster": cluster,
                    "partition": b.partition,
                    "backlog_nodes": b.backlog_nodes,
                    "idle_nodes": b.idle_nodes,
                    "previous_backlog_nodes": b.previous,
                });
                PutEventsRequestEntry::builder()
                    .source(EVENT_SOURCE)
                    .detail_type(BACKLOG_DETAIL_TYPE)
                    .detail(detail.to_string())
                    .event_bus_name(bus)
                    .build()
            })
            .collect();
        let resp =
            eb.put_events().set_entries(Some(entries)).send().await.context("EventBridge PutEvents")?;
        if resp.failed_entry_count() > 0 {
            anyhow::bail!("EventBridge refused {} event(s)", resp.failed_entry_count());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jobs::Kind;

    #[test]
    fn notice_lists_every_job() {
        let f = |job: &str| Finding {
            kind: Kind::IdleGpu,
            job: job.into(),
            user: "alice".into(),
            account: "physics".into(),
            detail: "2 GPU(s) idle".into(),
        };
        let (subject, body) = notice("prod", &[f("1"), f("2")]);
        assert_eq!(subject, "Slurm prod: 2 job finding(s)");
        assert!(body.contains("job 1 (user alice, account physics): IdleGpu: 2 GPU(s) idle"));
        assert!(body.contains("job 2 "));
        let long = "c".repeat(200);
        assert!(notice(&long, &[]).0.chars().count() <= 100);
    }
}
