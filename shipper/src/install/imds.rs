//! Instance metadata for root only. The instance role's credentials come from IMDS
//! (169.254.169.254) to any local user; with them a job (or a login node's user) could write
//! metrics and job records as the node, and on AWS PCS a role that may call
//! `pcs:RegisterComputeNodeGroupInstance` hands out the cluster's Munge key. An iptables rule
//! rejects every other user's packets to it (ip6tables for fd00:ec2::254), or, where iptables
//! is missing, one nftables table covering both; a oneshot unit adds them again at boot.
//! A failure is a warning and a journal line, and with `--strict` the run's exit 1; IPv6 left
//! open (no ip6tables beside iptables) is a warning and a journal line.

use super::command::Runner;
use super::{IMDS_UNIT_TEXT, InstallError, Root, files, log, systemd};

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

/// nftables where iptables is missing: one `inet` table, both addresses, loaded whole and
/// replacing an earlier copy (the first two lines), so that loading it again adds nothing. The
/// boot unit loads the same file.
pub const NFT_FILE: &str = "/etc/slurm-cw-shipper/imds.nft";
pub const NFT_TABLE: [&str; 2] = ["inet", "slurm_cw_imds"];
pub const NFT_RULESET: &str =
    "# Written by `slurm-cw-shipper install` where iptables is missing: instance metadata (IMDS)
# for root only, both address families. slurm-cw-imds-restrict.service loads it at boot.
table inet slurm_cw_imds
delete table inet slurm_cw_imds
table inet slurm_cw_imds {
\tchain output {
\t\ttype filter hook output priority 0; policy accept;
\t\tip daddr 169.254.169.254 meta skuid != 0 reject
\t\tip6 daddr fd00:ec2::254 meta skuid != 0 reject
\t}
}
";

/// Adds the rules and the boot unit; the changes made, and the problem when IPv4 IMDS stays
/// open or the unit could not be set.
pub fn restrict(root: &Root, runner: &Runner, changes: &mut Vec<String>) -> Result<(), InstallError> {
    let mut problem = None;
    let rules = if runner.has("iptables") {
        with_iptables(runner, changes)
    } else if runner.has("nft") {
        tracing::info!("iptables not found: IMDS restricted with nftables");
        with_nft(root, runner, changes)
    } else {
        Err(InstallError::NoFirewall)
    };
    if let Err(e) = rules {
        tracing::warn!("IMDS stays open to every user: {e}");
        problem.get_or_insert(e);
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
        let e = InstallError::BootUnit { unit: SERVICE, source: Box::new(e) };
        tracing::warn!("{e}");
        problem.get_or_insert(e);
    }
    problem.map_or(Ok(()), Err)
}

/// The iptables rule (required) and the ip6tables one (said loudly when it cannot be set).
fn with_iptables(runner: &Runner, changes: &mut Vec<String>) -> Result<(), InstallError> {
    let mut v4 = Ok(());
    for (tool, addr, required) in ENDPOINTS {
        let outcome = runner.find(tool).and_then(|()| {
            if runner.succeeds(tool, &args("-C", addr)) {
                tracing::info!("IMDS ({addr}) already restricted to root");
                return Ok(());
            }
            runner.run(tool, &args("-I", addr)).map(|()| {
                tracing::info!("IMDS ({addr}) restricted to root: {tool} -I {}", rule(addr).join(" "));
                changes.push(format!("IMDS rule for {addr}"));
            })
        });
        match outcome {
            Err(e) if required => v4 = Err(e),
            // Open only where the instance enables IMDS over IPv6; it still must be seen.
            Err(e) => {
                let msg = format!(
                    "IMDS over IPv6 ({addr}) stays OPEN to every user where the instance enables it: {e}"
                );
                tracing::warn!("{msg}");
                log::journal(runner, "warning", &msg);
            }
            Ok(()) => {}
        }
    }
    v4
}

/// The nftables table, from [`NFT_FILE`]: loaded when the file changed or the table is missing.
fn with_nft(root: &Root, runner: &Runner, changes: &mut Vec<String>) -> Result<(), InstallError> {
    let file = root.path(NFT_FILE);
    if let Some(dir) = file.parent() {
        files::create_dir(dir, 0o755)?;
    }
    let wrote = files::write(&file, NFT_RULESET.as_bytes(), 0o644)?;
    let [family, table] = NFT_TABLE;
    if !wrote && runner.succeeds("nft", &["list", "table", family, table]) {
        tracing::info!("IMDS already restricted to root (nftables table {family} {table})");
        return Ok(());
    }
    let path = file.to_string_lossy();
    runner.run("nft", &["-f", &path])?;
    tracing::info!("IMDS (169.254.169.254, fd00:ec2::254) restricted to root: nft -f {NFT_FILE}");
    changes.push(format!("IMDS nftables table {family} {table}"));
    Ok(())
}

/// `--no-imds-restriction`: the rules and the boot unit taken away where an earlier run added
/// them.
pub fn open(root: &Root, runner: &Runner, changes: &mut Vec<String>) -> Result<(), InstallError> {
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
    let nft = root.path(NFT_FILE);
    if runner.has("nft") && runner.succeeds("nft", &["list", "table", NFT_TABLE[0], NFT_TABLE[1]]) {
        runner.run("nft", &["delete", "table", NFT_TABLE[0], NFT_TABLE[1]])?;
        tracing::info!("removed the IMDS nftables table (--no-imds-restriction)");
        changes.push("IMDS nftables table removed".into());
    }
    if nft.exists() {
        files::remove(&nft)?;
        changes.push(format!("{NFT_FILE} removed"));
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
