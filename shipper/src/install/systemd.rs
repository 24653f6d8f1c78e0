//! The shipper's unit and service, through systemctl.

use super::command::Runner;
use super::{InstallError, Root, UNIT_TEXT, files};

pub const SERVICE: &str = "slurm-cw-shipper";
const UNIT: &str = "/etc/systemd/system/slurm-cw-shipper.service";

/// Err names the command: "systemctl daemon-reload failed: ...".
pub fn daemon_reload(runner: &Runner) -> Result<(), InstallError> {
    runner.run("systemctl", &["daemon-reload"])
}

/// This host's systemd version (`systemctl --version`: `systemd 219`); None where it cannot say.
fn version(runner: &Runner) -> Option<u32> {
    let out = runner.output("systemctl", &["--version"]).ok()?;
    out.lines().next()?.strip_prefix("systemd ")?.split_whitespace().next()?.parse().ok()
}

/// The unit for a host whose systemd is `version`. Before 231 (Amazon Linux 2 has 219)
/// `SystemCallFilter=` knows no `@` groups: it takes `@system-service` for an unknown call,
/// skips it, and allows almost nothing else, so the daemon could not even load its libraries
/// and restarted every 5 s for good. There the filter is left out, and the memory cap is said
/// the old way too (`MemoryLimit=`: `MemoryMax=` came in 231). Such a systemd ignores, with a
/// warning, the rest it does not know (ProtectSystem=strict, StateDirectory=, OOMPolicy=...):
/// docs/deploying.md says what that leaves.
pub fn unit_for(version: Option<u32>) -> String {
    match version {
        Some(v) if v < 231 => UNIT_TEXT
            .lines()
            .filter(|l| !l.starts_with("SystemCallFilter=") && !l.starts_with("SystemCallErrorNumber="))
            .map(|l| match l.strip_prefix("MemoryMax=") {
                Some(max) => format!("{l}\nMemoryLimit={max}\n"),
                None => format!("{l}\n"),
            })
            .collect(),
        _ => UNIT_TEXT.to_owned(),
    }
}

/// Writes the unit (and reloads systemd) when it differs; true when it did.
pub fn install_unit(root: &Root, runner: &Runner) -> Result<bool, InstallError> {
    let wrote = files::write(&root.path(UNIT), unit_for(version(runner)).as_bytes(), 0o644)?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_old_systemd_gets_the_unit_without_the_filter_it_cannot_read() {
        assert_eq!(unit_for(Some(252)), UNIT_TEXT);
        assert_eq!(unit_for(None), UNIT_TEXT, "where systemctl cannot say");
        let al2 = unit_for(Some(219));
        assert!(!al2.contains("SystemCallFilter=") && !al2.contains("SystemCallErrorNumber="), "{al2}");
        assert!(al2.contains("ProtectSystem=") && al2.contains("MemoryMax=128M"), "the rest stays");
        assert!(al2.contains("\nMemoryLimit=128M\n"), "the cap 219 knows");
        assert_eq!(al2.lines().count(), UNIT_TEXT.lines().count() - 1);
    }
}
