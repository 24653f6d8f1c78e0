//! The final sample of a job that ends between two collections.
//!
//! Slurm removes a job's cgroup as soon as its last step ends, before the Epilog runs, so the
//! Epilog is too late to read peak memory or total CPU time. The TaskEpilog still runs inside
//! the job (as its user) while the cgroup exists: `infra/slurm/task-epilog.sh` runs
//! `slurm-cw-shipper --job-ended $SLURM_JOB_ID`, which asks the daemon over a Unix socket to
//! sample that job now and waits (at most [`CLIENT_TIMEOUT`]) for the answer. The daemon serves
//! only root and the job's own user, and at most one final sample per job per second.
//!
//! The socket is open to every user of the node, so what one user can make the daemon hold or
//! do is bounded ([`Limits::default`]):
//! - at most 64 connections open at once, and 8 per uid (the peer's uid comes from
//!   SO_PEERCRED before anything is read); over either cap a connection is closed at once
//!   (`too-many`), so idle connections cannot use up the daemon's file descriptors;
//! - a budget per uid of 10 connections a second, 20 at once (a token bucket); each accepted
//!   connection spends a token, whatever it asks and whether it is denied; without one the
//!   answer is `busy` at once;
//! - the request line: 1 s to arrive, 128 bytes at most;
//! - at most 20 requests a second, 40 at once, in all uids together, reach the main loop,
//!   and only while its queue has room; otherwise `busy`. The uids active in the last 2 s share
//!   that budget, and the connections, equally (see [`gate`]): flooding from several uids
//!   leaves every other uid its share, so a job's own user gets through;
//! - 3 s for the main loop's answer and 1 s to write it;
//! - after a failed accept (out of file descriptors, say) a pause of 100 ms, doubling to 1 s,
//!   and one log line per run of failures.
//!
//! What a request costs the main loop is bounded too: a job id the job table does not know is
//! looked for by listing the job cgroups again at most once per [`crate::sources::node::LOOKUP_EVERY`] (in between
//! the answer is `busy`, and the client asks again), and a running job asked for again gets a
//! sample, not another summary (the summary rule is in `transforms::jobs`).
//!
//! The client retries `busy` and `too-many` with a short jittered pause until its 3 s are up:
//! many tasks of one user ending together are served a few at a time instead of refused.

mod client;
mod gate;

use crate::sources::FinalSample;
pub use client::{request, socket_path};
use gate::{Gate, Refused, Slot, lock};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::unix::OwnedWriteHalf;
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::{mpsc, oneshot};

/// How long the hook waits for the daemon; a job's end must not wait longer on us.
pub const CLIENT_TIMEOUT: Duration = Duration::from_secs(3);

/// Requests the daemon's loop holds for the collection thread; the collection thread answers at
/// most this many before a collection that fell due.
pub const QUEUE: usize = 64;

/// The longest request line read: a job id is at most 64 bytes.
pub const MAX_REQUEST: u64 = 128;

/// The pause after a failed accept, doubling up to [`ACCEPT_BACKOFF_MAX`].
pub const ACCEPT_BACKOFF_MIN: Duration = Duration::from_millis(100);
pub const ACCEPT_BACKOFF_MAX: Duration = Duration::from_secs(1);

/// How much of the daemon one user, and all of them together, can take through the socket.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Connections open at once, all uids.
    pub connections: usize,
    /// Connections open at once, per uid.
    pub per_uid: usize,
    /// Connections per second per uid, and how many at once (token bucket).
    pub uid_rate: f64,
    pub uid_burst: f64,
    /// Requests per second to the main loop, all uids, and how many at once.
    pub rate: f64,
    pub burst: f64,
    /// For the request line to arrive.
    pub read_timeout: Duration,
    /// For the main loop's answer.
    pub answer_timeout: Duration,
    /// For the answer to be written.
    pub write_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            connections: 64,
            per_uid: 8,
            uid_rate: 10.0,
            uid_burst: 20.0,
            rate: 20.0,
            burst: 40.0,
            read_timeout: Duration::from_secs(1),
            answer_timeout: CLIENT_TIMEOUT,
            write_timeout: Duration::from_secs(1),
        }
    }
}

/// A request from the hook, handed to the main loop.
#[derive(Debug)]
pub struct Request {
    pub job: String,
    /// The requesting process's uid, from the socket's peer credentials.
    pub uid: u32,
    pub reply: oneshot::Sender<FinalSample>,
}

