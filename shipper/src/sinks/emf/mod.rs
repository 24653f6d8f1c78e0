//! `emf`: the same metrics as `cloudwatch`, written as CloudWatch Logs events in the embedded
//! metric format ([`encode`]) to a log group of their own (`emf.log_group`) through
//! PutLogEvents, which CloudWatch turns into metrics as they arrive. No `PutMetricData`
//! request is billed; the log bytes are ($0.50/GB ingested), and each metric is billed as a
//! custom metric as with `cloudwatch` (docs/cost.md weighs the two). Its shape and rules are
//! CloudWatch's; it spools in `spool.dir/emf`, and job records go to CloudWatch Logs as with
//! `cloudwatch`.

pub mod config;
pub mod encode;

use crate::aggregate::Aggregate;
use crate::check::{Row, Status, row};
use crate::sinks::cloudwatch::PutMetricDataRules;
use crate::sinks::delivery::Checks;
use crate::sinks::logs::LogsSink;
use crate::sinks::{BuildError, Context, MetricDestination, MetricSink, Records, Spool};
use crate::transforms::shape::Shape;
use config::EmfConfig;
use slurm_cw_sink::outcome::Outcome;
use std::collections::HashMap;

/// `emf` in the registry.
pub struct Spec;

#[async_trait::async_trait]
impl crate::sinks::Component for Spec {
    type Section = EmfConfig;

    fn name(&self) -> &'static str {
        "emf"
    }

    fn keys(&self) -> &'static [crate::config::docs::Key] {
        config::KEYS
    }

    /// The same custom metrics as `cloudwatch`, billed the same.
    fn shape(&self, per_series: Shape) -> Shape {
        per_series
    }

    fn spool(&self) -> Spool {
        Spool::Own
    }

    fn records(&self) -> Records {
        Records::Logs
    }

    fn uses_aws(&self) -> bool {
        true
    }

    fn plain_self_metrics(&self) -> bool {
        true
    }

    async fn check(&self, emf: &EmfConfig, cx: &Context<'_>) -> Vec<Row> {
        vec![group_row(emf, cx).await]
    }

    async fn build(&self, emf: &EmfConfig, cx: &Context<'_>) -> Result<MetricSink, BuildError> {
        let group = emf.group_for(cx.cluster);
        let logs =
            LogsSink::new(settings(emf, cx, &group)).await.map_err(|e| BuildError::new(self.name(), e))?;
        tracing::info!(group, "embedded metric format events destination");
        Ok(Box::new(EmfSink {
            logs,
            group,
            namespace: cx.namespace.to_owned(),
            resolution: cx.aws.storage_resolution,
        }))
    }
}

/// The Logs client's settings for the events: `[emf]`'s group and stream, the rest as the job
/// records'.
fn settings(emf: &EmfConfig, cx: &Context<'_>, group: &str) -> crate::sinks::logs::Settings {
    let mut settings = crate::sinks::logs::settings(cx.aws, cx.logs, group, cx.node);
    settings.stream = emf.log_stream.clone().unwrap_or_else(|| cx.node.to_owned());
    settings
}

/// The log group's row: it must exist (the Terraform module creates it); this node's stream is
/// created here if missing.
async fn group_row(emf: &EmfConfig, cx: &Context<'_>) -> Row {
    let check = "emf log group";
    if cx.cluster.is_empty() {
        return row(check, Status::Skip, "no cluster name");
    }
    let group = emf.group_for(cx.cluster);
    crate::sinks::logs::probe_row(check, settings(emf, cx, &group)).await
}

pub struct EmfSink {
    logs: LogsSink,
    group: String,
    namespace: String,
    resolution: i32,
}

#[async_trait::async_trait]
impl MetricDestination for EmfSink {
    fn label(&self) -> &str {
        &self.namespace
    }

    fn checks(&self) -> Box<dyn Checks<Aggregate>> {
        Box::new(PutMetricDataRules::default())
    }

    async fn put_in(&mut self, namespace: &str, items: Vec<Aggregate>) -> Outcome<Aggregate> {
        let encoded = encode::encode(namespace, self.resolution, &items);
        // Which events a message stands for (equal messages carry equal datums' parts).
        let mut events: HashMap<&str, Vec<usize>> = HashMap::new();
        for (i, r) in encoded.records.iter().enumerate() {
            events.entry(r.message.as_str()).or_default().push(i);
        }
        let sent = self.logs.put_in(&self.group, encoded.records.clone()).await;
        let mut sources_of = |records: &[slurm_cw_sink::record::Record]| -> Vec<usize> {
            let mut out: Vec<usize> = Vec::new();
            for r in records {
                if let Some(i) = events.get_mut(r.message.as_str()).and_then(Vec::pop) {
                    out.extend_from_slice(&encoded.sources[i]);
                }
            }
            out
        };
        // A datum split over several events goes again whole if any part did not go.
        let undelivered = sources_of(&sent.undelivered);
        let rejected: Vec<usize> =
            sources_of(&sent.rejected).into_iter().filter(|i| !undelivered.contains(i)).collect();
        let mut fate = vec![0u8; items.len()];
        for i in rejected {
            fate[i] = 1;
        }
        for i in undelivered {
            fate[i] = 2;
        }
        let mut out = Outcome {
            requests: sent.requests,
            retries: sent.retries,
            bytes: sent.bytes,
            last_error: sent.last_error,
            persistent: sent.persistent,
            fatal: sent.fatal,
            ..Outcome::default()
        };
        for (d, f) in items.into_iter().zip(fate) {
            match f {
                0 => out.sent += 1,
                1 => out.rejected.push(d),
                _ => out.undelivered.push(d),
            }
        }
        out
    }
}
