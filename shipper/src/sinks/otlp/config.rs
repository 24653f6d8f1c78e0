//! `[otlp]`: where OpenTelemetry metrics go, and how they are signed.

use crate::config::docs::Shown::{Unset, Value};
use crate::config::docs::{Key, key};
use crate::config::{ConfigError, opt_string};
use serde::Deserialize;

/// This section's lines of the configuration table (docs/configuration.md) ([`crate::settings::docs`]).
#[rustfmt::skip]
pub const KEYS: &[Key] = &[
    key("otlp.endpoint", Unset("CloudWatch's in the region"), "OTLP/HTTP metrics URL, path included: `https://monitoring.<region>.amazonaws.com/v1/metrics`, a collector's `/v1/metrics`, Prometheus' `/api/v1/otlp/v1/metrics`; retries and timeouts are `cloudwatch.*`'s"),
    key("otlp.region", Unset("the endpoint's, else `cloudwatch.region`'s"), "SigV4 signing region"),
    key("otlp.sigv4", Value("\"auto\""), "sign requests with SigV4 (service `monitoring`, or `aps` for Amazon Managed Service for Prometheus' `aps-workspaces` hosts): `auto` (when the endpoint is CloudWatch's or AMP's), `on`, `off`; signing over `http://` is refused (the session token would travel in clear text)"),
];

/// `otlp.sigv4`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SigV4Setting {
    /// When the endpoint is CloudWatch's (`monitoring.<region>.amazonaws.com`).
    Auto,
    On,
    Off,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct OtlpConfig {
    /// The OTLP/HTTP metrics URL, path included; CloudWatch's in the region when not set.
    #[serde(deserialize_with = "opt_string")]
    pub endpoint: Option<String>,
    /// The signing region; the endpoint's, else `cloudwatch.region`'s, else the SDK's.
    #[serde(deserialize_with = "opt_string")]
    pub region: Option<String>,
    pub sigv4: SigV4Setting,
}

impl Default for OtlpConfig {
    fn default() -> Self {
        OtlpConfig { endpoint: None, region: None, sigv4: SigV4Setting::Auto }
    }
}

impl OtlpConfig {
    pub fn check(&self) -> Result<(), ConfigError> {
        if let Some(e) = &self.endpoint
            && !(e.starts_with("http://") || e.starts_with("https://"))
        {
            return Err(ConfigError::invalid(
                "otlp.endpoint",
                format!(
                    "{e:?} must be an http:// or https:// URL with its path \
                 (https://monitoring.us-east-1.amazonaws.com/v1/metrics)"
                ),
            ));
        }
        // A signed request over http:// shows the access key id, the session token and a
        // signature anyone on the path can replay for minutes.
        if let Some(e) = &self.endpoint
            && let Some(rest) = e.strip_prefix("http://")
        {
            let host = rest.split(['/', '?', '#']).next().unwrap_or_default().to_ascii_lowercase();
            let host = host.rsplit_once(':').map_or(host.as_str(), |(h, port)| {
                if port.chars().all(|c| c.is_ascii_digit()) { h } else { host.as_str() }
            });
            let signs = match self.sigv4 {
                SigV4Setting::On => true,
                SigV4Setting::Off => false,
                SigV4Setting::Auto => super::endpoint::aws_endpoint(host).is_some(),
            };
            if signs {
                return Err(ConfigError::invalid(
                    "otlp.sigv4",
                    format!(
                        "signing over http:// (otlp.endpoint {e:?}) would send the instance \
                     role's session token and signature in clear text: use https://, or \
                     otlp.sigv4 = \"off\" for a receiver that needs no signature"
                    ),
                ));
            }
        }
        Ok(())
    }
}

/// CloudWatch's OTLP metrics endpoint in `region`.
pub fn cloudwatch_endpoint(region: &str) -> String {
    let domain = if region.starts_with("cn-") { "amazonaws.com.cn" } else { "amazonaws.com" };
    format!("https://monitoring.{region}.{domain}/v1/metrics")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(endpoint: &str, sigv4: SigV4Setting) -> Result<(), String> {
        OtlpConfig { endpoint: Some(endpoint.into()), region: None, sigv4 }.check().map_err(|e| e.to_string())
    }

    #[test]
    fn sigv4_over_http_is_refused_naming_the_key() {
        for (endpoint, sigv4) in [
            ("http://127.0.0.1:4318/v1/metrics", SigV4Setting::On),
            // auto signs CloudWatch's endpoint, whatever the scheme.
            ("http://monitoring.us-east-1.amazonaws.com/v1/metrics", SigV4Setting::Auto),
            ("http://monitoring.us-east-1.amazonaws.com:80/v1/metrics", SigV4Setting::Auto),
        ] {
            let e = check(endpoint, sigv4).unwrap_err();
            assert!(e.starts_with("otlp.sigv4: signing over http://") && e.contains(endpoint), "{e}");
        }
        for (endpoint, sigv4) in [
            ("https://monitoring.us-east-1.amazonaws.com/v1/metrics", SigV4Setting::On),
            ("https://aps-workspaces.us-east-1.amazonaws.com/v1/metrics", SigV4Setting::Auto),
            ("http://127.0.0.1:4318/v1/metrics", SigV4Setting::Auto),
            ("http://monitoring.us-east-1.amazonaws.com/v1/metrics", SigV4Setting::Off),
        ] {
            assert_eq!(check(endpoint, sigv4), Ok(()), "{endpoint} {sigv4:?}");
        }
    }
}
