//! slurmctld's own OpenMetrics endpoint (Slurm 25.11+, `MetricsType=metrics/openmetrics`) as
//! the source of the head role's node figures, in place of sinfo: one HTTP GET of
//! /metrics/nodes and one of /metrics/partitions, served from slurmctld's memory.
//!
//! What stays with the commands: squeue (the endpoint has no pending reasons and no pending
//! demand, and one squeue gives every job figure, so /metrics/jobs is not read; its jobs'
//! allocations, 0 on 25.11.0-25.11.4, are never used) and sdiag for the RPC statistics the
//! endpoint lacks. With `head.top_rpc_types = 0` no RPC statistics are wanted: sdiag does not
//! run and /metrics/scheduler gives the scheduler figures ([`super::openmetrics_sched`]).
//!
//! `head.source = auto` reads the endpoint where this Slurm is 25.11 or newer, slurm.conf does
//! not say it is off and it answers; any failure falls back to sinfo for that cycle (logged
//! when the error changes, counted under the part `openmetrics`).

use super::command::SlurmCommands;
use super::config::{HeadConfig, HeadSource};
pub use super::openmetrics_describe::describe;
use super::openmetrics_http::{self as http, HttpError, Url};
use crate::slurm_conf;
use slurm_cw_formats::slurm::openmetrics::{Exposition, parse_at_most};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Where the endpoint is and what slurm.conf says of it.
#[derive(Debug, Clone)]
pub struct Resolved {
    /// The primary controller's endpoint.
    pub url: Result<Url, String>,
    /// The backup controllers' endpoints, in slurm.conf's order: tried when the primary does
    /// not answer (see [`Endpoint::fetch`]).
    pub backups: Vec<Url>,
    /// Where the URL came from, for `--check` and the log.
    pub from: String,
    /// slurm.conf's MetricsType names openmetrics (None: no slurm.conf read).
    pub metrics_on: Option<bool>,
    /// Accounting tracks gres/gpu, so the endpoint's GPU counts are real.
    pub gpus_tracked: bool,
    /// slurm.conf's GresTypes names gpu: the cluster may have GPUs the endpoint does not count.
    pub gpus_configured: bool,
}

/// The endpoint's address: `head.metrics_url`, else each SlurmctldHost's address (`name(addr)`,
/// else the name: a login node reaches a controller elsewhere, which AWS PCS names by address)
/// and the first port of SlurmctldPort, else 6817; the first is the primary, the others its backups.
pub fn resolve(head: &HeadConfig, slurm_conf: Option<&Path>) -> Resolved {
    let entries = slurm_conf.and_then(|p| slurm_conf::entries(p).ok());
    let metrics_on = entries.as_ref().map(|e| {
        slurm_conf::value(e, "MetricsType").is_some_and(|v| v.to_ascii_lowercase().contains("openmetrics"))
    });
    let gpus_tracked = entries.as_ref().is_some_and(|e| {
        slurm_conf::value(e, "AccountingStorageTRES")
            .is_some_and(|v| v.to_ascii_lowercase().contains("gres/gpu"))
    });
    let gpus_configured = entries.as_ref().is_some_and(|e| {
        slurm_conf::value(e, "GresTypes").is_some_and(|v| v.to_ascii_lowercase().contains("gpu"))
    });
    if let Some(u) = &head.metrics_url {
        return Resolved {
            url: Url::parse(u),
            backups: Vec::new(),
            from: "head.metrics_url".into(),
            metrics_on,
            gpus_tracked,
            gpus_configured,
        };
    }
    let Some(e) = entries else {
        return Resolved {
            url: Err("no slurm.conf to find slurmctld in; set head.metrics_url".into()),
            backups: Vec::new(),
            from: "nowhere".into(),
            metrics_on,
            gpus_tracked,
            gpus_configured,
        };
    };
    let mut urls = urls_from_conf(&e).into_iter();
    let url =
        urls.next().unwrap_or_else(|| Err("slurm.conf names no SlurmctldHost; set head.metrics_url".into()));
    let backups = urls.filter_map(Result::ok).collect();
    Resolved { url, backups, from: "slurm.conf".into(), metrics_on, gpus_tracked, gpus_configured }
}

