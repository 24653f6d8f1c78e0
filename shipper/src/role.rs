//! Which role this host plays: `head` (slurmctld), `node` (slurmd), or `all`.

use crate::config::{Config, RoleSetting};
use std::path::Path;

/// This host's role, and why: the configured one, else what the host shows.
pub fn detect(config: &Config) -> Result<(Role, String), String> {
    let conf = config.slurm_conf_path();
    let host = short_hostname();
    resolve(
        config.role,
        &Probe {
            cfnconfig: Path::new("/etc/parallelcluster/cfnconfig"),
            proc_root: &config.node.proc_root,
            slurm_conf: conf.as_deref(),
            hostname: &host,
        },
    )
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Node,
    Head,
    All,
}

impl Role {
    pub fn runs_head(self) -> bool {
        matches!(self, Role::Head | Role::All)
    }

    pub fn runs_node(self) -> bool {
        matches!(self, Role::Node | Role::All)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Role::Node => "node",
            Role::Head => "head",
            Role::All => "all",
        }
    }
}

/// Where to look, so tests can point at a fake root.
pub struct Probe<'a> {
    /// ParallelCluster's `/etc/parallelcluster/cfnconfig` (it holds `cfn_node_type=`).
    pub cfnconfig: &'a Path,
    pub proc_root: &'a Path,
    pub slurm_conf: Option<&'a Path>,
    pub hostname: &'a str,
}

/// The role and why it was chosen, or why none could be.
pub fn resolve(setting: RoleSetting, probe: &Probe) -> Result<(Role, String), String> {
    match setting {
        RoleSetting::Node => return Ok((Role::Node, "configured".into())),
        RoleSetting::Head => return Ok((Role::Head, "configured".into())),
        RoleSetting::All => return Ok((Role::All, "configured".into())),
        RoleSetting::Auto => {}
    }
    if let Ok(text) = std::fs::read_to_string(probe.cfnconfig) {
        for line in text.lines() {
            if let Some(v) = line.trim().strip_prefix("cfn_node_type=") {
                match v.trim().trim_matches('"') {
                    "HeadNode" | "MasterServer" => {
                        return Ok((
                            Role::Head,
                            format!("ParallelCluster head node ({})", probe.cfnconfig.display()),
                        ));
                    }
                    "ComputeFleet" => {
                        return Ok((
                            Role::Node,
                            format!("ParallelCluster compute node ({})", probe.cfnconfig.display()),
                        ));
                    }
                    _ => {}
                }
            }
        }
    }
    let ctld = process_running(probe.proc_root, "slurmctld");
    let slurmd = process_running(probe.proc_root, "slurmd");
    match (ctld, slurmd) {
        (true, true) => return Ok((Role::All, "slurmctld and slurmd run here".into())),
        (true, false) => return Ok((Role::Head, "slurmctld runs here".into())),
        (false, true) => return Ok((Role::Node, "slurmd runs here".into())),
        (false, false) => {}
    }
    if let Some(conf) = probe.slurm_conf
        && let Ok(entries) = crate::slurm_conf::entries(conf)
        && crate::slurm_conf::controller_hosts(&entries).iter().any(|h| h == probe.hostname)
    {
        return Ok((Role::Head, format!("{} names this host as SlurmctldHost", conf.display())));
    }
    Err("cannot tell this host's role: no ParallelCluster node type, no slurmctld or slurmd \
         running, and slurm.conf does not name it SlurmctldHost; pass --role node|head|all"
        .into())
}

/// True when a process whose command name is `name` runs (read from /proc/<pid>/comm).
pub fn process_running(proc_root: &Path, name: &str) -> bool {
    let Ok(dir) = std::fs::read_dir(proc_root) else {
        return false;
    };
    dir.flatten()
        .filter(|e| e.file_name().to_str().is_some_and(|s| s.bytes().all(|b| b.is_ascii_digit())))
        .any(|e| std::fs::read_to_string(e.path().join("comm")).is_ok_and(|c| c.trim_end() == name))
}

/// This host's name in the figures it ships.
impl Config {
    /// The `NodeName` dimension of this host.
    pub fn node_name(&self) -> String {
        self.node_name.clone().unwrap_or_else(short_hostname)
    }
}

/// The host name up to its first dot.
pub fn short_hostname() -> String {
    let raw = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    let name = raw.trim().split('.').next().unwrap_or("").to_owned();
    if name.is_empty() { "unknown-host".to_owned() } else { name }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fake_proc(dir: &Path, procs: &[(u32, &str)]) {
        for (pid, comm) in procs {
            let p = dir.join(pid.to_string());
            std::fs::create_dir_all(&p).unwrap();
            std::fs::write(p.join("comm"), format!("{comm}\n")).unwrap();
        }
    }

    #[test]
    fn detection_order() {
        let root = tempfile::tempdir().unwrap();
        let proc_root = root.path().join("proc");
        std::fs::create_dir_all(&proc_root).unwrap();
        let cfn = root.path().join("cfnconfig");
        let conf = root.path().join("slurm.conf");
        std::fs::write(&conf, "SlurmctldHost=headhost(10.0.0.1)\n").unwrap();
        let probe = |host: &'static str| Probe {
            cfnconfig: &cfn,
            proc_root: &proc_root,
            slurm_conf: Some(&conf),
            hostname: host,
        };

        assert!(resolve(RoleSetting::Auto, &probe("other")).unwrap_err().contains("--role"));
        assert_eq!(resolve(RoleSetting::Auto, &probe("headhost")).unwrap().0, Role::Head);
        fake_proc(&proc_root, &[(10, "slurmd")]);
        assert_eq!(resolve(RoleSetting::Auto, &probe("other")).unwrap().0, Role::Node);
        fake_proc(&proc_root, &[(11, "slurmctld")]);
        assert_eq!(resolve(RoleSetting::Auto, &probe("other")).unwrap().0, Role::All);
        std::fs::write(&cfn, "stack_name=x\ncfn_node_type=ComputeFleet\n").unwrap();
        assert_eq!(resolve(RoleSetting::Auto, &probe("other")).unwrap().0, Role::Node);
        std::fs::write(&cfn, "cfn_node_type=HeadNode\n").unwrap();
        assert_eq!(resolve(RoleSetting::Auto, &probe("other")).unwrap().0, Role::Head);
        assert_eq!(resolve(RoleSetting::Node, &probe("other")).unwrap().0, Role::Node);
    }
}
