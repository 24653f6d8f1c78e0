//! The commands the installer runs (systemctl, iptables, ip6tables, scontrol, logger), each
//! with an argv, a time limit and bounded output, through the head collector's runner.

use super::InstallError;
use crate::sources::head::command::{CommandError, SlurmCommands};
use std::time::Duration;

/// systemctl waits for a unit's start (`enable --now`); the unit's own start takes a second.
const TIMEOUT: Duration = Duration::from_secs(90);
const OUTPUT_MAX: usize = 64 << 10;

pub struct Runner {
    commands: SlurmCommands,
    runtime: tokio::runtime::Runtime,
}

impl Runner {
    pub fn new() -> Result<Runner, InstallError> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(InstallError::Runtime)?;
        // No bin_dir: PATH, then /opt/slurm/bin (ParallelCluster's scontrol).
        let commands = SlurmCommands::new(None, TIMEOUT).with_limits(OUTPUT_MAX, OUTPUT_MAX);
        Ok(Runner { commands, runtime })
    }

    /// Runs `program args...`; Err names the command and says why it did not succeed (not
    /// found, its exit status and first line of standard error, a timeout).
    pub fn run(&self, program: &str, args: &[&str]) -> Result<(), InstallError> {
        tracing::debug!(program, ?args, "running");
        let command = || std::iter::once(program).chain(args.iter().copied()).collect::<Vec<_>>().join(" ");
        match self.runtime.block_on(self.commands.run(program, args)) {
            Ok(_) => Ok(()),
            Err(e) => Err(failed(command(), e)),
        }
    }

    /// What `program args...` prints; Err as [`Runner::run`]'s.
    pub fn output(&self, program: &str, args: &[&str]) -> Result<String, InstallError> {
        let command = || std::iter::once(program).chain(args.iter().copied()).collect::<Vec<_>>().join(" ");
        match self.runtime.block_on(self.commands.run(program, args)) {
            Ok(out) => Ok(out.stdout),
            Err(e) => Err(failed(command(), e)),
        }
    }

    /// Ok when `program` is installed; Err says where it was looked for.
    pub fn find(&self, program: &str) -> Result<(), InstallError> {
        self.commands.locate(program).map(|_| ()).map_err(|e| failed(program.to_owned(), e))
    }

    /// True when `program` is installed.
    pub fn has(&self, program: &str) -> bool {
        self.find(program).is_ok()
    }

    /// True when `program args...` exits 0 (queries: `systemctl is-active`, `iptables -C`).
    pub fn succeeds(&self, program: &str, args: &[&str]) -> bool {
        self.run(program, args).is_ok()
    }
}

fn failed(command: String, e: CommandError) -> InstallError {
    match e {
        // The head collector's own text speaks of slurm.bin_dir, which means nothing here.
        CommandError::NotFound(program, looked) => InstallError::NotFound { program, looked },
        source => InstallError::Command { command, source },
    }
}
