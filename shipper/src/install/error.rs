//! Why an install step failed, as the steps hand it up: each names what a person would look
//! at next (the command and its standard error, the file and the operation, the unit's journal).

use crate::sources::head::command::CommandError;
use std::io;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    /// The installer's own runtime, through which every command runs.
    #[error("cannot start the async runtime: {0}")]
    Runtime(#[source] io::Error),
    #[error("{program} not found (looked in {looked})")]
    NotFound { program: String, looked: String },
    /// A command that ran and failed, or could not run: its exit status and first line of
    /// standard error, or its time limit.
    #[error("{command} failed: {source}")]
    Command { command: String, source: CommandError },
    /// `op` is what was being done: "read", "write", "create", "remove", "set the mode of".
    #[error("cannot {op} {}: {source}", .path.display())]
    File { path: PathBuf, op: &'static str, source: io::Error },
    #[error("{} has no directory", .0.display())]
    NoDirectory(PathBuf),
    #[error("cannot find this executable: {0}")]
    ThisExecutable(#[source] io::Error),
    /// Neither firewall tool: instance metadata cannot be restricted.
    #[error("neither iptables nor nft found")]
    NoFirewall,
    /// A step on a systemd unit, with where its own log is.
    #[error("{source} (journalctl -u {unit})")]
    Unit { unit: &'static str, source: Box<InstallError> },
    /// The boot unit that adds the IMDS rule again at every boot.
    #[error("setting up {unit} failed: {source}")]
    BootUnit { unit: &'static str, source: Box<InstallError> },
    #[error("--edit-slurm-conf: slurm.conf not found (give --slurm-conf)")]
    NoSlurmConf,
    /// slurm.conf (or a file it includes) could not be read.
    #[error(transparent)]
    SlurmConf(#[from] crate::slurm_conf::ReadError),
}

impl InstallError {
    pub fn file(path: &Path, op: &'static str, source: io::Error) -> InstallError {
        InstallError::File { path: path.to_owned(), op, source }
    }
}
