//! `slurm-cw-shipper install`: sets a node up the way every boot path needs (ParallelCluster's
//! OnNodeConfigured action, AWS PCS's lifecycle scripts, by hand): the role and cluster found by
//! the daemon's own code, the configuration, the systemd unit, the TaskEpilog, this binary, IMDS
//! for root only where jobs or login users run, and the service started.
//!
//! Every change is checked for first, so a second run changes nothing and says so. A failed
//! step stops the run, is logged (standard error, [`log::LOG_FILE`], one journal line) and
//! exits 0, so a node's boot goes on; `--strict` makes it exit 1. Bad arguments exit 2.

mod command;
mod error;
mod files;
mod imds;
mod log;
mod plan;
mod slurm_conf_edit;
mod steps;
mod systemd;

use std::path::PathBuf;

use error::InstallError;
pub use files::Root;

/// Where the pieces go, as seen on the node (under `--root`).
pub const BIN: &str = "/usr/local/bin/slurm-cw-shipper";
pub const EPILOG: &str = "/opt/slurm-cw-shipper/task-epilog.sh";
pub const CONFIG: &str = crate::settings::DEFAULT_PATH;

/// The TaskEpilog and the unit, built in: the repository's files are the one copy.
pub const EPILOG_TEXT: &str = include_str!("../../../infra/slurm/task-epilog.sh");
pub const UNIT_TEXT: &str = include_str!("../../../infra/systemd/slurm-cw-shipper.service");
pub const IMDS_UNIT_TEXT: &str = include_str!("../../../infra/systemd/slurm-cw-imds-restrict.service");

#[derive(Debug, Clone, clap::Args)]
pub struct InstallArgs {
    /// Install under this directory instead of / (a fake node tree for tests: etc/, proc/,
    /// opt/, ...). Commands (systemctl, iptables, logger, scontrol) are still found in PATH.
    #[arg(long, value_name = "DIR", default_value = "/")]
    pub root: PathBuf,
    /// The node's role; detected as the daemon does when not given (ParallelCluster's node
    /// type, slurmctld or slurmd running, slurm.conf naming this host). PCS compute node groups
    /// run before slurmd starts: pass `--role node` there.
    #[arg(long, value_enum)]
    pub role: Option<crate::config::Role>,
    /// The ClusterName dimension; default slurm.conf's ClusterName, else ParallelCluster's
    /// cluster name (cfnconfig `stack_name`). Must match the Terraform module's.
    #[arg(long, value_name = "NAME")]
    pub cluster_name: Option<String>,
    /// CloudWatch namespace; default none written, so the shipper uses Slurm/<cluster>.
    #[arg(long, value_name = "NS")]
    pub namespace: Option<String>,
    /// slurm.conf, as a path on the node; default the first of /opt/slurm/etc, /etc/slurm,
    /// /etc/slurm-llnl that has one. Written to the configuration when given.
    #[arg(long, value_name = "PATH")]
    pub slurm_conf: Option<PathBuf>,
    /// Leave instance metadata open to every user (and take an earlier restriction away).
    #[arg(long)]
    pub no_imds_restriction: bool,
    /// Head node of a cluster that cannot set TaskEpilog through its own settings: add
    /// TaskEpilog= to slurm.conf when none is set and run `scontrol reconfigure`.
    #[arg(long)]
    pub edit_slurm_conf: bool,
    /// Exit 1 when a step fails (default: log it and exit 0, so the node's boot goes on).
    #[arg(long)]
    pub strict: bool,
    /// The executable to install as /usr/local/bin/slurm-cw-shipper (default: this one).
    #[arg(long, value_name = "FILE")]
    pub binary: Option<PathBuf>,
}

/// Why a run stopped.
#[derive(Debug)]
pub enum Stop {
    /// A step failed: logged, exit 0 (1 with `--strict`).
    Failed(String),
    /// The arguments cannot work: exit 2, nothing done.
    BadArguments(String),
}

/// A failed step stops the run; its text is what the log and the journal line say.
impl From<InstallError> for Stop {
    fn from(e: InstallError) -> Stop {
        Stop::Failed(e.to_string())
    }
}

/// Runs the installer; the process's exit status.
pub fn run(args: &InstallArgs) -> u8 {
    let root = Root::new(&args.root);
    let log_path = log::init(&root);
    let runner = match command::Runner::new() {
        Ok(r) => r,
        Err(e) => {
            tracing::error!("cannot start: {e}");
            return if args.strict { 1 } else { 0 };
        }
    };
    let outcome = steps::run(args, &root, &runner);
    match outcome {
        Ok(changes) if changes.is_empty() => {
            tracing::info!("done: nothing changed");
            0
        }
        Ok(changes) => {
            tracing::info!("done: {}", changes.join(", "));
            0
        }
        Err(Stop::BadArguments(why)) => {
            tracing::error!("bad arguments: {why}");
            log::journal(&runner, "err", &format!("install: bad arguments: {why} (see {log_path})"));
            2
        }
        Err(Stop::Failed(why)) => {
            tracing::error!("failed: {why}");
            log::journal(&runner, "err", &format!("install failed: {why} (see {log_path})"));
            if args.strict {
                1
            } else {
                tracing::warn!(
                    "exit status 0 all the same, so the node's boot goes on (--strict would fail it)"
                );
                0
            }
        }
    }
}
