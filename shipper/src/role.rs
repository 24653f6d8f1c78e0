//! Which role this host plays: `head` (slurmctld, or a login node: see [`login_node`]),
//! `node` (slurmd), or `all`.

use std::path::Path;

/// This host's role, and why: `configured` (`role`, None for `auto`), else what the host shows
/// (its processes under `proc_root`, its slurm.conf).
pub fn detect(
    configured: Option<Role>,
    proc_root: &Path,
    slurm_conf: Option<&Path>,
) -> Result<(Role, String), RoleError> {
    let host = short_hostname();
    resolve(
        configured,
        &Probe {
            cfnconfig: Path::new("/etc/parallelcluster/cfnconfig"),
            proc_root,
            slurm_conf,
            hostname: &host,
            trusted_owner: 0,
            pcs_root: Path::new(crate::sources::head::command::PCS_SCHEDULER),
        },
    )
}

pub use crate::config::Role;

/// Why `role = "auto"` found no role: the process exits 2 with it (pass `--role`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RoleError {
    /// ParallelCluster says this is a login node: its head node ships the cluster's figures.
    #[error(
        "a ParallelCluster login node ({}): its head node ships the cluster's figures, so role = \
         auto ships none here; pass --role head only if the head node runs no shipper",
        cfnconfig.display()
    )]
    ParallelClusterLoginNode { cfnconfig: std::path::PathBuf },
    /// Nothing here says what this host is; `not_login` says why it is no login node either.
    #[error(
        "cannot tell this host's role: no ParallelCluster node type, no slurmctld or slurmd \
         running as root or SlurmUser, slurm.conf does not name it SlurmctldHost, and it is no \
         login node ({not_login}); pass --role node|head|all"
    )]
    Undetermined { not_login: String },
}

/// Where to look, so tests can point at a fake root.
pub struct Probe<'a> {
    /// ParallelCluster's `/etc/parallelcluster/cfnconfig` (it holds `cfn_node_type=`).
    pub cfnconfig: &'a Path,
    pub proc_root: &'a Path,
    pub slurm_conf: Option<&'a Path>,
    pub hostname: &'a str,
    /// Who must own the files trusted here (cfnconfig, a daemon's executable): root, or the
    /// test's own user in tests.
    pub trusted_owner: u32,
    /// Where AWS PCS installs Slurm (`/opt/aws/pcs/scheduler`).
    pub pcs_root: &'a Path,
}

/// The role and why it was chosen, or why none could be.
///
/// Only what a job's user cannot fake counts: root's ParallelCluster file, slurm.conf naming
/// this host, Slurm daemons run by root or `SlurmUser` from a root-owned program, and root's
/// Slurm tree. A process name alone does not: anyone can run a program named `slurmctld`.
pub fn resolve(setting: Option<Role>, probe: &Probe) -> Result<(Role, String), RoleError> {
    if let Some(role) = setting {
        return Ok((role, "configured".into()));
    }
    if let Some(found) = parallelcluster_role(probe) {
        return found;
    }
    let entries = probe.slurm_conf.and_then(|c| crate::slurm_conf::entries(c).ok()).unwrap_or_default();
    let users = daemon_users(&entries);
    let ctld = daemon_running(probe, "slurmctld", &users);
    let slurmd = daemon_running(probe, "slurmd", &users);
    let named = crate::slurm_conf::controller_hosts(&entries).iter().any(|h| h == probe.hostname);
    let mut why = Vec::new();
    if ctld {
        why.push("slurmctld runs here".to_owned());
    }
    if named && let Some(conf) = probe.slurm_conf {
        why.push(format!("{} names this host as SlurmctldHost", conf.display()));
    }
    if slurmd {
        why.push("slurmd runs here".to_owned());
    }
    let role = match (ctld || named, slurmd) {
        (true, true) => Role::All,
        (true, false) => Role::Head,
        (false, true) => Role::Node,
        (false, false) => {
            return login_node(probe, &entries, &users)
                .map(|why| (Role::Head, why))
                .map_err(|not_login| RoleError::Undetermined { not_login });
        }
    };
    Ok((role, why.join(", ")))
}

