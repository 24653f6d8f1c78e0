//! The final sample of a job that ends between two collections.
//!
//! Slurm removes a job's cgroup as soon as its last step ends, before the Epilog runs, so the
//! Epilog is too late to read peak memory or total CPU time. The TaskEpilog still runs inside
//! the job (as its user) while the cgroup exists: `infra/slurm/task-epilog.sh` runs
//! `slurm-cw-shipper --job-ended $SLURM_JOB_ID`, which asks the daemon over a Unix socket to
//! sample that job now and waits (at most [`CLIENT_TIMEOUT`]) for the answer. The daemon serves
//! only root and the job's own user, and at most one final sample per job per second.

use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::{mpsc, oneshot};

/// How long the hook waits for the daemon; a job's end must not wait longer on us.
pub const CLIENT_TIMEOUT: Duration = Duration::from_secs(3);

/// A request from the hook, handed to the main loop.
#[derive(Debug)]
pub struct Request {
    pub job: String,
    /// The requesting process's uid, from the socket's peer credentials.
    pub uid: u32,
    pub reply: oneshot::Sender<Answer>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// Sampled; the number of job cgroups read.
    Sampled(usize),
    /// The requester is neither root nor the job's user.
    Denied,
    /// Asked again within a second.
    TooSoon,
}

impl Answer {
    fn line(&self) -> String {
        match self {
            Answer::Sampled(n) => format!("ok {n}\n"),
            Answer::Denied => "denied\n".into(),
            Answer::TooSoon => "too-soon\n".into(),
        }
    }
}

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

/// Accepts hook connections until the receiver of `tx` is gone.
pub async fn serve(listener: UnixListener, tx: mpsc::Sender<Request>) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        if tx.is_closed() {
            return;
        }
        let tx = tx.clone();
        tokio::spawn(async move {
            if let Err(e) = handle(stream, tx).await {
                tracing::debug!(error = %e, "hook connection failed");
            }
        });
    }
}

async fn handle(stream: UnixStream, tx: mpsc::Sender<Request>) -> std::io::Result<()> {
    let uid = stream.peer_cred()?.uid();
    let (read, mut write) = stream.into_split();
    let mut line = String::new();
    let mut reader = BufReader::new(read.take(128));
    tokio::time::timeout(CLIENT_TIMEOUT, reader.read_line(&mut line))
        .await
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "no request"))??;
    let job = line.trim();
    if !valid_job_id(job) {
        write.write_all(b"bad-request\n").await?;
        return Ok(());
    }
    let (reply, answer) = oneshot::channel();
    if tx.send(Request { job: job.to_owned(), uid, reply }).await.is_err() {
        return Ok(());
    }
    if let Ok(a) = answer.await {
        write.write_all(a.line().as_bytes()).await?;
    }
    Ok(())
}

/// The client side, run by the TaskEpilog: asks for the final sample of `job` and waits for
/// the answer. Errors are for the caller to print; the hook always exits 0.
pub async fn request(socket: &Path, job: &str) -> Result<String, String> {
    if !valid_job_id(job) {
        return Err(format!("{job:?} is not a job id"));
    }
    let exchange = async {
        let mut s = UnixStream::connect(socket).await.map_err(|e| format!("{}: {e}", socket.display()))?;
        s.write_all(format!("{job}\n").as_bytes()).await.map_err(|e| e.to_string())?;
        let mut answer = String::new();
        BufReader::new(s).read_line(&mut answer).await.map_err(|e| e.to_string())?;
        Ok::<String, String>(answer.trim().to_owned())
    };
    tokio::time::timeout(CLIENT_TIMEOUT, exchange).await.map_err(|_| "no answer in time".to_owned())?
}

/// Socket path for the client: the configured one, or the default when the configuration
/// cannot be read (the hook must not fail a job for that).
pub fn socket_path(config: Option<&crate::config::Config>) -> PathBuf {
    config
        .map(|c| c.node.hook_socket.clone())
        .unwrap_or_else(|| crate::config::NodeConfig::default().hook_socket)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn job_ids() {
        assert!(valid_job_id("123"));
        assert!(valid_job_id("123_4"));
        assert!(!valid_job_id(""));
        assert!(!valid_job_id("1; rm -rf /"));
        assert!(!valid_job_id(&"1".repeat(65)));
    }

    #[tokio::test]
    async fn request_and_answer_over_the_socket() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/hook.sock");
        let listener = bind(&path).unwrap();
        let (tx, mut rx) = mpsc::channel(4);
        tokio::spawn(serve(listener, tx));
        tokio::spawn(async move {
            while let Some(r) = rx.recv().await {
                let a = if r.job == "7" { Answer::Sampled(1) } else { Answer::Denied };
                assert_eq!(r.uid, unsafe { libc::getuid() });
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
}
