//! `[otlp]`: where OpenTelemetry metrics go, and how they are signed.

use crate::config::{ConfigError, opt_string};
use serde::Deserialize;

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
            return Err(ConfigError(format!(
                "otlp.endpoint: {e:?} must be an http:// or https:// URL with its path \
                 (https://monitoring.us-east-1.amazonaws.com/v1/metrics)"
            )));
        }
        Ok(())
    }
}

/// CloudWatch's OTLP metrics endpoint in `region`.
pub fn cloudwatch_endpoint(region: &str) -> String {
    let domain = if region.starts_with("cn-") { "amazonaws.com.cn" } else { "amazonaws.com" };
    format!("https://monitoring.{region}.{domain}/v1/metrics")
}