/// The URL slurm.conf's entries give for the primary controller.
pub fn url_from_conf(e: &[(String, String)]) -> Result<Url, String> {
    urls_from_conf(e).into_iter().next().unwrap_or_else(|| Err("slurm.conf names no SlurmctldHost".into()))
}

/// One URL per controller, primary first.
fn urls_from_conf(e: &[(String, String)]) -> Vec<Result<Url, String>> {
    let port = slurm_conf::slurmctld_port(e);
    slurm_conf::controllers(e)
        .iter()
        .map(|c| {
            let host = c.host();
            let host = if host.contains(':') && !host.starts_with('[') {
                format!("[{host}]")
            } else {
                host.to_owned()
            };
            Url::parse(&format!("http://{host}:{port}"))
        })
        .collect()
}

/// The bodies of one fetch.
pub struct Fetched {
    pub nodes: Exposition,
    pub partitions: Exposition,
    /// /metrics/scheduler, where asked for.
    pub scheduler: Option<Exposition>,
}

/// Where a JWT for the endpoint comes from (26.05 `MetricsAuthUsers`). Never root's own
/// `scontrol token`: the daemon runs as root, and whatever answers 401 on the endpoint's port
/// (above 1024: a user's listener while slurmctld restarts) would get it in clear text.
#[derive(Debug, Clone, Default, PartialEq)]
pub enum TokenFrom {
    /// No token: a 401 or 403 falls back to the commands.
    #[default]
    Nowhere,
    /// `head.metrics_token_file`.
    File(PathBuf),
    /// `head.metrics_token_user`: `scontrol token username=<user>`, a short-lived token of
    /// that (unprivileged, `MetricsAuthUsers`) user.
    User(String),
}

impl TokenFrom {
    pub fn of(head: &HeadConfig) -> TokenFrom {
        match (&head.metrics_token_file, &head.metrics_token_user) {
            (Some(f), _) => TokenFrom::File(f.clone()),
            (None, Some(u)) => TokenFrom::User(u.clone()),
            (None, None) => TokenFrom::Nowhere,
        }
    }
}

/// Samples and labels one collection may hold, its answers together ([`parse_at_most`]): a
/// node has ten samples of one label in /metrics/nodes, so a cluster of 15,000 nodes fits.
/// Each takes some 100 bytes parsed however short its text: with the byte bound, what a
/// collection holds stays some 45 MB at most, far below the unit's `MemoryMax=128M`.
pub const COLLECTION_ITEMS_MAX: usize = 300_000;

/// Seconds a token minted for `head.metrics_token_user` lives; a 401 mints another.
const TOKEN_LIFESPAN_S: u32 = 3600;

pub struct Endpoint {
    mode: HeadSource,
    resolved: Resolved,
    token_from: TokenFrom,
    token: Option<String>,
    timeout: Duration,
    /// Bytes, and samples and labels, one collection may hold.
    max: usize,
    max_items: usize,
    /// `auto` after a failure: cycles left before the next try, and the next wait (doubling to
    /// 32 cycles), so an endpoint that times out does not hold every cycle up.
    skip: u32,
    backoff: u32,
    /// Which controller answered last (0: the primary, then the backups), tried first.
    current: usize,
    /// Whose listener on this host may be slurmctld: root and SlurmUser ([`listener_users`]).
    trusted: Vec<u32>,
}

/// The users slurmctld may listen as (root, and slurm.conf's SlurmUser): a listener on this
/// host that belongs to another is sent nothing (see [`http::get`]).
pub fn listener_users(slurm_conf: Option<&Path>) -> Vec<u32> {
    match slurm_conf.map(slurm_conf::entries) {
        Some(Ok(e)) => crate::role::daemon_users(&e),
        _ => vec![0],
    }
}

impl Endpoint {
    pub fn new(mode: HeadSource, resolved: Resolved, token_from: TokenFrom, timeout: Duration) -> Self {
        Endpoint {
            mode,
            resolved,
            token_from,
            token: None,
            timeout,
            max: http::COLLECTION_BYTES_MAX,
            max_items: COLLECTION_ITEMS_MAX,
            skip: 0,
            backoff: 1,
            current: 0,
            trusted: vec![0],
        }
    }

    /// The users whose listener on this host may be slurmctld (root alone by default).
    pub fn trusting(mut self, users: Vec<u32>) -> Self {
        self.trusted = users;
        self
    }

