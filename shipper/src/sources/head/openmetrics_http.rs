//! A small HTTP/1.1 GET over tokio's TcpStream for slurmctld's metrics endpoint: plain HTTP
//! (slurmctld serves no TLS there), one request per connection, a time limit on the whole
//! exchange and a bound on what one collection reads ([`Budget`]), shared by its concurrent
//! GETs. The answer is read into one buffer, looked at once as it grows (never scanned again
//! from the start) and its body taken out in place: no second copy.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Bytes one collection may read from the endpoint, its answers together (headers included).
/// /metrics/nodes takes some 600 bytes a node: a cluster of 20,000 nodes fits. Far below the
/// unit's `MemoryMax=128M`; a larger answer is an error, and sinfo stands in.
pub const COLLECTION_BYTES_MAX: usize = 12 << 20;
const HEADER_MAX: usize = 64 << 10;

/// What one collection may still read, shared by its concurrent GETs.
#[derive(Debug, Clone)]
pub struct Budget {
    left: Arc<AtomicUsize>,
    limit: usize,
}

impl Budget {
    pub fn new(limit: usize) -> Self {
        Budget { left: Arc::new(AtomicUsize::new(limit)), limit }
    }

    /// Takes `n` bytes; false (and nothing taken) when fewer are left.
    fn take(&self, n: usize) -> bool {
        self.left.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |left| left.checked_sub(n)).is_ok()
    }

    fn left(&self) -> usize {
        self.left.load(Ordering::Relaxed)
    }
}

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
    #[error("{0}: the answers of one collection passed {1} bytes; dropped")]
    TooLarge(String, usize),
    #[error("{0} answered something that is not HTTP: {1}")]
    Malformed(String, String),
    #[error("{0}: {1}, neither root nor SlurmUser: not slurmctld, sent nothing (no token)")]
    NotSlurm(String, String),
}

/// GETs `path` under `url`; the body of a 200 answer, else an error (401 and 403 too, so the
/// caller can fetch a token). What it reads is taken from `budget`. A listener on this host
/// that belongs to none of `trusted` (root and SlurmUser; this process's own uid besides) is
/// not slurmctld: it is sent nothing, the token least of all.
pub async fn get(
    url: &Url,
    path: &str,
    token: Option<&str>,
    timeout: Duration,
    budget: &Budget,
    trusted: &[u32],
) -> Result<String, HttpError> {
    let target = format!("{url}{path}");
    match tokio::time::timeout(timeout, exchange(url, path, token, budget, &target, trusted)).await {
        Ok(r) => r,
        Err(_) => Err(HttpError::Timeout(target, timeout)),
    }
}

async fn exchange(
    url: &Url,
    path: &str,
    token: Option<&str>,
    budget: &Budget,
    target: &str,
    trusted: &[u32],
) -> Result<String, HttpError> {
    let host = url.host.trim_start_matches('[').trim_end_matches(']');
    let connect = |e: std::io::Error| HttpError::Connect(target.to_owned(), e.to_string());
    let mut stream = TcpStream::connect((host, url.port)).await.map_err(connect)?;
    let (local, peer) = (stream.local_addr().map_err(connect)?, stream.peer_addr().map_err(connect)?);
    if let Some(why) = crate::peer::untrusted_peer(local, peer, trusted) {
        return Err(HttpError::NotSlurm(target.to_owned(), why));
    }
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
    let at = |e: HttpError| match e {
        HttpError::Malformed(_, why) => HttpError::Malformed(target.to_owned(), why),
        other => other,
    };
    let too_large = || HttpError::TooLarge(target.to_owned(), budget.limit);
    let mut raw = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    let mut head: Option<Head> = None;
    loop {
        let n = stream
            .read(&mut buf)
            .await
            .map_err(|e| HttpError::Malformed(target.to_owned(), e.to_string()))?;
        if n == 0 {
            break;
        }
        // Nothing past a known length: the buffer holds just the answer and never moves.
        let n = match &head {
            Some(Head { framing: Framing::Length(len), start, .. }) => n.min(start + len - raw.len()),
            _ => n,
        };
        if !budget.take(n) {
            return Err(too_large());
        }
        raw.extend_from_slice(&buf[..n]);
        if head.is_none() {
            head = parse_head(&raw).transpose().map_err(at)?;
            match &head {
                None if raw.len() > HEADER_MAX => return Err(at(malformed("headers too long"))),
                // A length past what is left fails now; else room for all of it at once.
                Some(Head { framing: Framing::Length(len), start, .. }) => {
                    let more = (start + len).saturating_sub(raw.len());
                    if more > budget.left() {
                        return Err(too_large());
                    }
                    raw.reserve_exact(more);
                }
                // Room for all it may still read, so the buffer never moves while it grows:
                // pages not written take no memory.
                Some(_) => raw.reserve_exact(budget.left()),
                None => {}
            }
        }
        // Stop at the end of the body without waiting for the server to close.
        if let Some(h) = &mut head
            && h.whole(&raw, false).map_err(at)?
        {
            return finish(raw, h, target);
        }
    }
    if let Some(mut h) = head
        && h.whole(&raw, true).map_err(at)?
    {
        return finish(raw, &h, target);
    }
    Err(HttpError::Malformed(target.to_owned(), "answer cut short".into()))
}

