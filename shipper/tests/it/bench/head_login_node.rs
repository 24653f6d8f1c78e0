//! The head role where no slurmctld runs, as on a login node (AWS PCS: the controller lives in
//! another account): the binary in a PID namespace of its own, which shows it no Slurm daemon,
//! reads the real bench through the Slurm clients. Forced with `--role head`, and with `role =
//! auto` on a fake AWS PCS login node (its Slurm under /opt/aws/pcs/scheduler, another host
//! name, a $PATH without Slurm).

use crate::common;

use common::*;
use slurm_cw_catalog::metrics::{CPUS_TOTAL, NODE_COUNT, SLURMCTLD_UP};
use std::collections::BTreeMap;
use std::ffi::CString;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;

/// What sinfo says of the cluster: state -> nodes, and CPUs.
type Truth = (BTreeMap<String, f64>, f64);
/// Cluster-wide data shipped: (metric, its State or "") -> value.
type Shipped = BTreeMap<(String, String), f64>;

/// What sinfo says, each node once.
fn sinfo_truth() -> Truth {
    let mut seen = std::collections::HashSet::new();
    let (mut states, mut cpus) = (BTreeMap::new(), 0.0);
    for line in cmd("sinfo", &["-h", "-N", "-o", "%N %T %c"]).lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        let [node, state, c] = f[..] else { continue };
        if seen.insert(node.to_owned()) {
            let state = state.trim_end_matches(['*', '~', '#', '!', '%', '$', '@', '^', '-']).to_lowercase();
            *states.entry(state).or_insert(0.0) += 1.0;
            cpus += c.parse::<f64>().unwrap_or_else(|_| panic!("sinfo %c: {line}"));
        }
    }
    (states, cpus)
}

/// The cluster-wide data of a `--sink stdout` run (ClusterName alone, or with State).
fn shipped(stdout: &str) -> Shipped {
    let mut out = BTreeMap::new();
    for line in stdout.lines() {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else { continue };
        // slurmctld's figures no view reads (CpusTotal among them), and at rest (the bench
        // between tests) every figure no alarm watches, come in the head's record.
        if v["record"]["Type"] == slurm_cw_catalog::records::kinds::SCHEDULER_SAMPLE {
            for m in slurm_cw_catalog::ALL {
                match &v["record"][m.name] {
                    serde_json::Value::Object(by) => {
                        for (k, value) in by.iter().filter_map(|(k, v)| Some((k, v.as_f64()?))) {
                            out.insert((m.name.to_owned(), k.clone()), value);
                        }
                    }
                    other => {
                        if let Some(value) = other.as_f64() {
                            out.insert((m.name.to_owned(), String::new()), value);
                        }
                    }
                }
            }
            continue;
        }
        let (Some(metric), Some(dims), Some(value)) =
            (v["metric"].as_str(), v["dimensions"].as_object(), v["value"].as_f64())
        else {
            continue;
        };
        let other: Vec<&String> = dims.keys().filter(|k| *k != "ClusterName").collect();
        let key = match other[..] {
            [] => String::new(),
            [k] if k == "State" => dims[k].as_str().unwrap_or("").to_owned(),
            _ => continue,
        };
        out.insert((metric.to_owned(), key), value);
    }
    out
}

/// The shipper run by `unshare --pid --fork --mount-proc`: pid 1 of a namespace with its own
/// /proc. Its environment is the test shipper's (spool, no SLURM_CW_* of the developer's).
fn in_pid_namespace(conf: &Path, args: &[&str]) -> Command {
    let inner = shipper();
    let mut c = unshare();
    c.args(["--pid", "--fork", "--mount-proc"]).arg(inner.get_program()).args(args);
    for (k, v) in inner.get_envs() {
        match v {
            Some(v) => c.env(k, v),
            None => c.env_remove(k),
        };
    }
    c.env("SLURM_CONF", conf).env("SLURM_CW_GPU__ENABLED", "off");
    c
}

/// util-linux's unshare, by its path (a namespaced run's $PATH has none).
fn unshare() -> Command {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let found = std::env::split_paths(&path).map(|d| d.join("unshare")).find(|p| p.is_file());
    Command::new(found.unwrap_or_else(|| "unshare".into()))
}

/// unshare, and root to use it; false (outside CI) without them.
fn can_unshare() -> bool {
    let found = unshare().arg("--version").output().is_ok_and(|o| o.status.success());
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    if found && root {
        return true;
    }
    let why = if found { "not root" } else { "no unshare (util-linux)" };
    let in_ci = std::env::var("CI").is_ok_and(|v| v == "true" || v == "1");
    assert!(!in_ci, "{why}, and CI=true requires this test to run");
    eprintln!("SKIPPED: {why}");
    false
}