    /// The endpoint that answered last, or the primary's.
    pub fn answering(&self) -> Result<Url, String> {
        match self.current {
            0 => self.resolved.url.clone(),
            i => self.resolved.backups.get(i - 1).cloned().ok_or_else(|| "no such controller".into()),
        }
    }

    /// `primary` or `backup N`, for the controller that answered last.
    pub fn answering_role(&self) -> String {
        match self.current {
            0 => "primary".into(),
            i => format!("backup {i}"),
        }
    }

    /// Other bounds on what one collection holds: bytes, and samples and labels (tests).
    pub fn with_max(mut self, max: usize, max_items: usize) -> Self {
        self.max = max;
        self.max_items = max_items;
        self
    }

    pub fn mode(&self) -> HeadSource {
        self.mode
    }

    pub fn resolved(&self) -> &Resolved {
        &self.resolved
    }

    /// Whether to try the endpoint this cycle, and if not why (for `--check`).
    pub fn wanted(&self, version: Option<super::Version>) -> Result<(), String> {
        match self.mode {
            HeadSource::Commands => Err("head.source = commands".into()),
            HeadSource::Openmetrics => Ok(()),
            HeadSource::Auto => {
                let new_enough = super::Version { major: 25, minor: 11 };
                match version {
                    None => Err("Slurm's version not known yet".into()),
                    Some(v) if v < new_enough => {
                        Err(format!("Slurm {}.{:02} has no endpoint (25.11+)", v.major, v.minor))
                    }
                    _ if self.resolved.metrics_on == Some(false) => {
                        Err("slurm.conf does not set MetricsType=metrics/openmetrics".into())
                    }
                    // The endpoint would report 0 GPUs (see openmetrics_map): sinfo counts them.
                    _ if self.resolved.gpus_configured && !self.resolved.gpus_tracked => Err(
                        "GresTypes has gpu but AccountingStorageTRES does not track gres/gpu: the endpoint would \
                         count no GPU (head.source = openmetrics takes it anyway, without GPU figures)"
                            .into(),
                    ),
                    _ => Ok(()),
                }
            }
        }
    }

    /// False while `auto` waits out a failure (the commands stand in meanwhile).
    pub fn due(&mut self) -> bool {
        if self.skip == 0 {
            return true;
        }
        self.skip -= 1;
        false
    }

    fn outcome<T>(&mut self, r: Result<T, String>) -> Result<T, String> {
        match (&r, self.mode) {
            (Ok(_), _) => self.backoff = 1,
            (Err(_), HeadSource::Auto) => {
                self.skip = self.backoff;
                self.backoff = (self.backoff * 2).min(32);
            }
            (Err(_), _) => {}
        }
        r
    }

    /// GETs /metrics/nodes and /metrics/partitions (and /metrics/scheduler with `scheduler`);
    /// on 401 or 403 fetches a token (see [`TokenFrom`]) and tries once more.
    pub async fn fetch(&mut self, cmds: &SlurmCommands, scheduler: bool) -> Result<Fetched, String> {
        let r = self.try_fetch(cmds, scheduler).await;
        self.outcome(r)
    }

    /// The controller that answered last, then the others in slurm.conf's order, each while
    /// the one before did not answer at all (refused, unreachable, timed out): Slurm's clients
    /// move on to the backups alike. A backup that lists no node is taken for one in standby.
    async fn try_fetch(&mut self, cmds: &SlurmCommands, scheduler: bool) -> Result<Fetched, String> {
        let primary = self.resolved.url.clone()?;
        let urls: Vec<Url> = std::iter::once(primary).chain(self.resolved.backups.iter().cloned()).collect();
        let mut failed = Vec::new();
        let start = self.current;
        for i in (0..urls.len()).map(|k| (start + k) % urls.len()) {
            match self.fetch_from(&urls[i], cmds, scheduler).await {
                Ok(f) if i > 0 && f.nodes.series("slurm_node_cpus").next().is_none() => {
                    failed.push(format!("backup {} lists no node (in standby?)", urls[i]));
                }
                Ok(f) => {
                    self.current = i;
                    return Ok(f);
                }
                Err((e, answered)) => {
                    failed.push(e);
                    if answered {
                        break;
                    }
                }
            }
        }
        Err(failed.join("; "))
    }