/// An answer's status line and headers, and how far its body has been seen.
struct Head {
    status: u16,
    /// Where the body starts in the buffer.
    start: usize,
    framing: Framing,
}

enum Framing {
    /// `Content-Length`.
    Length(usize),
    /// Chunked: where the next chunk's size line starts, and whether the last chunk came.
    Chunked { next: usize, done: bool },
    /// Neither: the body ends when the server closes.
    Close,
}

/// The head of the answer in `raw`, once its blank line came; None until then.
fn parse_head(raw: &[u8]) -> Option<Result<Head, HttpError>> {
    let end = raw.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = match std::str::from_utf8(&raw[..end]) {
        Ok(h) => h,
        Err(_) => return Some(Err(malformed("headers are not UTF-8"))),
    };
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or("");
    let status = match status_line.split_whitespace().nth(1).and_then(|s| s.parse::<u16>().ok()) {
        Some(s) if status_line.starts_with("HTTP/1.") => s,
        _ => return Some(Err(malformed("no HTTP status line"))),
    };
    let start = end + 4;
    let mut framing = Framing::Close;
    for line in lines {
        let Some((k, v)) = line.split_once(':') else { continue };
        if k.trim().eq_ignore_ascii_case("content-length") {
            match v.trim().parse::<usize>() {
                Ok(n) if !matches!(framing, Framing::Chunked { .. }) => framing = Framing::Length(n),
                Ok(_) => {}
                Err(_) => return Some(Err(malformed("bad Content-Length"))),
            }
        } else if k.trim().eq_ignore_ascii_case("transfer-encoding")
            && v.to_ascii_lowercase().contains("chunked")
        {
            framing = Framing::Chunked { next: start, done: false };
        }
    }
    Some(Ok(Head { status, start, framing }))
}

impl Head {
    /// Whether the body in `raw` is whole (a body framed by neither ends when the server
    /// closes); each chunk's size line is read once, as it comes.
    fn whole(&mut self, raw: &[u8], closed: bool) -> Result<bool, HttpError> {
        match &mut self.framing {
            Framing::Length(n) => Ok(raw.len() - self.start >= *n),
            Framing::Close => Ok(closed),
            Framing::Chunked { next, done } => {
                while !*done {
                    let Some((size, data)) = chunk_at(raw, *next)? else { return Ok(false) };
                    if size == 0 {
                        *done = true;
                    } else if raw.len() < data.saturating_add(size).saturating_add(2) {
                        return Ok(false);
                    } else {
                        *next = data + size + 2;
                    }
                }
                Ok(true)
            }
        }
    }
}

/// The size of the chunk whose size line starts at `at`, and where its data starts; None until
/// the line is whole.
fn chunk_at(raw: &[u8], at: usize) -> Result<Option<(usize, usize)>, HttpError> {
    let rest = raw.get(at..).unwrap_or_default();
    let Some(eol) = rest.windows(2).position(|w| w == b"\r\n") else { return Ok(None) };
    let size_text = std::str::from_utf8(&rest[..eol]).ok().map(|s| s.split(';').next().unwrap_or("").trim());
    match size_text.and_then(|s| usize::from_str_radix(s, 16).ok()) {
        Some(size) => Ok(Some((size, at + eol + 2))),
        None => Err(malformed("bad chunk size")),
    }
}

