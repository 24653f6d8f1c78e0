//! `prometheus`: a pull endpoint for a Prometheus server, at `prometheus.address` (loopback by
//! default). It serves each collection as it comes ([`live`]): one gauge a series, the mean of
//! its period so far, named from the catalog (`slurm_memory_rss_bytes{job_id="42",...}`),
//! per-job series included (the open shape). A series not updated for three flush intervals is
//! dropped (an ended job's). Nothing waits on disk: a scrape always reads the latest values. Where
//! slurm.conf's `PrivateData` hides jobs or users, only aggregate series are served unless
//! `prometheus.job_series = "on"` ([`config::serves_job_series`]).
//!
//! The address needs no privilege, so any local user may hold it first, and while the daemon
//! restarts: systemd's socket unit (`infra/systemd/slurm-cw-shipper.socket`) holds it from boot
//! and passes it ([`crate::sys::listen`]). Where a user holds it all the same, the daemon goes
//! on: the other destinations start as usual, the endpoint keeps trying to bind in the
//! background ([`bind_later`]) and each flush it cannot serve is counted as dropped
//! (`not_listening`), until the port is free.

pub mod check;
pub mod config;
pub mod exposition;
pub mod live;
pub mod server;
pub mod token;

use crate::aggregate::Aggregate;
use crate::sinks::delivery::{Checks, StatsHandle};
use crate::sinks::open::OpenRules;
use crate::sinks::{BuildError, Context, MetricDestination, MetricSink};
use config::PrometheusConfig;
use live::Live;
use server::Body;
use slurm_cw_sink::outcome::Outcome;
use slurm_cw_sink::validate::DropReason;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// `prometheus` in the registry.
pub struct Spec;

#[async_trait::async_trait]
impl crate::sinks::Component for Spec {
    type Section = PrometheusConfig;

    fn name(&self) -> &'static str {
        "prometheus"
    }

    fn keys(&self) -> &'static [crate::config::docs::Key] {
        config::KEYS
    }

    async fn build(&self, cfg: &PrometheusConfig, cx: &Context<'_>) -> Result<MetricSink, BuildError> {
        Ok(Box::new(build(cfg, cx).await?))
    }

    async fn check(&self, cfg: &PrometheusConfig, cx: &Context<'_>) -> Vec<crate::check::Row> {
        check::rows(cfg, cx.slurm_conf).await
    }
}

pub struct PrometheusSink {
    address: String,
    live: Live,
    listening: Arc<AtomicBool>,
}

impl PrometheusSink {
    /// The address it listens on (the configured one, with the port chosen when it was 0).
    pub fn address(&self) -> &str {
        &self.address
    }
}

/// The first wait before binding again, doubled after each failure up to [`BIND_RETRY_MAX`].
pub const BIND_RETRY_FIRST: Duration = Duration::from_secs(1);
pub const BIND_RETRY_MAX: Duration = Duration::from_secs(30);

