//! `--check`'s rows for the pull endpoint: whether its address can be had (and who holds it when
//! it cannot), and whether it serves per-job series.

use super::config::PrometheusConfig;
use crate::check::{Row, Status, config_row, row};
use std::path::Path;

/// Whether the address can be had, and the job series row.
pub fn rows(cfg: &PrometheusConfig, slurm_conf: Option<&Path>) -> Vec<Row> {
    let address = &cfg.address;
    let endpoint = match std::net::TcpListener::bind(address) {
        Ok(_) => row("prometheus endpoint", Status::Ok, format!("http://{address}/metrics can be served")),
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => prometheus_held_row(address),
        Err(e) => row(
            "prometheus endpoint",
            Status::Fail,
            format!("{address}: {e}; the daemon ships to the other destinations and keeps trying it"),
        ),
    };
    // Read once: its row says whether it can be had, the job series row whom it guards.
    let token = cfg.bearer_token_file.as_deref().map(|f| (f, super::token::Token::read(f)));
    let guarded = token.as_ref().is_some_and(|(_, t)| t.is_ok());
    vec![endpoint, token_row(token), job_series_row(cfg, slurm_conf, guarded)]
}

/// Whether the endpoint's token (its file, and what reading it gave) can be read and is kept
/// from other users.
fn token_row(token: Option<(&Path, Result<super::token::Token, String>)>) -> Row {
    match token {
        None => row("prometheus token", Status::Ok, "none: every local user reads the endpoint".to_owned()),
        Some((f, read)) => match read {
            Ok(_) => row(
                "prometheus token",
                Status::Ok,
                format!("{}: only requests with its bearer token are answered", f.display()),
            ),
            Err(e) => config_row("prometheus token", Status::Fail, format!("{e}: the daemon will not start")),
        },
    }
}

/// Whether every local user reads every job's series: a warning where slurm.conf's
/// `PrivateData` says they should not and `prometheus.job_series = "on"` serves them anyway.
/// `guarded`: a token that can be read guards the endpoint.
fn job_series_row(cfg: &PrometheusConfig, conf: Option<&Path>, guarded: bool) -> Row {
    use super::config::serves_job_series;
    use crate::config::Toggle;
    let (served, why) = serves_job_series(cfg.job_series, conf);
    let (auto_served, auto_why) = serves_job_series(Toggle::Auto, conf);
    match (served, !auto_served) {
        (true, hidden) if guarded => {
            let readers = if hidden {
                format!("; {auto_why}: whoever reads the Prometheus server reads them")
            } else {
                String::new()
            };
            row(
                "prometheus job series",
                Status::Ok,
                format!("served to the token's holder alone ({why}){readers}"),
            )
        }
        (true, true) => row(
            "prometheus job series",
            Status::Warn,
            format!("served to every local user although {auto_why}"),
        ),
        (true, false) => {
            row("prometheus job series", Status::Ok, format!("served to every local user ({why})"))
        }
        (false, _) => row("prometheus job series", Status::Ok, format!("aggregate series only ({why})")),
    }
}

/// Who holds the pull address: root (the daemon's user) is most likely the running daemon;
/// another user's program would answer scrapes with its own numbers, while the daemon ships to
/// the other destinations and binds once the address is free.
fn prometheus_held_row(address: &str) -> Row {
    use crate::peer::{describe_uid, listener_uid};
    match listener_uid(std::path::Path::new("/proc"), address) {
        Some(0) => row(
            "prometheus endpoint",
            Status::Warn,
            format!("{address} is in use by root: the running daemon's?"),
        ),
        Some(uid) => row(
            "prometheus endpoint",
            Status::Fail,
            format!(
                "{address} is held by {}, not the daemon: its numbers answer scrapes; the daemon ships \
                 to the other destinations and binds when the address is free",
                describe_uid(uid)
            ),
        ),
        None => row(
            "prometheus endpoint",
            Status::Warn,
            format!("{address} is in use: the running daemon's, or another program's"),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serving_job_series_against_private_data_is_a_warning() {
        use crate::config::Toggle;
        let dir = tempfile::tempdir().unwrap();
        let conf = dir.path().join("slurm.conf");
        std::fs::write(&conf, "PrivateData=jobs\n").unwrap();
        let mut cfg = PrometheusConfig::default();
        let status = |cfg: &PrometheusConfig| {
            let r = job_series_row(cfg, Some(&conf), false);
            (r.status, r.detail)
        };
        assert_eq!(status(&cfg).0, Status::Ok, "{}", status(&cfg).1);
        assert!(status(&cfg).1.starts_with("aggregate series only"), "{}", status(&cfg).1);
        cfg.job_series = Toggle::On;
        assert_eq!(status(&cfg).0, Status::Warn, "{}", status(&cfg).1);
    }
}
