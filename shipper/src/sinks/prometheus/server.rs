//! The pull endpoint's HTTP side: `GET /metrics` answers the last rendered exposition, and
//! nothing else. Any user of the node can connect, so the server is bounded: a few connections
//! at a time, a small request head read within a deadline, and each answer a copy of text
//! rendered at the last collection or flush, never work per request. When every slot is taken,
//! the connection that has waited longest without sending its request is closed for the new
//! one: a user who connects and sends nothing, again and again, cannot keep a scraper out (a
//! scraper sends its request as it connects). It runs on the runtime's thread beside delivery;
//! collection has its own thread, so a flood slows neither.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
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

/// The body served, swapped whole at each collection and flush ([`super::live`]).
pub type Body = Arc<Mutex<Arc<String>>>;

/// The connections still waiting for their request, oldest first.
#[derive(Clone, Default)]
struct Waiting(Arc<Mutex<VecDeque<(u64, AbortHandle)>>>);

impl Waiting {
    fn lock(&self) -> MutexGuard<'_, VecDeque<(u64, AbortHandle)>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn done(&self, id: u64) {
        self.lock().retain(|(i, _)| *i != id);
    }
}

/// Serves until the process ends.
pub async fn serve(listener: TcpListener, body: Body) {
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let waiting = Waiting::default();
    for id in 0u64.. {
        let (stream, _) = match listener.accept().await {
            Ok(c) => c,
            Err(e) => {
                // Out of file descriptors, say: wait a little rather than spin.
                tracing::warn!(error = %e, "prometheus endpoint: cannot accept a connection");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let slot = match slots.clone().try_acquire_owned() {
            Ok(slot) => slot,
            Err(_) => {
                // Full: the longest waiting for its request goes; when every slot is answering,
                // this one does (its scrape fails and it tries again).
                let Some((_, oldest)) = waiting.lock().pop_front() else { continue };
                oldest.abort();
                let freed = tokio::time::timeout(Duration::from_millis(100), slots.clone().acquire_owned());
                match freed.await {
                    Ok(Ok(slot)) => slot,
                    _ => continue,
                }
            }
        };
        let (body, mine) = (body.clone(), waiting.clone());
        let task = tokio::spawn(async move {
            let _ = tokio::time::timeout(DEADLINE * 2, answer(stream, body, || mine.done(id))).await;
            mine.done(id);
            drop(slot);
        });
        waiting.lock().push_back((id, task.abort_handle()));
    }
}

/// Reads the request head and answers it; `asked` is called once the head is in (or given up).
async fn answer(mut stream: TcpStream, body: Body, asked: impl FnOnce()) -> std::io::Result<()> {
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
    asked();
    let (status, text) = match complete {
        Ok(Ok(true)) => route(&head, &body),
        Ok(Ok(false)) => ("400 Bad Request", Arc::new("bad request\n".to_owned())),
        Ok(Err(e)) => return Err(e),
        Err(_) => ("408 Request Timeout", Arc::new("request timeout\n".to_owned())),
    };
    let header = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n",
        text.len()
    );
    tokio::time::timeout(DEADLINE, async {
        stream.write_all(header.as_bytes()).await?;
        stream.write_all(text.as_bytes()).await?;
        stream.shutdown().await
    })
    .await
    .unwrap_or(Ok(()))
}

fn route(head: &[u8], body: &Body) -> (&'static str, Arc<String>) {
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