/// Why this host, where neither slurmctld nor slurmd runs, is a login node whose Slurm clients
/// reach slurmctld elsewhere (the head role then reads the cluster from here), or why not.
///
/// Either Slurm's login-node daemon `sackd` runs (as root or SlurmUser, from a root-owned
/// program), or AWS PCS's root-owned Slurm release is here with its sinfo, and a slurm.conf of
/// root (or SlurmUser) names a controller elsewhere. Not when that slurm.conf is slurmd's
/// configless cache (a `conf-cache` directory): that is a compute node whose slurmd is not
/// running (yet), which must not ship the cluster's figures.
fn login_node(probe: &Probe, entries: &[(String, String)], users: &[u32]) -> Result<String, String> {
    let controller = crate::slurm_conf::controller_hosts(entries).into_iter().next();
    let at = controller.as_deref().map(|c| format!("; slurmctld is {c}")).unwrap_or_default();
    if daemon_running(probe, "sackd", users) {
        return Ok(format!("a login node: sackd runs here, neither slurmctld nor slurmd{at}"));
    }
    let root = probe.pcs_root.display();
    let bin =
        crate::sources::head::command::pcs_bin_dir(probe.pcs_root, probe.trusted_owner).ok_or_else(|| {
            format!("no sackd runs, and no root-owned AWS PCS Slurm in {root}/slurm-<version>/bin")
        })?;
    let sinfo = bin.join("sinfo");
    if !std::fs::metadata(&sinfo).is_ok_and(|m| m.is_file() && owned_by(&m, probe.trusted_owner)) {
        return Err(format!("{} is not a root-owned program", sinfo.display()));
    }
    let conf = probe.slurm_conf.ok_or("no slurm.conf")?;
    let owner_ok = |m: &std::fs::Metadata| {
        owned_by(m, probe.trusted_owner) || users.iter().any(|&u| u != 0 && owned_by(m, u))
    };
    if !std::fs::metadata(conf).is_ok_and(|m| owner_ok(&m)) {
        return Err(format!("{} is not root's or SlurmUser's alone", conf.display()));
    }
    let Some(controller) = controller else {
        return Err(format!("{} names no SlurmctldHost", conf.display()));
    };
    let real = std::fs::canonicalize(conf).unwrap_or_else(|_| conf.to_owned());
    if real.components().any(|c| c.as_os_str() == "conf-cache") {
        return Err(format!(
            "{} is slurmd's configless cache ({}): a compute node whose slurmd is not running",
            conf.display(),
            real.display()
        ));
    }
    Ok(format!(
        "an AWS PCS login node: root's Slurm in {}, {} names slurmctld {controller} elsewhere, \
         neither slurmctld nor slurmd runs here",
        bin.display(),
        conf.display()
    ))
}

/// The node type in ParallelCluster's cfnconfig, when root owns the file and alone may write it.
/// A login node gets no role: its cluster's head node runs the head role already, and the
/// cluster's figures shipped twice would count twice (sums, rates, slurmctld's load).
fn parallelcluster_role(probe: &Probe) -> Option<Result<(Role, String), RoleError>> {
    let path = probe.cfnconfig;
    let meta = std::fs::metadata(path).ok()?;
    if !owned_by(&meta, probe.trusted_owner) {
        tracing::warn!(path = %path.display(), "ignored: not owned by root or writable by others");
        return None;
    }
    let text = std::fs::read_to_string(path).ok()?;
    let value = text.lines().find_map(|l| l.trim().strip_prefix("cfn_node_type="))?;
    match value.trim().trim_matches('"') {
        "HeadNode" | "MasterServer" => {
            Some(Ok((Role::Head, format!("ParallelCluster head node ({})", path.display()))))
        }
        "ComputeFleet" => {
            Some(Ok((Role::Node, format!("ParallelCluster compute node ({})", path.display()))))
        }
        "LoginNode" => Some(Err(RoleError::ParallelClusterLoginNode { cfnconfig: path.to_owned() })),
        _ => None,
    }
}

/// True when `meta` belongs to `owner` and neither its group nor others may write it.
pub(crate) fn owned_by(meta: &std::fs::Metadata, owner: u32) -> bool {
    use std::os::unix::fs::MetadataExt;
    meta.uid() == owner && meta.mode() & 0o022 == 0
}

