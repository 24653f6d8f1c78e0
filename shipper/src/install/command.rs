//! The commands the installer runs (systemctl, iptables, ip6tables, scontrol, logger), each
//! with an argv, a time limit and bounded output, through the head collector's runner.

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
    pub fn new() -> Result<Runner, String> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start the async runtime: {e}"))?;
        // No bin_dir: PATH, then /opt/slurm/bin (ParallelCluster's scontrol).
        let commands = SlurmCommands::new(None, TIMEOUT).with_limits(OUTPUT_MAX, OUTPUT_MAX);
        Ok(Runner { commands, runtime })
    }

    /// Runs `program args...`; Err says why it did not succeed (not found, its exit status and
    /// first line of standard error, a timeout).
    pub fn run(&self, program: &str, args: &[&str]) -> Result<(), String> {
        tracing::debug!(program, ?args, "running");
        match self.runtime.block_on(self.commands.run(program, args)) {
            Ok(_) => Ok(()),
            Err(CommandError::NotFound(p, looked)) => Err(format!("{p} not found (looked in {looked})")),
            Err(e) => Err(e.to_string()),
        }
    }

    /// True when `program` is installed.
    pub fn has(&self, program: &str) -> bool {
        self.commands.locate(program).is_ok()
    }

    /// True when `program args...` exits 0 (queries: `systemctl is-active`, `iptables -C`).
    pub fn succeeds(&self, program: &str, args: &[&str]) -> bool {
        self.run(program, args).is_ok()
    }
}
