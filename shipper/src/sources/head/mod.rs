//! The head-node collector: node states and capacity (sinfo, or slurmctld's OpenMetrics
//! endpoint: see [`openmetrics`]), job states and demand (squeue), scheduler statistics (sdiag)
//! and slurmctld health. One call of each command per cycle, each with a time limit; a part
//! that fails leaves the others shipping.

pub mod command;
pub mod config;
pub mod fallback;
pub mod openmetrics;
mod openmetrics_describe;
pub mod openmetrics_http;
pub mod openmetrics_map;
pub mod openmetrics_sched;
pub mod sdiag;
pub mod sinfo;
pub mod squeue;

pub use slurm_cw_formats::slurm::{gres, state};

use super::{Collector, Errors};
use crate::sample::{Batch, Dims};
use command::{CommandError, Output, SlurmCommands};
use config::HeadConfig;
use fallback::{Format, PartFormat, run_part};
use slurm_cw_catalog::metrics::{NODES_DOWN_UNPLANNED, SLURMCTLD_RESPONSE_TIME, SLURMCTLD_UP};
use slurm_cw_formats::log_once::LogOnce;
use std::collections::HashMap;

/// A Slurm release, from `sinfo --version` (`slurm 23.11.4`, `slurm-wlm 22.05.8`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Version {
    pub major: u32,
    pub minor: u32,
}

impl Version {
    pub fn parse(s: &str) -> Option<Version> {
        let v = s.split_whitespace().last()?;
        let mut parts = v.split('.');
        let major = parts.next()?.parse().ok()?;
        let minor = parts.next()?.parse().ok()?;
        Some(Version { major, minor })
    }

    /// `sdiag --json` exists from 23.02.
    pub fn has_sdiag_json(self) -> bool {
        self >= Version { major: 23, minor: 2 }
    }
}

/// The head role's collector in [`super::COLLECTORS`]: sinfo, squeue and sdiag, or slurmctld's
/// OpenMetrics endpoint.
/// The head collector of the `[head]` section ([`super::table`]).
pub fn build(head: &HeadConfig, shared: &super::Shared) -> Option<Box<dyn Collector>> {
    let cmds = shared.commands().clone();
    let conf = shared.slurm_conf.as_deref();
    let endpoint = openmetrics::Endpoint::new(
        head.source,
        openmetrics::resolve(head, conf),
        openmetrics::TokenFrom::of(head),
        cmds.timeout(),
    )
    .trusting(openmetrics::listener_users(conf));
    Some(Box::new(HeadCollector::new(cmds, head.clone()).with_endpoint(endpoint)))
}

pub struct HeadCollector {
    cmds: SlurmCommands,
    cfg: HeadConfig,
    version: Option<Version>,
    /// How each command's output is read: JSON where it adds something (sdiag from 23.02), or
    /// where this Slurm refuses the other (see [`fallback`]).
    sinfo_format: PartFormat,
    squeue_format: PartFormat,
    sdiag_format: PartFormat,
    /// The last error logged per part, so a persisting failure is logged once, not every cycle.
    last_error: HashMap<&'static str, String>,
    logged_unknown: LogOnce,
    controller_up: Option<bool>,
    /// slurmctld's metrics endpoint, where node figures come from in place of sinfo.
    endpoint: Option<openmetrics::Endpoint>,
    /// Which source gave the node figures last cycle: `openmetrics` or `commands`.
    node_source: &'static str,
}

impl HeadCollector {
    pub fn new(cmds: SlurmCommands, cfg: HeadConfig) -> Self {
        HeadCollector {
            cmds,
            cfg,
            version: None,
            sinfo_format: PartFormat::new(Format::Text),
            squeue_format: PartFormat::new(Format::Text),
            sdiag_format: PartFormat::new(Format::Text),
            last_error: HashMap::new(),
            logged_unknown: LogOnce::default(),
            controller_up: None,
            endpoint: None,
            node_source: "commands",
        }
    }

    /// Reads node figures from slurmctld's metrics endpoint where `head.source` and this Slurm
    /// allow (see [`openmetrics`]).
    pub fn with_endpoint(mut self, endpoint: openmetrics::Endpoint) -> Self {
        self.endpoint = Some(endpoint);
        self
    }

