//! `--check`'s row of the destinations named, then each one's own rows (its folder's
//! [`crate::sinks::Component::check`]).

use super::{Row, Status, row};
use crate::settings::Settings;
use crate::sinks::Context;

/// `cx` as `--check` resolved it (an empty cluster where it could not be).
pub async fn destination_rows(settings: &Settings, cx: &Context<'_>) -> Vec<Row> {
    let names: Vec<&str> = settings.sink.iter().map(|k| k.as_str()).collect();
    let mut rows = vec![row("destinations", Status::Ok, names.join(", "))];
    for kind in settings.sink.iter() {
        rows.extend(kind.component().check(settings, cx).await);
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn destination_rows_say_where_figures_go_and_whether_the_pull_address_can_be_had() {
        let held = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let sink = ["cloudwatch", "prometheus"].map(|n| crate::sinks::SinkKind::named(n).unwrap());
        let mut config =
            Settings { sink: crate::sinks::Sinks::new(sink.to_vec()).unwrap(), ..Settings::default() };
        config.prometheus.address = held.local_addr().unwrap().to_string();
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let cx = config.sink_context("c", "Slurm/c", "n1", None);
        let rows = rt.block_on(destination_rows(&config, &cx));
        let got: Vec<(&str, Status, &str)> =
            rows.iter().map(|r| (r.check, r.status, r.detail.as_str())).collect();
        assert_eq!(got[0], ("destinations", Status::Ok, "cloudwatch, prometheus"));
        // Held by this test's uid: root's is taken for the daemon's, another user's fails.
        let expected = if crate::sys::uid() == 0 { Status::Warn } else { Status::Fail };
        assert_eq!((got[1].0, got[1].1), ("prometheus endpoint", expected), "{got:?}");
        drop(held);
        let rows = rt.block_on(destination_rows(&config, &cx));
        assert_eq!(rows[1].status, Status::Ok, "{}", rows[1].detail);
    }
}
