//! The OTLP sink's share of the cost bench: the bytes it would send for a scenario, encoded
//! and gzipped by the sink's own encoder (`slurm_cw_shipper::sinks::otlp::client::bodies`, the requests `put`
//! makes), of the pipeline's OTLP destination (per-job series labelled by job, user, account
//! and partition; cluster figures as for CloudWatch). CloudWatch bills OTLP metrics by the GB
//! ingested, with no per-metric charge, counting each data point's serialized size with its
//! metric name, labels, resource attributes, timestamp and value (CloudWatch's "OTel metrics
//! pricing and storage": not the gzip bytes sent, and the resource counted once a point, not
//! once a request): [`OtlpBytes::billed`]. The price is not in the shared reference, so it is a
//! parameter: `COST_OTLP_PER_GB` dollars (default [`DEFAULT_PER_GB`], an assumption: CloudWatch
//! Logs' ingestion price).

use slurm_cw_catalog::series;
use slurm_cw_shipper::aggregate::Aggregate;
use slurm_cw_shipper::sinks::otlp::client::{DEFAULT_MAX_REQUEST_BYTES, bodies, resource};
use slurm_cw_shipper::sinks::otlp::encode;

/// Dollars per GB when `COST_OTLP_PER_GB` is not set: an assumption, not a published price.
pub const DEFAULT_PER_GB: f64 = 0.50;

pub fn price_per_gb() -> (f64, &'static str) {
    match std::env::var("COST_OTLP_PER_GB").ok().and_then(|v| v.parse::<f64>().ok()) {
        Some(p) => (p, "COST_OTLP_PER_GB"),
        None => (DEFAULT_PER_GB, "assumed; set COST_OTLP_PER_GB"),
    }
}

/// What the OTLP sink would have sent.
#[derive(Debug, Default, Clone)]
pub struct OtlpBytes {
    pub requests: u64,
    /// Protobuf bytes before gzip.
    pub plain: u64,
    /// Bytes on the wire.
    pub gzip: u64,
    /// Bytes as CloudWatch counts them: each point with its name and the resource's attributes.
    pub billed: u64,
}

impl OtlpBytes {
    pub fn add(&mut self, o: &OtlpBytes) {
        self.requests += o.requests;
        self.plain += o.plain;
        self.gzip += o.gzip;
        self.billed += o.billed;
    }

    /// One flush of `node`: the OTLP destination's datums (the pipeline's open shape: per-job
    /// series labelled by job, user, account, partition and node), encoded as the sink sends them.
    pub fn flush(&mut self, cluster: &str, node: &str, datums: Vec<Aggregate>) {
        let resource = resource(cluster, node);
        let attributes: usize = resource.iter().map(|(k, v)| k.len() + v.len()).sum();
        for d in &datums {
            self.billed += (encode::point_size(d) + series::name(d.metric).len() + attributes) as u64;
        }
        for (plain, gzip) in bodies(&resource, datums, DEFAULT_MAX_REQUEST_BYTES) {
            self.requests += 1;
            self.plain += plain as u64;
            self.gzip += gzip.len() as u64;
        }
    }
}

/// A month of the whole cluster's OTLP bytes, from one simulated hour of `sim_nodes` of
/// `nodes` nodes and the head; one line beside CloudWatch's bill (`cloudwatch_usd`).
pub fn print(
    scenario: &str,
    sim_nodes: usize,
    nodes: usize,
    busy: f64,
    node_bytes: &OtlpBytes,
    head: &OtlpBytes,
    cloudwatch_usd: f64,
) {
    let hours = 730.0;
    // The nodes send the hours they run (busy, of a day); the head always.
    let scale = nodes as f64 / sim_nodes as f64 * busy;
    let month = |n: u64, h: u64| (n as f64 * scale + h as f64) * hours;
    let gb_plain = month(node_bytes.plain, head.plain) / 1e9;
    let gb_gzip = month(node_bytes.gzip, head.gzip) / 1e9;
    let gb_billed = month(node_bytes.billed, head.billed) / 1e9;
    let requests = month(node_bytes.requests, head.requests);
    let (price, source) = price_per_gb();
    println!(
        "{scenario} OTLP (per-job series labelled job_id, user, account, partition; host figures per node, cluster figures as for CloudWatch): measured {sim_nodes}/{nodes} nodes + head, 1 h: {} requests, {} bytes billed, {} bytes protobuf, {} bytes gzip ({:.1}x) | month: {:.1}M requests, {gb_billed:.2} GB billed (each point with its name and resource), {gb_plain:.2} GB protobuf, {gb_gzip:.2} GB gzip sent; at ${price:.2}/GB ({source}): ${:.2} (CloudWatch today: ${cloudwatch_usd:.2})",
        node_bytes.requests + head.requests,
        node_bytes.billed + head.billed,
        node_bytes.plain + head.plain,
        node_bytes.gzip + head.gzip,
        (node_bytes.plain + head.plain) as f64 / (node_bytes.gzip + head.gzip).max(1) as f64,
        requests / 1e6,
        gb_billed * price,
    );
}