    /// Which source gave the node figures last cycle: `openmetrics` or `commands`.
    pub fn node_source(&self) -> &'static str {
        self.node_source
    }

    /// Node figures from the endpoint, and with no RPC statistics wanted (`top_rpc_types = 0`)
    /// the scheduler's too: (nodes shipped, scheduler shipped). False (logged, counted) where it
    /// is not wanted or fails, and sinfo (and sdiag) are to run.
    async fn collect_endpoint(&mut self, out: &mut Batch, errors: &mut Errors) -> (bool, bool) {
        let Some(ep) = self.endpoint.as_mut() else { return (false, false) };
        if ep.wanted(self.version).is_err() || !ep.due() {
            return (false, false);
        }
        errors.ran("openmetrics");
        let gpus = ep.resolved().gpus_tracked;
        match ep.fetch(&self.cmds, self.cfg.top_rpc_types == 0).await {
            Ok(f) => {
                let bad = f.nodes.bad_total + f.partitions.bad_total;
                let first = (f.nodes.bad.first().map(|b| ("nodes", b)))
                    .or_else(|| f.partitions.bad.first().map(|b| ("partitions", b)));
                if let Some((path, first)) = first {
                    // The first bad line says where, which metric and why: enough to act on.
                    let why =
                        format!("{bad} metrics lines unreadable; skipped (first: /metrics/{path} {first})");
                    self.note_error("openmetrics", errors, why);
                } else {
                    self.note_ok("openmetrics");
                }
                let opts = openmetrics_map::Options { per_partition: self.cfg.reads_partitions(), gpus };
                let fixes = openmetrics_map::emit(&f.nodes, &f.partitions, &opts, out);
                if let Some(first) = fixes.wrapped.first()
                    && self.logged_unknown.first("openmetrics 16-bit wrap")
                {
                    tracing::info!(example = %first, "endpoint counts wrapped at 65,536; corrected");
                }
                if fixes.down_guessed {
                    self.down_from_sinfo(out, errors).await;
                }
                let sched = f.scheduler.as_ref().is_some_and(|e| openmetrics_sched::emit(e, out) > 0);
                (true, sched)
            }
            Err(e) => {
                self.note_error("openmetrics", errors, format!("{e}; node figures from sinfo"));
                (false, false)
            }
        }
    }

    /// `NodesDownUnplanned` from sinfo's down nodes, where the endpoint's counts leave it a guess
    /// (see [`openmetrics_map::Corrections::down_guessed`]): whether a powered-down or drained
    /// count is on a down node decides whether the nodes-down alarm pages. One sinfo of the down
    /// nodes alone, only while some node is down; where it fails, the guess stands.
    async fn down_from_sinfo(&mut self, out: &mut Batch, errors: &mut Errors) {
        let mut args = sinfo::ARGS.to_vec();
        args.push("--states=down");
        let rows = match self.cmds.run("sinfo", &args).await {
            Ok(o) => sinfo::parse_text(&o.stdout).0,
            Err(e) => {
                return self.note_error(
                    "sinfo",
                    errors,
                    format!("{e}; nodes down from the endpoint's counts"),
                );
            }
        };
        let unplanned = sinfo::down_unplanned(&rows);
        let cluster =
            out.samples.iter_mut().find(|s| s.metric.name == NODES_DOWN_UNPLANNED.name && s.dims.is_empty());
        if let Some(s) = cluster {
            s.value = crate::sample::Observed::Scalar(unplanned as f64);
        }
    }

    /// Asks for the version once (again next cycle if it failed).
    async fn detect_version(&mut self) {
        if self.version.is_some() {
            return;
        }
        if let Ok(out) = self.cmds.run("sinfo", &["--version"]).await {
            self.version = Version::parse(&out.stdout);
            if let Some(v) = self.version {
                tracing::info!(version = out.stdout.trim(), "Slurm version");
                if v.has_sdiag_json() {
                    self.sdiag_format.prefer(Format::Json);
                }
            }
        }
    }

    /// The format `part` (sinfo, squeue, sdiag) is read in now: `text` or `json`.
    pub fn format(&self, part: &str) -> Option<&'static str> {
        let pf = match part {
            "sinfo" => &self.sinfo_format,
            "squeue" => &self.squeue_format,
            "sdiag" => &self.sdiag_format,
            _ => return None,
        };
        Some(pf.current.as_str())
    }

    fn note_error(&mut self, part: &'static str, errors: &mut Errors, message: String) {
        errors.add(part, 1);
        if self.last_error.get(part) != Some(&message) {
            tracing::warn!(collector = part, error = %message, "head collector part failed");
            self.last_error.insert(part, message);
        }
    }

    fn note_ok(&mut self, part: &'static str) {
        if self.last_error.remove(part).is_some() {
            tracing::info!(collector = part, "head collector part works again");
        }
    }

    /// Logs the first of each kind of thing Slurm printed that this shipper does not know.
    fn note_unknown(&mut self, what: &str, example: &str) {
        if self.logged_unknown.first(what) {
            tracing::info!(
                what,
                example,
                "Slurm printed something this version of the shipper does not know; shipped as other"
            );
        }
    }

    fn note_controller(&mut self, up: bool, why: Option<&CommandError>) {
        if self.controller_up != Some(up) {
            match (up, why) {
                (true, _) => tracing::info!("slurmctld answers"),
                (false, Some(e)) => tracing::warn!(error = %e, "slurmctld does not answer"),
                (false, None) => tracing::warn!("slurmctld does not answer"),
            }
            self.controller_up = Some(up);
        }
    }

    fn handle_sinfo(&mut self, result: &Result<Output, CommandError>, out: &mut Batch, errors: &mut Errors) {
        let o = match result {
            Ok(o) => o,
            Err(e) => return self.note_error("sinfo", errors, e.to_string()),
        };
        let parsed = match self.sinfo_format.current {
            Format::Text => Ok(sinfo::parse_text(&o.stdout)),
            Format::Json => sinfo::parse_json(&o.stdout).map_err(|e| e.to_string()),
        };
        match parsed {
            Ok((rows, bad)) => {
                for b in &bad {
                    self.note_error("sinfo", errors, format!("sinfo output {b}"));
                }
                if let Some(r) = rows.iter().find(|r| !r.state.recognised) {
                    self.note_unknown("node state", &r.name);
                }
                if let Some(r) = rows.iter().find(|r| r.state.has("other")) {
                    self.note_unknown("node state flag", &r.name);
                }
                if bad.is_empty() {
                    self.note_ok("sinfo");
                }
                sinfo::emit(&rows, self.cfg.reads_partitions(), out);
            }
            Err(e) => self.note_error("sinfo", errors, e),
        }
    }

    fn handle_squeue(&mut self, result: &Result<Output, CommandError>, out: &mut Batch, errors: &mut Errors) {
        let o = match result {
            Ok(o) => o,
            Err(e) => return self.note_error("squeue", errors, e.to_string()),
        };
        let parsed = match self.squeue_format.current {
            Format::Text => Ok(squeue::parse_text(&o.stdout)),
            Format::Json => squeue::parse_json(&o.stdout),
        };
        match parsed {
            Ok((queue, bad)) => {
                for b in &bad {
                    self.note_error("squeue", errors, format!("squeue output {b}"));
                }
                if queue.unknown_states > 0 {
                    self.note_unknown("job state", "");
                }
                if queue.cluster.flags.contains_key("other") {
                    self.note_unknown("job state flag", "");
                }
                if let Some(r) = &queue.first_unknown_reason {
                    self.note_unknown("pending reason description (shipped as Other)", r);
                }
                if bad.is_empty() {
                    self.note_ok("squeue");
                }
                squeue::emit(&queue, self.cfg.reads_partitions(), self.cfg.top_pending_reasons, out);
            }
            Err(e) => self.note_error("squeue", errors, e),
        }
    }

    fn handle_sdiag(&mut self, result: &Result<Output, CommandError>, out: &mut Batch, errors: &mut Errors) {
        let o = match result {
            Ok(o) => o,
            Err(e) => return self.note_error("sdiag", errors, e.to_string()),
        };
        let parsed = match self.sdiag_format.current {
            Format::Text => sdiag::parse_text(&o.stdout),
            Format::Json => sdiag::parse_json(&o.stdout),
        };
        match parsed {
            Ok(s) => {
                for label in &s.unknown {
                    self.note_unknown(&format!("sdiag field {label:?}"), label);
                }
                self.note_ok("sdiag");
                sdiag::emit(&s, self.cfg.top_rpc_types, out);
            }
            Err(e) => {
                if self.sdiag_format.current == Format::Json && self.sdiag_format.give_up_current() {
                    tracing::warn!(error = %e, "sdiag --json unusable; reading plain sdiag from now on");
                }
                self.note_error("sdiag", errors, e.to_string());
            }
        }
    }
}

