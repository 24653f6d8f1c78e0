//! Where the installer reports: standard error (ParallelCluster and PCS keep a lifecycle
//! script's output), the log file on the node, and one journal line when something failed.

use super::command::Runner;
use super::{InstallError, Root};
use tracing_subscriber::Layer;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

/// The installer's log on the node; the boot scripts append their own lines to it too.
pub const LOG_FILE: &str = "/var/log/slurm-cw-shipper/install.log";
/// The journal's tag (`journalctl -t slurm-cw-shipper`).
const TAG: &str = "slurm-cw-shipper";

/// Logs at info to standard error and to [`LOG_FILE`] (appended); the file's path as seen on
/// the node. RUST_LOG asks for more or less.
pub fn init(root: &Root) -> String {
    let path = root.path(LOG_FILE);
    let file = path.parent().map(|dir| {
        super::files::create_dir(dir, 0o755)?;
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(|e| InstallError::file(&path, "open", e))
    });
    let filter = || {
        std::env::var("RUST_LOG")
            .ok()
            .and_then(|f| tracing_subscriber::EnvFilter::try_new(f).ok())
            .unwrap_or_else(|| tracing_subscriber::EnvFilter::new("info"))
    };
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let stderr =
        tracing_subscriber::fmt::layer().with_writer(std::io::stderr).with_ansi(ansi).with_target(false);
    let (file_layer, error) = match file {
        Some(Ok(f)) => (
            Some(
                tracing_subscriber::fmt::layer()
                    .with_writer(std::sync::Mutex::new(f))
                    .with_ansi(false)
                    .with_target(false),
            ),
            None,
        ),
        Some(Err(e)) => (None, Some(e.to_string())),
        None => (None, Some("no directory".into())),
    };
    let _ = tracing_subscriber::registry()
        .with(stderr.with_filter(filter()))
        .with(file_layer.map(|l| l.with_filter(filter())))
        .try_init();
    if let Some(e) = error {
        tracing::warn!(path = %path.display(), "cannot write the log file ({e}): standard error only");
    }
    LOG_FILE.to_owned()
}

/// One line to the system journal through `logger` (absent: the log file has it all).
pub fn journal(runner: &Runner, priority: &str, message: &str) {
    let prio = format!("user.{priority}");
    if let Err(e) = runner.run("logger", &["-t", TAG, "-p", &prio, "--", message]) {
        tracing::debug!("journal line not written: {e}");
    }
}