/// The users a Slurm daemon runs as: root, and slurm.conf's `SlurmUser` (root when unset).
pub(crate) fn daemon_users(entries: &[(String, String)]) -> Vec<u32> {
    let mut users = vec![0];
    if let Some(name) = crate::slurm_conf::value(entries, "SlurmUser") {
        match name.parse::<u32>().ok().or_else(|| crate::sys::user::uid_of(&name)) {
            Some(uid) => users.push(uid),
            None => tracing::warn!(user = %name, "slurm.conf's SlurmUser is no user on this host"),
        }
    }
    users
}

/// True when a Slurm daemon `name` runs: a process of that name whose real uid is one of
/// `users` and whose program is a file owned by root (`probe.trusted_owner`).
pub fn daemon_running(probe: &Probe, name: &str, users: &[u32]) -> bool {
    let Ok(dir) = std::fs::read_dir(probe.proc_root) else {
        return false;
    };
    dir.flatten()
        .filter(|e| e.file_name().to_str().is_some_and(|s| s.bytes().all(|b| b.is_ascii_digit())))
        .filter(|e| std::fs::read_to_string(e.path().join("comm")).is_ok_and(|c| c.trim_end() == name))
        .any(|e| match untrusted_because(&e.path(), users, probe.trusted_owner) {
            None => true,
            Some(why) => {
                tracing::warn!(pid = %e.file_name().to_string_lossy(), "a process named {name} is not taken for Slurm's: {why}");
                false
            }
        })
}

