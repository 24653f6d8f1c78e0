//! End-to-end golden files: the real binary's whole `--once --sink stdout` output for a fixture
//! node (cgroup v2 tree, /proc, EFA, RAPL and Lustre under a sys root) and a fixture head node
//! (fake sinfo, squeue and sdiag printing the real Slurm 22.05 captures), compared line by line
//! with `tests/fixtures/golden/*.txt`. Any change in what is shipped shows up here and in review.
//!
//! `UPDATE_GOLDEN=1 cargo test -p slurm-cw-shipper --test it golden::` rewrites the files.

use crate::common::{golden_sys_root, shipper};
use serde_json::Value;
use slurm_cw_catalog::Metric;
use slurm_cw_catalog::metrics::{
    SHIPPER_COLLECTION_DURATION, SHIPPER_CPU_USAGE, SHIPPER_MEMORY_RSS, SLURMCTLD_RESPONSE_TIME,
};
use slurm_cw_shipper::sources::node::owner::user_name;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// Figures measured on the host running the test (the shipper's own cost, how long a command
/// took): their lines are kept, their values masked.
const HOST_DEPENDENT: &[&Metric] =
    &[&SHIPPER_COLLECTION_DURATION, &SHIPPER_CPU_USAGE, &SHIPPER_MEMORY_RSS, &SLURMCTLD_RESPONSE_TIME];

/// Fields that hold the time of the run.
const TIME_FIELDS: &[&str] = &["timestamp", "time", "Time"];

/// The fixture processes' uid, whose name comes from this host's passwd database.
const FIXTURE_UID: u32 = 1000;

/// One line's JSON with times, host-measured values and the host's name for the fixture uid
/// replaced by placeholders.
fn mask(v: &mut Value, user: &str) {
    let Value::Object(m) = v else { return };
    let metric = m.get("metric").and_then(Value::as_str).unwrap_or_default();
    if HOST_DEPENDENT.iter().any(|h| h.name == metric) {
        for k in ["value", "values", "counts"] {
            if let Some(x) = m.get_mut(k) {
                *x = Value::from("<host>");
            }
        }
    }
    for (k, x) in m.iter_mut() {
        if TIME_FIELDS.contains(&k.as_str()) {
            *x = Value::from("<time>");
        } else if HOST_DEPENDENT.iter().any(|h| h.name == k) {
            // The same figures as a record's fields (the head's scheduler_sample).
            *x = Value::from("<host>");
        } else if k == "RecordId"
            && let Some((who, _millis)) = x.as_str().and_then(|id| id.rsplit_once(":scheduler:"))
        {
            // A scheduler_sample's id ends in the time it was made.
            *x = Value::from(format!("{who}:scheduler:<time>"));
        } else if k == "User" && x.as_str() == Some(user) {
            *x = Value::from(format!("<uid {FIXTURE_UID}>"));
        } else {
            mask(x, user);
        }
    }
}

/// stdout as sorted, masked lines (the order of lines within a flush is not a promise).
fn normalise(stdout: &str) -> Vec<String> {
    let user = user_name(FIXTURE_UID).unwrap_or_else(|| FIXTURE_UID.to_string());
    let mut lines: Vec<String> = stdout
        .lines()
        .map(|l| {
            let mut v: Value = serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}"));
            mask(&mut v, &user);
            v.to_string()
        })
        .collect();
    lines.sort();
    lines
}

/// Compares with the checked-in file, or rewrites it with UPDATE_GOLDEN=1.
fn check_golden(name: &str, stdout: &str) {
    let got = normalise(stdout);
    let path = fixtures().join("golden").join(name);
    if std::env::var_os("UPDATE_GOLDEN").is_some_and(|v| v == "1") {
        std::fs::write(&path, got.join("\n") + "\n").unwrap();
        return;
    }
    let want_text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let want: Vec<String> = want_text.lines().map(str::to_owned).collect();
    if got == want {
        return;
    }
    // Both sides are sorted: a merge gives what went and what came.
    let (mut i, mut j, mut diff) = (0, 0, Vec::new());
    while i < want.len() || j < got.len() {
        match (want.get(i), got.get(j)) {
            (Some(w), Some(g)) if w == g => (i, j) = (i + 1, j + 1),
            (Some(w), Some(g)) if w < g => {
                diff.push(format!("- {w}"));
                i += 1;
            }
            (Some(w), None) => {
                diff.push(format!("- {w}"));
                i += 1;
            }
            (_, Some(g)) => {
                diff.push(format!("+ {g}"));
                j += 1;
            }
            (None, None) => break,
        }
    }
    panic!(
        "the shipped output differs from {} ({} line(s); - expected, + shipped now):\n{}\n\n\
         If the change is intended: UPDATE_GOLDEN=1 cargo test -p slurm-cw-shipper --test it golden::, \
         and review the file's diff.",
        path.display(),
        diff.len(),
        diff.join("\n")
    );
}

/// Runs the binary once; its stdout.
fn run_once(role: &str, env: &[(&str, &Path)], node: &str, bin_dir: &Path) -> String {
    let out = shipper()
        .args(["--once", "--sink", "stdout", "--role", role])
        .env("SLURM_CW_CLUSTER_NAME", "golden")
        .env("SLURM_CW_NODE_NAME", node)
        .env("SLURM_CW_GPU__ENABLED", "off")
        .env("SLURM_CW_SLURM__BIN_DIR", bin_dir)
        .envs(env.iter().map(|(k, v)| (*k, *v)))
        .output()
        .unwrap();
    assert!(out.status.success(), "shipper failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn node_role_ships_what_the_golden_file_says() {
    let tmp = tempfile::tempdir().unwrap();
    // One sys root with EFA ports, RAPL zones and a Lustre client (debugfs).
    let sys = golden_sys_root(tmp.path());
    // No Slurm commands: accounts come from the jobs' environment (marked unverified).
    let bin = tmp.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let (cgroup, proc) = (fixtures().join("cgroup/v2-kernel-docs"), fixtures().join("proc/slurm-job-1001"));
    let env = [
        ("SLURM_CW_NODE__CGROUP_ROOT", cgroup.as_path()),
        ("SLURM_CW_NODE__PROC_ROOT", proc.as_path()),
        ("SLURM_CW_NODE__SYS_ROOT", sys.as_path()),
    ];
    check_golden("node.txt", &run_once("node", &env, "c3", &bin));
}

#[test]
fn head_role_ships_what_the_golden_file_says() {
    let tmp = tempfile::tempdir().unwrap();
    let bin = tmp.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let captures = fixtures().join("../../../formats/tests/fixtures/slurm/22.05");
    for program in ["sinfo", "squeue", "sdiag"] {
        let (d, p) = (captures.display(), bin.join(program));
        let body = format!(
            "#!/bin/sh\ncase \"$*\" in\n--version) cat '{d}/version.txt' ;;\n*--json*) cat '{d}/{program}.json' ;;\n*) cat '{d}/{program}.txt' ;;\nesac\n"
        );
        std::fs::write(&p, body).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    check_golden("head.txt", &run_once("head", &[], "head1", &bin));
}