/// Runs `c`; its stdout, asserting success.
fn output(mut c: Command) -> String {
    let out = c.output().expect("unshare runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{c:?} failed: {stderr}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// One `--once` in the namespace, retried while sinfo changed around it; what it shipped and
/// what sinfo said.
fn once_against_sinfo(run: impl Fn() -> Command) -> (Shipped, Truth) {
    for _ in 0..5 {
        let before = sinfo_truth();
        let got = shipped(&output(run()));
        if before == sinfo_truth() {
            return (got, before);
        }
    }
    panic!("the bench's nodes kept changing; run again");
}

fn assert_agrees(got: &Shipped, (states, cpus): &Truth) {
    let get = |m: &str, k: &str| got.get(&(m.to_owned(), k.to_owned())).copied();
    assert_eq!(get(SLURMCTLD_UP.name, ""), Some(1.0), "SlurmctldUp from where no slurmctld runs: {got:?}");
    assert!(!states.is_empty());
    for (state, n) in states {
        assert_eq!(get(NODE_COUNT.name, state), Some(*n), "NodeCount State={state}");
    }
    assert_eq!(get(CPUS_TOTAL.name, ""), Some(*cpus), "CpusTotal");
}

#[ignore = "needs the Slurm bench: scripts/test.sh runs it"]
#[test]
fn forced_head_role_answers_from_a_pid_namespace_without_slurmctld() {
    let Some(conf) = slurm() else { return };
    if !can_unshare() {
        return;
    }
    let _lock = SLURM_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    // The namespace shows no process but its own first one.
    let mut ls = unshare();
    ls.args(["--pid", "--fork", "--mount-proc", "ls", "/proc"]);
    let pids: Vec<String> = output(ls)
        .split_whitespace()
        .filter(|e| e.bytes().all(|b| b.is_ascii_digit()))
        .map(str::to_owned)
        .collect();
    assert_eq!(pids, ["1"], "a PID namespace of its own");
    let (got, truth) =
        once_against_sinfo(|| in_pid_namespace(&conf, &["--once", "--role", "head", "--sink", "stdout"]));
    assert_agrees(&got, &truth);
}

/// The shipper in a fake AWS PCS login node: besides its PID namespace, a mount namespace whose
/// /opt is a fresh tmpfs holding `aws/pcs/scheduler/slurm-<ver>/bin` (links to the bench's
/// clients, root's), a UTS namespace named `login1` (the bench's slurm.conf names `vm`), and a
/// $PATH with no Slurm in it.
fn in_pcs_login_node(conf: &Path, args: &[&str]) -> Command {
    let (major, minor) = slurm_version();
    let scheduler = "/opt/aws/pcs/scheduler".to_owned();
    let release = format!("{scheduler}/slurm-{major}.{minor:02}");
    let bin = format!("{release}/bin");
    let dirs: Vec<CString> = ["/opt/aws", "/opt/aws/pcs", &scheduler, &release, &bin]
        .iter()
        .map(|d| CString::new(*d).unwrap())
        .collect();
    let links: Vec<(CString, CString)> = ["sinfo", "squeue", "sdiag", "scontrol"]
        .iter()
        .map(|p| {
            let target = program(p);
            let target = if target.is_absolute() { target } else { Path::new("/usr/bin").join(p) };
            (CString::new(target.to_str().unwrap()).unwrap(), CString::new(format!("{bin}/{p}")).unwrap())
        })
        .collect();
    let mut c = in_pid_namespace(conf, args);
    c.env_remove("SLURM_CW_SLURM__BIN_DIR").env("PATH", "/nonexistent");
    let (opt, tmpfs, root, mode) = (c"/opt", c"tmpfs", c"/", c"mode=755");
    // SAFETY: between fork and exec the closure makes system calls only, on strings made
    // before; it allocates nothing and takes no lock.
    unsafe {
        c.pre_exec(move || {
            let check = |rc: libc::c_int| if rc == 0 { Ok(()) } else { Err(std::io::Error::last_os_error()) };
            check(libc::unshare(libc::CLONE_NEWNS | libc::CLONE_NEWUTS))?;
            // Nothing mounted here reaches the host's namespace.
            check(libc::mount(
                std::ptr::null(),
                root.as_ptr(),
                std::ptr::null(),
                libc::MS_REC | libc::MS_PRIVATE,
                std::ptr::null(),
            ))?;
            check(libc::mount(tmpfs.as_ptr(), opt.as_ptr(), tmpfs.as_ptr(), 0, mode.as_ptr().cast()))?;
            for d in &dirs {
                check(libc::mkdir(d.as_ptr(), 0o755))?;
                check(libc::chmod(d.as_ptr(), 0o755))?;
            }
            for (target, link) in &links {
                check(libc::symlink(target.as_ptr(), link.as_ptr()))?;
            }
            check(libc::sethostname(c"login1".as_ptr(), 6))
        });
    }
    c
}

#[ignore = "needs the Slurm bench: scripts/test.sh runs it"]
#[test]
fn role_auto_on_a_pcs_login_node_is_head_and_finds_slurm_under_pcs_path() {
    let Some(conf) = slurm() else { return };
    if !can_unshare() {
        return;
    }
    let _lock = SLURM_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let check = output(in_pcs_login_node(&conf, &["--check", "--sink", "stdout"]));
    let row = |name: &str| {
        check
            .lines()
            .find(|l| l.split("  ").next() == Some(name))
            .unwrap_or_else(|| panic!("no {name} row: {check}"))
    };
    let (major, minor) = slurm_version();
    let bin = format!("/opt/aws/pcs/scheduler/slurm-{major}.{minor:02}/bin");
    let role = row("role");
    assert!(
        role.contains("head (an AWS PCS login node: root's Slurm in") && role.contains("names slurmctld vm"),
        "{role}"
    );
    assert!(row("sinfo").contains(&format!("{bin}/sinfo")), "{check}");
    let ctld = row("slurmctld");
    assert!(ctld.contains(" ok ") && ctld.contains("vm (primary) answers"), "{ctld}");
    let (got, truth) = once_against_sinfo(|| in_pcs_login_node(&conf, &["--once", "--sink", "stdout"]));
    assert_agrees(&got, &truth);
}
