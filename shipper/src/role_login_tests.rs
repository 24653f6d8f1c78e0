//! `role = auto` on login nodes: AWS PCS's (root's Slurm release, slurm.conf naming a controller
//! elsewhere), any with sackd, and ParallelCluster's (no role: its head node ships).

use super::tests::{Host, fake_process, me, write_644};
use super::*;
use std::os::unix::fs::PermissionsExt;

fn mode(p: &Path, m: u32) {
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).unwrap();
}

/// AWS PCS's layout under `root/pcs`: `slurm-24.11/bin/sinfo`, as its AMIs install it.
fn pcs_release(h: &Host) -> std::path::PathBuf {
    let bin = h.root.path().join("pcs/slurm-24.11/bin");
    std::fs::create_dir_all(&bin).unwrap();
    for d in ["pcs", "pcs/slurm-24.11", "pcs/slurm-24.11/bin"] {
        mode(&h.root.path().join(d), 0o755);
    }
    write_644(&bin.join("sinfo"), "");
    mode(&bin.join("sinfo"), 0o755);
    bin.join("sinfo")
}

const LOGIN_CONF: &str =
    "ClusterName=pcs\nSlurmctldHost=slurmctld-primary(10.3.149.220)\nSlurmctldPort=6817\n";

#[test]
fn a_pcs_login_node_is_a_head_and_says_why() {
    let h = Host::new(LOGIN_CONF);
    mode(&h.root.path().join("slurm.conf"), 0o644);
    let no = h.role("login1", me()).unwrap_err();
    assert!(no.contains("no root-owned AWS PCS Slurm") && no.contains("--role"), "{no}");
    let sinfo = pcs_release(&h);
    let (role, why) = h.role("login1", me()).unwrap();
    assert_eq!(role, Role::Head);
    assert!(why.starts_with("an AWS PCS login node") && why.contains("slurmctld-primary elsewhere"), "{why}");
    // Where a daemon runs, it decides: a compute node with PCS's tree is a node.
    fake_process(h.root.path(), 10, "slurmd", 0, "slurmd");
    assert_eq!(h.role("login1", me()).unwrap().0, Role::Node);
    std::fs::remove_dir_all(h.root.path().join("proc/10")).unwrap();
    // What others may write is not believed: the program, then slurm.conf.
    mode(&sinfo, 0o777);
    let no = h.role("login1", me()).unwrap_err();
    assert!(no.contains("is not a root-owned program"), "{no}");
    mode(&sinfo, 0o755);
    mode(&h.root.path().join("slurm.conf"), 0o666);
    assert!(h.role("login1", me()).unwrap_err().contains("not root's or SlurmUser's"));
    // Not root's at all: no PCS release counts.
    mode(&h.root.path().join("slurm.conf"), 0o644);
    assert!(h.role("login1", me().wrapping_add(1)).is_err());
}

#[test]
fn slurmds_configless_cache_is_a_compute_node_whose_slurmd_is_down_not_a_login_node() {
    let h = Host::new("");
    pcs_release(&h);
    // /run/slurm/conf -> SlurmdSpoolDir/conf-cache, as configless slurmd links it.
    let cache = h.root.path().join("spool/slurmd/conf-cache");
    std::fs::create_dir_all(&cache).unwrap();
    write_644(&cache.join("slurm.conf"), LOGIN_CONF);
    std::fs::remove_file(h.root.path().join("slurm.conf")).unwrap();
    std::os::unix::fs::symlink(cache.join("slurm.conf"), h.root.path().join("slurm.conf")).unwrap();
    let no = h.role("compute-1", me()).unwrap_err();
    assert!(no.contains("slurmd's configless cache"), "{no}");
}

#[test]
fn sackd_makes_a_login_node_and_a_users_sackd_does_not() {
    let h = Host::new("SlurmctldHost=ctl\nSlurmUser=64030\n");
    fake_process(h.root.path(), 20, "sackd", 1000, "sackd");
    assert!(h.role("login1", me()).is_err(), "a user's program named sackd");
    fake_process(h.root.path(), 21, "sackd", 64030, "sackd");
    assert_eq!(
        h.role("login1", me()).unwrap(),
        (Role::Head, "a login node: sackd runs here, neither slurmctld nor slurmd; slurmctld is ctl".into())
    );
}

#[test]
fn a_parallelcluster_login_node_gets_no_role() {
    let h = Host::new(LOGIN_CONF);
    pcs_release(&h);
    write_644(&h.root.path().join("cfnconfig"), "cfn_node_type=LoginNode\n");
    let no = h.role("login1", me()).unwrap_err();
    assert!(no.starts_with("a ParallelCluster login node") && no.contains("head node ships"), "{no}");
}
