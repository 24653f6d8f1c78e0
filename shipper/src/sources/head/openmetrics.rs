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
use super::config::HeadSource;
use super::openmetrics_http::{self as http, HttpError, Url};
use crate::config::Config;
use crate::slurm_conf;
use slurm_cw_formats::slurm::openmetrics::{Exposition, parse};
use std::path::PathBuf;
use std::time::Duration;

/// Where the endpoint is and what slurm.conf says of it.
#[derive(Debug, Clone)]
pub struct Resolved {
    pub url: Result<Url, String>,
    /// Where the URL came from, for `--check` and the log.
    pub from: String,
    /// slurm.conf's MetricsType names openmetrics (None: no slurm.conf read).
    pub metrics_on: Option<bool>,
    /// Accounting tracks gres/gpu, so the endpoint's GPU counts are real.
    pub gpus_tracked: bool,
    /// slurm.conf's GresTypes names gpu: the cluster may have GPUs the endpoint does not count.
    pub gpus_configured: bool,
}

/// The endpoint's address: `head.metrics_url`, else SlurmctldHost's address (`name(addr)`, else
/// the name) of the first controller and the first port of SlurmctldPort, else 6817.
pub fn resolve(config: &Config) -> Resolved {
    let entries = config.slurm_conf_path().and_then(|p| slurm_conf::entries(&p).ok());
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
    if let Some(u) = &config.head.metrics_url {
        return Resolved {
            url: Url::parse(u),
            from: "head.metrics_url".into(),
            metrics_on,
            gpus_tracked,
            gpus_configured,
        };
    }
    let Some(e) = entries else {
        return Resolved {
            url: Err("no slurm.conf to find slurmctld in; set head.metrics_url".into()),
            from: "nowhere".into(),
            metrics_on,
            gpus_tracked,
            gpus_configured,
        };
    };
    Resolved { url: url_from_conf(&e), from: "slurm.conf".into(), metrics_on, gpus_tracked, gpus_configured }
}

/// The URL slurm.conf's entries give.
pub fn url_from_conf(e: &[(String, String)]) -> Result<Url, String> {
    let host_line = e
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("SlurmctldHost") || k.eq_ignore_ascii_case("ControlMachine"))
        .map(|(_, v)| v.as_str())
        .ok_or("slurm.conf names no SlurmctldHost; set head.metrics_url")?;
    // `name(addr)`: the address where there is one.
    let host = match host_line.split_once('(') {
        Some((_, addr)) => addr.trim_end_matches(')').trim(),
        None => host_line.trim(),
    };
    let port = slurm_conf::value(e, "SlurmctldPort")
        .map(|p| p.split(['-', ',']).next().unwrap_or("").trim().to_owned())
        .unwrap_or_else(|| "6817".into());
    let host =
        if host.contains(':') && !host.starts_with('[') { format!("[{host}]") } else { host.to_owned() };
    Url::parse(&format!("http://{host}:{port}"))
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
    pub fn of(head: &super::config::HeadConfig) -> TokenFrom {
        match (&head.metrics_token_file, &head.metrics_token_user) {
            (Some(f), _) => TokenFrom::File(f.clone()),
            (None, Some(u)) => TokenFrom::User(u.clone()),
            (None, None) => TokenFrom::Nowhere,
        }
    }
}

/// Seconds a token minted for `head.metrics_token_user` lives; a 401 mints another.
const TOKEN_LIFESPAN_S: u32 = 3600;

pub struct Endpoint {
    mode: HeadSource,
    resolved: Resolved,
    token_from: TokenFrom,
    token: Option<String>,
    timeout: Duration,
    max: usize,
    /// `auto` after a failure: cycles left before the next try, and the next wait (doubling to
    /// 32 cycles), so an endpoint that times out does not hold every cycle up.
    skip: u32,
    backoff: u32,
}

impl Endpoint {
    pub fn new(mode: HeadSource, resolved: Resolved, token_from: TokenFrom, timeout: Duration) -> Self {
        Endpoint {
            mode,
            resolved,
            token_from,
            token: None,
            timeout,
            max: http::BODY_MAX,
            skip: 0,
            backoff: 1,
        }
    }

