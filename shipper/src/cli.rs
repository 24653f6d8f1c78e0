//! The command line. Other tools and tests rely on these flags; keep them stable.

use clap::{Parser, Subcommand};
use std::path::PathBuf;

#[derive(Debug, Parser)]
#[command(
    name = "slurm-cw-shipper",
    version,
    about = "Ships Slurm job, node and scheduler metrics to Amazon CloudWatch",
    after_help = "Configuration: TOML (default /etc/slurm-cw-shipper/config.toml); SLURM_CW_<KEY> and \
                  SLURM_CW_<SECTION>__<KEY> override keys. Exit status 2 means bad configuration."
)]
pub struct Cli {
    /// Configuration file (TOML).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Which collectors run; detected when not given (slurmctld: head, slurmd: node).
    #[arg(long, value_enum)]
    pub role: Option<crate::config::Role>,
    /// Collect once, flush once, exit (0 when delivered).
    #[arg(long)]
    pub once: bool,
    /// Where figures go (overrides `sink`): one destination or several, comma-separated
    /// (`cloudwatch,prometheus`); `stdout` prints one JSON line per datum.
    #[arg(long, value_delimiter = ',', value_parser = crate::sinks::SinkKind::parse)]
    pub sink: Vec<crate::sinks::SinkKind>,
    /// Check the configuration and what the shipper needs here, print a table, exit.
    #[arg(long, conflicts_with = "once")]
    pub check: bool,
    /// For Slurm's TaskEpilog: ask the running daemon for the final sample of this job while
    /// its cgroup still exists. Always exits 0, so a job never fails for it.
    #[arg(long, value_name = "JOBID", conflicts_with_all = ["once", "check"])]
    pub job_ended: Option<String>,
    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Sets this node up: the binary, the configuration, the systemd unit, the TaskEpilog, IMDS
    /// for root only, the service started. Idempotent. Exit status: 0 done (or a step failed
    /// without --strict, logged), 1 a step failed with --strict, 2 bad arguments.
    Install(crate::install::InstallArgs),
    /// A job's CPU, memory and GPU use, read back from the job log group, with advice.
    /// Exit status: 0 printed, 1 no records or the group cannot be read, 2 bad arguments.
    Report {
        /// The Slurm job id.
        job: String,
        /// One JSON object on standard output, for scripts.
        #[arg(long)]
        json: bool,
        /// The cluster (its log group is /slurm-cw/<cluster>/jobs unless logs.group says).
        #[arg(long, value_name = "NAME")]
        cluster: Option<String>,
    },
}

impl Cli {
    /// Applies the command line over the configuration file.
    pub fn apply_to(&self, config: &mut crate::settings::Settings) {
        use crate::sinks::Sinks;
        if self.role.is_some() {
            config.role = self.role;
        }
        if !self.sink.is_empty() {
            // Each named once (`--sink stdout,stdout` means stdout).
            let mut kinds = Vec::new();
            for k in &self.sink {
                if !kinds.contains(k) {
                    kinds.push(*k);
                }
            }
            config.sink = Sinks::new(kinds).unwrap_or_default();
        }
    }
}
