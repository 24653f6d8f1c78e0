//! The shipper's unit and service, through systemctl.

use super::command::Runner;
use super::{InstallError, Root, UNIT_TEXT, files};

pub const SERVICE: &str = "slurm-cw-shipper";
const UNIT: &str = "/etc/systemd/system/slurm-cw-shipper.service";

/// Err names the command: "systemctl daemon-reload failed: ...".
pub fn daemon_reload(runner: &Runner) -> Result<(), InstallError> {
    runner.run("systemctl", &["daemon-reload"])
}

/// Writes the unit (and reloads systemd) when it differs; true when it did.
pub fn install_unit(root: &Root, runner: &Runner) -> Result<bool, InstallError> {
    let wrote = files::write(&root.path(UNIT), UNIT_TEXT.as_bytes(), 0o644)?;
    if wrote {
        tracing::info!("installed {UNIT}");
        daemon_reload(runner)?;
    }
    Ok(wrote)
}

/// Enabled and running; restarted when what it runs changed. What was done, if anything.
pub fn ensure_running(runner: &Runner, changed: bool) -> Result<Option<&'static str>, InstallError> {
    // The unit's own log says why it would not start.
    let fail = |e| InstallError::Unit { unit: SERVICE, source: Box::new(e) };
    if !runner.succeeds("systemctl", &["is-enabled", "--quiet", SERVICE]) {
        runner.run("systemctl", &["enable", "--now", SERVICE]).map_err(fail)?;
        tracing::info!("{SERVICE} enabled and started");
        Ok(Some("service enabled and started"))
    } else if !runner.succeeds("systemctl", &["is-active", "--quiet", SERVICE]) {
        runner.run("systemctl", &["start", SERVICE]).map_err(fail)?;
        tracing::info!("{SERVICE} started");
        Ok(Some("service started"))
    } else if changed {
        runner.run("systemctl", &["restart", SERVICE]).map_err(fail)?;
        tracing::info!("{SERVICE} restarted");
        Ok(Some("service restarted"))
    } else {
        tracing::info!("{SERVICE} running");
        Ok(None)
    }
}