#[async_trait::async_trait(?Send)]
impl Collector for HeadCollector {
    fn name(&self) -> &'static str {
        "head"
    }

    async fn collect(&mut self, out: &mut Batch, errors: &mut Errors) {
        for part in ["sinfo", "squeue", "sdiag"] {
            errors.ran(part);
        }
        self.detect_version().await;
        let (from_endpoint, sched_from_endpoint) = self.collect_endpoint(out, errors).await;
        // sdiag before sinfo and squeue, so that the server thread and agent counts it reports
        // are not inflated by them; those two then run together.
        let sdiag = match sched_from_endpoint {
            true => None,
            false => Some(run_part(&self.cmds, "sdiag", &mut self.sdiag_format).await),
        };
        self.node_source = if from_endpoint { "openmetrics" } else { "commands" };
        let (sinfo, squeue) = if from_endpoint {
            (None, run_part(&self.cmds, "squeue", &mut self.squeue_format).await)
        } else {
            let (a, b) = tokio::join!(
                run_part(&self.cmds, "sinfo", &mut self.sinfo_format),
                run_part(&self.cmds, "squeue", &mut self.squeue_format),
            );
            (Some(a), b)
        };

        let mut results = vec![&squeue];
        results.extend(sinfo.as_ref());
        results.extend(sdiag.as_ref());
        let timed_out = results.iter().find_map(|r| match r {
            Err(e @ CommandError::Timeout { .. }) => Some(e.clone()),
            _ => None,
        });
        let any_ok = from_endpoint || results.iter().any(|r| r.is_ok());
        let up = any_ok && timed_out.is_none();
        let first_err = sinfo.as_ref().unwrap_or(&squeue).as_ref().err().cloned();
        let why = timed_out.or(first_err);
        self.note_controller(up, why.as_ref());
        out.push(&SLURMCTLD_UP, Dims::new(), if up { 1.0 } else { 0.0 });
        let first_ok = [&sdiag, &sinfo].into_iter().find_map(|r| r.as_ref().and_then(|r| r.as_ref().ok()));
        if let Some(o) = first_ok.or(squeue.as_ref().ok()) {
            out.push(&SLURMCTLD_RESPONSE_TIME, Dims::new(), o.elapsed.as_secs_f64() * 1000.0);
        }

        if let Some(sinfo) = &sinfo {
            self.handle_sinfo(sinfo, out, errors);
        }
        self.handle_squeue(&squeue, out, errors);
        if let Some(sdiag) = &sdiag {
            self.handle_sdiag(sdiag, out, errors);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions() {
        assert_eq!(Version::parse("slurm-wlm 22.05.8\n"), Some(Version { major: 22, minor: 5 }));
        assert_eq!(Version::parse("slurm 23.11.4"), Some(Version { major: 23, minor: 11 }));
        assert_eq!(Version::parse("slurm 25.11.0-0rc1"), Some(Version { major: 25, minor: 11 }));
        assert_eq!(Version::parse("garbage"), None);
        assert!(!Version { major: 22, minor: 5 }.has_sdiag_json());
        assert!(Version { major: 23, minor: 2 }.has_sdiag_json());
        assert!(Version { major: 24, minor: 11 }.has_sdiag_json());
    }
}
