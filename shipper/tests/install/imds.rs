//! Instance metadata for root only on compute and login nodes: added once, never fatal, taken
//! away with --no-imds-restriction.

use crate::node::*;

const B: &str = "--binary";

#[test]
fn rule_added_once_and_checked_first() {
    let node = Node::new(Kind::ParallelClusterCompute);
    for _ in 0..3 {
        node.run(&[B, FAKE_BINARY], 0);
    }
    assert_eq!(node.rules("iptables"), [IMDS_V4]);
    let calls: Vec<String> = node.calls().into_iter().filter(|c| c.starts_with("iptables ")).collect();
    let inserts: Vec<&String> = calls.iter().filter(|c| c.contains(" -I ")).collect();
    assert_eq!(inserts, [&format!("iptables -w -I {IMDS_V4}")]);
    assert_eq!(calls[0], format!("iptables -w -C {IMDS_V4}"));
    // The boot unit adds the same rule, checked first.
    let unit = node.read(IMDS_UNIT);
    assert!(unit.contains(&format!("'iptables -w -C {IMDS_V4} 2>/dev/null || iptables -w -I {IMDS_V4}'")));
    assert!(unit.contains(&format!("'ip6tables -w -C {IMDS_V6} 2>/dev/null || ip6tables -w -I {IMDS_V6}'")));
}

#[test]
fn failure_is_a_warning_never_fatal() {
    for fail in ["iptables -I", "iptables -C,iptables -I"] {
        let node = Node::new(Kind::ParallelClusterCompute);
        let out = node.install(&[B, FAKE_BINARY, "--strict"], fail);
        assert_eq!(out.status.code(), Some(0), "{fail}");
        assert!(node.path(BIN).exists());
        let journal = node.journal();
        assert_eq!(journal.len(), 1, "{journal:?}");
        assert!(
            journal[0].starts_with("logger -t slurm-cw-shipper -p user.warning -- IMDS stays open"),
            "{journal:?}"
        );
        assert!(node.read(LOG).contains("injected failure"));
    }
    // IPv6 (best effort): logged only.
    let node = Node::new(Kind::ParallelClusterCompute);
    let out = node.install(&[B, FAKE_BINARY], "ip6tables -I");
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(node.rules("iptables"), [IMDS_V4]);
    assert!(node.journal().is_empty());
    assert!(node.read(LOG).contains("IMDS over IPv6 not restricted"));
}

#[test]
fn no_imds_restriction_takes_it_away() {
    let node = Node::new(Kind::ParallelClusterCompute);
    node.run(&[B, FAKE_BINARY], 0);
    node.run(&[B, FAKE_BINARY, "--no-imds-restriction"], 0);
    assert!(node.rules("iptables").is_empty() && node.rules("ip6tables").is_empty());
    assert!(!node.path(IMDS_UNIT).exists());
    assert!(node.calls().contains(&"systemctl disable slurm-cw-imds-restrict.service".to_owned()));
    node.forget_calls();
    node.run(&[B, FAKE_BINARY, "--no-imds-restriction"], 0);
    assert!(node.mutating_calls().is_empty(), "{:?}", node.mutating_calls());
    // On a fresh node: nothing added.
    let fresh = Node::new(Kind::ParallelClusterCompute);
    fresh.run(&[B, FAKE_BINARY, "--no-imds-restriction"], 0);
    assert!(!fresh.calls().iter().any(|c| c.contains(" -I ")) && !fresh.path(IMDS_UNIT).exists());
}

#[test]
fn boot_unit_passes_systemd_analyze_verify() {
    let dir = tempfile::tempdir().unwrap();
    let unit = dir.path().join("slurm-cw-imds-restrict.service");
    std::fs::write(&unit, repo_file("infra/systemd/slurm-cw-imds-restrict.service")).unwrap();
    let out = match std::process::Command::new("systemd-analyze")
        .arg("verify")
        .arg(&unit)
        .env("SYSTEMD_LOG_COLOR", "0")
        .output()
    {
        Ok(o) => o,
        Err(e) if std::env::var("CI").is_ok_and(|v| v == "true") => panic!("systemd-analyze: {e}"),
        Err(e) => return eprintln!("SKIPPED: systemd-analyze not runnable ({e})"),
    };
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success() && text.trim().is_empty(), "{text}");
}