/// The final sample's wire line.
fn wire_line(a: &FinalSample) -> String {
    match a {
        FinalSample::Sampled(n) => format!("ok {n}\n"),
        FinalSample::Denied => "denied\n".into(),
        FinalSample::TooSoon => "too-soon\n".into(),
        FinalSample::Busy => String::from_utf8_lossy(BUSY).into_owned(),
    }
}

/// Answers of the server itself, before the main loop is asked.
const BUSY: &[u8] = b"busy\n";
const TOO_MANY: &[u8] = b"too-many\n";
const BAD_REQUEST: &[u8] = b"bad-request\n";

/// A valid job id: digits, letters, `_` and `.` (array and new-style ids), at most 64 bytes.
pub fn valid_job_id(s: &str) -> bool {
    !s.is_empty() && s.len() <= 64 && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.')
}

/// Binds the socket (replacing a stale one), world-writable so every job's user can reach it;
/// requests are checked by peer credentials.
pub fn bind(path: &Path) -> std::io::Result<UnixListener> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    match std::fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    let listener = UnixListener::bind(path)?;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o666))?;
    Ok(listener)
}

/// The pause after `failures` failed accepts in a row (1 or more).
fn accept_backoff(failures: u32) -> Duration {
    ACCEPT_BACKOFF_MIN.saturating_mul(1 << failures.saturating_sub(1).min(16)).min(ACCEPT_BACKOFF_MAX)
}

/// Accepts hook connections until the receiver of `tx` is gone, within [`Limits::default`];
/// the uids that own no job in `owners` share one uid's part of them.
pub async fn serve(listener: UnixListener, tx: mpsc::Sender<Request>, owners: crate::sources::JobOwners) {
    serve_with(listener, tx, Limits::default(), Some(owners)).await
}

/// [`serve`] with other limits (tests), and without owners every uid on its own.
pub async fn serve_with(
    listener: UnixListener,
    tx: mpsc::Sender<Request>,
    limits: Limits,
    owners: Option<crate::sources::JobOwners>,
) {
    let gate = Arc::new(Mutex::new(Gate::new(limits, Instant::now()).pooling(owners)));
    let mut failures: u32 = 0;
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => {
                if failures > 0 {
                    tracing::info!(failures, "hook socket accepts connections again");
                    failures = 0;
                }
                stream
            }
            Err(e) => {
                // Out of file descriptors the socket stays readable: without a pause this
                // loop would spin.
                failures = failures.saturating_add(1);
                if failures == 1 {
                    tracing::warn!(error = %e, "hook socket cannot accept; pausing");
                }
                tokio::time::sleep(accept_backoff(failures)).await;
                continue;
            }
        };
        if tx.is_closed() {
            return;
        }
        // The uid before anything is read: a refused connection costs one accept and a close.
        let Ok(cred) = stream.peer_cred() else { continue };
        let uid = cred.uid();
        let key = match lock(&gate).admit(uid, Instant::now()) {
            Ok(key) => key,
            Err(why) => {
                // Non-blocking and best effort: the connection closes here either way.
                let _ = stream.try_write(if why == Refused::Busy { BUSY } else { TOO_MANY });
                continue;
            }
        };
        let slot = Slot { gate: gate.clone(), uid, key };
        let tx = tx.clone();
        tokio::spawn(async move {
            if let Err(e) = handle(stream, &slot, &tx, limits).await {
                tracing::debug!(error = %e, uid = slot.uid, "hook connection failed");
            }
        });
    }
}

fn timed_out(what: &str) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::TimedOut, what.to_owned())
}

async fn reply(write: &mut OwnedWriteHalf, line: &[u8], limit: Duration) -> std::io::Result<()> {
    tokio::time::timeout(limit, write.write_all(line)).await.map_err(|_| timed_out("answer not taken"))?
}

