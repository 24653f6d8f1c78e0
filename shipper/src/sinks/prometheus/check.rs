//! `--check`'s rows for the pull endpoint: whether its address can be had (and who holds it when
//! it cannot), and whether it serves per-job series.

use super::config::PrometheusConfig;
use crate::check::{Row, Status, config_row, row};
use std::path::Path;

/// Whether the address can be had, who holds its port across restarts, and the job series row.
pub async fn rows(cfg: &PrometheusConfig, slurm_conf: Option<&Path>) -> Vec<Row> {
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
    let port = port_row(socket_unit().await, address, guarded);
    vec![endpoint, port, token_row(token), job_series_row(cfg, slurm_conf, guarded)]
}

/// The socket unit that holds the port (infra/systemd).
const SOCKET_UNIT: &str = "slurm-cw-shipper.socket";

/// What systemd says of [`SOCKET_UNIT`]; Err: why it could not be asked (no systemd: a
/// container, a chroot).
async fn socket_unit() -> Result<SocketUnit, String> {
    let commands = crate::sources::head::command::SlurmCommands::new(None, std::time::Duration::from_secs(5))
        .with_limits(64 << 10, 4 << 10);
    let args = ["show", "--property=LoadState,ActiveState,Listen", SOCKET_UNIT];
    use crate::sources::head::command::CommandError;
    match commands.run("systemctl", &args).await {
        Ok(out) => Ok(SocketUnit::parse(&out.stdout)),
        Err(CommandError::NotFound(..)) => Err("no systemctl".to_owned()),
        // "System has not been booted with systemd as init system (PID 1). Can't operate."
        Err(CommandError::Failed { stderr, .. }) => Err(stderr.lines().next().unwrap_or_default().to_owned()),
        Err(e) => Err(e.to_string()),
    }
}

/// `systemctl show --property=LoadState,ActiveState,Listen` of the socket unit.
#[derive(Debug, Default, PartialEq)]
struct SocketUnit {
    /// `loaded`, or `not-found` where it is not installed.
    load: String,
    /// `active` where systemd holds its sockets.
    active: String,
    /// Its stream sockets' addresses (`Listen=127.0.0.1:9817 (Stream)`).
    streams: Vec<String>,
}

impl SocketUnit {
    fn parse(text: &str) -> SocketUnit {
        let mut u = SocketUnit::default();
        for line in text.lines() {
            match line.split_once('=') {
                Some(("LoadState", v)) => u.load = v.trim().to_owned(),
                Some(("ActiveState", v)) => u.active = v.trim().to_owned(),
                Some(("Listen", v)) => {
                    if let Some(a) = v.trim().strip_suffix("(Stream)") {
                        u.streams.push(a.trim().to_owned());
                    }
                }
                _ => {}
            }
        }
        u
    }

    /// Whether it holds `address` as the daemon looks for it (the same socket address: a unit
    /// on `[::]:9817` is no use to a daemon told `127.0.0.1:9817`, and keeps it from binding).
    fn holds(&self, address: &str) -> bool {
        let want = address.parse::<std::net::SocketAddr>().ok();
        want.is_some() && self.streams.iter().any(|s| s.parse::<std::net::SocketAddr>().ok() == want)
    }
}

/// Who holds the port while the daemon restarts: systemd's socket unit, or no one, when a
/// user could bind it and answer the scraper (and, where a token guards the endpoint, be sent
/// the token).
fn port_row(unit: Result<SocketUnit, String>, address: &str, guarded: bool) -> Row {
    let unheld = |why: &str| {
        let (status, what) = if guarded {
            (
                Status::Warn,
                "a user who binds it while the daemon restarts is sent the scraper's token; hold it",
            )
        } else {
            (Status::Ok, "it would be held across restarts")
        };
        row("prometheus port", status, format!("{why}: {what} with {SOCKET_UNIT} (infra/systemd)"))
    };
    match unit {
        Err(e) => unheld(&format!("bound by the daemon (systemd could not be asked: {e})")),
        Ok(u) if u.load != "loaded" => unheld("bound by the daemon"),
        Ok(u) if u.active != "active" => row(
            "prometheus port",
            if guarded { Status::Warn } else { Status::Ok },
            format!(
                "{SOCKET_UNIT} is installed but {}: the daemon binds the port itself; \
                 systemctl enable --now {SOCKET_UNIT}",
                u.active
            ),
        ),
        Ok(u) if !u.holds(address) => row(
            "prometheus port",
            Status::Fail,
            format!(
                "{SOCKET_UNIT} holds {}, not prometheus.address {address}: the daemon cannot serve on it; \
                 make its ListenStream= {address}",
                if u.streams.is_empty() { "no stream socket".to_owned() } else { u.streams.join(", ") }
            ),
        ),
        Ok(_) => row(
            "prometheus port",
            Status::Ok,
            format!("held by systemd's {SOCKET_UNIT} across the daemon's restarts"),
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
    fn the_port_is_held_only_where_systemd_holds_the_daemons_address() {
        let address = "127.0.0.1:9817";
        let status = |unit: Result<SocketUnit, String>, guarded| port_row(unit, address, guarded).status;
        // `systemctl show` of the unit as infra/systemd installs it, and of one not installed.
        let active = "LoadState=loaded\nActiveState=active\nListen=127.0.0.1:9817 (Stream)\n";
        let missing = "LoadState=not-found\nActiveState=inactive\n";
        assert_eq!(
            SocketUnit::parse(active),
            SocketUnit { load: "loaded".into(), active: "active".into(), streams: vec![address.into()] }
        );
        assert_eq!(status(Ok(SocketUnit::parse(active)), true), Status::Ok);
        // Not installed, or systemd not there to ask: a warning where a token is at stake.
        assert_eq!(status(Ok(SocketUnit::parse(missing)), true), Status::Warn);
        assert_eq!(status(Ok(SocketUnit::parse(missing)), false), Status::Ok);
        assert_eq!(status(Err("no systemd".into()), true), Status::Warn);
        // Installed and stopped: it holds nothing.
        let stopped = active.replace("ActiveState=active", "ActiveState=inactive");
        assert_eq!(status(Ok(SocketUnit::parse(&stopped)), true), Status::Warn);
        // On another address (ListenStream=9817 is [::]:9817): the daemon cannot use it and
        // cannot bind its own.
        let other = active.replace("127.0.0.1:9817", "[::]:9817");
        let r = port_row(Ok(SocketUnit::parse(&other)), address, false);
        assert_eq!(r.status, Status::Fail, "{}", r.detail);
        assert!(r.detail.contains("[::]:9817"), "{}", r.detail);
        // A datagram socket of the same address is not the endpoint's.
        let datagram = active.replace("(Stream)", "(Datagram)");
        assert_eq!(status(Ok(SocketUnit::parse(&datagram)), false), Status::Fail);
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
