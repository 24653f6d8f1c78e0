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
    let port = port_row(socket_unit(Path::new("/")), guarded);
    vec![endpoint, port, token_row(token), job_series_row(cfg, slurm_conf, guarded)]
}

/// Where systemd would find `slurm-cw-shipper.socket` under `root`, if installed.
fn socket_unit(root: &Path) -> Option<std::path::PathBuf> {
    ["etc/systemd/system", "usr/lib/systemd/system", "lib/systemd/system"]
        .iter()
        .map(|d| root.join(d).join("slurm-cw-shipper.socket"))
        .find(|p| p.is_file())
}

/// Who holds the port while the daemon restarts: systemd's socket unit, or no one, when a
/// user could bind it and answer the scraper (and, where a token guards the endpoint, be sent
/// the token).
fn port_row(unit: Option<std::path::PathBuf>, guarded: bool) -> Row {
    match unit {
        Some(u) => row(
            "prometheus port",
            Status::Ok,
            format!(
                "held by {} across the daemon's restarts (its ListenStream= must be prometheus.address)",
                u.display()
            ),
        ),
        None if guarded => row(
            "prometheus port",
            Status::Warn,
            "bound by the daemon: a user who binds it while the daemon restarts is sent the scraper's \
             token; hold it with slurm-cw-shipper.socket (infra/systemd)"
                .to_owned(),
        ),
        None => row(
            "prometheus port",
            Status::Ok,
            "bound by the daemon (slurm-cw-shipper.socket, infra/systemd, would hold it across restarts)"
                .to_owned(),
        ),
    }
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
    fn a_guarded_port_no_socket_unit_holds_is_a_warning() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(socket_unit(dir.path()), None);
        assert_eq!(port_row(None, true).status, Status::Warn);
        assert_eq!(port_row(None, false).status, Status::Ok);
        let units = dir.path().join("etc/systemd/system");
        std::fs::create_dir_all(&units).unwrap();
        std::fs::write(units.join("slurm-cw-shipper.socket"), "[Socket]\n").unwrap();
        let found = socket_unit(dir.path());
        assert_eq!(found, Some(units.join("slurm-cw-shipper.socket")));
        let r = port_row(found, true);
        assert_eq!(r.status, Status::Ok, "{}", r.detail);
    }

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
