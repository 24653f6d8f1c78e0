//! A small HTTP/1.1 GET over tokio's TcpStream for slurmctld's metrics endpoint: plain HTTP
//! (slurmctld serves no TLS there), one request per connection, a time limit on the whole
//! exchange and a bound on the body.

use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The most bytes of one answer kept (headers and body): /metrics/nodes of some 100,000 nodes.
pub const BODY_MAX: usize = 64 << 20;
const HEADER_MAX: usize = 64 << 10;

/// `http://host:port[/prefix]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Url {
    pub host: String,
    pub port: u16,
    pub prefix: String,
}

impl Url {
    pub fn parse(s: &str) -> Result<Url, String> {
        let rest = s
            .trim()
            .strip_prefix("http://")
            .ok_or_else(|| format!("{s:?}: only http:// URLs (slurmctld serves plain HTTP)"))?;
        let (authority, prefix) = match rest.find('/') {
            Some(i) => (&rest[..i], rest[i..].trim_end_matches('/')),
            None => (rest, ""),
        };
        let (host, port) = match authority.rsplit_once(':') {
            Some((h, p)) if !h.ends_with(']') || h.starts_with('[') => {
                (h, p.parse::<u16>().map_err(|_| format!("{s:?}: bad port {p:?}"))?)
            }
            _ => (authority, 80),
        };
        if host.is_empty() || host.contains(|c: char| c.is_whitespace() || c == '@') {
            return Err(format!("{s:?}: no host"));
        }
        Ok(Url { host: host.to_owned(), port, prefix: prefix.to_owned() })
    }
}

impl std::fmt::Display for Url {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "http://{}:{}{}", self.host, self.port, self.prefix)
    }
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum HttpError {
    #[error("cannot connect to {0}: {1}")]
    Connect(String, String),
    #[error("{0} did not answer within {1:?}")]
    Timeout(String, Duration),
    #[error("{0} answered HTTP {1}")]
    Status(String, u16),
    #[error("{0} answered more than {1} bytes; dropped")]
    TooLarge(String, usize),
    #[error("{0} answered something that is not HTTP: {1}")]
    Malformed(String, String),
}

/// GETs `path` under `url`; the body of a 200 answer, else an error (401 and 403 too, so the
/// caller can fetch a token).
pub async fn get(
    url: &Url,
    path: &str,
    token: Option<&str>,
    timeout: Duration,
    max: usize,
) -> Result<String, HttpError> {
    let target = format!("{url}{path}");
    match tokio::time::timeout(timeout, exchange(url, path, token, max, &target)).await {
        Ok(r) => r,
        Err(_) => Err(HttpError::Timeout(target, timeout)),
    }
}

async fn exchange(
    url: &Url,
    path: &str,
    token: Option<&str>,
    max: usize,
    target: &str,
) -> Result<String, HttpError> {
    let host = url.host.trim_start_matches('[').trim_end_matches(']');
    let mut stream = TcpStream::connect((host, url.port))
        .await
        .map_err(|e| HttpError::Connect(target.to_owned(), e.to_string()))?;
    let mut request = format!(
        "GET {}{} HTTP/1.1\r\nHost: {}:{}\r\nAccept: text/plain\r\nConnection: close\r\n",
        url.prefix, path, url.host, url.port
    );
    if let Some(t) = token {
        // Both headers: 26.05 reads either.
        request.push_str(&format!("X-SLURM-USER-TOKEN: {t}\r\nAuthorization: Bearer {t}\r\n"));
    }
    request.push_str("\r\n");
    stream
        .write_all(request.as_bytes())
        .await
        .map_err(|e| HttpError::Connect(target.to_owned(), e.to_string()))?;
    let mut raw = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = stream
            .read(&mut buf)
            .await
            .map_err(|e| HttpError::Malformed(target.to_owned(), e.to_string()))?;
        if n == 0 {
            break;
        }
        if raw.len() + n > max.saturating_add(HEADER_MAX) {
            return Err(HttpError::TooLarge(target.to_owned(), max));
        }
        raw.extend_from_slice(&buf[..n]);
        // Stop at Content-Length without waiting for the server to close.
        if let Some(Ok(r)) = complete(&raw, false) {
            return finish(r, target, max);
        }
    }
    match complete(&raw, true) {
        Some(r) => finish(r?, target, max),
        None => Err(HttpError::Malformed(target.to_owned(), "answer cut short".into())),
    }
}

/// A parsed answer: status and body.
struct Answer {
    status: u16,
    body: Vec<u8>,
}

fn finish(a: Answer, target: &str, max: usize) -> Result<String, HttpError> {
    if a.body.len() > max {
        return Err(HttpError::TooLarge(target.to_owned(), max));
    }
    if a.status != 200 {
        return Err(HttpError::Status(target.to_owned(), a.status));
    }
    String::from_utf8(a.body).map_err(|_| HttpError::Malformed(target.to_owned(), "body is not UTF-8".into()))
}

