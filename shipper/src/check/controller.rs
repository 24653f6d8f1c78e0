//! `--check`'s slurmctld row: which controller answers this host's Slurm commands, as
//! `scontrol ping` says (one ping RPC per controller; the head role never runs it).

use super::{Row, Status, row};
use crate::sources::head::command::SlurmCommands;

const CHECK: &str = "slurmctld";

/// One line of `scontrol ping`: `Slurmctld(primary) at head is UP`.
#[derive(Debug, PartialEq)]
pub struct Ping {
    /// `primary`, `backup`, `backup1`...
    pub role: String,
    pub host: String,
    pub up: bool,
}

/// The controllers `scontrol ping` lists, in its order (primary first); lines it does not know
/// are left out.
pub fn parse_ping(out: &str) -> Vec<Ping> {
    out.lines()
        .filter_map(|l| {
            let rest = l.trim().strip_prefix("Slurmctld(")?;
            let (role, rest) = rest.split_once(") at ")?;
            let (host, state) = rest.rsplit_once(" is ")?;
            Some(Ping { role: role.to_owned(), host: host.to_owned(), up: state.trim() == "UP" })
        })
        .collect()
}

/// The row: which controller answered and how; a failure where the head role needs it.
pub async fn slurmctld_row(cmds: &SlurmCommands, head: bool, conf_hosts: &[String]) -> Row {
    let miss = if head { Status::Fail } else { Status::Warn };
    let out = match cmds.run("scontrol", &["ping"]).await {
        Ok(o) => o.stdout,
        Err(e) => return row(CHECK, miss, format!("scontrol ping: {e}")),
    };
    judge(&parse_ping(&out), head, conf_hosts, &out)
}

fn judge(pings: &[Ping], head: bool, conf_hosts: &[String], raw: &str) -> Row {
    let miss = if head { Status::Fail } else { Status::Warn };
    let listed: Vec<String> =
        pings.iter().map(|p| format!("{} {} {}", p.role, p.host, if p.up { "UP" } else { "DOWN" })).collect();
    let listed = listed.join(", ");
    let here = |host: &str| if conf_hosts.iter().any(|h| h == host) { "" } else { " (not in slurm.conf)" };
    match pings.iter().position(|p| p.up) {
        None if pings.is_empty() => {
            let first = raw.lines().next().unwrap_or("(nothing)");
            row(CHECK, miss, format!("scontrol ping printed no controller: {first}"))
        }
        None => row(CHECK, miss, format!("no controller answers scontrol ping: {listed}")),
        Some(0) => {
            let p = &pings[0];
            row(
                CHECK,
                Status::Ok,
                format!(
                    "{} ({}){} answers Slurm's commands (scontrol ping: {listed})",
                    p.host,
                    p.role,
                    here(&p.host)
                ),
            )
        }
        Some(i) => row(
            CHECK,
            Status::Warn,
            format!(
                "the primary does not answer; {} ({}) answers Slurm's commands (scontrol ping: {listed})",
                pings[i].host, pings[i].role
            ),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ping_lines_and_the_row_they_make() {
        // Captured on the 22.05 bench; the backup lines as Slurm prints them (docs: scontrol(1)).
        let one = "Slurmctld(primary) at vm is UP\n";
        assert_eq!(parse_ping(one), [Ping { role: "primary".into(), host: "vm".into(), up: true }]);
        let r = judge(&parse_ping(one), true, &["vm".into()], one);
        assert_eq!(
            (r.status, r.detail.as_str()),
            (Status::Ok, "vm (primary) answers Slurm's commands (scontrol ping: primary vm UP)")
        );
        let failed_over = "Slurmctld(primary) at ctl-a is DOWN\nSlurmctld(backup1) at ctl-b is UP\n";
        let r = judge(&parse_ping(failed_over), true, &["ctl-a".into(), "ctl-b".into()], failed_over);
        assert_eq!(r.status, Status::Warn);
        assert!(r.detail.starts_with("the primary does not answer; ctl-b (backup1) answers"), "{}", r.detail);
        let down = "Slurmctld(primary) at ctl-a is DOWN\n";
        assert_eq!(judge(&parse_ping(down), true, &[], down).status, Status::Fail);
        assert_eq!(judge(&parse_ping(down), false, &[], down).status, Status::Warn);
        assert_eq!(judge(&[], true, &[], "error: x").detail, "scontrol ping printed no controller: error: x");
    }
}
