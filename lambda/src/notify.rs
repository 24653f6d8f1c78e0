//! Notices: job findings to the SNS topic, autoscaling signals to EventBridge.

use crate::cluster::Backlog;
use crate::findings::Finding;
use anyhow::{Context, Result};
use aws_sdk_eventbridge::types::PutEventsRequestEntry;
use slurm_cw_catalog::events::{self, backlog};

/// SNS takes messages up to 256 KB: a notice's body stays under this many bytes, and more
/// findings than fit go out as several notices.
pub const MAX_BODY_BYTES: usize = 200_000;
/// A node's own words, cut to this many characters in a notice.
const MAX_DETAIL_CHARS: usize = 1_000;

fn line(f: &Finding) -> String {
    let detail: String = f.detail.chars().take(MAX_DETAIL_CHARS).collect();
    format!(
        "- job {} (user {}, account {}, partition {}, node {}): {}: {} [{}]\n",
        f.job, f.user, f.account, f.partition, f.node, f.kind, detail, f.time
    )
}

/// The notices about `findings`: (subject, body, findings in it), one unless they do not fit
/// in one message.
pub fn notices(cluster: &str, findings: &[Finding]) -> Vec<(String, String, usize)> {
    let head = format!("Cluster {cluster}: jobs that are wasting what they hold.\n\n");
    let foot =
        "\nEach finding is reported once; the job's records (samples, summary) are in the job log group.\n";
    let mut chunks: Vec<Vec<String>> = Vec::new();
    let mut size = 0;
    for f in findings {
        let l = line(f);
        match chunks.last_mut() {
            Some(c) if size + l.len() <= MAX_BODY_BYTES - head.len() - foot.len() => {
                size += l.len();
                c.push(l);
            }
            _ => {
                size = l.len();
                chunks.push(vec![l]);
            }
        }
    }
    chunks
        .into_iter()
        .map(|lines| {
            let subject = format!("Slurm {cluster}: {} job finding(s)", lines.len());
            let mut body = head.clone();
            for l in &lines {
                body.push_str(l);
            }
            body.push_str(foot);
            // SNS subjects are at most 100 characters.
            (subject.chars().take(100).collect(), body, lines.len())
        })
        .collect()
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
    let details = changed.iter().map(|b| {
        serde_json::json!({
            events::CLUSTER: cluster,
            backlog::PARTITION: b.partition,
            backlog::BACKLOG_NODES: b.backlog_nodes,
            backlog::IDLE_NODES: b.idle_nodes,
            backlog::PREVIOUS_BACKLOG_NODES: b.previous,
        })
    });
    put_events(eb, bus, backlog::DETAIL_TYPE, details).await
}

/// Events of `detail_type` from [`events::SOURCE`] on `bus`, one a detail, ten to a PutEvents
/// call; an entry EventBridge refuses fails the whole.
pub async fn put_events(
    eb: &aws_sdk_eventbridge::Client,
    bus: &str,
    detail_type: &str,
    details: impl IntoIterator<Item = serde_json::Value>,
) -> Result<()> {
    put_events_marking(eb, bus, detail_type, details, &mut |_| {}).await
}

/// [`put_events`], telling `accepted` the index of each detail EventBridge took, also those
/// before a refusal: a caller that remembers them sends only the rest again.
pub async fn put_events_marking(
    eb: &aws_sdk_eventbridge::Client,
    bus: &str,
    detail_type: &str,
    details: impl IntoIterator<Item = serde_json::Value>,
    accepted: &mut dyn FnMut(usize),
) -> Result<()> {
    let entries: Vec<PutEventsRequestEntry> = details
        .into_iter()
        .map(|detail| {
            PutEventsRequestEntry::builder()
                .source(events::SOURCE)
                .detail_type(detail_type)
                .detail(detail.to_string())
                .event_bus_name(bus)
                .build()
        })
        .collect();
    for (n, chunk) in entries.chunks(10).enumerate() {
        let resp = eb
            .put_events()
            .set_entries(Some(chunk.to_vec()))
            .send()
            .await
            .context("EventBridge PutEvents")?;
        if resp.failed_entry_count() == 0 {
            (0..chunk.len()).for_each(|i| accepted(n * 10 + i));
            continue;
        }
        // The answer's entries are the request's, in order; one without an error code was taken.
        for (i, e) in resp.entries().iter().enumerate().take(chunk.len()) {
            if e.error_code().is_none() {
                accepted(n * 10 + i);
            }
        }
        anyhow::bail!("EventBridge refused {} {detail_type:?} event(s)", resp.failed_entry_count());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(job: &str, detail: &str) -> Finding {
        Finding {
            kind: "idle_gpu".into(),
            job: job.into(),
            user: "alice".into(),
            account: "physics".into(),
            partition: "gpu".into(),
            node: "n1".into(),
            detail: detail.into(),
            record_id: format!("r{job}"),
            time: "2027-01-15T08:00:00Z".into(),
            event_ms: 0,
            ingested_ms: 0,
        }
    }

    #[test]
    fn notice_lists_every_job() {
        let n = notices("prod", &[f("1", "2 GPU(s) idle"), f("2", "2 GPU(s) idle")]);
        assert_eq!(n.len(), 1);
        let (subject, body, count) = &n[0];
        assert_eq!((subject.as_str(), *count), ("Slurm prod: 2 job finding(s)", 2));
        assert!(body.contains(
            "job 1 (user alice, account physics, partition gpu, node n1): idle_gpu: 2 GPU(s) idle"
        ));
        assert!(body.contains("job 2 "));
        let long = "c".repeat(200);
        assert!(notices(&long, &[f("1", "")])[0].0.chars().count() <= 100);
        assert!(notices("prod", &[]).is_empty());
    }

    #[test]
    fn many_findings_split_into_notices_that_fit() {
        let many: Vec<Finding> = (0..1_000).map(|i| f(&i.to_string(), &"x".repeat(2_000))).collect();
        let n = notices("prod", &many);
        assert!(n.len() > 1);
        assert_eq!(n.iter().map(|(_, _, c)| c).sum::<usize>(), 1_000, "every finding once");
        assert!(n.iter().all(|(_, b, _)| b.len() <= MAX_BODY_BYTES), "each fits");
    }
}
