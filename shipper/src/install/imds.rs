//! Instance metadata for root only. The instance role's credentials come from IMDS
//! (169.254.169.254) to any local user; with them a job (or a login node's user) could write
//! metrics and job records as the node. An iptables rule rejects every other user's packets to
//! it (ip6tables for fd00:ec2::254 where there is one), and a oneshot unit adds it again at boot.
//! Never fatal: a failure is a warning and one journal line.

use super::command::Runner;
use super::{IMDS_UNIT_TEXT, Root, files, systemd};

pub const SERVICE: &str = "slurm-cw-imds-restrict.service";
const UNIT: &str = "/etc/systemd/system/slurm-cw-imds-restrict.service";

/// The rule after the chain's operation (`-C`, `-I`, `-D`); the boot unit has the same words.
pub fn rule(addr: &str) -> [&str; 10] {
    ["OUTPUT", "-d", addr, "-m", "owner", "!", "--uid-owner", "0", "-j", "REJECT"]
}

/// IPv4 is required; IPv6 best effort (IMDS answers there only where the instance enables it).
pub const ENDPOINTS: [(&str, &str, bool); 2] =
    [("iptables", "169.254.169.254/32", true), ("ip6tables", "fd00:ec2::254/128", false)];

fn args<'a>(op: &'a str, addr: &'a str) -> Vec<&'a str> {
    let mut v = vec!["-w", op];
    v.extend(rule(addr));
    v
}

/// Adds the rules and the boot unit; the changes made, and the problem when the IPv4 rule or
/// the unit could not be set.
pub fn restrict(root: &Root, runner: &Runner, changes: &mut Vec<String>) -> Result<(), String> {
    let mut problem = None;
    for (tool, addr, required) in ENDPOINTS {
        let outcome = if !runner.has(tool) {
            Err(format!("{tool} not found"))
        } else if runner.succeeds(tool, &args("-C", addr)) {
            tracing::info!("IMDS ({addr}) already restricted to root");
            Ok(())
        } else {
            runner.run(tool, &args("-I", addr)).map(|()| {
                tracing::info!("IMDS ({addr}) restricted to root: {tool} -I {}", rule(addr).join(" "));
                changes.push(format!("IMDS rule for {addr}"));
            })
        };
        match outcome {
            Err(e) if required => {
                tracing::warn!("IMDS stays open to every user: {e}");
                problem.get_or_insert(e);
            }
            Err(e) => tracing::info!("IMDS over IPv6 not restricted: {e}"),
            Ok(()) => {}
        }
    }
    // Again at every boot, before slurmd takes jobs.
    let unit = root.path(UNIT);
    let boot = files::write(&unit, IMDS_UNIT_TEXT.as_bytes(), 0o644).and_then(|wrote| {
        if wrote {
            tracing::info!("installed {UNIT}");
            changes.push(UNIT.into());
            systemd::daemon_reload(runner)?;
        }
        if !runner.succeeds("systemctl", &["is-enabled", "--quiet", SERVICE]) {
            runner.run("systemctl", &["enable", SERVICE])?;
            tracing::info!("enabled {SERVICE} (the rule again at boot)");
            changes.push(format!("{SERVICE} enabled"));
        }
        Ok(())
    });
    if let Err(e) = boot {
        tracing::warn!("setting up {SERVICE} failed: {e}");
        problem.get_or_insert(format!("setting up {SERVICE} failed: {e}"));
    }
    problem.map_or(Ok(()), Err)
}

/// `--no-imds-restriction`: the rules and the boot unit taken away where an earlier run added
/// them.
pub fn open(root: &Root, runner: &Runner, changes: &mut Vec<String>) -> Result<(), String> {
    for (tool, addr, _) in ENDPOINTS {
        if !runner.has(tool) {
            continue;
        }
        // The rule may have been added more than once (by hand, by an old bootstrap).
        for _ in 0..10 {
            if !runner.succeeds(tool, &args("-C", addr)) {
                break;
            }
            runner.run(tool, &args("-D", addr))?;
            tracing::info!("removed the IMDS rule for {addr} (--no-imds-restriction)");
            changes.push(format!("IMDS rule for {addr} removed"));
        }
    }
    let unit = root.path(UNIT);
    if unit.exists() {
        runner.run("systemctl", &["disable", SERVICE])?;
        files::remove(&unit)?;
        systemd::daemon_reload(runner)?;
        tracing::info!("removed {UNIT} (--no-imds-restriction)");
        changes.push(format!("{UNIT} removed"));
    }
    tracing::info!("IMDS left open to every user (--no-imds-restriction)");
    Ok(())
}
