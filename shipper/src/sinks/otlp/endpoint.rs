//! Which AWS service an OTLP endpoint's host is, for SigV4: CloudWatch's
//! (`monitoring.<region>.amazonaws.com`, signed as `monitoring`) or Amazon Managed Service for
//! Prometheus' (`aps-workspaces.<region>.amazonaws.com`, signed as `aps`).

/// The signing name of CloudWatch's OTLP endpoint.
pub const SERVICE: &str = "monitoring";

/// The region of `<prefix>.<region>.amazonaws.com` (or `.amazonaws.com.cn`, with or without the
/// final dot), or None for any other host.
fn region_of<'h>(host: &'h str, prefix: &str) -> Option<&'h str> {
    let host = host.strip_suffix('.').unwrap_or(host);
    let rest = host.strip_prefix(prefix)?.strip_prefix('.')?;
    let region = rest.strip_suffix(".amazonaws.com").or_else(|| rest.strip_suffix(".amazonaws.com.cn"))?;
    let plain = !region.is_empty()
        && region.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    plain.then_some(region)
}

/// The region of a CloudWatch OTLP endpoint's host, or None for any other host.
pub fn cloudwatch_region(host: &str) -> Option<&str> {
    region_of(host, SERVICE)
}

/// The signing service and region of an AWS OTLP endpoint's host; None for any other host.
pub fn aws_endpoint(host: &str) -> Option<(&'static str, &str)> {
    cloudwatch_region(host)
        .map(|r| (SERVICE, r))
        .or_else(|| region_of(host, "aps-workspaces").map(|r| ("aps", r)))
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
