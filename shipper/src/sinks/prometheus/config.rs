//! `[prometheus]`: where the pull endpoint listens.

use crate::config::docs::Shown::{Unset, Value};
use crate::config::docs::{Key, key};
use crate::config::{ConfigError, Toggle, string};
use serde::Deserialize;
use std::path::{Path, PathBuf};

/// This section's lines of the configuration table (docs/configuration.md) ([`crate::settings::docs`]).
#[rustfmt::skip]
pub const KEYS: &[Key] = &[
    key("prometheus.address", Value("\"127.0.0.1:9817\""), "where the pull endpoint listens (`/metrics`); every local user can read it unless `bearer_token_file` guards it, so open it wider only behind a firewall or with a token"),
    key("prometheus.job_series", Value("\"auto\""), "series labelled with a job or a user (`job_id`, `user`): `auto` serves them unless slurm.conf's `PrivateData` names `jobs` or `users` (or slurm.conf cannot be read), then only aggregate series; `on` serves them whatever `PrivateData` says (to every local user, or with a token to its holder alone); `off` never"),
    key("prometheus.bearer_token_file", Unset("none: any local user reads the endpoint"), "a file (root's, mode 0600, in directories only root can write) holding a token of at least 16 characters: the endpoint answers only requests with `Authorization: Bearer <token>` (Prometheus `authorization: credentials_file:`), others 401; read at start; plain HTTP, so keep its network the cluster's"),
];

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PrometheusConfig {
    /// `host:port`. Loopback by default: every user of the node can read what it serves (their
    /// neighbours' job ids, users and accounts), so open it wider only behind a firewall that
    /// lets the Prometheus server alone in.
    #[serde(deserialize_with = "string")]
    pub address: String,
    /// Per-job and per-user series (`job_id`, `user` labels): `auto` serves them unless
    /// slurm.conf's `PrivateData` hides jobs or users from one another; `on` serves them
    /// whatever it says (the explicit opt-in); `off` never.
    pub job_series: Toggle,
    /// A file holding the token a request must carry ([`super::token`]); none: every request
    /// is answered.
    pub bearer_token_file: Option<PathBuf>,
}

impl Default for PrometheusConfig {
    fn default() -> Self {
        PrometheusConfig {
            address: "127.0.0.1:9817".to_owned(),
            job_series: Toggle::Auto,
            bearer_token_file: None,
        }
    }
}

/// The `PrivateData` words under which the endpoint serves no per-job or per-user series.
pub const HIDING: &[&str] = &["jobs", "users"];

/// Whether the endpoint serves per-job and per-user series, and why (for the log and
/// `--check`). `slurm_conf`: the slurm.conf in use, if there is one; one that cannot be read
/// hides them (it may say `PrivateData=jobs`). A token guarding the endpoint changes nothing
/// here: whoever reads the Prometheus server reads what it scraped, so serving them there
/// stays the explicit `on`.
pub fn serves_job_series(job_series: Toggle, slurm_conf: Option<&Path>) -> (bool, String) {
    match job_series {
        Toggle::On => return (true, "prometheus.job_series = \"on\"".to_owned()),
        Toggle::Off => return (false, "prometheus.job_series = \"off\"".to_owned()),
        Toggle::Auto => {}
    }
    let Some(path) = slurm_conf else {
        return (true, "no slurm.conf, so no PrivateData".to_owned());
    };
    let entries = match crate::slurm_conf::entries(path) {
        Ok(e) => e,
        Err(e) => return (false, format!("{e}: PrivateData unknown, so hidden")),
    };
    let private = crate::slurm_conf::private_data(&entries);
    match private.iter().find(|w| HIDING.contains(&w.as_str())) {
        Some(w) => (
            false,
            format!(
                "{}: PrivateData={w} (prometheus.job_series = \"on\" serves them anyway)",
                path.display()
            ),
        ),
        None => (true, format!("{}: PrivateData hides neither jobs nor users", path.display())),
    }
}

impl PrometheusConfig {
    pub fn check(&self) -> Result<(), ConfigError> {
        if let Some(f) = self.bearer_token_file.as_ref().filter(|f| !f.is_absolute()) {
            return Err(ConfigError::invalid(
                "prometheus.bearer_token_file",
                format!("{} is not an absolute path", f.display()),
            ));
        }
        self.address.parse::<std::net::SocketAddr>().map(|_| ()).map_err(|_| {
            ConfigError::invalid(
                "prometheus.address",
                format!("{:?} is not an address and port (127.0.0.1:9817, [::1]:9817)", self.address),
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn private_data_naming_jobs_or_users_hides_job_series_unless_turned_on() {
        let dir = tempfile::tempdir().unwrap();
        let conf = dir.path().join("slurm.conf");
        let served = |t: Toggle, text: &str| {
            std::fs::write(&conf, text).unwrap();
            serves_job_series(t, Some(&conf))
        };
        let (on, why) = served(Toggle::Auto, "ClusterName=c\nPrivateData=accounts,Jobs # private\n");
        assert!(!on && why.contains("PrivateData=jobs") && why.contains("slurm.conf"), "{why}");
        assert!(!served(Toggle::Auto, "privatedata=users\n").0);
        assert!(served(Toggle::Auto, "PrivateData=accounts,usage\n").0);
        assert!(served(Toggle::Auto, "ClusterName=c\n").0);
        assert!(served(Toggle::On, "PrivateData=jobs\n").0, "the explicit opt-in");
        assert!(!served(Toggle::Off, "ClusterName=c\n").0);
        assert!(serves_job_series(Toggle::Auto, None).0, "no slurm.conf");
        let (on, why) = serves_job_series(Toggle::Auto, Some(&dir.path().join("missing.conf")));
        assert!(!on && why.contains("missing.conf"), "unreadable: hidden ({why})");
    }
}
