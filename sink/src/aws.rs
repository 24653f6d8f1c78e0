//! The AWS SDK configuration shared by the sink, `--check`, `report` and the Lambda.

use aws_config::{BehaviorVersion, Region};
use std::sync::OnceLock;

/// No CA certificate to verify AWS's TLS with: the SDK would panic (debug builds) or fail every
/// request with an unknown-issuer error (release builds), so nothing builds a client then.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "no CA certificates to verify AWS's TLS certificates with ({looked}): install the system's CA \
     bundle (Debian/Ubuntu: apt-get install ca-certificates; Amazon Linux/RHEL: dnf install \
     ca-certificates), or point SSL_CERT_FILE or SSL_CERT_DIR at one"
)]
pub struct NoCaCertificates {
    /// Where they were looked for, and what went wrong there.
    pub looked: String,
}

/// Checks, once per process, that the CA certificates the SDK loads (rustls-native-certs: the
/// files named by SSL_CERT_FILE / SSL_CERT_DIR, else the system's usual places) hold at least
/// one that rustls accepts, as the SDK requires.
pub fn ca_certificates() -> Result<(), NoCaCertificates> {
    static FOUND: OnceLock<Result<(), NoCaCertificates>> = OnceLock::new();
    FOUND.get_or_init(load_ca_certificates).clone()
}

fn load_ca_certificates() -> Result<(), NoCaCertificates> {
    let found = rustls_native_certs::load_native_certs();
    let mut roots = rustls::RootCertStore::empty();
    let (valid, invalid) = roots.add_parsable_certificates(found.certs);
    if valid > 0 {
        return Ok(());
    }
    let mut looked: Vec<String> = ["SSL_CERT_FILE", "SSL_CERT_DIR"]
        .into_iter()
        .filter_map(|v| std::env::var_os(v).map(|p| format!("{v}={}", p.to_string_lossy())))
        .collect();
    if looked.is_empty() {
        looked.push("the system's CA bundle".to_owned());
    }
    if invalid > 0 {
        looked.push(format!("{invalid} certificate(s) unreadable"));
    }
    looked.extend(found.errors.iter().map(|e| e.to_string()));
    Err(NoCaCertificates { looked: looked.join("; ") })
}

/// The default chain: environment, profile, then the EC2 instance profile through IMDSv2;
/// `region` (from the configuration) wins over AWS_REGION and the instance's own region.
pub async fn sdk_config(region: Option<&str>) -> Result<aws_config::SdkConfig, NoCaCertificates> {
    ca_certificates()?;
    let mut loader = aws_config::defaults(BehaviorVersion::latest());
    if let Some(r) = region {
        loader = loader.region(Region::new(r.to_owned()));
    }
    Ok(loader.load().await)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_message_says_what_to_install() {
        let e = NoCaCertificates { looked: "SSL_CERT_DIR=/empty".into() };
        let text = e.to_string();
        assert!(text.contains("ca-certificates") && text.contains("SSL_CERT_DIR=/empty"), "{text}");
    }
}