async fn handle(
    stream: UnixStream,
    slot: &Slot,
    tx: &mpsc::Sender<Request>,
    limits: Limits,
) -> std::io::Result<()> {
    let (read, mut write) = stream.into_split();
    let mut line = String::new();
    let mut reader = BufReader::new(read.take(MAX_REQUEST));
    tokio::time::timeout(limits.read_timeout, reader.read_line(&mut line))
        .await
        .map_err(|_| timed_out("no request"))??;
    let job = line.trim();
    if !valid_job_id(job) {
        return reply(&mut write, BAD_REQUEST, limits.write_timeout).await;
    }
    if !lock(&slot.gate).forward(slot.key, Instant::now()) {
        return reply(&mut write, BUSY, limits.write_timeout).await;
    }
    let (reply_tx, answer) = oneshot::channel();
    // Never wait for room: a full queue means the main loop has enough to do.
    match tx.try_send(Request { job: job.to_owned(), uid: slot.uid, reply: reply_tx }) {
        Ok(()) => {}
        Err(mpsc::error::TrySendError::Full(_)) => {
            return reply(&mut write, BUSY, limits.write_timeout).await;
        }
        Err(mpsc::error::TrySendError::Closed(_)) => return Ok(()),
    }
    match tokio::time::timeout(limits.answer_timeout, answer).await {
        Ok(Ok(a)) => reply(&mut write, wire_line(&a).as_bytes(), limits.write_timeout).await,
        // The daemon is stopping.
        Ok(Err(_)) => Ok(()),
        Err(_) => reply(&mut write, BUSY, limits.write_timeout).await,
    }
}

#[cfg(test)]
mod tests {
    use super::client::exchange;
    use super::*;
    use std::path::PathBuf;

    #[test]
    fn job_ids() {
        assert!(valid_job_id("123"));
        assert!(valid_job_id("123_4"));
        assert!(!valid_job_id(""));
        assert!(!valid_job_id("1; rm -rf /"));
        assert!(!valid_job_id(&"1".repeat(65)));
    }

