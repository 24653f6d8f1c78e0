//! `role = auto` is not fooled by a name: a real process named `slurmctld`, started by a user,
//! does not make `--check` call this host a head node.

use crate::common;

use common::*;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Child, Command};

const NOBODY: u32 = 65534;

fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() }
}

/// A copy of sleep(1) named `slurmctld` in `dir`, running as `uid` (only root can pick).
fn fake_slurmctld(dir: &Path, uid: Option<u32>) -> Child {
    let sleep = ["/usr/bin/sleep", "/bin/sleep"].into_iter().find(|p| Path::new(p).is_file()).unwrap();
    let prog = dir.join("slurmctld");
    if !prog.exists() {
        std::fs::copy(sleep, &prog).unwrap();
        std::fs::set_permissions(&prog, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let mut c = Command::new(&prog);
    c.arg("300");
    if let Some(uid) = uid {
        use std::os::unix::process::CommandExt;
        c.uid(uid).gid(uid);
    }
    past_etxtbsy(|| c.spawn()).unwrap()
}

/// Links these processes into `proc_root` (spawn returns once the child has exec'd, so each
/// already has its program's name).
fn expose(proc_root: &Path, pids: &[u32]) {
    for pid in pids {
        std::os::unix::fs::symlink(format!("/proc/{pid}"), proc_root.join(pid.to_string())).unwrap();
    }
}

/// The detail of `--check`'s role row, with these processes as all of /proc.
fn role_row(dir: &Path) -> String {
    let out = shipper()
        .arg("--check")
        .env("SLURM_CW_CLUSTER_NAME", "rolecheck")
        .env("SLURM_CW_NODE__PROC_ROOT", dir.join("proc"))
        .env("SLURM_CW_SLURM__CONF", dir.join("slurm.conf"))
        .env("SLURM_CW_GPU__ENABLED", "off")
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .env("AWS_REGION", "us-east-1")
        .env("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.lines().find(|l| l.starts_with("role")).unwrap_or_else(|| panic!("no role row: {text}")).to_owned()
}

struct Kill(Vec<Child>);

impl Drop for Kill {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn host() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    // The user the fake runs as must reach its program.
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::create_dir(dir.path().join("proc")).unwrap();
    std::fs::write(dir.path().join("slurm.conf"), "ClusterName=rolecheck\nSlurmctldHost=elsewhere\n")
        .unwrap();
    dir
}

#[test]
fn a_users_process_named_slurmctld_does_not_make_a_head_node() {
    let dir = host();
    // As root, the fake runs as nobody; otherwise as this (non-root) user.
    let as_user = (euid() == 0).then_some(NOBODY);
    let mut kids = Kill(vec![fake_slurmctld(dir.path(), as_user)]);
    expose(&dir.path().join("proc"), &[kids.0[0].id()]);
    let row = role_row(dir.path());
    assert!(row.contains("FAIL") && row.contains("cannot tell this host's role"), "{row}");

    if euid() == 0 {
        // The same program run by root is taken for slurmctld: the check above saw the process.
        let real = fake_slurmctld(dir.path(), None);
        expose(&dir.path().join("proc"), &[real.id()]);
        kids.0.push(real);
        let row = role_row(dir.path());
        assert!(row.contains("head (slurmctld runs here)"), "{row}");
    } else {
        eprintln!("not root: the control (the same program run by root counts) is left out");
    }
}

#[ignore = "needs the Slurm bench: scripts/test.sh runs it"]
#[test]
fn on_a_slurmd_node_a_users_slurmctld_leaves_it_a_node() {
    let Some(_conf) = slurm() else { return };
    let dir = host();
    let slurmds: Vec<u32> = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == "slurmd")
        })
        .collect();
    assert!(!slurmds.is_empty(), "the bench runs slurmd");
    let kids = Kill(vec![fake_slurmctld(dir.path(), Some(NOBODY))]);
    let mut pids = slurmds.clone();
    pids.push(kids.0[0].id());
    expose(&dir.path().join("proc"), &pids);
    let row = role_row(dir.path());
    assert!(row.contains("node (slurmd runs here)"), "{row}");
}
