//! `head.metrics_token_user` set to slurm.conf's SlurmUser: that user's token is good for
//! every Slurm RPC and goes to the endpoint in clear text, so the shipper refuses to start with
//! it (exit 2, naming the key) and `--check` fails its row as a configuration error.

mod common;

use common::shipper;

#[test]
fn slurm_user_as_the_token_user_is_refused_naming_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("slurm.conf");
    std::fs::write(&conf, "ClusterName=tokens\nSlurmctldHost=head(127.0.0.1)\nSlurmUser=slurm\n").unwrap();
    let run = |user: &str, args: &[&str]| {
        shipper()
            .args(args)
            .env("SLURM_CW_SLURM__CONF", &conf)
            .env("SLURM_CW_HEAD__METRICS_TOKEN_USER", user)
            .env("SLURM_CW_SINK", "stdout")
            .env("SLURM_CW_NODE__CGROUP_ROOT", dir.path())
            .env("SLURM_CW_GPU__ENABLED", "off")
            .output()
            .unwrap()
    };
    for args in [&["--once", "--role", "head"][..], &["--role", "head"][..]] {
        let out = run("slurm", args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr
                .contains("bad configuration: head.metrics_token_user: \"slurm\" is slurm.conf's SlurmUser"),
            "{stderr}"
        );
    }
    let out = run("slurm", &["--check", "--role", "head"]);
    let table = String::from_utf8_lossy(&out.stdout);
    let row = table.lines().find(|l| l.starts_with("token user")).unwrap_or_default();
    assert!(row.contains("FAIL") && row.contains("SlurmUser"), "{table}");
    assert_eq!(out.status.code(), Some(2), "{table}");
    // Another user is no configuration error.
    let out = run("slurm-metrics", &["--check", "--role", "head"]);
    let table = String::from_utf8_lossy(&out.stdout);
    let row = table.lines().find(|l| l.starts_with("token user")).unwrap_or_default();
    assert!(row.contains(" ok "), "{table}");
    assert_ne!(out.status.code(), Some(2), "{table}");
}