    /// A server with `limits` and a main loop that answers `Sampled(1)`, or holds every
    /// request unanswered when `answer` is false.
    fn start(limits: Limits, queue: usize, answer: bool) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("hook.sock");
        let listener = bind(&path).unwrap();
        let (tx, mut rx) = mpsc::channel(queue);
        tokio::spawn(serve_with(listener, tx, limits, None));
        tokio::spawn(async move {
            if !answer {
                // Keeps the receiver, never receives: the queue stays full.
                std::future::pending::<()>().await;
            }
            while let Some(r) = rx.recv().await {
                let _ = r.reply.send(FinalSample::Sampled(1));
            }
            drop(rx);
        });
        (dir, path)
    }

    /// Roomy limits, to change one at a time.
    pub(crate) fn roomy() -> Limits {
        Limits { uid_burst: 1000.0, burst: 1000.0, ..Limits::default() }
    }

    #[tokio::test]
    async fn request_and_answer_over_the_socket() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/hook.sock");
        let listener = bind(&path).unwrap();
        let (tx, mut rx) = mpsc::channel(4);
        tokio::spawn(serve_with(listener, tx, Limits::default(), None));
        tokio::spawn(async move {
            while let Some(r) = rx.recv().await {
                let a = if r.job == "7" { FinalSample::Sampled(1) } else { FinalSample::Denied };
                assert_eq!(r.uid, crate::sys::uid());
                let _ = r.reply.send(a);
            }
        });
        assert_eq!(request(&path, "7").await.unwrap(), "ok 1");
        assert_eq!(request(&path, "8").await.unwrap(), "denied");
        assert!(request(&path, "x;y").await.is_err());
        assert!(request(&dir.path().join("none.sock"), "7").await.is_err());
        // A stale socket from a crashed daemon is replaced.
        drop(bind(&path).unwrap());
        assert!(bind(&path).is_ok());
    }

    #[tokio::test]
    async fn a_full_queue_of_connections_is_waited_out_not_given_up_on() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("hook.sock");
        let socket = tokio::net::UnixSocket::new_stream().unwrap();
        socket.bind(&path).unwrap();
        let listener = socket.listen(1).unwrap();
        // A user's flood: connections not accepted yet, until the queue is full (EAGAIN).
        let mut flood = Vec::new();
        loop {
            match UnixStream::connect(&path).await {
                Ok(s) => flood.push(s),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) => panic!("{e}"),
            }
            assert!(flood.len() < 64, "the queue fills");
        }
        assert!(exchange(&path, "7").await.is_err(), "one try meets the full queue");
        // The daemon gets to the queue a moment later; the TaskEpilog's request waits for it.
        let (tx, mut rx) = mpsc::channel::<Request>(4);
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(300)).await;
            serve_with(listener, tx, roomy(), None).await;
        });
        tokio::spawn(async move {
            while let Some(r) = rx.recv().await {
                let _ = r.reply.send(FinalSample::Sampled(1));
            }
        });
        assert_eq!(request(&path, "7").await, Ok("ok 1".to_owned()));
        drop(flood);
    }

    #[test]
    fn accept_backoff_doubles_to_a_second() {
        let ms: Vec<u128> = (1..=6).map(|n| accept_backoff(n).as_millis()).collect();
        assert_eq!(ms, [100, 200, 400, 800, 1000, 1000]);
        assert_eq!(accept_backoff(u32::MAX), ACCEPT_BACKOFF_MAX);
    }

    #[tokio::test]
    async fn idle_connections_over_the_cap_are_closed_at_once_and_the_rest_time_out() {
        // Timings far apart, so that a slow machine cannot blur "at once" and "after the timeout".
        let read_timeout = Duration::from_secs(5);
        let limits = Limits { per_uid: 2, read_timeout, ..roomy() };
        let (_dir, path) = start(limits, 4, true);
        let mut idle = Vec::new();
        for _ in 0..2 {
            idle.push(UnixStream::connect(&path).await.unwrap());
        }
        // The server accepts in arrival order: the third is over the cap.
        let started = Instant::now();
        assert_eq!(exchange(&path, "7").await.unwrap(), "too-many");
        assert!(started.elapsed() < read_timeout / 2, "refused without waiting");
        // The idle ones are closed after the read timeout, freeing their places.
        for s in &mut idle {
            let mut buf = [0u8; 16];
            let n = tokio::time::timeout(read_timeout * 3, s.read(&mut buf)).await.unwrap().unwrap();
            assert_eq!(n, 0, "closed without an answer");
        }
        let freed = Instant::now();
        loop {
            match exchange(&path, "7").await.unwrap().as_str() {
                "ok 1" => break,
                a => assert!(freed.elapsed() < Duration::from_secs(30), "places never freed: {a}"),
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    #[tokio::test]
    async fn a_spent_budget_answers_busy_and_the_client_asks_again() {
        let limits = Limits { uid_rate: 10.0, uid_burst: 2.0, ..roomy() };
        let (_dir, path) = start(limits, 4, true);
        assert_eq!(exchange(&path, "7").await.unwrap(), "ok 1");
        // A bad request spends a token as well.
        assert_eq!(exchange(&path, "x;y").await.unwrap(), "bad-request");
        assert_eq!(exchange(&path, "7").await.unwrap(), "busy");
        // The client retries until a token is back (10 a second), within its CLIENT_TIMEOUT.
        assert_eq!(request(&path, "7").await.unwrap(), "ok 1");

        // All uids together: the main loop's budget.
        let limits = Limits { rate: 0.001, burst: 2.0, ..roomy() };
        let (_dir, path) = start(limits, 4, true);
        assert_eq!(exchange(&path, "7").await.unwrap(), "ok 1");
        assert_eq!(exchange(&path, "7").await.unwrap(), "ok 1");
        assert_eq!(exchange(&path, "7").await.unwrap(), "busy");
    }

    #[tokio::test]
    async fn a_full_queue_answers_busy_at_once_and_a_silent_main_loop_in_time() {
        let answer_timeout = Duration::from_secs(4);
        let limits = Limits { answer_timeout, ..roomy() };
        let (_dir, path) = start(limits, 1, false);
        // Two at once: whichever is queued first fills the queue (one place, never read).
        let timed = |p: PathBuf, job: &'static str| async move {
            let started = Instant::now();
            (exchange(&p, job).await.unwrap(), started.elapsed())
        };
        let (a, b) = tokio::join!(timed(path.clone(), "7"), timed(path.clone(), "8"));
        let (quick, slow) = if a.1 <= b.1 { (a, b) } else { (b, a) };
        assert_eq!(quick.0, "busy");
        assert!(quick.1 < answer_timeout / 2, "not queued behind the other: {quick:?}");
        assert_eq!(slow.0, "busy", "no answer from the main loop in time");
        assert!(slow.1 >= answer_timeout, "it waited for the main loop first: {slow:?}");
    }

    #[tokio::test]
    async fn a_huge_request_is_read_only_up_to_its_bound() {
        let (_dir, path) = start(roomy(), 4, true);
        let mut s = UnixStream::connect(&path).await.unwrap();
        let big = vec![b'1'; 1 << 20];
        // The server stops reading after MAX_REQUEST bytes; the write then fails.
        let _ = tokio::time::timeout(Duration::from_secs(2), s.write_all(&big)).await.unwrap();
        let mut answer = String::new();
        let _ = tokio::time::timeout(Duration::from_secs(2), BufReader::new(s).read_line(&mut answer))
            .await
            .unwrap();
        assert_eq!(answer, "bad-request\n");
    }
}
