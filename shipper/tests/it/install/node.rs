//! A fake node tree for `slurm-cw-shipper install --root`: etc/, opt/, proc/ as ParallelCluster
//! or AWS PCS lays them out (built from their documentation and the old bootstrap's tests), and
//! recording fakes of systemctl, iptables, ip6tables, nft, logger and scontrol first in PATH
//! (always all of them: the real iptables or systemctl must never run from a test; a test that
//! takes fakes away gets a PATH of the fakes and a few file tools alone).

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub const BIN: &str = "usr/local/bin/slurm-cw-shipper";
pub const EPILOG: &str = "opt/slurm-cw-shipper/task-epilog.sh";
pub const CONFIG: &str = "etc/slurm-cw-shipper/config.toml";
pub const UNIT: &str = "etc/systemd/system/slurm-cw-shipper.service";
pub const IMDS_UNIT: &str = "etc/systemd/system/slurm-cw-imds-restrict.service";
pub const NFT_FILE: &str = "etc/slurm-cw-shipper/imds.nft";
pub const LOG: &str = "var/log/slurm-cw-shipper/install.log";
pub const PC_SLURM_CONF: &str = "opt/slurm/etc/slurm.conf";
/// The binary tests install (`--binary`): small, unlike the test build.
pub const FAKE_BINARY: &str = "/srv/dist/slurm-cw-shipper";
pub const IMDS_V4: &str = "OUTPUT -d 169.254.169.254/32 -m owner ! --uid-owner 0 -j REJECT";
pub const IMDS_V6: &str = "OUTPUT -d fd00:ec2::254/128 -m owner ! --uid-owner 0 -j REJECT";

/// One fake for every command: appends its argv as a line to $FAKE_LOG and keeps state
/// (enabled and active units, firewall rules) in $FAKE_STATE; $FAKE_FAIL (comma-separated)
/// names what fails: "systemctl enable", "iptables -I".
const FAKE: &str = r#"#!/bin/sh
name=${0##*/}
{ printf '%s' "$name"; for a in "$@"; do printf ' %s' "$a"; done; echo; } >> "$FAKE_LOG"
verb=
for a in "$@"; do case $a in -w | --*) ;; *) verb=$a; break ;; esac; done
case ",$FAKE_FAIL," in *",$name $verb,"*) echo "$name: injected failure of $name $verb" >&2; exit 1 ;; esac
st=$FAKE_STATE
case $name in
systemctl)
    [ "$1" = --version ] && { echo "systemd $(cat "$st/systemd-version" 2>/dev/null || echo 252) (252.38-1)"; exit 0; }
    unit=; now=no
    for a in "$@"; do unit=$a; [ "$a" = --now ] && now=yes; done
    unit=${unit%.service}
    case $verb in
        is-enabled) [ -e "$st/enabled-$unit" ]; exit ;;
        is-active) [ -e "$st/active-$unit" ]; exit ;;
        enable) touch "$st/enabled-$unit"; if [ $now = yes ]; then touch "$st/active-$unit"; fi ;;
        start | restart) touch "$st/active-$unit" ;;
        disable) rm -f "$st/enabled-$unit" ;;
    esac ;;
iptables | ip6tables)
    [ "$1" = -w ] && shift
    op=$1; shift; spec="$*"; rules="$st/rules-$name"; touch "$rules"
    case $op in
        -C) grep -Fxq -- "$spec" "$rules"; exit ;;
        -I) { echo "$spec"; cat "$rules"; } > "$rules.new"; mv "$rules.new" "$rules" ;;
        -D) grep -Fxq -- "$spec" "$rules" || exit 1
            grep -Fxv -- "$spec" "$rules" > "$rules.new"; mv "$rules.new" "$rules" ;;
    esac ;;
nft)
    case $1 in
        -f) cp "$2" "$st/nft-ruleset" ;;
        list) [ -e "$st/nft-ruleset" ]; exit ;;
        delete) [ -e "$st/nft-ruleset" ] || exit 1; rm -f "$st/nft-ruleset" ;;
    esac ;;
esac
exit 0
"#;
const FAKES: [&str; 6] = ["systemctl", "iptables", "ip6tables", "nft", "logger", "scontrol"];
/// What the fakes run, for a PATH without the system's directories.
const FILE_TOOLS: [&str; 6] = ["grep", "cat", "mv", "touch", "rm", "cp"];

