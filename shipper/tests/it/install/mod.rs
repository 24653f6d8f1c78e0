//! `slurm-cw-shipper install` run by the built binary against fake node trees (see node.rs):
//! ParallelCluster head and compute nodes, an AWS PCS compute node at nodeBootstrapped and a PCS
//! login node. The files written, the commands run, idempotence, and the exit statuses.

mod failures;
mod imds;
mod node;

use node::*;

const B: &str = "--binary";

fn assert_installed(node: &Node, want: toml::Table) {
    assert_eq!(node.read(BIN), node.read(FAKE_BINARY.trim_start_matches('/')));
    assert_eq!(node.mode(BIN), 0o755);
    assert_eq!(node.read(EPILOG), repo_file("infra/slurm/task-epilog.sh"));
    assert_eq!(node.mode(EPILOG), 0o755);
    assert_eq!(node.mode("opt/slurm-cw-shipper"), 0o755);
    assert_eq!(node.read(UNIT), repo_file("infra/systemd/slurm-cw-shipper.service"));
    assert_eq!(node.mode(UNIT), 0o644);
    assert_eq!(config(node), want);
    assert_eq!(node.mode(CONFIG), 0o644);
    let calls = node.calls();
    let at = |c: &str| calls.iter().position(|x| x == c).unwrap_or_else(|| panic!("no `{c}` in {calls:?}"));
    assert!(at("systemctl daemon-reload") < at("systemctl enable --now slurm-cw-shipper"));
    assert!(node.leftovers().is_empty(), "{:?}", node.leftovers());
    assert_eq!(node.journal(), Vec::<String>::new(), "a successful run writes nothing to the journal");
}

#[test]
fn parallelcluster_head_node() {
    let node = Node::new(Kind::ParallelClusterHead);
    let before = node.read(PC_SLURM_CONF);
    node.run(&[B, FAKE_BINARY], 0);
    // Role from cfnconfig, cluster name from the file slurm.conf includes.
    assert_installed(&node, table(&[("cluster_name", "pc-test"), ("role", "head")]));
    assert_eq!(node.read(PC_SLURM_CONF), before, "slurm.conf is ParallelCluster's");
    assert!(!node.calls().iter().any(|c| c.starts_with("iptables") || c.starts_with("scontrol")));
    assert!(!node.path(IMDS_UNIT).exists(), "HeadNode/Imds/Secured is ParallelCluster's");
    let log = node.read(LOG);
    for line in [
        "role head (ParallelCluster head node",
        "cluster name pc-test (from",
        "installed /usr/local/bin/slurm-cw-shipper",
    ] {
        assert!(log.contains(line), "{line:?} not in {log}");
    }
}

#[test]
fn parallelcluster_compute_node() {
    let node = Node::new(Kind::ParallelClusterCompute);
    node.run(&[B, FAKE_BINARY, "--cluster-name", "hpc-prod"], 0);
    assert_installed(&node, table(&[("cluster_name", "hpc-prod"), ("role", "node")]));
    assert_eq!(node.rules("iptables"), [IMDS_V4]);
    assert_eq!(node.rules("ip6tables"), [IMDS_V6]);
    assert_eq!(node.read(IMDS_UNIT), repo_file("infra/systemd/slurm-cw-imds-restrict.service"));
    assert!(node.calls().contains(&"systemctl enable slurm-cw-imds-restrict.service".to_owned()));
}

#[test]
fn pcs_compute_node_installs_itself() {
    // nodeBootstrapped: slurmd not started yet, so the role is given; no --binary: this build.
    let node = Node::new(Kind::PcsCompute);
    node.run(&["--role", "node", "--cluster-name", "pcs-demo", "--namespace", "Hpc/Demo"], 0);
    let me = std::fs::read(env!("CARGO_BIN_EXE_slurm-cw-shipper")).unwrap();
    assert!(std::fs::read(node.path(BIN)).unwrap() == me, "the installed binary is this build");
    assert_eq!(
        config(&node),
        table(&[("cluster_name", "pcs-demo"), ("namespace", "Hpc/Demo"), ("role", "node")])
    );
    assert_eq!(node.rules("iptables"), [IMDS_V4]);
    // Again: nothing to copy.
    node.forget_calls();
    let err = node.run(&["--role", "node", "--cluster-name", "pcs-demo", "--namespace", "Hpc/Demo"], 0);
    assert!(err.contains("nothing changed"), "{err}");
}

