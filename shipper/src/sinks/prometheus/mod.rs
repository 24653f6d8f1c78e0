//! `prometheus`: a pull endpoint for a Prometheus server, at `prometheus.address` (loopback by
//! default). It serves what the last flushes brought: one gauge a series, the mean of its
//! period, named from the catalog (`slurm_memory_rss_bytes{job_id="42",...}`), per-job series
//! included (the open shape). A series not updated for three flush intervals is dropped (an
//! ended job's). Nothing waits on disk: a scrape always reads the latest values.

pub mod config;
pub mod exposition;
pub mod server;

use crate::datum::Datum;
use crate::sinks::delivery::Checks;
use crate::sinks::open::OpenRules;
use crate::sinks::{Context, MetricDestination};
use exposition::Series;
use server::Body;
use slurm_cw_sink::outcome::Outcome;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub struct PrometheusSink {
    address: String,
    series: Series,
    body: Body,
    ttl: Duration,
}

impl PrometheusSink {
    /// The address it listens on (the configured one, with the port chosen when it was 0).
    pub fn address(&self) -> &str {
        &self.address
    }
}

/// Binds the endpoint and serves it on the runtime. Fails when the address cannot be had.
pub async fn build(ctx: &Context<'_>) -> Result<PrometheusSink, String> {
    let configured = &ctx.config.prometheus.address;
    let listener = tokio::net::TcpListener::bind(configured)
        .await
        .map_err(|e| format!("cannot listen on prometheus.address {configured}: {e}"))?;
    let address = listener.local_addr().map_or_else(|_| configured.clone(), |a| a.to_string());
    tracing::info!(address, "Prometheus endpoint at http://{address}/metrics");
    let body: Body = Arc::new(Mutex::new(Arc::new(String::new())));
    tokio::spawn(server::serve(listener, body.clone()));
    Ok(PrometheusSink { address, series: Series::default(), body, ttl: ctx.config.flush_interval * 3 })
}

#[async_trait::async_trait]
impl MetricDestination for PrometheusSink {
    fn label(&self) -> &str {
        &self.address
    }

    fn checks(&self) -> Box<dyn Checks<Datum>> {
        Box::new(OpenRules::default())
    }

    async fn put_in(&mut self, _label: &str, datums: Vec<Datum>) -> Outcome<Datum> {
        let now = Instant::now();
        let offered = datums.len();
        let unknown = self.series.update(datums, now);
        self.series.expire(now, self.ttl);
        let text = Arc::new(self.series.render());
        let bytes = text.len() as u64;
        match self.body.lock() {
            Ok(mut g) => *g = text,
            Err(p) => *p.into_inner() = text,
        }
        Outcome { sent: offered - unknown.len(), rejected: unknown, bytes, ..Outcome::default() }
    }
}
