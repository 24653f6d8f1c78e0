//! SigV4 for CloudWatch's OTLP endpoint: service `monitoring`, the exact bytes sent (the gzip
//! body) hashed into the signature, credentials from aws-config's default chain, kept until five
//! minutes before they expire so a flush does not ask IMDS each time.

use aws_credential_types::Credentials;
use aws_credential_types::provider::{ProvideCredentials, SharedCredentialsProvider};
use aws_sigv4::http_request::{SignableBody, SignableRequest, SigningSettings, sign};
use aws_sigv4::sign::v4;
use std::time::{Duration, SystemTime};

/// The signing name of CloudWatch's OTLP endpoint.
pub const SERVICE: &str = "monitoring";

/// Credentials fetched again this long before they expire.
const REFRESH_BEFORE: Duration = Duration::from_secs(300);

/// The region of a CloudWatch OTLP endpoint's host (`monitoring.<region>.amazonaws.com`, or
/// `.amazonaws.com.cn`), or None for any other host.
pub fn cloudwatch_region(host: &str) -> Option<&str> {
    let host = host.strip_suffix('.').unwrap_or(host);
    let rest = host.strip_prefix("monitoring.")?;
    let region = rest.strip_suffix(".amazonaws.com").or_else(|| rest.strip_suffix(".amazonaws.com.cn"))?;
    let plain = !region.is_empty()
        && region.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    plain.then_some(region)
}

/// The signing service and region of an AWS OTLP endpoint's host: CloudWatch's
/// (`monitoring.<region>.amazonaws.com`, signed as `monitoring`) or Amazon Managed Service for
/// Prometheus' (`aps-workspaces.<region>.amazonaws.com`, signed as `aps`); None for any other
/// host.
pub fn aws_endpoint(host: &str) -> Option<(&'static str, &str)> {
    if let Some(region) = cloudwatch_region(host) {
        return Some((SERVICE, region));
    }
    let host = host.strip_suffix('.').unwrap_or(host);
    let rest = host.strip_prefix("aps-workspaces.")?;
    let region = rest.strip_suffix(".amazonaws.com").or_else(|| rest.strip_suffix(".amazonaws.com.cn"))?;
    let plain = !region.is_empty()
        && region.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    plain.then_some(("aps", region))
}

/// The service a request to `host` is signed as: `aps` for Amazon Managed Service for
/// Prometheus, else CloudWatch's `monitoring` (a collector or another receiver that checks
/// SigV4 is told by `otlp.sigv4 = "on"` and takes CloudWatch's name).
pub fn service_for(host: &str) -> &'static str {
    aws_endpoint(host).map_or(SERVICE, |(service, _)| service)
}

/// Whether `uri` is a CloudWatch OTLP endpoint (see [`cloudwatch_region`]).
pub fn is_cloudwatch(uri: &::http::Uri) -> bool {
    uri.host().and_then(cloudwatch_region).is_some()
}

