//! The pull endpoint's HTTP side: `GET /metrics` answers the last rendered exposition, and
//! nothing else. Any user of the node can connect, so the server is bounded: a few connections
//! at a time, a small request head read within a deadline, and each answer a copy of text
//! rendered at the last collection or flush, never work per request.
//!
//! When every slot is taken, a newcomer takes a slot from the peer holding the most: a
//! connection from this host is its owner's (the uid the kernel gives the other end,
//! [`crate::sys::sock_diag`]), one from elsewhere its host's address. Of that peer's connections
//! it takes the one that has gone longest without moving (waiting for its request since it
//! came, or for its reader to take the next part of its answer). So a user flooding the
//! endpoint, from any number of connections and asking and reading as fast as a scraper, only
//! ever displaces its own once it holds the most, and several users together displace one
//! another before a scraper, which holds one. Within one peer (a scraper and a user on the same
//! host, where the user's uid cannot be told) the stalest goes first: a user who connects and
//! sends nothing, or asks and never reads, again and again, cannot keep a scraper out (it sends
//! its request as it connects and reads its answer as it comes, so it is the last chosen). It
//! runs on the runtime's thread beside delivery; collection has its own thread, so a flood
//! slows neither.

use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio::task::AbortHandle;

/// Connections served at once.
pub const MAX_CONNECTIONS: usize = 16;
/// The largest request head read.
pub const MAX_REQUEST: usize = 8 << 10;
/// How long a client has to send its request, and to read the answer.
pub const DEADLINE: Duration = Duration::from_secs(2);
/// An answer is written in parts of this size, each one a sign its reader is reading.
const PART: usize = 16 << 10;

/// The body served, swapped whole at each collection and flush ([`super::live`]).
pub type Body = Arc<Mutex<Arc<String>>>;

/// Who is at the other end of a connection, for the slots' shares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Peer {
    /// A process of this host, by the uid that owns its socket.
    Uid(u32),
    /// Another host, or one of this host whose owner could not be told.
    Host(IpAddr),
}

impl Peer {
    /// The peer of a connection accepted at `local` from `remote`.
    fn of(local: SocketAddr, remote: SocketAddr) -> Peer {
        let (from, to) = (remote.ip().to_canonical(), local.ip().to_canonical());
        let here = from.is_loopback() || from == to;
        match here.then(|| crate::sys::sock_diag::tcp_owner(remote, local)).flatten() {
            Some(uid) => Peer::Uid(uid),
            None => Peer::Host(from),
        }
    }
}

/// A connection being served.
struct Conn {
    id: u64,
    peer: Peer,
    task: AbortHandle,
    /// When its reader last took a part of the answer (or it came, or asked).
    moved: Instant,
}

/// The connections being served, in the order they came.
#[derive(Clone, Default)]
struct Served(Arc<Mutex<Vec<Conn>>>);

impl Served {
    fn lock(&self) -> MutexGuard<'_, Vec<Conn>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `id` moved on: its request is in, or its reader took a part.
    fn moved(&self, id: u64) {
        if let Some(c) = self.lock().iter_mut().find(|c| c.id == id) {
            c.moved = Instant::now();
        }
    }

    fn done(&self, id: u64) {
        self.lock().retain(|c| c.id != id);
    }

    /// Takes the connection to close for a newcomer, where every slot is taken.
    fn victim(&self) -> Option<AbortHandle> {
        let mut conns = self.lock();
        let at = victim(&conns)?;
        Some(conns.remove(at).task)
    }
}

/// Which of `conns` closes for a newcomer ([`Served::victim`]): none while a slot is free,
/// else the stalest (gone longest without moving) of the peer holding the most, of peers
/// holding as many the one with the stalest.
fn victim(conns: &[Conn]) -> Option<usize> {
    if conns.len() < MAX_CONNECTIONS {
        return None;
    }
    let held = |p: Peer| conns.iter().filter(|c| c.peer == p).count();
    let busiest =
        conns.iter().max_by(|a, b| held(a.peer).cmp(&held(b.peer)).then(b.moved.cmp(&a.moved)))?.peer;
    conns.iter().enumerate().filter(|(_, c)| c.peer == busiest).min_by_key(|(_, c)| c.moved).map(|(i, _)| i)
}