/// The body of a whole answer, taken out of `raw` in place.
fn body(mut raw: Vec<u8>, head: &Head) -> Vec<u8> {
    match head.framing {
        Framing::Length(n) => {
            raw.truncate(head.start + n);
            raw.drain(..head.start);
        }
        Framing::Close => {
            raw.drain(..head.start);
        }
        Framing::Chunked { .. } => {
            // Each chunk's data moved down over the size lines before it.
            let (mut read, mut write) = (head.start, 0);
            while let Ok(Some((size, data))) = chunk_at(&raw, read) {
                if size == 0 || data + size > raw.len() {
                    break;
                }
                raw.copy_within(data..data + size, write);
                write += size;
                read = data + size + 2;
            }
            raw.truncate(write);
        }
    }
    raw
}

fn finish(raw: Vec<u8>, head: &Head, target: &str) -> Result<String, HttpError> {
    if head.status != 200 {
        return Err(HttpError::Status(target.to_owned(), head.status));
    }
    String::from_utf8(body(raw, head))
        .map_err(|_| HttpError::Malformed(target.to_owned(), "body is not UTF-8".into()))
}

fn malformed(why: &str) -> HttpError {
    HttpError::Malformed(String::new(), why.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Answer {
        status: u16,
        body: Vec<u8>,
    }

    /// The answer in `raw` once it is whole, as the reading loop sees it.
    fn complete(raw: &[u8], closed: bool) -> Option<Result<Answer, HttpError>> {
        let mut head = match parse_head(raw)? {
            Ok(h) => h,
            Err(e) => return Some(Err(e)),
        };
        match head.whole(raw, closed) {
            Ok(true) => Some(Ok(Answer { status: head.status, body: body(raw.to_vec(), &head) })),
            Ok(false) => None,
            Err(e) => Some(Err(e)),
        }
    }

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
            "../../../../formats/tests/fixtures/slurm/26.05-real/openmetrics-nodes-401-metricsauthusers.txt"
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
        let e = get(&u, "/metrics/nodes", None, Duration::from_secs(10), &Budget::new(1000), &[]).await;
        assert!(matches!(e, Err(HttpError::TooLarge(_, 1000))), "{e:?}");
        let u = server(None).await;
        let e = get(&u, "/metrics/nodes", None, Duration::from_millis(300), &Budget::new(1000), &[]).await;
        assert!(matches!(e, Err(HttpError::Timeout(..))), "{e:?}");
        let u = server(Some(b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nx 1\ny 2".to_vec())).await;
        assert_eq!(
            get(&u, "/m", Some("t"), Duration::from_secs(5), &Budget::new(1000), &[]).await.unwrap(),
            "x 1\ny "
        );
        // Chunked, cut anywhere: the same body.
        let u = server(Some(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nx 1\n\r\n3\r\ny 2\r\n0\r\n\r\n"
                .to_vec(),
        ))
        .await;
        assert_eq!(
            get(&u, "/m", None, Duration::from_secs(5), &Budget::new(1000), &[]).await.unwrap(),
            "x 1\ny 2"
        );
        // One budget for a collection's GETs together: the second passes it.
        let mut half = b"HTTP/1.1 200 OK\r\nContent-Length: 600\r\n\r\n".to_vec();
        half.extend(std::iter::repeat_n(b'x', 600));
        let (u, budget) = (server(Some(half)).await, Budget::new(1000));
        assert!(get(&u, "/a", None, Duration::from_secs(5), &budget, &[]).await.is_ok());
        let e = get(&u, "/b", None, Duration::from_secs(5), &budget, &[]).await;
        assert!(matches!(e, Err(HttpError::TooLarge(_, 1000))), "{e:?}");
        let u = server(Some(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n".to_vec())).await;
        assert!(matches!(
            get(&u, "/m", None, Duration::from_secs(5), &Budget::new(1000), &[]).await,
            Err(HttpError::Status(_, 403))
        ));
    }
}
