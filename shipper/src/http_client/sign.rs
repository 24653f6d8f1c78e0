//! SigV4 for the AWS requests made without the SDK (metrics over HTTP, the price look-ups): the
//! exact bytes sent hashed into the signature, credentials from aws-config's default chain, kept
//! until five minutes before they expire so a flush does not ask IMDS each time.

use aws_credential_types::Credentials;
use aws_credential_types::provider::{ProvideCredentials, SharedCredentialsProvider};
use aws_sigv4::http_request::{SignableBody, SignableRequest, SigningSettings, sign};
use aws_sigv4::sign::v4;
use std::time::{Duration, SystemTime};

/// Credentials fetched again this long before they expire.
const REFRESH_BEFORE: Duration = Duration::from_secs(300);

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
                "this host's clock is off from the endpoint's: signing with the endpoint's time"
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
        let c = self.provider.provide_credentials().await.map_err(|e| {
            format!("no AWS credentials to sign with: {}", slurm_cw_sink::failure::source_chain(&e))
        })?;
        self.cached = Some(c.clone());
        Ok(c)
    }
}