/// Who may read: anyone, or a request carrying the token ([`super::token`]).
pub type Guard = Option<Arc<super::token::Token>>;

/// Serves until the process ends.
pub async fn serve(listener: TcpListener, body: Body, guard: Guard) {
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let served = Served::default();
    for id in 0u64.. {
        let (stream, remote) = match listener.accept().await {
            Ok(c) => c,
            Err(e) => {
                // Out of file descriptors, say: wait a little rather than spin.
                tracing::warn!(error = %e, "prometheus endpoint: cannot accept a connection");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let peer = match stream.local_addr() {
            Ok(local) => Peer::of(local, remote),
            Err(_) => Peer::Host(remote.ip().to_canonical()),
        };
        if let Some(victim) = served.victim() {
            victim.abort();
        }
        let freed = tokio::time::timeout(Duration::from_millis(100), slots.clone().acquire_owned());
        let Ok(Ok(slot)) = freed.await else { continue };
        let (body, mine, guard) = (body.clone(), served.clone(), guard.clone());
        // Listed before the task can run, so that its end always finds it listed.
        let mut conns = served.lock();
        let task = tokio::spawn(async move {
            let _ =
                tokio::time::timeout(DEADLINE * 2, answer(stream, body, guard.as_deref(), &mine, id)).await;
            mine.done(id);
            drop(slot);
        });
        conns.push(Conn { id, peer, task: task.abort_handle(), moved: Instant::now() });
        drop(conns);
    }
}

/// Reads the request head and answers it, telling `served` as it moves on.
async fn answer(
    mut stream: TcpStream,
    body: Body,
    guard: Option<&super::token::Token>,
    served: &Served,
    id: u64,
) -> std::io::Result<()> {
    let mut head = Vec::with_capacity(512);
    let mut buf = [0u8; 1024];
    let complete = tokio::time::timeout(DEADLINE, async {
        loop {
            let n = stream.read(&mut buf).await?;
            if n == 0 {
                return Ok::<bool, std::io::Error>(false);
            }
            head.extend_from_slice(&buf[..n]);
            if head.windows(4).any(|w| w == b"\r\n\r\n") {
                return Ok(true);
            }
            if head.len() > MAX_REQUEST {
                return Ok(false);
            }
        }
    })
    .await;
    served.moved(id);
    let (status, text) = match complete {
        Ok(Ok(true)) => route(&head, &body, guard),
        Ok(Ok(false)) => ("400 Bad Request", Arc::new("bad request\n".to_owned())),
        Ok(Err(e)) => return Err(e),
        Err(_) => ("408 Request Timeout", Arc::new("request timeout\n".to_owned())),
    };
    let challenge = if status == UNAUTHORIZED { "WWW-Authenticate: Bearer\r\n" } else { "" };
    let header = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n\
         {challenge}Content-Length: {}\r\nConnection: close\r\n\r\n",
        text.len()
    );
    tokio::time::timeout(DEADLINE, async {
        stream.write_all(header.as_bytes()).await?;
        for part in text.as_bytes().chunks(PART) {
            stream.write_all(part).await?;
            served.moved(id);
        }
        stream.shutdown().await
    })
    .await
    .unwrap_or(Ok(()))
}

const UNAUTHORIZED: &str = "401 Unauthorized";

fn route(head: &[u8], body: &Body, guard: Option<&super::token::Token>) -> (&'static str, Arc<String>) {
    if guard.is_some_and(|t| !t.admits(head)) {
        return (
            UNAUTHORIZED,
            Arc::new("a bearer token is required (prometheus.bearer_token_file)\n".to_owned()),
        );
    }
    let line = head.split(|b| *b == b'\r').next().unwrap_or_default();
    let mut parts = line.split(|b| *b == b' ');
    let (method, target) = (parts.next().unwrap_or_default(), parts.next().unwrap_or_default());
    let path = target.split(|b| *b == b'?').next().unwrap_or_default();
    match (method, path) {
        (b"GET", b"/metrics") => {
            let text = match body.lock() {
                Ok(g) => g.clone(),
                Err(p) => p.into_inner().clone(),
            };
            ("200 OK", text)
        }
        (b"GET", _) => ("404 Not Found", Arc::new("not found: the metrics are at /metrics\n".to_owned())),
        _ => ("405 Method Not Allowed", Arc::new("only GET /metrics\n".to_owned())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use tokio::net::TcpSocket;

    const REQUEST: &[u8] = b"GET /metrics HTTP/1.1\r\nHost: node\r\n\r\n";

    /// A scrape read whole within a few seconds: the answer's length.
    async fn scrape(addr: std::net::SocketAddr) -> Option<usize> {
        tokio::time::timeout(Duration::from_secs(5), async {
            let mut s = TcpStream::connect(addr).await.ok()?;
            s.write_all(REQUEST).await.ok()?;
            let mut got = Vec::new();
            s.read_to_end(&mut got).await.ok()?;
            let head = got.windows(4).position(|w| w == b"\r\n\r\n")?;
            got.starts_with(b"HTTP/1.1 200 OK").then_some(got.len() - head - 4)
        })
        .await
        .ok()
        .flatten()
    }

    #[test]
    fn a_local_peer_is_the_uid_that_owns_its_end_and_a_remote_one_its_host() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let _client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, remote) = listener.accept().unwrap();
        let local = server.local_addr().unwrap();
        assert_eq!(Peer::of(local, remote), Peer::Uid(crate::sys::euid()));
        let mapped = |a: SocketAddr| match a.ip() {
            IpAddr::V4(v4) => SocketAddr::new(IpAddr::V6(v4.to_ipv6_mapped()), a.port()),
            IpAddr::V6(_) => a,
        };
        assert_eq!(
            Peer::of(mapped(local), mapped(remote)),
            Peer::Uid(crate::sys::euid()),
            "a dual-stack listener's"
        );
        let elsewhere: SocketAddr = "10.1.2.3:40000".parse().unwrap();
        assert_eq!(Peer::of(local, elsewhere), Peer::Host(elsewhere.ip()));
    }

    #[tokio::test]
    async fn a_guarded_endpoint_answers_401_and_nothing_else_without_its_token() {
        let dir = tempfile::tempdir().unwrap();
        let file = crate::secret::secret_file(dir.path(), "s3cret-s3cret-s3cret\n", 0o600);
        let guard = Some(Arc::new(super::super::token::Token::read(&file).unwrap()));
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let body = "slurm_jobs_on_node{node_name=\"c1\"} 2\n";
        tokio::spawn(serve(listener, Arc::new(Mutex::new(Arc::new(body.to_owned()))), guard));
        let ask = |auth: &'static str| async move {
            let mut s = TcpStream::connect(addr).await.unwrap();
            s.write_all(format!("GET /metrics HTTP/1.1\r\nHost: node\r\n{auth}\r\n").as_bytes())
                .await
                .unwrap();
            let mut got = String::new();
            s.read_to_string(&mut got).await.unwrap();
            got
        };
        for auth in ["", "Authorization: Bearer s3cret-s3cret-s3creT\r\n", "Authorization: Basic s3cret\r\n"]
        {
            let got = ask(auth).await;
            assert!(got.starts_with("HTTP/1.1 401 Unauthorized\r\n"), "{got}");
            assert!(got.contains("WWW-Authenticate: Bearer\r\n") && !got.contains("slurm_"), "{got}");
        }
        let got = ask("Authorization: Bearer s3cret-s3cret-s3cret\r\n").await;
        assert!(got.starts_with("HTTP/1.1 200 OK\r\n") && got.ends_with(body), "{got}");
        // Nor does a path other than /metrics say anything without it.
        let mut s = TcpStream::connect(addr).await.unwrap();
        s.write_all(b"GET /nothing HTTP/1.1\r\n\r\n").await.unwrap();
        let mut got = String::new();
        s.read_to_string(&mut got).await.unwrap();
        assert!(got.starts_with("HTTP/1.1 401"), "{got}");
    }

    #[tokio::test]
    async fn a_newcomer_displaces_the_stalest_of_the_peer_holding_the_most() {
        let t0 = Instant::now();
        let conn = |peer: Peer, ms: u64| Conn {
            id: 0,
            peer,
            task: tokio::spawn(async {}).abort_handle(),
            moved: t0 + Duration::from_millis(ms),
        };
        let (scraper, user, other) =
            (Peer::Host("10.0.0.5".parse().unwrap()), Peer::Uid(1000), Peer::Uid(1001));
        // The scraper's connection is the stalest of all.
        let mut conns = vec![conn(scraper, 0)];
        conns.extend((0..3).map(|i| conn(other, 5 + i)));
        conns.extend((0..MAX_CONNECTIONS as u64 - 5).map(|i| conn(user, 10 + i)));
        assert_eq!(victim(&conns), None, "a slot free");
        conns.push(conn(user, 9));
        let chosen = victim(&conns).map(|i| (conns[i].peer, conns[i].moved - t0));
        assert_eq!(chosen, Some((user, Duration::from_millis(9))), "the busiest user's stalest");
        // One peer alone: its stalest, as before peers were told apart.
        let alone: Vec<Conn> = (0..MAX_CONNECTIONS as u64).map(|i| conn(user, 20 - i)).collect();
        assert_eq!(victim(&alone), Some(MAX_CONNECTIONS - 1));
    }

    /// A user who asks on connection after connection and never reads (a small receive buffer,
    /// an answer far larger than the socket buffers) held every slot for the answer's whole
    /// deadline, and the endpoint closed each newcomer: a scraper got in only by chance. Now a
    /// newcomer takes the slot of the answer that has stalled longest, and a scraper, reading
    /// as the parts come, is the last to be chosen.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_user_who_asks_and_never_reads_does_not_keep_a_scraper_out() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let size = 8 << 20;
        tokio::spawn(serve(listener, Arc::new(Mutex::new(Arc::new("x".repeat(size)))), None));
        assert_eq!(scrape(addr).await, Some(size), "served before the flood");
        let (stop, asked) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicU64::new(0)));
        let (stopping, count) = (stop.clone(), asked.clone());
        let flood = tokio::spawn(async move {
            let mut held = std::collections::VecDeque::new();
            while !stopping.load(Ordering::Relaxed) {
                let Ok(socket) = TcpSocket::new_v4() else { continue };
                let _ = socket.set_recv_buffer_size(4096);
                if let Ok(mut s) = socket.connect(addr).await
                    && s.write_all(REQUEST).await.is_ok()
                {
                    held.push_back(s);
                    count.fetch_add(1, Ordering::Relaxed);
                }
                if held.len() > 8 * MAX_CONNECTIONS {
                    held.pop_front();
                }
            }
        });
        while asked.load(Ordering::Relaxed) < 4 * MAX_CONNECTIONS as u64 {
            tokio::task::yield_now().await;
        }
        let mut answered = 0;
        for _ in 0..10 {
            answered += usize::from(scrape(addr).await == Some(size));
        }
        stop.store(true, Ordering::Relaxed);
        let _ = flood.await;
        let asked = asked.load(Ordering::Relaxed);
        eprintln!("{answered} of 10 scrapes answered while the user asked {asked} times");
        assert!(answered >= 5, "{answered} of 10 scrapes answered");
    }
}