/// Why the process at `dir` is not Slurm's daemon, or None when it is.
fn untrusted_because(dir: &Path, users: &[u32], owner: u32) -> Option<String> {
    let status = std::fs::read_to_string(dir.join("status")).unwrap_or_default();
    let real_uid = status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse::<u32>().ok());
    match real_uid {
        None => return Some("its uid cannot be read".into()),
        Some(uid) if !users.contains(&uid) => {
            return Some(format!("uid {uid} is neither root nor SlurmUser"));
        }
        Some(_) => {}
    }
    // The program (/proc/<pid>/exe, readable by root) must be a root-owned file. Its name may
    // differ (Debian's is slurmd-wlm, linked as slurmd); a user runs nothing as root or SlurmUser.
    let exe = dir.join("exe");
    let target = std::fs::read_link(&exe).unwrap_or_default();
    match std::fs::metadata(&exe) {
        Ok(meta) if owned_by(&meta, owner) => None,
        Ok(_) => Some(format!("{} is not a root-owned file", target.display())),
        Err(e) => Some(format!("its program cannot be read ({e})")),
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

    /// A fake /proc entry: name, real uid, and a program file of `exe` (made in `bin`).
    pub(super) fn fake_process(root: &Path, pid: u32, comm: &str, uid: u32, exe: &str) {
        let p = root.join("proc").join(pid.to_string());
        std::fs::create_dir_all(&p).unwrap();
        std::fs::write(p.join("comm"), format!("{comm}\n")).unwrap();
        std::fs::write(p.join("status"), format!("Name:\t{comm}\nUid:\t{uid}\t{uid}\t{uid}\t{uid}\n"))
            .unwrap();
        let bin = root.join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        write_644(&bin.join(exe), "");
        std::os::unix::fs::symlink(bin.join(exe), p.join("exe")).unwrap();
    }

    /// Whatever the umask: files trusted only when group and others cannot write them.
    pub(super) fn write_644(path: &Path, text: &str) {
        use std::os::unix::fs::PermissionsExt;
        std::fs::write(path, text).unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o644)).unwrap();
    }

    pub(super) fn me() -> u32 {
        crate::sys::euid()
    }

    pub(super) struct Host {
        pub(super) root: tempfile::TempDir,
    }

    impl Host {
        pub(super) fn new(conf: &str) -> Host {
            let root = tempfile::tempdir().unwrap();
            std::fs::create_dir_all(root.path().join("proc")).unwrap();
            std::fs::write(root.path().join("slurm.conf"), conf).unwrap();
            Host { root }
        }

        pub(super) fn role(&self, host: &str, owner: u32) -> Result<(Role, String), String> {
            let (cfn, proc_root, conf, pcs) = (
                self.root.path().join("cfnconfig"),
                self.root.path().join("proc"),
                self.root.path().join("slurm.conf"),
                self.root.path().join("pcs"),
            );
            let probe = Probe {
                cfnconfig: &cfn,
                proc_root: &proc_root,
                slurm_conf: Some(&conf),
                hostname: host,
                trusted_owner: owner,
                pcs_root: &pcs,
            };
            resolve(None, &probe).map_err(|e| e.to_string())
        }
    }

    #[test]
    fn detection_order() {
        let h = Host::new("SlurmctldHost=headhost(10.0.0.1)\n");
        assert!(h.role("other", me()).unwrap_err().contains("--role"));
        assert_eq!(h.role("headhost", me()).unwrap().0, Role::Head);
        fake_process(h.root.path(), 10, "slurmd", 0, "slurmd");
        assert_eq!(h.role("other", me()).unwrap().0, Role::Node);
        assert_eq!(h.role("headhost", me()).unwrap().0, Role::All);
        fake_process(h.root.path(), 11, "slurmctld", 0, "slurmctld");
        assert_eq!(
            h.role("other", me()).unwrap(),
            (Role::All, "slurmctld runs here, slurmd runs here".into())
        );
        write_644(&h.root.path().join("cfnconfig"), "stack_name=x\ncfn_node_type=ComputeFleet\n");
        assert_eq!(h.role("other", me()).unwrap().0, Role::Node);
        write_644(&h.root.path().join("cfnconfig"), "cfn_node_type=HeadNode\n");
        assert_eq!(h.role("other", me()).unwrap().0, Role::Head);
    }

    #[test]
    fn a_users_process_named_slurmctld_on_a_slurmd_node_leaves_it_a_node() {
        let h = Host::new("SlurmctldHost=headhost\nSlurmUser=64030\n");
        fake_process(h.root.path(), 10, "slurmd", 0, "slurmd");
        // `exec -a` does not change comm, but a program (or a link to one) named so does, and
        // so does prctl(PR_SET_NAME).
        fake_process(h.root.path(), 20, "slurmctld", 1000, "slurmctld");
        fake_process(h.root.path(), 21, "slurmctld", 1000, "python3");
        assert_eq!(h.role("c1", me()).unwrap(), (Role::Node, "slurmd runs here".into()));
        // SlurmUser's own slurmctld, from a root-owned program, counts.
        fake_process(h.root.path(), 22, "slurmctld", 64030, "slurmctld");
        assert_eq!(h.role("c1", me()).unwrap().0, Role::All);
    }

    #[test]
    fn files_root_does_not_own_are_not_believed() {
        let h = Host::new("SlurmctldHost=headhost\n");
        fake_process(h.root.path(), 11, "slurmctld", 0, "slurmctld");
        write_644(&h.root.path().join("cfnconfig"), "cfn_node_type=HeadNode\n");
        assert_eq!(h.role("c1", me()).unwrap().0, Role::Head);
        // Owned by someone else than the trusted owner: neither the program nor cfnconfig counts.
        assert!(h.role("c1", me().wrapping_add(1)).unwrap_err().contains("--role"));
        // Writable by others: cfnconfig does not count, the daemon (its program is fine) does.
        use std::os::unix::fs::PermissionsExt;
        let cfn = h.root.path().join("cfnconfig");
        std::fs::set_permissions(&cfn, std::fs::Permissions::from_mode(0o666)).unwrap();
        std::fs::write(&cfn, "cfn_node_type=ComputeFleet\n").unwrap();
        assert_eq!(h.role("c1", me()).unwrap(), (Role::Head, "slurmctld runs here".into()));
    }

    #[test]
    fn slurm_user_by_name() {
        let entries = vec![("SlurmUser".to_owned(), "root".to_owned())];
        assert_eq!(daemon_users(&entries), vec![0, 0]);
    }
}

#[cfg(test)]
#[path = "role_login_tests.rs"]
mod login_tests;