pub enum Kind {
    ParallelClusterHead,
    ParallelClusterCompute,
    ParallelClusterLogin,
    /// A PCS compute node at nodeBootstrapped: no cfnconfig, slurmd not started, no slurm.conf.
    PcsCompute,
    /// A PCS login node: PCS's Slurm clients, /etc/slurm/slurm.conf naming the remote controller.
    PcsLogin,
}

pub struct Node {
    _dir: tempfile::TempDir,
    pub root: PathBuf,
    fakes: PathBuf,
    state: PathBuf,
    log: PathBuf,
}

fn write(path: &Path, text: &str, mode: u32) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

impl Node {
    pub fn new(kind: Kind) -> Node {
        let dir = tempfile::tempdir().unwrap();
        // A space in the root catches a path handled as words.
        let root = dir.path().join("fake root");
        let (fakes, state, log) =
            (dir.path().join("fakes"), dir.path().join("state"), dir.path().join("calls"));
        for d in [&root, &fakes, &state] {
            std::fs::create_dir_all(d).unwrap();
        }
        std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o755)).unwrap();
        for name in FAKES {
            write(&fakes.join(name), FAKE, 0o755);
        }
        std::fs::write(&log, "").unwrap();
        let node = Node { _dir: dir, root, fakes, state, log };
        std::fs::create_dir_all(node.path("proc/sys/kernel")).unwrap();
        node.write("srv/dist/slurm-cw-shipper", "\x7fELF fake slurm-cw-shipper\n");
        let cfn = |t: &str| format!("stack_name=pc-stack\ncfn_region=us-east-1\ncfn_node_type={t}\n");
        let pc_conf = "# slurm.conf written by ParallelCluster\nSlurmctldHost=ip-10-0-0-10(10.0.0.10)\n\
                       SlurmUser=slurm\ninclude slurm_parallelcluster.conf";
        match kind {
            Kind::ParallelClusterHead | Kind::ParallelClusterCompute | Kind::ParallelClusterLogin => {
                let t = match kind {
                    Kind::ParallelClusterHead => "HeadNode",
                    Kind::ParallelClusterCompute => "ComputeFleet",
                    _ => "LoginNode",
                };
                node.write("etc/parallelcluster/cfnconfig", &cfn(t));
                // No final newline: --edit-slurm-conf must add one. ClusterName in the include,
                // which the old script's awk did not follow.
                node.write(PC_SLURM_CONF, pc_conf);
                node.write("opt/slurm/etc/slurm_parallelcluster.conf", "ClusterName=pc-test\n");
                node.write("proc/sys/kernel/hostname", "ip-10-0-0-10\n");
            }
            Kind::PcsCompute => node.write("proc/sys/kernel/hostname", "compute-1\n"),
            Kind::PcsLogin => {
                let bin = "opt/aws/pcs/scheduler/slurm-25.11/bin";
                for p in ["sinfo", "squeue", "sdiag", "scontrol"] {
                    write(&node.path(&format!("{bin}/{p}")), "#!/bin/sh\nexit 0\n", 0o755);
                }
                node.write(
                    "etc/slurm/slurm.conf",
                    "ClusterName=pcs-demo\nSlurmctldHost=slurmctld-primary(10.3.149.220)\nAuthType=auth/slurm\n",
                );
                node.write("proc/sys/kernel/hostname", "ip-10-3-7-21\n");
            }
        }
        node
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }

    pub fn write(&self, rel: &str, text: &str) {
        write(&self.path(rel), text, 0o644);
    }

    pub fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.path(rel)).unwrap_or_default()
    }

    pub fn mode(&self, rel: &str) -> u32 {
        std::fs::metadata(self.path(rel)).unwrap().permissions().mode() & 0o7777
    }

    /// `slurm-cw-shipper install --root <root> args...` with the fakes; `fail` for $FAKE_FAIL.
    pub fn install(&self, args: &[&str], fail: &str) -> Output {
        let tools = self.state.join("file-tools");
        let path = if tools.is_dir() {
            format!("{}:{}", self.fakes.display(), tools.display())
        } else {
            format!("{}:{}", self.fakes.display(), std::env::var("PATH").unwrap_or_default())
        };
        let out = Command::new(env!("CARGO_BIN_EXE_slurm-cw-shipper"))
            .arg("install")
            .arg("--root")
            .arg(&self.root)
            .args(args)
            .env("PATH", path)
            .env("FAKE_LOG", &self.log)
            .env("FAKE_STATE", &self.state)
            .env("FAKE_FAIL", fail)
            .env_remove("RUST_LOG")
            .env_remove("SLURM_CONF")
            .output()
            .unwrap();
        eprintln!("install {args:?}: {}\n{}", out.status, String::from_utf8_lossy(&out.stderr));
        out
    }

    /// Runs and asserts the exit status; standard error.
    pub fn run(&self, args: &[&str], status: i32) -> String {
        let out = self.install(args, "");
        assert_eq!(out.status.code(), Some(status), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stderr).into_owned()
    }

    pub fn calls(&self) -> Vec<String> {
        std::fs::read_to_string(&self.log).unwrap().lines().map(str::to_owned).collect()
    }

    pub fn forget_calls(&self) {
        std::fs::write(&self.log, "").unwrap();
    }

    /// Calls that change the node: not queries, not the journal.
    pub fn mutating_calls(&self) -> Vec<String> {
        let query = |c: &str| {
            c.contains(" is-enabled ")
                || c.contains(" is-active ")
                || c.ends_with(" --version")
                || c.contains(" -C ")
                || c.starts_with("nft list ")
        };
        self.calls().into_iter().filter(|c| !query(c) && !c.starts_with("logger ")).collect()
    }

    pub fn journal(&self) -> Vec<String> {
        self.calls().into_iter().filter(|c| c.starts_with("logger ")).collect()
    }

    pub fn rules(&self, tool: &str) -> Vec<String> {
        std::fs::read_to_string(self.state.join(format!("rules-{tool}")))
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    /// Takes the fakes of `commands` away, and the system's directories from PATH, so that the
    /// installer finds no such command (nor the real one).
    pub fn without(&self, commands: &[&str]) {
        for c in commands {
            std::fs::remove_file(self.fakes.join(c)).unwrap();
        }
        let tools = self.state.join("file-tools");
        std::fs::create_dir_all(&tools).unwrap();
        let path = std::env::var("PATH").unwrap_or_default();
        for t in FILE_TOOLS {
            let found = std::env::split_paths(&path).map(|d| d.join(t)).find(|p| p.is_file());
            std::os::unix::fs::symlink(found.unwrap_or_else(|| panic!("no {t} in PATH")), tools.join(t))
                .unwrap();
        }
    }

    /// The real `command` (at `path`) for the installer, after [`Node::without`].
    pub fn with_real(&self, command: &str, path: &Path) {
        std::os::unix::fs::symlink(path, self.state.join("file-tools").join(command)).unwrap();
    }

    /// The nftables ruleset the fake `nft` loaded (empty: none).
    pub fn nft_ruleset(&self) -> String {
        std::fs::read_to_string(self.state.join("nft-ruleset")).unwrap_or_default()
    }

    /// What the fake `systemctl --version` says (252 unless set).
    pub fn set_systemd_version(&self, v: u32) {
        std::fs::write(self.state.join("systemd-version"), v.to_string()).unwrap();
    }

    pub fn set_state(&self, flag: &str, on: bool) {
        let p = self.state.join(flag);
        if on { std::fs::write(p, "").unwrap() } else { std::fs::remove_file(p).unwrap() }
    }

    /// Every file under the root but the log: content and modification time.
    pub fn snapshot(&self) -> BTreeMap<PathBuf, (Vec<u8>, std::time::SystemTime)> {
        fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
            for e in std::fs::read_dir(dir).unwrap().flatten() {
                if e.file_type().unwrap().is_dir() { walk(&e.path(), out) } else { out.push(e.path()) }
            }
        }
        let mut files = Vec::new();
        walk(&self.root, &mut files);
        files
            .into_iter()
            .filter(|p| !p.ends_with(LOG))
            .map(|p| {
                let meta = std::fs::metadata(&p).unwrap();
                (p.clone(), (std::fs::read(&p).unwrap(), meta.modified().unwrap()))
            })
            .collect()
    }

    /// Files a write left behind.
    pub fn leftovers(&self) -> Vec<PathBuf> {
        self.snapshot().into_keys().filter(|p| p.to_string_lossy().contains(".new.")).collect()
    }
}

/// The repository's copy of a file the installer embeds.
pub fn repo_file(rel: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(rel)).unwrap()
}

/// The configuration written, as a TOML table.
pub fn config(node: &Node) -> toml::Table {
    toml::from_str(&node.read(CONFIG)).unwrap()
}

pub fn table(pairs: &[(&str, &str)]) -> toml::Table {
    pairs.iter().map(|(k, v)| (k.to_string(), toml::Value::String(v.to_string()))).collect()
}
