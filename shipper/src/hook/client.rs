//! The hook's client, run by the TaskEpilog as the job's user.

use super::{CLIENT_TIMEOUT, valid_job_id};
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;

/// Whether the client should ask again: the daemon refused for load, not for the request.
fn retryable(answer: &str) -> bool {
    answer == "busy" || answer == "too-many"
}

/// One try, a full queue an error (the tests' one connection).
#[cfg(test)]
pub(super) async fn exchange(socket: &Path, job: &str) -> Result<String, String> {
    try_once(socket, job)
        .await?
        .ok_or_else(|| format!("{}: its queue of connections is full", socket.display()))
}

/// The request on a connection, then the answer line.
async fn ask(mut s: UnixStream, job: &str) -> Result<String, String> {
    // A refused connection may be closed before the request is written; its answer is
    // still there to read.
    let _ = s.write_all(format!("{job}\n").as_bytes()).await;
    let mut answer = String::new();
    match BufReader::new(s).read_line(&mut answer).await {
        Ok(_) if answer.ends_with('\n') => Ok(answer.trim().to_owned()),
        Ok(_) => Err("the daemon closed the connection without an answer".to_owned()),
        Err(e) => Err(e.to_string()),
    }
}

/// One try: the daemon's answer, or None where the socket's queue of connections waiting to
/// be accepted was full (EAGAIN at connect). A user who floods the socket with connections
/// fills that queue before the daemon's limits per user see them; a TaskEpilog that met it
/// gave up at once, and its job lost its final sample.
async fn try_once(socket: &Path, job: &str) -> Result<Option<String>, String> {
    match UnixStream::connect(socket).await {
        Ok(s) => ask(s, job).await.map(Some),
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => Ok(None),
        Err(e) => Err(format!("{}: {e}", socket.display())),
    }
}

/// The client side, run by the TaskEpilog: asks for the final sample of `job` and waits for
/// the answer, asking again after `busy` or `too-many`, or where the socket's queue is full,
/// for [`CLIENT_TIMEOUT`] in all. Errors are for the caller to print; the hook always exits 0.
pub async fn request(socket: &Path, job: &str) -> Result<String, String> {
    if !valid_job_id(job) {
        return Err(format!("{job:?} is not a job id"));
    }
    let deadline = tokio::time::Instant::now() + CLIENT_TIMEOUT;
    let mut pause = Duration::from_millis(50);
    loop {
        let answer = tokio::time::timeout_at(deadline, try_once(socket, job))
            .await
            .map_err(|_| "no answer in time".to_owned())??;
        // Jittered, so tasks that ended together do not ask together again.
        let wait = pause.mul_f64(0.5 + rand::random::<f64>());
        let last = tokio::time::Instant::now() + wait >= deadline;
        match answer {
            Some(answer) if !retryable(&answer) || last => return Ok(answer),
            None if last => {
                return Err(format!(
                    "{}: its queue of connections stayed full (a flood of them)",
                    socket.display()
                ));
            }
            _ => {}
        }
        tokio::time::sleep(wait).await;
        pause = (pause * 2).min(Duration::from_millis(500));
    }
}

/// Socket path for the client: the configured one, or the default when the configuration
/// cannot be read (the hook must not fail a job for that).
pub fn socket_path(configured: Option<&std::path::Path>) -> PathBuf {
    configured
        .map(ToOwned::to_owned)
        .unwrap_or_else(|| crate::sources::node::config::NodeConfig::default().hook_socket)
}