/// Binds the endpoint and serves it on the runtime. When the address cannot be had (another
/// program, maybe another user's, holds it), it says so and keeps trying in the background:
/// the daemon and its other destinations go on.
pub async fn build(cfg: &PrometheusConfig, cx: &Context<'_>) -> Result<PrometheusSink, BuildError> {
    // A token that cannot be read, or that others could read, is a setting to mend (exit 2):
    // serving without it would hand every job's figures to every local user.
    let guard: server::Guard =
        match &cfg.bearer_token_file {
            Some(f) => Some(Arc::new(token::Token::read(f).map_err(|e| {
                BuildError::config("prometheus", format!("prometheus.bearer_token_file {e}"))
            })?)),
            None => None,
        };
    let configured = cfg.address.clone();
    let body: Body = Arc::new(Mutex::new(Arc::new(String::new())));
    let listening = Arc::new(AtomicBool::new(false));
    let address = match bind(&configured).await {
        Ok(listener) => {
            let address = listener.local_addr().map_or_else(|_| configured.clone(), |a| a.to_string());
            tracing::info!(address, "Prometheus endpoint at http://{address}/metrics");
            listening.store(true, Ordering::Relaxed);
            tokio::spawn(server::serve(listener, body.clone(), guard.clone()));
            address
        }
        Err(e) => {
            let holder = crate::peer::listener_uid(std::path::Path::new("/proc"), &configured)
                .map_or_else(|| "another program".to_owned(), crate::peer::describe_uid);
            tracing::error!(
                address = configured, error = %e, holder,
                "cannot listen on prometheus.address; the other destinations go on, the endpoint \
                 is tried again in the background and each flush it misses counted as dropped (not_listening)"
            );
            tokio::spawn(bind_later(configured.clone(), body.clone(), guard.clone(), listening.clone()));
            configured
        }
    };
    let (job_series, why) = config::serves_job_series(cfg.job_series, cx.slurm_conf);
    if job_series {
        tracing::info!(why, "the Prometheus endpoint serves per-job and per-user series");
    } else {
        tracing::info!(why, "the Prometheus endpoint serves no per-job or per-user series");
    }
    let live = Live::new(body, cx.flush_interval * 3, job_series);
    Ok(PrometheusSink { address, live, listening })
}

/// The listener for `address`: the one systemd's socket unit passed for it (held across the
/// daemon's restarts, so no user can take the port in between and be sent the scraper's
/// token), else bound now.
async fn bind(address: &str) -> std::io::Result<tokio::net::TcpListener> {
    use std::net::ToSocketAddrs;
    let passed = address
        .to_socket_addrs()
        .ok()
        .into_iter()
        .flatten()
        .find_map(|a| crate::sys::listen::tcp_listener(&a));
    match passed {
        Some(listener) => {
            tracing::info!(address, "Prometheus endpoint from systemd's socket");
            listener.set_nonblocking(true)?;
            tokio::net::TcpListener::from_std(listener)
        }
        None => tokio::net::TcpListener::bind(address).await,
    }
}

/// Tries to bind `address` again, waiting longer after each failure, and serves it once bound.
async fn bind_later(address: String, body: Body, guard: server::Guard, listening: Arc<AtomicBool>) {
    let mut wait = BIND_RETRY_FIRST;
    loop {
        tokio::time::sleep(wait).await;
        match tokio::net::TcpListener::bind(&address).await {
            Ok(listener) => {
                tracing::info!(
                    address,
                    "Prometheus endpoint at http://{address}/metrics (the address is free now)"
                );
                listening.store(true, Ordering::Relaxed);
                server::serve(listener, body, guard).await;
                return;
            }
            Err(e) => {
                tracing::debug!(address, error = %e, ?wait, "prometheus.address still cannot be had");
                wait = (wait * 2).min(BIND_RETRY_MAX);
            }
        }
    }
}

/// The open rules, and while the endpoint is not listening, every datum dropped as
/// `not_listening`: no one can read it.
struct Rules {
    open: OpenRules,
    listening: Arc<AtomicBool>,
}

impl Checks<Aggregate> for Rules {
    fn retain_sendable(&mut self, items: &mut Vec<Aggregate>, stats: &StatsHandle) {
        if !self.listening.load(Ordering::Relaxed) {
            stats.count_drop(DropReason::NotListening, items.len() as u64);
            items.clear();
            return;
        }
        self.open.retain_sendable(items, stats);
    }
}

#[async_trait::async_trait]
impl MetricDestination for PrometheusSink {
    fn label(&self) -> &str {
        &self.address
    }

    fn checks(&self) -> Box<dyn Checks<Aggregate>> {
        Box::new(Rules { open: OpenRules::default(), listening: self.listening.clone() })
    }

    fn live(&self) -> Option<Live> {
        Some(self.live.clone())
    }

    async fn put_in(&mut self, _label: &str, items: Vec<Aggregate>) -> Outcome<Aggregate> {
        let offered = items.len();
        // Series kept private are not sent, nor refused: they are not this destination's.
        let (private, bytes) = self.live.flush(items);
        Outcome { sent: offered - private, bytes, ..Outcome::default() }
    }
}
