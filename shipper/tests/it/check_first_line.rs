//! `--check` on a host without instance metadata (a plain VM, a GPU host outside EC2): the
//! table is the first thing printed, standard output and standard error together as a
//! terminal shows them. The AWS SDK warned at each retry of its metadata look-ups before it
//! (eight long WARN lines); those belong at debug, where they still show.

use crate::common::shipper;
use std::process::Stdio;

/// `--check` with no AWS settings and instance metadata refused: everything it printed, in
/// order, and its exit status.
fn check(dir: &std::path::Path, level: Option<&str>) -> (String, Option<i32>) {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let out = dir.join(format!("out-{}", level.unwrap_or("default")));
    let file = std::fs::File::create(&out).unwrap();
    let mut c = shipper();
    for (k, _) in std::env::vars() {
        if k.starts_with("AWS_") {
            c.env_remove(k);
        }
    }
    if let Some(l) = level {
        c.env("SLURM_CW_LOG__LEVEL", l);
    }
    let status = c
        .args(["--check", "--role", "node"])
        .env("AWS_EC2_METADATA_SERVICE_ENDPOINT", format!("http://{closed}"))
        .env("AWS_CONFIG_FILE", dir.join("no-config"))
        .env("AWS_SHARED_CREDENTIALS_FILE", dir.join("no-credentials"))
        .env("SLURM_CW_CLUSTER_NAME", "plainvm")
        .env("SLURM_CW_NODE__CGROUP_ROOT", dir)
        .env("SLURM_CW_GPU__ENABLED", "off")
        .stdin(Stdio::null())
        .stdout(file.try_clone().unwrap())
        .stderr(file)
        .status()
        .unwrap();
    (std::fs::read_to_string(&out).unwrap(), status.code())
}

#[test]
fn check_without_instance_metadata_prints_its_table_first() {
    let dir = tempfile::tempdir().unwrap();
    let (text, code) = check(dir.path(), None);
    let first = text.lines().next().unwrap_or_default();
    assert!(
        first.starts_with("CHECK") && first.contains("STATUS"),
        "the first line is the table's header:\n{text}"
    );
    assert!(!text.contains("aws_config"), "no SDK line at the default level:\n{text}");
    // What the SDK could not find is in the table.
    let region = text.lines().find(|l| l.starts_with("aws region")).unwrap_or_default();
    assert!(region.contains("FAIL") && region.contains("instance metadata"), "{text}");
    assert_eq!(code, Some(1), "{text}");
    // Asked for, the SDK's own lines still show.
    let (text, _) = check(dir.path(), Some("debug"));
    assert!(text.contains("aws_config"), "the SDK's look-ups at debug:\n{text}");
}