#[test]
fn pcs_compute_node_without_a_cluster_name_fails_softly() {
    let node = Node::new(Kind::PcsCompute);
    node.run(&[B, FAKE_BINARY, "--role", "node"], 0);
    assert!(!node.path(BIN).exists());
    let journal = node.journal();
    assert_eq!(journal.len(), 1, "{journal:?}");
    assert!(
        journal[0].starts_with("logger -t slurm-cw-shipper -p user.err -- install failed: "),
        "{journal:?}"
    );
    assert!(
        journal[0].contains("--cluster-name") && journal[0].contains("/var/log/slurm-cw-shipper/install.log")
    );
    // The compute node is hardened all the same.
    assert_eq!(node.rules("iptables"), [IMDS_V4]);
}

#[test]
fn pcs_login_node_is_detected_as_head() {
    let node = Node::new(Kind::PcsLogin);
    node.run(&[B, FAKE_BINARY], 0);
    assert_installed(&node, table(&[("cluster_name", "pcs-demo"), ("role", "head")]));
    assert!(node.read(LOG).contains("role head (an AWS PCS login node"), "{}", node.read(LOG));
    // Its users must not use the instance role: IMDS for root only, as on compute nodes.
    assert_eq!(node.rules("iptables"), [IMDS_V4]);
    // Forced: the same.
    node.forget_calls();
    let err = node.run(&[B, FAKE_BINARY, "--role", "head"], 0);
    assert!(err.contains("nothing changed"), "{err}");
}

#[test]
fn parallelcluster_login_node_gets_nothing() {
    let node = Node::new(Kind::ParallelClusterLogin);
    let err = node.run(&[B, FAKE_BINARY], 0);
    assert!(err.contains("login node: nothing to install"), "{err}");
    assert!(!node.path(BIN).exists() && node.mutating_calls().is_empty());
}

#[test]
fn second_run_changes_nothing() {
    let cases: [(Kind, &[&str]); 4] = [
        (Kind::ParallelClusterHead, &[B, FAKE_BINARY]),
        (Kind::ParallelClusterCompute, &[B, FAKE_BINARY]),
        (Kind::PcsCompute, &[B, FAKE_BINARY, "--role", "node", "--cluster-name", "c1"]),
        (Kind::PcsLogin, &[B, FAKE_BINARY]),
    ];
    for (kind, args) in cases {
        let node = Node::new(kind);
        node.run(args, 0);
        let (before, rules) = (node.snapshot(), (node.rules("iptables"), node.rules("ip6tables")));
        node.forget_calls();
        let err = node.run(args, 0);
        assert_eq!(node.mutating_calls(), Vec::<String>::new());
        assert!(node.snapshot() == before, "files changed on a second run");
        assert_eq!((node.rules("iptables"), node.rules("ip6tables")), rules);
        assert!(err.contains("done: nothing changed"), "{err}");
        assert!(node.journal().is_empty());
    }
}

#[test]
fn a_new_binary_or_configuration_restarts_the_service() {
    let node = Node::new(Kind::ParallelClusterCompute);
    node.run(&[B, FAKE_BINARY], 0);
    node.write("srv/dist/slurm-cw-shipper", "\x7fELF fake slurm-cw-shipper v2\n");
    node.forget_calls();
    node.run(&[B, FAKE_BINARY], 0);
    assert_eq!(node.read(BIN), "\x7fELF fake slurm-cw-shipper v2\n");
    let calls = node.calls();
    assert!(calls.contains(&"systemctl restart slurm-cw-shipper".to_owned()), "{calls:?}");
    assert!(!calls.contains(&"systemctl daemon-reload".to_owned()), "the unit did not change");

    node.forget_calls();
    node.run(&[B, FAKE_BINARY, "--namespace", "Slurm"], 0);
    assert_eq!(config(&node)["namespace"].as_str(), Some("Slurm"));
    assert!(node.calls().contains(&"systemctl restart slurm-cw-shipper".to_owned()));

    // Stopped by hand: started, not restarted.
    node.set_state("active-slurm-cw-shipper", false);
    node.forget_calls();
    node.run(&[B, FAKE_BINARY, "--namespace", "Slurm"], 0);
    assert_eq!(node.mutating_calls(), ["systemctl start slurm-cw-shipper"]);
}

#[test]
fn cluster_name_falls_back_to_parallelclusters() {
    let node = Node::new(Kind::ParallelClusterCompute);
    std::fs::remove_file(node.path(PC_SLURM_CONF)).unwrap();
    node.run(&[B, FAKE_BINARY], 0);
    assert_eq!(config(&node)["cluster_name"].as_str(), Some("pc-stack"));
}

