//! `--check`'s line of the head role's node figures: which source gives them, and why; and
//! where a token would cross the network, that the network must be trusted.

use super::command::SlurmCommands;
use super::config::{HeadConfig, HeadSource};
use super::openmetrics::{Endpoint, TokenFrom, listener_users, resolve};
use super::openmetrics_http::Url;
use std::path::Path;

/// `--check`'s line: which source gives node figures, and why. Err where `head.source =
/// openmetrics` and the endpoint fails (the commands stand in, but that is not what was asked).
pub async fn describe(
    head: &HeadConfig,
    slurm_conf: Option<&Path>,
    cmds: &SlurmCommands,
) -> Result<String, String> {
    let mut ep = Endpoint::new(head.source, resolve(head, slurm_conf), TokenFrom::of(head), cmds.timeout())
        .trusting(listener_users(slurm_conf));
    let version = match cmds.run("sinfo", &["--version"]).await {
        Ok(o) => super::Version::parse(&o.stdout),
        Err(_) => None,
    };
    if let Err(why) = ep.wanted(version) {
        return Ok(format!("commands (sinfo): {why}"));
    }
    let from = ep.resolved().from.clone();
    let release =
        version.map(|v| format!("; Slurm {}.{:02} (sinfo --version)", v.major, v.minor)).unwrap_or_default();
    match ep.fetch(cmds, head.top_rpc_types == 0).await {
        Ok(f) => Ok(format!(
            "openmetrics: {} ({} controller, from {from}) answers OpenMetrics, {} samples in \
             /metrics/nodes{release}{}{}",
            ep.answering().map(|u| u.to_string()).unwrap_or_default(),
            ep.answering_role(),
            f.nodes.samples.len(),
            if ep.resolved().gpus_tracked {
                ""
            } else {
                "; GPU figures left out (accounting does not track gres/gpu)"
            },
            token_note(&TokenFrom::of(head), ep.answering().ok().as_ref()),
        )),
        Err(e) if ep.mode() == HeadSource::Openmetrics => Err(format!("commands (sinfo) stand in: {e}")),
        Err(e) => Ok(format!("commands (sinfo): the endpoint fails: {e}")),
    }
}

/// Where the token goes: on this host only to a listener of root or SlurmUser; to another host
/// in clear text, where nothing can vouch for the listener but the network.
fn token_note(from: &TokenFrom, url: Option<&Url>) -> &'static str {
    match (from, url) {
        (TokenFrom::Nowhere, _) | (_, None) => "",
        (_, Some(u)) if on_this_host(u) => "; the token goes only to a listener of root or SlurmUser",
        _ => {
            "; the token crosses the network in clear text to another host, whose listener cannot be \
             checked from here: that network must be trusted"
        }
    }
}

/// Whether `url`'s host is this one: a loopback address, or one a socket can be bound to here.
fn on_this_host(url: &Url) -> bool {
    use std::net::{ToSocketAddrs, UdpSocket};
    let host = url.host.trim_start_matches('[').trim_end_matches(']');
    (host, 0u16)
        .to_socket_addrs()
        .is_ok_and(|mut addrs| addrs.any(|a| a.ip().is_loopback() || UdpSocket::bind((a.ip(), 0)).is_ok()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_to_another_host_says_the_network_must_be_trusted() {
        let url = |s: &str| Url::parse(s).unwrap();
        let file = TokenFrom::File("/t".into());
        assert_eq!(token_note(&TokenFrom::Nowhere, Some(&url("http://192.0.2.1:6817"))), "");
        assert!(token_note(&file, Some(&url("http://127.0.0.1:6817"))).contains("root or SlurmUser"));
        assert!(token_note(&file, Some(&url("http://192.0.2.1:6817"))).contains("must be trusted"));
    }
}