/// The answer in `raw` once it is whole (by Content-Length or chunked encoding): None while
/// more may come; a body without either ends when the server closes (`closed`).
fn complete(raw: &[u8], closed: bool) -> Option<Result<Answer, HttpError>> {
    let end = raw.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = match std::str::from_utf8(&raw[..end]) {
        Ok(h) => h,
        Err(_) => return Some(Err(malformed("headers are not UTF-8"))),
    };
    let body = &raw[end + 4..];
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or("");
    let status = match status_line.split_whitespace().nth(1).and_then(|s| s.parse::<u16>().ok()) {
        Some(s) if status_line.starts_with("HTTP/1.") => s,
        _ => return Some(Err(malformed("no HTTP status line"))),
    };
    let mut length = None;
    let mut chunked = false;
    for line in lines {
        let Some((k, v)) = line.split_once(':') else { continue };
        if k.trim().eq_ignore_ascii_case("content-length") {
            match v.trim().parse::<usize>() {
                Ok(n) => length = Some(n),
                Err(_) => return Some(Err(malformed("bad Content-Length"))),
            }
        } else if k.trim().eq_ignore_ascii_case("transfer-encoding")
            && v.to_ascii_lowercase().contains("chunked")
        {
            chunked = true;
        }
    }
    if chunked {
        return dechunk(body).map(|r| r.map(|body| Answer { status, body }));
    }
    match length {
        Some(n) if body.len() >= n => Some(Ok(Answer { status, body: body[..n].to_vec() })),
        Some(_) => None,
        None if closed => Some(Ok(Answer { status, body: body.to_vec() })),
        None => None,
    }
}

fn malformed(why: &str) -> HttpError {
    HttpError::Malformed(String::new(), why.into())
}

/// A chunked body once its last chunk came; None while more may come.
fn dechunk(mut b: &[u8]) -> Option<Result<Vec<u8>, HttpError>> {
    let mut out = Vec::new();
    loop {
        let eol = b.windows(2).position(|w| w == b"\r\n")?;
        let size_text = std::str::from_utf8(&b[..eol]).ok().map(|s| s.split(';').next().unwrap_or("").trim());
        let Some(size) = size_text.and_then(|s| usize::from_str_radix(s, 16).ok()) else {
            return Some(Err(malformed("bad chunk size")));
        };
        b = &b[eol + 2..];
        if size == 0 {
            return Some(Ok(out));
        }
        if b.len() < size.saturating_add(2) {
            return None;
        }
        out.extend_from_slice(&b[..size]);
        b = &b[size + 2..];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        let u = Url::parse("http://head-node:6820").unwrap();
        assert_eq!((u.host.as_str(), u.port, u.prefix.as_str()), ("head-node", 6820, ""));
        assert_eq!(Url::parse("http://10.0.0.5:6817/x/").unwrap().prefix, "/x");
        assert_eq!(Url::parse("http://[::1]:6817").unwrap().host, "[::1]");
        assert!(Url::parse("https://h:1").is_err());
        assert!(Url::parse("http://h:port").is_err());
        assert!(Url::parse("http://:6817").is_err());
    }

    #[test]
    fn answers_by_length_chunks_and_close() {
        let a = complete(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabcdef", false).unwrap().unwrap();
        assert_eq!(a.body, b"abc");
        assert!(complete(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nabc", false).is_none());
        let c = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2;x=y\r\nde\r\n0\r\n\r\n";
        assert_eq!(complete(c, false).unwrap().unwrap().body, b"abcde");
        assert!(complete(b"HTTP/1.1 200 OK\r\n\r\nabc", false).is_none());
        assert_eq!(complete(b"HTTP/1.1 401 Unauthorized\r\n\r\nno", true).unwrap().unwrap().status, 401);
        assert!(complete(b"SSH-2.0\r\n\r\n", true).unwrap().is_err());
        // Real 26.05.5 answer with MetricsAuthUsers set and no token.
        let real = include_bytes!(
            "../../../tests/fixtures/slurm/26.05-real/openmetrics-nodes-401-metricsauthusers.txt"
        );
        let a = complete(real, false).unwrap().unwrap();
        assert_eq!(a.status, 401);
        assert!(String::from_utf8_lossy(&a.body).contains("Invalid authentication credential"));
        assert!(
            complete(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", true).unwrap().is_err()
        );
    }

    /// A server on 127.0.0.1 that reads the request, then writes `answer` (or nothing).
    async fn server(answer: Option<Vec<u8>>) -> Url {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = l.local_addr().unwrap().port();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = l.accept().await {
                let mut buf = [0u8; 4096];
                let _ = s.read(&mut buf).await;
                match &answer {
                    Some(a) => {
                        let _ = s.write_all(a).await;
                    }
                    None => tokio::time::sleep(Duration::from_secs(30)).await,
                }
            }
        });
        Url { host: "127.0.0.1".into(), port, prefix: String::new() }
    }

    #[tokio::test]
    async fn a_body_past_the_bound_or_a_silent_server_is_an_error() {
        let mut big = b"HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\n\r\n".to_vec();
        big.extend(std::iter::repeat_n(b'x', 1_000_000));
        let u = server(Some(big)).await;
        let e = get(&u, "/metrics/nodes", None, Duration::from_secs(10), 1000).await;
        assert!(matches!(e, Err(HttpError::TooLarge(_, 1000))), "{e:?}");
        let u = server(None).await;
        let e = get(&u, "/metrics/nodes", None, Duration::from_millis(300), 1000).await;
        assert!(matches!(e, Err(HttpError::Timeout(..))), "{e:?}");
        let u = server(Some(b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nx 1\ny 2".to_vec())).await;
        assert_eq!(get(&u, "/m", Some("t"), Duration::from_secs(5), 1000).await.unwrap(), "x 1\ny ");
        let u = server(Some(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n".to_vec())).await;
        assert!(matches!(
            get(&u, "/m", None, Duration::from_secs(5), 1000).await,
            Err(HttpError::Status(_, 403))
        ));
    }
}