#[test]
fn amazon_linux_2s_systemd_gets_a_unit_it_can_run() {
    // systemd 219 reads `SystemCallFilter=@system-service` as an allow-list of almost nothing:
    // the daemon could not start. There the filter is left out; elsewhere the unit is the repo's.
    let node = Node::new(Kind::ParallelClusterCompute);
    node.set_systemd_version(219);
    node.run(&[B, FAKE_BINARY], 0);
    let unit = node.read(UNIT);
    assert!(!unit.contains("SystemCallFilter="), "{unit}");
    assert!(unit.contains("ProtectSystem=strict"));
    let node = Node::new(Kind::ParallelClusterCompute);
    node.run(&[B, FAKE_BINARY], 0);
    assert_eq!(node.read(UNIT), repo_file("infra/systemd/slurm-cw-shipper.service"));
}

#[test]
fn a_parallelcluster_head_node_keeps_its_own_imds_whatever_the_role() {
    // `--role all` (a head node that also runs slurmd): ParallelCluster's HeadNode/Imds/Secured
    // is left alone, not shut to its pcluster-admin user by a rule of ours.
    let node = Node::new(Kind::ParallelClusterHead);
    node.run(&[B, FAKE_BINARY, "--role", "all"], 0);
    assert_eq!(config(&node)["role"].as_str(), Some("all"));
    assert!(!node.calls().iter().any(|c| c.starts_with("iptables")), "{:?}", node.calls());
    assert!(!node.path(IMDS_UNIT).exists());
}

#[test]
fn role_argument_wins_over_cfnconfig() {
    let node = Node::new(Kind::ParallelClusterCompute);
    node.run(&[B, FAKE_BINARY, "--role", "head", "--slurm-conf", "/opt/slurm/etc/slurm.conf"], 0);
    let mut want = table(&[("cluster_name", "pc-test"), ("role", "head")]);
    want.insert("slurm".into(), toml::Value::Table(table(&[("conf", "/opt/slurm/etc/slurm.conf")])));
    assert_eq!(config(&node), want);
    assert!(!node.calls().iter().any(|c| c.starts_with("iptables")));
}

#[test]
fn edit_slurm_conf_on_request() {
    let node = Node::new(Kind::ParallelClusterHead);
    let before = node.read(PC_SLURM_CONF);
    node.run(&[B, FAKE_BINARY, "--edit-slurm-conf"], 0);
    let text = node.read(PC_SLURM_CONF);
    assert!(text.starts_with(&format!("{before}\n")), "the unterminated last line was not glued to ours");
    assert!(text.ends_with("TaskEpilog=/opt/slurm-cw-shipper/task-epilog.sh\n"));
    let calls = node.calls();
    let at = |c: &str| calls.iter().position(|x| x == c).unwrap();
    assert!(at("systemctl enable --now slurm-cw-shipper") < at("scontrol reconfigure"));
    node.forget_calls();
    node.run(&[B, FAKE_BINARY, "--edit-slurm-conf"], 0);
    assert_eq!(node.read(PC_SLURM_CONF), text);
    assert!(node.mutating_calls().is_empty());
}

#[test]
fn edit_slurm_conf_leaves_an_existing_task_epilog_and_compute_nodes_alone() {
    let node = Node::new(Kind::ParallelClusterHead);
    node.write(
        "opt/slurm/etc/slurm_parallelcluster.conf",
        "ClusterName=pc-test\nTaskEpilog=/opt/site/epilog\n",
    );
    let before = node.read(PC_SLURM_CONF);
    let err = node.run(&[B, FAKE_BINARY, "--edit-slurm-conf"], 0);
    assert_eq!(node.read(PC_SLURM_CONF), before);
    assert!(err.contains("already has a TaskEpilog (/opt/site/epilog)"), "{err}");
    let compute = Node::new(Kind::ParallelClusterCompute);
    compute.run(&[B, FAKE_BINARY, "--edit-slurm-conf"], 0);
    assert!(!compute.read(PC_SLURM_CONF).contains("TaskEpilog"));
}

#[test]
fn help_names_the_flags() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_slurm-cw-shipper"))
        .args(["install", "--help"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success());
    for flag in [
        "--root",
        "--role",
        "--cluster-name",
        "--namespace",
        "--no-imds-restriction",
        "--strict",
        "--edit-slurm-conf",
    ] {
        assert!(text.contains(flag), "{flag} not in {text}");
    }
}