    /// Another bound on each body (tests).
    pub fn with_max(mut self, max: usize) -> Self {
        self.max = max;
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

    async fn try_fetch(&mut self, cmds: &SlurmCommands, scheduler: bool) -> Result<Fetched, String> {
        let url = self.resolved.url.clone()?;
        match self.get_all(&url, scheduler).await {
            Err(HttpError::Status(_, 401 | 403)) => {
                self.token = Some(self.new_token(cmds).await?);
                self.get_all(&url, scheduler).await.map_err(|e| e.to_string())
            }
            other => other.map_err(|e| e.to_string()),
        }
        .and_then(|(n, p, s)| {
            let nodes = parse(&n);
            let partitions = parse(&p);
            let listed = nodes.series("slurm_node_cpus").next().is_some();
            match nodes.value("slurm_nodes") {
                None if !listed => {
                    return Err(format!(
                        "{url}/metrics/nodes is not slurmctld's node metrics (no slurm_nodes)"
                    ));
                }
                // The per-node series are what the figures are summed from.
                Some(n) if n > 0.0 && !listed => {
                    return Err(format!("{url}/metrics/nodes counts {n} nodes but lists none"));
                }
                _ => {}
            }
            Ok(Fetched { nodes, partitions, scheduler: s.map(|s| parse(&s)) })
        })
    }

    async fn get_all(
        &self,
        url: &Url,
        scheduler: bool,
    ) -> Result<(String, String, Option<String>), HttpError> {
        let token = self.token.as_deref();
        let get = |path| http::get(url, path, token, self.timeout, self.max);
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
                let text = std::fs::read_to_string(f)
                    .map_err(|e| format!("head.metrics_token_file {}: {e}", f.display()))?;
                let t = text.trim();
                if t.is_empty() || t.contains(char::is_whitespace) {
                    return Err(format!("head.metrics_token_file {}: not one token", f.display()));
                }
                return Ok(t.to_owned());
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

/// `--check`'s line: which source gives node figures, and why. Err where `head.source =
/// openmetrics` and the endpoint fails (the commands stand in, but that is not what was asked).
pub async fn describe(config: &Config, cmds: &SlurmCommands) -> Result<String, String> {
    let mut ep = Endpoint::new(
        config.head.source,
        resolve(config),
        TokenFrom::of(&config.head),
        config.slurm.command_timeout,
    );
    let version = match cmds.run("sinfo", &["--version"]).await {
        Ok(o) => super::Version::parse(&o.stdout),
        Err(_) => None,
    };
    if let Err(why) = ep.wanted(version) {
        return Ok(format!("commands (sinfo): {why}"));
    }
    let from = ep.resolved().from.clone();
    match ep.fetch(cmds, config.head.top_rpc_types == 0).await {
        Ok(f) => Ok(format!(
            "openmetrics: {} (from {from}) answers, {} samples in /metrics/nodes{}",
            ep.resolved().url.as_ref().map(|u| u.to_string()).unwrap_or_default(),
            f.nodes.samples.len(),
            if ep.resolved().gpus_tracked {
                ""
            } else {
                "; GPU figures left out (accounting does not track gres/gpu)"
            }
        )),
        Err(e) if ep.mode() == HeadSource::Openmetrics => Err(format!("commands (sinfo) stand in: {e}")),
        Err(e) => Ok(format!("commands (sinfo): the endpoint fails: {e}")),
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
mod tests {
    use super::*;

    fn entries(text: &str) -> Vec<(String, String)> {
        text.lines().filter_map(|l| l.split_once('=')).map(|(k, v)| (k.to_owned(), v.to_owned())).collect()
    }

    #[test]
    fn url_from_slurm_conf() {
        // ParallelCluster: a port range, the first port is slurmctld's.
        let u =
            url_from_conf(&entries("SlurmctldHost=ip-10-0-0-5(10.0.0.5)\nSlurmctldPort=6820-6829")).unwrap();
        assert_eq!(u.to_string(), "http://10.0.0.5:6820");
        let u = url_from_conf(&entries("SlurmctldHost=head\nSlurmctldHost=backup")).unwrap();
        assert_eq!(u.to_string(), "http://head:6817");
        assert!(url_from_conf(&entries("ClusterName=x")).is_err());
    }

    #[test]
    fn auto_waits_longer_after_each_failure_and_openmetrics_never() {
        let resolved = Resolved {
            url: Err("x".into()),
            from: String::new(),
            metrics_on: None,
            gpus_tracked: false,
            gpus_configured: false,
        };
        let mut ep =
            Endpoint::new(HeadSource::Auto, resolved.clone(), TokenFrom::Nowhere, Duration::from_secs(1));
        let mut tried = Vec::new();
        for _ in 0..10 {
            let due = ep.due();
            tried.push(due);
            if due {
                let _ = ep.outcome::<()>(Err("refused".into()));
            }
        }
        let t = true;
        let f = false;
        assert_eq!(tried, [t, f, t, f, f, t, f, f, f, f]);
        let _ = ep.outcome(Ok(()));
        assert_eq!(ep.backoff, 1);
        let mut ep =
            Endpoint::new(HeadSource::Openmetrics, resolved, TokenFrom::Nowhere, Duration::from_secs(1));
        let _ = ep.outcome::<()>(Err("refused".into()));
        assert!(ep.due());
    }

    /// A loopback endpoint that answers 401 unless the request carries token `T`.
    fn wants_token() -> Url {
        use std::io::{Read, Write};
        let fixtures = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/slurm/26.05-real/");
        let body = |p: &str| std::fs::read_to_string(format!("{fixtures}openmetrics-{p}.txt")).unwrap();
        let (nodes, parts) = (body("nodes"), body("partitions"));
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        std::thread::spawn(move || {
            for s in l.incoming() {
                let Ok(mut s) = s else { return };
                let mut req = [0u8; 4096];
                let n = s.read(&mut req).unwrap_or(0);
                let req = String::from_utf8_lossy(&req[..n]);
                let text = if req.contains("/metrics/nodes") { &nodes } else { &parts };
                let answer = if req.contains("X-SLURM-USER-TOKEN: T\r\n") {
                    format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{text}", text.len())
                } else {
                    "HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\n\r\n".to_owned()
                };
                let _ = s.write_all(answer.as_bytes());
            }
        });
        Url::parse(&format!("http://127.0.0.1:{port}")).unwrap()
    }

    #[tokio::test]
    async fn a_token_only_from_the_file_or_the_named_user_never_roots_own() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        let resolved = Resolved {
            url: Ok(wants_token()),
            from: String::new(),
            metrics_on: Some(true),
            gpus_tracked: true,
            gpus_configured: false,
        };
        // A scontrol that notes how it was asked and mints `T`.
        let asked = d.path().join("asked");
        let scontrol = d.path().join("scontrol");
        std::fs::write(
            &scontrol,
            format!("#!/bin/sh\necho \"$@\" >> {}\necho SLURM_JWT=T\n", asked.display()),
        )
        .unwrap();
        std::fs::set_permissions(&scontrol, std::fs::Permissions::from_mode(0o755)).unwrap();
        let cmds = SlurmCommands::new(Some(d.path().to_owned()), Duration::from_secs(5));
        let fetch = |from: TokenFrom| {
            let (resolved, cmds) = (resolved.clone(), cmds.clone());
            async move {
                let mut ep = Endpoint::new(HeadSource::Openmetrics, resolved, from, Duration::from_secs(5));
                ep.fetch(&cmds, false).await.map(|f| f.nodes.samples.len())
            }
        };
        // Nowhere: no token is made, and the error says what to set.
        let none = fetch(TokenFrom::Nowhere).await.unwrap_err();
        assert!(none.contains("head.metrics_token_user"), "{none}");
        assert!(!asked.exists(), "scontrol token was not run");
        // A file.
        let file = d.path().join("jwt");
        std::fs::write(&file, "T\n").unwrap();
        assert!(fetch(TokenFrom::File(file)).await.unwrap() > 0);
        assert!(!asked.exists());
        // The named user's short-lived token.
        assert!(fetch(TokenFrom::User("slurm-metrics".into())).await.unwrap() > 0);
        let args = std::fs::read_to_string(&asked).unwrap();
        assert_eq!(args.trim(), "token username=slurm-metrics lifespan=3600");
    }

    #[test]
    fn tokens_of_scontrol() {
        assert_eq!(token_of("SLURM_JWT=eyJhbGc.eyJ.sig\n").as_deref(), Some("eyJhbGc.eyJ.sig"));
        assert_eq!(token_of("warning: x\n"), None);
        assert_eq!(token_of("SLURM_JWT=\n"), None);
    }
}
