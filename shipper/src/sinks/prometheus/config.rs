//! `[prometheus]`: where the pull endpoint listens.

use crate::config::{ConfigError, string};
use serde::Deserialize;

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PrometheusConfig {
    /// `host:port`. Loopback by default: every user of the node can read what it serves (their
    /// neighbours' job ids, users and accounts), so open it wider only behind a firewall that
    /// lets the Prometheus server alone in.
    #[serde(deserialize_with = "string")]
    pub address: String,
}

impl Default for PrometheusConfig {
    fn default() -> Self {
        PrometheusConfig { address: "127.0.0.1:9817".to_owned() }
    }
}

impl PrometheusConfig {
    pub fn check(&self) -> Result<(), ConfigError> {
        self.address.parse::<std::net::SocketAddr>().map(|_| ()).map_err(|_| {
            ConfigError(format!(
                "prometheus.address: {:?} is not an address and port (127.0.0.1:9817, [::1]:9817)",
                self.address
            ))
        })
    }
}