/// The headers SigV4 adds (`authorization`, `x-amz-date`, `x-amz-security-token` with a
/// session token) for a request to `service` (its signing name: `monitoring`, `ec2`,
/// `pricing`) made of `method`, `uri`, `headers` and `body`, signed at `time`. Every header given
/// is signed.
#[allow(clippy::too_many_arguments)]
pub fn signature(
    credentials: &Credentials,
    service: &str,
    region: &str,
    time: SystemTime,
    method: &str,
    uri: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Result<Vec<(&'static str, String)>, String> {
    let identity = credentials.clone().into();
    let params = v4::SigningParams::builder()
        .identity(&identity)
        .region(region)
        .name(service)
        .time(time)
        .settings(SigningSettings::default())
        .build()
        .map_err(|e| format!("SigV4 parameters: {e}"))?
        .into();
    let request = SignableRequest::new(method, uri, headers.iter().copied(), SignableBody::Bytes(body))
        .map_err(|e| format!("SigV4: {e}"))?;
    let (instructions, _) = sign(request, &params).map_err(|e| format!("SigV4: {e}"))?.into_parts();
    let (headers, _) = instructions.into_parts();
    Ok(headers.into_iter().map(|h| (h.name(), h.value().to_owned())).collect())
}

/// SigV4 accepts a request time within 5 minutes of the server's; past this the signer takes
/// the server's clock.
const SKEW_TOLERATED: Duration = Duration::from_secs(240);

#[derive(Debug)]
pub struct Signer {
    provider: SharedCredentialsProvider,
    pub region: String,
    cached: Option<Credentials>,
    /// The server's clock minus this host's, in seconds, where they differ by more than
    /// [`SKEW_TOLERATED`]; 0 otherwise.
    skew_s: i64,
}

impl Signer {
    pub fn new(provider: SharedCredentialsProvider, region: String) -> Self {
        Signer { provider, region, cached: None, skew_s: 0 }
    }

    /// The time to sign with: this host's clock, corrected by the server's where it is off.
    pub fn now(&self) -> SystemTime {
        let now = SystemTime::now();
        let by = Duration::from_secs(self.skew_s.unsigned_abs());
        if self.skew_s >= 0 { now + by } else { now.checked_sub(by).unwrap_or(now) }
    }

    /// Takes the server's clock (an answer's `Date`) where this host's is too far from it for
    /// SigV4; returns whether the correction changed.
    pub fn server_time(&mut self, date: SystemTime) -> bool {
        let now = SystemTime::now();
        let skew = match date.duration_since(now) {
            Ok(ahead) => ahead.as_secs() as i64,
            Err(behind) => -(behind.duration().as_secs() as i64),
        };
        let skew = if skew.unsigned_abs() > SKEW_TOLERATED.as_secs() { skew } else { 0 };
        let changed = (skew - self.skew_s).unsigned_abs() > 1;
        if changed {
            tracing::warn!(
                skew_s = skew,
                "this host's clock is off from the OTLP endpoint's: signing with the endpoint's time"
            );
            self.skew_s = skew;
        }
        changed
    }

    /// The credentials to sign with now.
    pub async fn credentials(&mut self) -> Result<Credentials, String> {
        let fresh = |c: &Credentials| c.expiry().is_none_or(|e| e > SystemTime::now() + REFRESH_BEFORE);
        if let Some(c) = self.cached.as_ref().filter(|c| fresh(c)) {
            return Ok(c.clone());
        }
        let c =
            self.provider.provide_credentials().await.map_err(|e| {
                format!("no AWS credentials to sign with: {}", crate::failure::source_chain(&e))
            })?;
        self.cached = Some(c.clone());
        Ok(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn managed_prometheus_is_signed_as_aps() {
        assert_eq!(aws_endpoint("aps-workspaces.eu-west-1.amazonaws.com"), Some(("aps", "eu-west-1")));
        assert_eq!(aws_endpoint("monitoring.us-east-1.amazonaws.com"), Some(("monitoring", "us-east-1")));
        assert_eq!(aws_endpoint("aps-workspaces.example.com"), None);
        assert_eq!(service_for("aps-workspaces.us-west-2.amazonaws.com"), "aps");
        assert_eq!(service_for("collector.internal"), "monitoring");
    }

    #[test]
    fn cloudwatch_hosts_name_their_region() {
        assert_eq!(cloudwatch_region("monitoring.us-east-1.amazonaws.com"), Some("us-east-1"));
        assert_eq!(cloudwatch_region("monitoring.cn-north-1.amazonaws.com.cn"), Some("cn-north-1"));
        assert_eq!(cloudwatch_region("monitoring.eu-west-3.amazonaws.com."), Some("eu-west-3"));
        for other in [
            "127.0.0.1",
            "aps-workspaces.us-east-1.amazonaws.com",
            "monitoring.example.com",
            "monitoring..amazonaws.com",
        ] {
            assert_eq!(cloudwatch_region(other), None, "{other}");
        }
    }
}
