//! A failed step: logged, exit 0 so the boot goes on; 1 with --strict; bad arguments exit 2.

use super::node::*;

const B: &str = "--binary";

#[test]
fn failed_step_exits_0_logs_and_journals_once() {
    let node = Node::new(Kind::ParallelClusterHead);
    let out = node.install(&[B, FAKE_BINARY], "systemctl enable");
    assert_eq!(out.status.code(), Some(0));
    let want = "systemctl enable --now slurm-cw-shipper failed: ";
    let log = node.read(LOG);
    assert!(log.contains(want) && log.contains("injected failure"), "{log}");
    assert!(log.contains("--strict would fail it"), "{log}");
    let journal = node.journal();
    assert_eq!(journal.len(), 1, "{journal:?}");
    assert!(
        journal[0].starts_with("logger -t slurm-cw-shipper -p user.err -- install failed: ")
            && journal[0].contains(want)
    );
    // With --strict, the boot fails.
    node.forget_calls();
    let out = node.install(&[B, FAKE_BINARY, "--strict"], "systemctl enable");
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(node.journal().len(), 1);
}

#[test]
fn no_role_to_be_found_installs_nothing() {
    let node = Node::new(Kind::PcsCompute);
    node.run(&[B, FAKE_BINARY, "--cluster-name", "c1"], 0);
    assert!(!node.path(BIN).exists() && !node.path(UNIT).exists());
    assert!(node.mutating_calls().is_empty());
    assert!(node.journal()[0].contains("cannot tell this host's role"), "{:?}", node.journal());
    node.run(&[B, FAKE_BINARY, "--cluster-name", "c1", "--strict"], 1);
}

#[test]
fn a_missing_binary_keeps_the_installed_one() {
    let node = Node::new(Kind::ParallelClusterCompute);
    node.run(&[B, FAKE_BINARY], 0);
    let before = node.read(BIN);
    node.forget_calls();
    node.run(&[B, "/srv/dist/missing", "--namespace", "Other"], 0);
    assert_eq!(node.read(BIN), before);
    assert!(!node.read(CONFIG).contains("Other"), "the run stopped at the binary");
    assert!(!node.calls().iter().any(|c| c.contains("restart")));
    assert!(node.leftovers().is_empty());
    assert!(node.journal()[0].contains("cannot read"), "{:?}", node.journal());
}

#[test]
fn bad_arguments_exit_2_and_change_nothing() {
    let cases: [&[&str]; 6] = [
        &["--role", "login"],
        &["--bogus"],
        &["--namespace", "AWS/EC2"],
        &["--namespace", "Slurm/${aws:username}"],
        &["--cluster-name", ""],
        &["--slurm-conf", "etc/slurm.conf"],
    ];
    for args in cases {
        for strict in [false, true] {
            let node = Node::new(Kind::ParallelClusterCompute);
            let mut all = vec![B, FAKE_BINARY];
            all.extend(args);
            if strict {
                all.push("--strict");
            }
            let out = node.install(&all, "");
            assert_eq!(out.status.code(), Some(2), "{all:?}");
            assert!(!node.path(BIN).exists() && !node.path(CONFIG).exists(), "{all:?}");
            assert!(node.mutating_calls().is_empty(), "{all:?}");
        }
    }
}
