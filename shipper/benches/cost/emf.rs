//! The `emf` destination's month beside CloudWatch's: the same flushes encoded as it sends them
//! (`sinks::emf::encode`), their log bytes (message + 26 per event, as PutLogEvents counts)
//! instead of the shipper's PutMetricData requests. The metrics are the same custom metrics.

use super::{HOURS, LOG_INGEST_PER_GB, LOG_STORE_PER_GB_MONTH, Month, PER_1000_REQUESTS, Run, Scenario};
use slurm_cw_shipper::aggregate::Aggregate;
use slurm_cw_shipper::sinks::emf::encode::encode;

/// The events' retention in the Terraform module's group (emf_log_retention_days).
const RETENTION_DAYS: f64 = 1.0;

#[derive(Debug, Default, Clone, Copy)]
pub struct EmfBytes {
    pub events: u64,
    pub bytes: u64,
}

impl EmfBytes {
    pub fn add(&mut self, o: &EmfBytes) {
        self.events += o.events;
        self.bytes += o.bytes;
    }

    /// One flush's aggregates for CloudWatch, as events.
    pub fn flush(&mut self, namespace: &str, datums: &[Aggregate]) {
        let encoded = encode(namespace, 60, datums);
        self.events += encoded.records.len() as u64;
        self.bytes += encoded.records.iter().map(|r| r.message.len() as u64 + 26).sum::<u64>();
    }
}

/// One line: the month with `sink = "emf"` instead of `cloudwatch`.
pub fn print(s: &Scenario, r: &Run, m: &Month) {
    let busy = s.busy_hours / 24.0;
    let scale = s.nodes as f64 / s.sim_nodes as f64;
    let gb = (r.emf_nodes.bytes as f64 * scale * busy + r.emf_head.bytes as f64) * HOURS / 1e9;
    let logs_usd = gb * LOG_INGEST_PER_GB + gb * (RETENTION_DAYS * 24.0 / HOURS) * LOG_STORE_PER_GB_MONTH;
    let shipper_requests_usd = (m.put_requests - m.lambda_requests) / 1000.0 * PER_1000_REQUESTS;
    let total = m.total - shipper_requests_usd + logs_usd;
    let verdict = if total <= s.target { "meets" } else { "MISSES" };
    println!(
        "{} emf (the same metrics as embedded-metric-format events): measured {}/{} nodes + head, 1 h: {} events, {} bytes | month: {:.2} GB events ${logs_usd:.2} instead of {:.1}M PutMetricData ${shipper_requests_usd:.2}; metrics ${:.2}, job records ${:.2}, Lambda ${:.2}, alarms ${:.2}, dashboard ${:.2} = ${total:.2} ({verdict} ${:.0})",
        s.name,
        s.sim_nodes,
        s.nodes,
        r.emf_nodes.events + r.emf_head.events,
        r.emf_nodes.bytes + r.emf_head.bytes,
        gb,
        (m.put_requests - m.lambda_requests) / 1e6,
        m.metrics_usd,
        m.logs_usd,
        m.read_usd + m.list_usd + m.lambda_requests / 1000.0 * PER_1000_REQUESTS,
        m.alarms_usd,
        m.dashboard_usd,
        s.target,
    );
}