    /// One controller's answer, or the error and whether it answered at all.
    async fn fetch_from(
        &mut self,
        url: &Url,
        cmds: &SlurmCommands,
        scheduler: bool,
    ) -> Result<Fetched, (String, bool)> {
        // A user's listener is no controller either: the next one is tried.
        let silent = |e: &HttpError| {
            matches!(e, HttpError::Connect(..) | HttpError::Timeout(..) | HttpError::NotSlurm(..))
        };
        let url = url.clone();
        let answered = match self.get_all(&url, scheduler).await {
            Err(HttpError::Status(_, 401 | 403)) => {
                self.token = Some(self.new_token(cmds).await.map_err(|e| (e, true))?);
                self.get_all(&url, scheduler).await
            }
            other => other,
        };
        let (n, p, s) = answered.map_err(|e| (e.to_string(), !silent(&e)))?;
        // Counted before parsed, each text dropped once parsed.
        let mut left = self.max_items;
        let mut bounded = |text: String, path: &str| match parse_at_most(&text, left) {
            Ok(e) => {
                left = left.saturating_sub(e.samples.iter().map(|s| 1 + s.labels.len()).sum());
                Ok(e)
            }
            Err(items) => Err((
                format!(
                    "{url}{path}: {items} samples and labels, past the {} one collection may hold; dropped",
                    self.max_items
                ),
                true,
            )),
        };
        let nodes = bounded(n, "/metrics/nodes")?;
        let listed = nodes.series("slurm_node_cpus").next().is_some();
        match nodes.value("slurm_nodes") {
            None if !listed => {
                return Err((
                    format!("{url}/metrics/nodes is not slurmctld's node metrics (no slurm_nodes)"),
                    true,
                ));
            }
            // The per-node series are what the figures are summed from.
            Some(n) if n > 0.0 && !listed => {
                return Err((format!("{url}/metrics/nodes counts {n} nodes but lists none"), true));
            }
            _ => {}
        }
        let partitions = bounded(p, "/metrics/partitions")?;
        // The scheduler's figures alone failing leaves sdiag to give them.
        let scheduler = s.and_then(|s| bounded(s, "/metrics/scheduler").ok());
        Ok(Fetched { nodes, partitions, scheduler })
    }

    async fn get_all(
        &self,
        url: &Url,
        scheduler: bool,
    ) -> Result<(String, String, Option<String>), HttpError> {
        let token = self.token.as_deref();
        let budget = http::Budget::new(self.max);
        let get = |path| http::get(url, path, token, self.timeout, &budget, &self.trusted);
        let sched = async {
            match scheduler {
                true => get("/metrics/scheduler").await.map(Some),
                false => Ok(None),
            }
        };
        let (n, p, s) = tokio::join!(get("/metrics/nodes"), get("/metrics/partitions"), sched);
        // The scheduler's figures alone failing leaves sdiag to give them, not the node
        // figures to sinfo.
        Ok((n?, p?, s.unwrap_or(None)))
    }

    async fn new_token(&self, cmds: &SlurmCommands) -> Result<String, String> {
        let user = match &self.token_from {
            TokenFrom::File(f) => {
                return crate::secret::read(f).map_err(|e| format!("head.metrics_token_file {e}"));
            }
            TokenFrom::User(u) => u,
            TokenFrom::Nowhere => {
                return Err("the endpoint wants a token (MetricsAuthUsers): set head.metrics_token_file \
                            or head.metrics_token_user"
                    .into());
            }
        };
        let (name, life) = (format!("username={user}"), format!("lifespan={TOKEN_LIFESPAN_S}"));
        let out = cmds
            .run("scontrol", &["token", &name, &life])
            .await
            .map_err(|e| format!("the endpoint wants a token, and `scontrol token {name}` failed: {e}"))?;
        token_of(&out.stdout).ok_or_else(|| "`scontrol token` printed no SLURM_JWT=".into())
    }
}

/// The JWT in `scontrol token`'s `SLURM_JWT=...`.
pub fn token_of(stdout: &str) -> Option<String> {
    stdout
        .lines()
        .find_map(|l| l.trim().strip_prefix("SLURM_JWT="))
        .map(str::trim)
        .filter(|t| !t.is_empty() && !t.contains(char::is_whitespace))
        .map(str::to_owned)
}

#[cfg(test)]
#[path = "openmetrics_tests.rs"]
mod tests;
