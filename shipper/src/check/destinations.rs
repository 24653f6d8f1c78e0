//! `--check`'s rows of the destinations other than CloudWatch: OTLP's endpoint answers,
//! Prometheus' address can be had (and who holds it when it cannot).

use super::{Row, Status, endpoint_row, row};
use crate::config::{Config, SinkKind};

/// The destinations other than CloudWatch: OTLP's endpoint answers, Prometheus' address can
/// be had.
pub async fn destination_rows(config: &Config) -> Vec<Row> {
    let names: Vec<&str> = config.sink.iter().map(SinkKind::as_str).collect();
    let mut rows = vec![row("destinations", Status::Ok, names.join(", "))];
    if config.sink.contains(SinkKind::Otlp) {
        rows.push(match &config.otlp.endpoint {
            Some(url) => {
                let mut r = endpoint_row(url).await;
                r.check = "otlp endpoint";
                r
            }
            None => {
                row("otlp endpoint", Status::Ok, "CloudWatch's in the region (SigV4, the aws rows above)")
            }
        });
    }
    if config.sink.contains(SinkKind::Prometheus) {
        let address = &config.prometheus.address;
        rows.push(match std::net::TcpListener::bind(address) {
            Ok(_) => {
                row("prometheus endpoint", Status::Ok, format!("http://{address}/metrics can be served"))
            }
            Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => prometheus_held_row(address),
            Err(e) => row(
                "prometheus endpoint",
                Status::Fail,
                format!("{address}: {e}; the daemon ships to the other destinations and keeps trying it"),
            ),
        });
        rows.push(job_series_row(config));
    }
    rows
}

/// Whether every local user reads every job's series: a warning where slurm.conf's
/// `PrivateData` says they should not and `prometheus.job_series = "on"` serves them anyway.
fn job_series_row(config: &Config) -> Row {
    use crate::config::Toggle;
    use crate::sinks::prometheus::config::serves_job_series;
    let conf = config.slurm_conf_path();
    let (served, why) = serves_job_series(config.prometheus.job_series, conf.as_deref());
    let (auto_served, auto_why) = serves_job_series(Toggle::Auto, conf.as_deref());
    match (served, !auto_served) {
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
    use crate::sinks::prometheus::holder::{describe_uid, listener_uid};
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
    fn destination_rows_say_where_figures_go_and_whether_the_pull_address_can_be_had() {
        let held = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut config = Config::default();
        config.sink = crate::config::Sinks::new(vec![SinkKind::Cloudwatch, SinkKind::Prometheus]).unwrap();
        config.prometheus.address = held.local_addr().unwrap().to_string();
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let rows = rt.block_on(destination_rows(&config));
        let got: Vec<(&str, Status, &str)> =
            rows.iter().map(|r| (r.check, r.status, r.detail.as_str())).collect();
        assert_eq!(got[0], ("destinations", Status::Ok, "cloudwatch, prometheus"));
        // Held by this test's uid: root's is taken for the daemon's, another user's fails.
        // SAFETY: getuid has no preconditions.
        let expected = if unsafe { libc::getuid() } == 0 { Status::Warn } else { Status::Fail };
        assert_eq!((got[1].0, got[1].1), ("prometheus endpoint", expected), "{got:?}");
        drop(held);
        let rows = rt.block_on(destination_rows(&config));
        assert_eq!(rows[1].status, Status::Ok, "{}", rows[1].detail);
    }

    #[test]
    fn serving_job_series_against_private_data_is_a_warning() {
        use crate::config::Toggle;
        let dir = tempfile::tempdir().unwrap();
        let conf = dir.path().join("slurm.conf");
        std::fs::write(&conf, "PrivateData=jobs\n").unwrap();
        let mut config = Config::default();
        config.slurm.conf = Some(conf);
        let status = |config: &Config| (job_series_row(config).status, job_series_row(config).detail);
        assert_eq!(status(&config).0, Status::Ok, "{}", status(&config).1);
        assert!(status(&config).1.starts_with("aggregate series only"), "{}", status(&config).1);
        config.prometheus.job_series = Toggle::On;
        assert_eq!(status(&config).0, Status::Warn, "{}", status(&config).1);
    }
}
