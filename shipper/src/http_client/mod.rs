//! One HTTP/1.1 POST at a time over hyper: plain http (a receiver on loopback) or https with
//! rustls and the system's CA certificates, connections kept for the next flush. The answer's
//! body is read up to [`MAX_RESPONSE`] bytes: a receiver cannot make the shipper hold more.

pub mod sign;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use slurm_cw_sink::aws::NoCaCertificates;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// The most of an answer's body read: the answers taken are a few bytes to a few kilobytes, error
/// texts a few hundred.
pub const MAX_RESPONSE: usize = 64 * 1024;

/// What came back: the status, the server's clock (its `Date` header) and the first
/// [`MAX_RESPONSE`] bytes of the body.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub date: Option<SystemTime>,
    pub body: Vec<u8>,
}

/// An HTTP `Date` (`Wed, 26 Nov 2026 20:00:00 GMT`).
pub fn http_date(text: &str) -> Option<SystemTime> {
    let t = time::OffsetDateTime::parse(text.trim(), &time::format_description::well_known::Rfc2822).ok()?;
    Some(SystemTime::from(t))
}

#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    #[error("timed out after {0:?}")]
    Timeout(Duration),
    #[error("{0}")]
    Send(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn http_dates() {
        let t = http_date("Thu, 26 Nov 2026 20:00:00 GMT").unwrap();
        assert_eq!(t.duration_since(SystemTime::UNIX_EPOCH).unwrap().as_secs(), 1_795_723_200);
        assert_eq!(http_date("yesterday"), None);
    }
}

#[derive(Clone)]
pub struct Http {
    client: Client<HttpsConnector<HttpConnector>, Full<Bytes>>,
}

impl Http {
    /// A client for `https` endpoints (the system's CA certificates checked first, as for the
    /// SDK) or plain http ones (no certificates needed).
    pub fn new(https: bool, connect_timeout: Duration) -> Result<Self, NoCaCertificates> {
        let mut roots = rustls::RootCertStore::empty();
        if https {
            slurm_cw_sink::aws::ca_certificates()?;
            roots.add_parsable_certificates(rustls_native_certs::load_native_certs().certs);
        }
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let tls = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| NoCaCertificates { looked: format!("TLS setup failed: {e}") })?
            .with_root_certificates(roots)
            .with_no_client_auth();
        let mut tcp = HttpConnector::new();
        tcp.enforce_http(false);
        tcp.set_connect_timeout(Some(connect_timeout));
        tcp.set_nodelay(true);
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http()
            .enable_http1()
            .wrap_connector(tcp);
        let client =
            Client::builder(TokioExecutor::new()).pool_idle_timeout(Duration::from_secs(60)).build(connector);
        Ok(Http { client })
    }

    /// Sends `request` and reads the answer, all within `timeout`.
    pub async fn send(
        &self,
        request: http::Request<Full<Bytes>>,
        timeout: Duration,
    ) -> Result<Answer, HttpError> {
        let exchange = async {
            let response = self
                .client
                .request(request)
                .await
                .map_err(|e| HttpError::Send(slurm_cw_sink::failure::source_chain(&e)))?;
            let status = response.status().as_u16();
            let date = response
                .headers()
                .get(::http::header::DATE)
                .and_then(|d| d.to_str().ok())
                .and_then(http_date);
            // An answer longer than the bound keeps its status; its text is not needed.
            let body = match Limited::new(response.into_body(), MAX_RESPONSE).collect().await {
                Ok(collected) => collected.to_bytes().to_vec(),
                Err(e) if e.is::<http_body_util::LengthLimitError>() => b"(answer too long)".to_vec(),
                Err(e) => return Err(HttpError::Send(format!("reading the answer: {e}"))),
            };
            Ok(Answer { status, date, body })
        };
        tokio::time::timeout(timeout, exchange).await.map_err(|_| HttpError::Timeout(timeout))?
    }
}
