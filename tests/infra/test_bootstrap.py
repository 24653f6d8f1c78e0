"""infra/parallelcluster/on-node-configured.sh in a fake ParallelCluster root: a temporary
directory with /etc/parallelcluster/cfnconfig and /opt/slurm/etc/slurm.conf, and recording fakes
of systemctl, scontrol, aws, iptables, ip6tables, logger and uname first in PATH (always all of
them: the real iptables or logger must never run from a test). Runs it with the Args of
cluster-config.example.yaml, for a head node and a compute node, and breaks what it depends on."""

import hashlib
import json
import os
import pathlib
import shutil
import stat
import subprocess
import sys
import tomllib

import pytest
import yaml

from conftest import INFRA, REPO

SCRIPT = INFRA / "parallelcluster" / "on-node-configured.sh"
EXAMPLE = INFRA / "parallelcluster" / "cluster-config.example.yaml"
UNIT_SRC = INFRA / "systemd" / "slurm-cw-shipper.service"
EPILOG_SRC = INFRA / "slurm" / "task-epilog.sh"

BIN = "usr/local/bin/slurm-cw-shipper"
EPILOG = "opt/slurm-cw-shipper/task-epilog.sh"
CONFIG = "etc/slurm-cw-shipper/config.toml"
UNIT = "etc/systemd/system/slurm-cw-shipper.service"
IMDS_UNIT = "etc/systemd/system/slurm-cw-imds-restrict.service"
LOG = "var/log/slurm-cw-shipper-bootstrap.log"
SLURM_CONF = "opt/slurm/etc/slurm.conf"
TASK_EPILOG = "/opt/slurm-cw-shipper/task-epilog.sh"
TASK_EPILOG_LINE = f"TaskEpilog={TASK_EPILOG}"


def elf(machine: int, text: bytes) -> bytes:
    """A file that starts as an ELF executable for `machine` (e_machine) does: the script reads
    only the header."""
    ident = b"\x7fELF\x02\x01\x01" + bytes(9)  # 64-bit, little-endian, version 1
    return ident + (2).to_bytes(2, "little") + machine.to_bytes(2, "little") + text


BINARY = elf(0x3E, b" fake slurm-cw-shipper x86_64\n")
BINARY_ARM = elf(0xB7, b" fake slurm-cw-shipper aarch64\n")
BINARY_RISCV = elf(0xF3, b" fake slurm-cw-shipper riscv64\n")
# The names scripts/release.sh gives them in dist/ and SHA256SUMS.
NAME = "slurm-cw-shipper-x86_64"
NAME_ARM = "slurm-cw-shipper-aarch64"
S3_DIR = "my-bucket/slurm-cw"
S3_BINARY = f"s3://{S3_DIR}/{NAME}"
S3_BINARY_ARM = f"s3://{S3_DIR}/{NAME_ARM}"
RELEASE = REPO / "scripts" / "release.sh"
IMDS_V4 = ["OUTPUT", "-d", "169.254.169.254/32", "-m", "owner", "!", "--uid-owner", "0", "-j", "REJECT"]
IMDS_V6 = ["OUTPUT", "-d", "fd00:ec2::254/128", "-m", "owner", "!", "--uid-owner", "0", "-j", "REJECT"]

# One fake for every command: records its argv as one JSON line in $FAKE_LOG and keeps state
# (enabled and active units, firewall rules) in $FAKE_STATE. $FAKE_FAIL names what fails:
# "systemctl enable", "iptables -I", ...
# -S: no site packages, a faster start (the fakes run a few hundred times).
FAKE = f"#!{sys.executable} -S\n" + """import json, os, pathlib, shutil, sys
name = pathlib.Path(sys.argv[0]).name
args = sys.argv[1:]
with open(os.environ["FAKE_LOG"], "a") as f:
    f.write(json.dumps([name] + args) + "\\n")
state = pathlib.Path(os.environ["FAKE_STATE"])
fail = os.environ.get("FAKE_FAIL", "").split(",")
def failing(what):
    if what in fail:
        print(f"{name}: injected failure of {what}", file=sys.stderr)
        sys.exit(1)
if name == "systemctl":
    words = [a for a in args if not a.startswith("--")]
    verb, units = words[0], words[1:]
    failing(f"systemctl {verb}")
    flag = lambda kind, unit: state / f"{kind}-{unit.removesuffix('.service')}"
    if verb == "is-active":
        sys.exit(0 if flag("active", units[0]).exists() else 3)
    if verb == "is-enabled":
        sys.exit(0 if flag("enabled", units[0]).exists() else 1)
    for unit in units:
        if verb == "enable":
            flag("enabled", unit).touch()
        if verb in ("start", "restart") or (verb == "enable" and "--now" in args):
            flag("active", unit).touch()
        if verb == "disable":
            flag("enabled", unit).unlink(missing_ok=True)
        if verb == "stop" or (verb == "disable" and "--now" in args):
            flag("active", unit).unlink(missing_ok=True)
elif name in ("iptables", "ip6tables"):
    rules_file = state / f"rules-{name}.json"
    rules = json.loads(rules_file.read_text()) if rules_file.exists() else []
    words = [a for a in args if a != "-w"]
    op, spec = words[0], words[1:]
    failing(f"{name} {op}")
    if op == "-C":
        sys.exit(0 if spec in rules else 1)
    if op == "-I":
        rules.insert(0, spec)
    elif op == "-D":
        if spec not in rules:
            print("iptables: Bad rule (does a matching rule exist in that chain?).", file=sys.stderr)
            sys.exit(1)
        rules.remove(spec)
    rules_file.write_text(json.dumps(rules))
elif name == "uname":
    print(os.environ.get("FAKE_UNAME_M", "x86_64") if args == ["-m"] else "Linux")
elif name == "aws":
    # aws s3 cp [options] s3://bucket/key DEST: from $FAKE_S3/bucket/key
    failing("aws")
    words = [a for a in args if not a.startswith("--")]
    if "--region" in args:
        words.remove(args[args.index("--region") + 1])
    assert words[:2] == ["s3", "cp"], words
    src, dest = words[2], words[3]
    path = pathlib.Path(os.environ["FAKE_S3"]) / src[len("s3://"):]
    if not path.exists():
        print(f"fatal error: An error occurred (404) when calling the HeadObject operation: Key {src!r} does not exist", file=sys.stderr)
        sys.exit(1)
    shutil.copyfile(path, dest)
elif name == "scontrol":
    failing("scontrol")
"""
FAKES = ("systemctl", "scontrol", "aws", "iptables", "ip6tables", "logger", "uname")

SLURM_CONF_TEXT = """# slurm.conf written by ParallelCluster
ClusterName=pc-test
SlurmctldHost=ip-10-0-0-10(10.0.0.10)
SlurmUser=slurm
ProctrackType=proctrack/cgroup
include slurm_parallelcluster.conf"""  # no final newline: --edit-slurm-conf must add one


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sums(**files: bytes) -> str:
    """A SHA256SUMS as scripts/release.sh writes it (`sha256sum` output)."""
    return "".join(f"{sha256(data)}  {name}\n" for name, data in files.items())


class Node:
    def __init__(self, tmp_path: pathlib.Path, node_type: str):
        # A space in the root catches unquoted paths.
        self.root = tmp_path / "fake root"
        self.fakes = tmp_path / "fakes"
        self.s3 = tmp_path / "s3"
        self.state = tmp_path / "state"
        self.log = tmp_path / "calls.jsonl"
        for d in (self.root / "etc/parallelcluster", self.root / "opt/slurm/etc", self.fakes,
                  self.s3 / S3_DIR, self.state):
            d.mkdir(parents=True, exist_ok=True)
        (self.root / "etc/parallelcluster/cfnconfig").write_text(
            f"stack_name=pc-stack\ncfn_region=us-east-1\ncfn_node_type={node_type}\ncfn_cluster_user=ec2-user\n"
        )
        (self.root / SLURM_CONF).write_text(SLURM_CONF_TEXT)
        (self.root / "opt/slurm/etc/slurm_parallelcluster.conf").write_text("SchedulerParameters=nohold_on_prolog_fail\n")
        for name in FAKES:
            fake = self.fakes / name
            fake.write_text(FAKE)
            fake.chmod(0o755)
        self.upload(BINARY)
        self.log.write_text("")

    def upload(self, binary: bytes, arm: bytes = BINARY_ARM, checksums: str | None = None):
        """The release in S3: both binaries and SHA256SUMS."""
        d = self.s3 / S3_DIR
        (d / NAME).write_bytes(binary)
        (d / NAME_ARM).write_bytes(arm)
        (d / "SHA256SUMS").write_text(checksums if checksums is not None else sums(**{NAME: binary, NAME_ARM: arm}))

    def run(self, args, expect_rc=0, root=None, **env_extra):
        env = {
            "PATH": f"{self.fakes}:{os.environ['PATH']}",
            "ROOT": str(self.root if root is None else root),
            "FAKE_LOG": str(self.log),
            "FAKE_STATE": str(self.state),
            "FAKE_S3": str(self.s3),
            "LC_ALL": "C",
            **env_extra,
        }
        proc = subprocess.run(["bash", str(SCRIPT), *args], env=env, capture_output=True, text=True, timeout=60)
        assert proc.returncode == expect_rc, f"exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
        return proc

    def calls(self, name=None):
        calls = [json.loads(line) for line in self.log.read_text().splitlines()]
        return [c for c in calls if name is None or c[0] == name]

    def mutating_calls(self):
        """Calls that change the node: everything but queries and reads."""
        out = []
        for c in self.calls():
            if c[0] == "systemctl" and any(v in c for v in ("is-active", "is-enabled")):
                continue
            if c[0] in ("iptables", "ip6tables") and "-C" in c:
                continue
            if c[0] in ("uname",) or (c[0] == "aws" and any(a.endswith("/SHA256SUMS") for a in c)):
                continue
            out.append(c)
        return out

    def journal(self):
        return self.calls("logger")

    def rules(self, tool="iptables"):
        f = self.state / f"rules-{tool}.json"
        return json.loads(f.read_text()) if f.exists() else []

    def path(self, rel):
        return self.root / rel

    def log_text(self):
        f = self.path(LOG)
        return f.read_text() if f.exists() else ""

    def snapshot(self):
        """Every file under the root: content and modification time."""
        return {str(p.relative_to(self.root)): (p.read_bytes(), p.stat().st_mtime_ns)
                for p in sorted(self.root.rglob("*")) if p.is_file() and p.relative_to(self.root).as_posix() != LOG}


def example_args(section: str):
    config = yaml.safe_load(EXAMPLE.read_text())
    if section == "HeadNode":
        action = config["HeadNode"]["CustomActions"]["OnNodeConfigured"]
    else:
        action = config["Scheduling"]["SlurmQueues"][0]["CustomActions"]["OnNodeConfigured"]
    assert action["Script"].endswith("/on-node-configured.sh")
    return [str(a) for a in action["Args"]]


def mode(path):
    return stat.S_IMODE(path.stat().st_mode)


def assert_installed(node: Node, cluster_name: str, role: str, namespace: str | None = None, binary: bytes = BINARY):
    assert node.path(BIN).read_bytes() == binary
    assert mode(node.path(BIN)) == 0o755
    # The built-in copies are the repository's files.
    assert node.path(EPILOG).read_text() == EPILOG_SRC.read_text(), \
        "the TaskEpilog built into on-node-configured.sh is out of date: run infra/parallelcluster/update-embedded.py"
    assert mode(node.path(EPILOG)) == 0o755
    assert node.path(UNIT).read_text() == UNIT_SRC.read_text(), \
        "the unit built into on-node-configured.sh is out of date: run infra/parallelcluster/update-embedded.py"
    assert mode(node.path(UNIT)) == 0o644
    config = tomllib.loads(node.path(CONFIG).read_text())
    # No namespace unless given: the shipper then uses Slurm/<cluster_name>, as Terraform does.
    want = {"cluster_name": cluster_name, "role": role} | ({"namespace": namespace} if namespace else {})
    assert config == want
    assert mode(node.path(CONFIG)) == 0o644
    calls = node.calls()
    assert ["systemctl", "daemon-reload"] in calls
    assert ["systemctl", "enable", "--now", "slurm-cw-shipper"] in calls
    assert calls.index(["systemctl", "daemon-reload"]) < calls.index(["systemctl", "enable", "--now", "slurm-cw-shipper"])
    leftovers = [p for p in node.root.rglob("*.new.*")]
    assert not leftovers, leftovers
    assert node.journal() == [], "a successful run writes nothing to the journal"


def assert_not_installed(node: Node):
    assert not node.path(BIN).exists()
    assert not any(c[:2] == ["systemctl", "enable"] and "slurm-cw-shipper" in c for c in node.calls())
    assert not [p for p in node.root.rglob("*.new.*")]


def assert_failure_logged(node: Node, proc, *words):
    """One line to the journal, the details in the log file."""
    (line,) = node.journal()
    assert line[:5] == ["logger", "-t", "slurm-cw-shipper", "-p", "user.err"], line
    assert "/var/log/slurm-cw-shipper-bootstrap.log" in line[-1]
    log = node.log_text()
    for w in words:
        assert w in line[-1] and w in log, (w, line, log)
    assert "failed" in log


@pytest.fixture
def head(tmp_path):
    return Node(tmp_path, "HeadNode")


@pytest.fixture
def compute(tmp_path):
    return Node(tmp_path, "ComputeFleet")


# --- installing --------------------------------------------------------------------------------


def test_head_node(head):
    head.run(example_args("HeadNode"))
    assert_installed(head, cluster_name="hpc-prod", role="head")
    cps = [c for c in head.calls("aws") if c[:2] == ["aws", "s3"]]
    # SHA256SUMS first, then the binary, in the node's region.
    assert [c[-2] for c in cps] == [f"s3://{S3_DIR}/SHA256SUMS", S3_BINARY], cps
    assert all("us-east-1" in c for c in cps)
    # slurm.conf is ParallelCluster's (CustomSlurmSettings sets TaskEpilog), IMDS too.
    assert head.path(SLURM_CONF).read_text() == SLURM_CONF_TEXT
    assert head.calls("scontrol") == []
    assert head.calls("iptables") == [] and head.calls("ip6tables") == []
    assert not head.path(IMDS_UNIT).exists()
    assert "installed /usr/local/bin/slurm-cw-shipper" in head.log_text()


def test_compute_node(compute):
    compute.run(example_args("SlurmQueues"))
    assert_installed(compute, cluster_name="hpc-prod", role="node")
    assert compute.path(SLURM_CONF).read_text() == SLURM_CONF_TEXT
    assert compute.calls("scontrol") == []
    # IMDS: root only, now and at every boot.
    assert compute.rules("iptables") == [IMDS_V4]
    assert compute.rules("ip6tables") == [IMDS_V6]
    assert compute.path(IMDS_UNIT).exists()
    assert ["systemctl", "enable", "slurm-cw-imds-restrict.service"] in compute.calls()


@pytest.mark.parametrize("node_type,section", [("HeadNode", "HeadNode"), ("ComputeFleet", "SlurmQueues")])
def test_second_run_changes_nothing(tmp_path, node_type, section):
    node = Node(tmp_path, node_type)
    args = example_args(section)
    node.run(args)
    before, rules = node.snapshot(), (node.rules("iptables"), node.rules("ip6tables"))
    node.log.write_text("")
    proc = node.run(args)
    assert node.mutating_calls() == [], node.mutating_calls()
    # The binary is not even fetched: the installed one has the checksum.
    assert not any(S3_BINARY in c for c in node.calls("aws"))
    assert node.snapshot() == before
    assert (node.rules("iptables"), node.rules("ip6tables")) == rules
    assert "nothing changed" in proc.stdout
    assert node.journal() == []


def test_new_binary_or_configuration_restarts(compute):
    args = example_args("SlurmQueues")
    compute.run(args)
    newer = BINARY + b"v2\n"
    compute.upload(newer)
    compute.log.write_text("")
    compute.run(args)
    assert compute.path(BIN).read_bytes() == newer
    assert ["systemctl", "restart", "slurm-cw-shipper"] in compute.calls()
    assert ["systemctl", "daemon-reload"] not in compute.calls()  # the unit did not change

    compute.log.write_text("")
    compute.run([*args, "--namespace", "Slurm/Other"])
    assert tomllib.loads(compute.path(CONFIG).read_text())["namespace"] == "Slurm/Other"
    assert ["systemctl", "restart", "slurm-cw-shipper"] in compute.calls()


def test_stopped_service_is_started(compute):
    args = example_args("SlurmQueues")
    compute.run(args)
    (compute.state / "active-slurm-cw-shipper").unlink()
    compute.log.write_text("")
    compute.run(args)
    assert ["systemctl", "start", "slurm-cw-shipper"] in compute.calls()


@pytest.mark.parametrize("node_type", ["HeadNode", "ComputeFleet"])
def test_cluster_name_from_slurm_conf_and_local_binary(tmp_path, node_type):
    node = Node(tmp_path, node_type)
    shared = node.root / "shared/slurm-cw"
    shared.mkdir(parents=True)
    (shared / NAME).write_bytes(BINARY)
    (shared / "SHA256SUMS").write_text(sums(**{NAME: BINARY}))
    node.run(["--binary", f"/shared/slurm-cw/{NAME}", "--namespace", "Slurm/Test"])
    assert_installed(node, cluster_name="pc-test", role="head" if node_type == "HeadNode" else "node",
                     namespace="Slurm/Test")
    assert node.calls("aws") == []


def test_cluster_name_falls_back_to_the_parallelcluster_name(compute):
    (compute.root / SLURM_CONF).unlink()
    # --namespace=Slurm: a cluster that keeps the namespace older versions shared.
    compute.run(["--binary", S3_BINARY, "--namespace=Slurm", "--role=node"])
    assert_installed(compute, cluster_name="pc-stack", role="node", namespace="Slurm")


# --- the role ----------------------------------------------------------------------------------


def test_role_argument_wins_over_cfnconfig(compute):
    compute.run(["--binary", S3_BINARY, "--role", "head"])
    assert_installed(compute, cluster_name="pc-test", role="head")
    assert compute.calls("iptables") == []


def test_role_from_cfnconfig_when_not_given(compute):
    compute.run(["--binary", S3_BINARY])
    assert_installed(compute, cluster_name="pc-test", role="node")


def test_role_without_cfnconfig(tmp_path):
    node = Node(tmp_path, "ComputeFleet")
    (node.root / "etc/parallelcluster/cfnconfig").unlink()
    node.run(["--binary", S3_BINARY, "--role", "node"])
    assert_installed(node, cluster_name="pc-test", role="node")
    # No region known: the AWS CLI's own.
    assert not any("--region" in c for c in node.calls("aws"))


def test_no_role_and_no_cfnconfig_fails_softly(tmp_path):
    node = Node(tmp_path, "ComputeFleet")
    (node.root / "etc/parallelcluster/cfnconfig").unlink()
    proc = node.run(["--binary", S3_BINARY])
    assert_not_installed(node)
    assert_failure_logged(node, proc, "--role")


def test_login_node_does_nothing(tmp_path):
    node = Node(tmp_path, "LoginNode")
    node.run(["--binary", S3_BINARY])
    assert not node.path(BIN).exists() and node.mutating_calls() == []


# --- never breaking the boot ---------------------------------------------------------------------


def test_failed_download_exits_0_and_logs(compute):
    (compute.s3 / S3_DIR / NAME).unlink()
    proc = compute.run(example_args("SlurmQueues"))
    assert_not_installed(compute)
    assert_failure_logged(compute, proc, f"could not fetch {S3_BINARY}")
    assert "does not exist" in compute.log_text()  # the AWS CLI's own words
    # What does not depend on the binary is done: the TaskEpilog (harmless without the daemon)
    # and the IMDS restriction.
    assert compute.path(EPILOG).exists()
    assert compute.rules() == [IMDS_V4]


def test_strict_fails_the_run(compute):
    (compute.s3 / S3_DIR / NAME).unlink()
    proc = compute.run([*example_args("SlurmQueues"), "--strict"], expect_rc=1)
    assert_not_installed(compute)
    assert_failure_logged(compute, proc, "could not fetch")


def test_failed_download_keeps_the_installed_binary(compute):
    args = example_args("SlurmQueues")
    compute.run(args)
    compute.upload(BINARY + b"v2\n")
    (compute.s3 / S3_DIR / NAME).unlink()
    compute.log.write_text("")
    compute.run(args)
    assert compute.path(BIN).read_bytes() == BINARY
    assert not any(c[:2] == ["systemctl", "restart"] for c in compute.calls())


def test_wrong_sha256_argument_refuses_to_install(compute):
    proc = compute.run(["--binary", S3_BINARY, "--role", "node", "--sha256", "0" * 64])
    assert_not_installed(compute)
    assert_failure_logged(compute, proc, f"sha256 {sha256(BINARY)}, not {'0' * 64}", "refused")


def test_mismatch_with_sha256sums_refuses_and_keeps_the_installed_binary(compute):
    args = example_args("SlurmQueues")
    compute.run(args)
    # A partial or wrong upload: the binary no longer matches SHA256SUMS.
    compute.upload(BINARY + b"v2\n", checksums=sums(**{NAME: BINARY + b"v3\n", NAME_ARM: BINARY_ARM}))
    compute.log.write_text("")
    proc = compute.run(args)
    assert compute.path(BIN).read_bytes() == BINARY
    assert not [p for p in compute.root.rglob("*.new.*")]
    assert not any(c[:2] == ["systemctl", "restart"] for c in compute.calls())
    assert_failure_logged(compute, proc, "refused")


def test_right_sha256_argument_needs_no_sha256sums(compute):
    (compute.s3 / S3_DIR / "SHA256SUMS").unlink()
    compute.run(["--binary", S3_BINARY, "--role", "node", "--sha256", sha256(BINARY).upper()])
    assert_installed(compute, cluster_name="pc-test", role="node")
    assert not any("SHA256SUMS" in a for c in compute.calls("aws") for a in c)


@pytest.mark.parametrize("checksums", [None, "", f"{sha256(BINARY)}  other-file\n"], ids=["no file", "empty", "no line"])
def test_no_checksum_refuses_to_install(compute, checksums):
    if checksums is None:
        (compute.s3 / S3_DIR / "SHA256SUMS").unlink()
    else:
        (compute.s3 / S3_DIR / "SHA256SUMS").write_text(checksums)
    proc = compute.run(["--binary", S3_BINARY, "--role", "node"])
    assert_not_installed(compute)
    assert_failure_logged(compute, proc, "SHA256SUMS")


def test_sha256sums_in_binary_mode_format(compute):
    (compute.s3 / S3_DIR / "SHA256SUMS").write_text(f"{sha256(BINARY_ARM)} *{NAME_ARM}\n{sha256(BINARY)} *{NAME}\n")
    compute.run(["--binary", S3_BINARY, "--role", "node"])
    assert_installed(compute, cluster_name="pc-test", role="node")


def test_systemd_failure_exits_0_and_logs(head):
    proc = head.run(example_args("HeadNode"), FAKE_FAIL="systemctl enable")
    assert_failure_logged(head, proc, "systemctl enable --now slurm-cw-shipper failed")


@pytest.mark.parametrize(
    "args",
    [
        [],
        ["--namespace", "Slurm"],
        ["--binary"],
        ["--binary", "s3://b/k", "--bogus"],
        ["--binary", "s3://b/k", "--namespace", "AWS/EC2"],
        ["--binary", "s3://b/k", "--namespace", ":Slurm"],
        ["--binary", "s3://b/k", "--namespace", "Slurm/${aws:username}"],
        ["--binary", "s3://b/k", "--cluster-name", "bad name"],
        ["--binary", "https://example.com/slurm-cw-shipper"],
        ["--binary", "s3://b/k", "--sha256", "abc"],
        ["--binary", "s3://b/k", "--role", "login"],
    ],
)
def test_bad_arguments(compute, args):
    """Logged, and the boot goes on; with --strict, exit status 2."""
    proc = compute.run(args)
    assert "usage:" in proc.stderr
    assert_not_installed(compute)
    assert_failure_logged(compute, proc, "bad arguments" if "--cluster-name" not in args else "bad cluster name")
    assert not any(c[0] == "systemctl" for c in compute.calls())
    compute.log.write_text("")
    compute.run([*args, "--strict"], expect_rc=2)


# --- one script for every machine ----------------------------------------------------------------


def s3_fetches(node):
    return [c[-2] for c in node.calls("aws") if c[:3] == ["aws", "s3", "cp"]]


@pytest.mark.parametrize("section", ["HeadNode", "SlurmQueues"])
def test_example_args_on_aarch64_install_the_aarch64_binary(tmp_path, section):
    """The example's Args, on a Graviton instance: its own binary, checked against its own line."""
    node = Node(tmp_path, "HeadNode" if section == "HeadNode" else "ComputeFleet")
    node.run(example_args(section), FAKE_UNAME_M="aarch64")
    assert_installed(node, cluster_name="hpc-prod", role="head" if section == "HeadNode" else "node", binary=BINARY_ARM)
    assert s3_fetches(node) == [f"s3://{S3_DIR}/SHA256SUMS", S3_BINARY_ARM]
    assert f"installed /usr/local/bin/slurm-cw-shipper from {S3_BINARY_ARM} (sha256 {sha256(BINARY_ARM)})" in node.log_text()


def test_aarch64_node_installs_the_aarch64_binary(compute):
    compute.run(["--binary", S3_BINARY, "--binary-aarch64", S3_BINARY_ARM, "--role", "node"], FAKE_UNAME_M="aarch64")
    assert_installed(compute, cluster_name="pc-test", role="node", binary=BINARY_ARM)
    assert S3_BINARY not in s3_fetches(compute)


def test_aarch64_sha256_argument(compute):
    (compute.s3 / S3_DIR / "SHA256SUMS").unlink()
    args = ["--binary", S3_BINARY, "--sha256", sha256(BINARY), "--binary-aarch64", S3_BINARY_ARM,
            "--sha256-aarch64", sha256(BINARY_ARM), "--role", "node"]
    compute.run(args, FAKE_UNAME_M="aarch64")
    assert compute.path(BIN).read_bytes() == BINARY_ARM


def test_aarch64_checksum_mismatch_refused(compute):
    """SHA256SUMS right for the x86_64 binary, wrong for the aarch64 one (a partial upload)."""
    args = example_args("SlurmQueues")
    compute.run(args, FAKE_UNAME_M="aarch64")
    newer, listed = BINARY_ARM + b"v2\n", BINARY_ARM + b"v3\n"
    compute.upload(BINARY, arm=newer, checksums=sums(**{NAME: BINARY, NAME_ARM: listed}))
    compute.log.write_text("")
    proc = compute.run(args, FAKE_UNAME_M="aarch64")
    assert compute.path(BIN).read_bytes() == BINARY_ARM, "the installed binary stays"
    assert not [p for p in compute.root.rglob("*.new.*")]
    assert not any(c[:2] == ["systemctl", "restart"] for c in compute.calls())
    assert_failure_logged(compute, proc, f"{S3_BINARY_ARM} has sha256 {sha256(newer)}, not {sha256(listed)}", "refused")
    # --strict: the boot fails.
    compute.log.write_text("")
    compute.run([*args, "--strict"], expect_rc=1, FAKE_UNAME_M="aarch64")


def test_aarch64_wrong_sha256_argument_refused(compute):
    """--sha256-aarch64 is checked, not --sha256 (which is right for the aarch64 file here)."""
    args = ["--binary", S3_BINARY, "--sha256", sha256(BINARY_ARM), "--binary-aarch64", S3_BINARY_ARM,
            "--sha256-aarch64", sha256(BINARY), "--role", "node"]
    proc = compute.run(args, FAKE_UNAME_M="aarch64")
    assert_not_installed(compute)
    assert_failure_logged(compute, proc, f"sha256 {sha256(BINARY_ARM)}, not {sha256(BINARY)}", "refused")


@pytest.mark.parametrize("machine,binary", [
    ("aarch64", BINARY),
    ("x86_64", BINARY_ARM),
    ("aarch64", BINARY_RISCV),
    ("aarch64", b"#!/bin/sh\necho not a binary\n"),
], ids=["x86_64 on aarch64", "aarch64 on x86_64", "riscv64 on aarch64", "a script"])
def test_binary_for_another_machine_refused(compute, machine, binary):
    """The checksum matches (the file's own SHA256SUMS line), but the file is for another machine:
    --binary-aarch64 pointed at the x86_64 binary, say."""
    (compute.s3 / S3_DIR / "wrong").write_bytes(binary)
    (compute.s3 / S3_DIR / "SHA256SUMS").write_text(sums(wrong=binary))
    flag = "--binary" if machine == "x86_64" else "--binary-aarch64"
    proc = compute.run([flag, f"s3://{S3_DIR}/wrong", "--role", "node"], FAKE_UNAME_M=machine)
    assert_not_installed(compute)
    assert_failure_logged(compute, proc, f"s3://{S3_DIR}/wrong is not a binary for {machine}", "refused")


@pytest.mark.parametrize("machine,args", [
    ("riscv64", ["--binary", S3_BINARY, "--binary-aarch64", S3_BINARY_ARM]),
    ("ppc64le", ["--binary", S3_BINARY, "--binary-aarch64", S3_BINARY_ARM]),
    ("aarch64", ["--binary", S3_BINARY]),
    ("x86_64", ["--binary-aarch64", S3_BINARY_ARM]),
])
def test_no_binary_for_the_machine_logs_and_exits_0(compute, machine, args):
    """A failure like the others: the log file, one journal line, exit 0; 1 with --strict."""
    proc = compute.run([*args, "--role", "node"], FAKE_UNAME_M=machine)
    want = f"no slurm-cw-shipper binary for this machine ({machine})"
    assert want in proc.stdout + proc.stderr
    assert_failure_logged(compute, proc, want)
    assert_not_installed(compute)
    assert not compute.path(UNIT).exists()
    assert s3_fetches(compute) == [], "nothing is downloaded"
    # The node is still hardened.
    assert compute.rules() == [IMDS_V4]

    compute.log.write_text("")
    proc = compute.run([*args, "--role", "node", "--strict"], expect_rc=1, FAKE_UNAME_M=machine)
    assert_failure_logged(compute, proc, want)
    assert_not_installed(compute)


def test_release_names_match_the_example():
    """scripts/release.sh writes a SHA256SUMS line for each binary the example's Args name, under
    that name."""
    release = RELEASE.read_text()
    (line,) = [l for l in release.splitlines() if "> SHA256SUMS" in l]
    summed = line.split("sha256sum", 1)[1].split(">")[0].split()
    for section in ("HeadNode", "SlurmQueues"):
        args = example_args(section)
        for flag, name in (("--binary", NAME), ("--binary-aarch64", NAME_ARM)):
            assert args[args.index(flag) + 1] == f"s3://{S3_DIR}/{name}", (section, flag)
            assert name in summed and f"dist/{name}" in release, name


# --- IMDS ----------------------------------------------------------------------------------------


def test_imds_rule_added_once(compute):
    args = example_args("SlurmQueues")
    compute.run(args)
    compute.run(args)
    compute.run(args)
    assert compute.rules("iptables") == [IMDS_V4] and compute.rules("ip6tables") == [IMDS_V6]
    inserts = [c for c in compute.calls("iptables") if "-I" in c]
    assert inserts == [["iptables", "-w", "-I", *IMDS_V4]]
    # Checked before added, every time.
    checks = [c for c in compute.calls("iptables") if "-C" in c]
    assert len(checks) == 3 and compute.calls("iptables").index(checks[0]) < compute.calls("iptables").index(inserts[0])


def test_existing_imds_rule_is_not_added_again(compute):
    (compute.state / "rules-iptables.json").write_text(json.dumps([IMDS_V4]))
    compute.run(example_args("SlurmQueues"))
    assert compute.rules("iptables") == [IMDS_V4]
    assert not any("-I" in c for c in compute.calls("iptables"))


@pytest.mark.parametrize("fail", ["iptables -I", "iptables -C,iptables -I"])
def test_imds_failure_is_logged_never_fatal(compute, fail):
    proc = compute.run([*example_args("SlurmQueues"), "--strict"], FAKE_FAIL=fail)
    assert compute.path(BIN).read_bytes() == BINARY
    (line,) = compute.journal()
    assert line[:5] == ["logger", "-t", "slurm-cw-shipper", "-p", "user.warning"] and "IMDS" in line[-1]
    assert "injected failure" in compute.log_text()
    assert "warning" in proc.stdout


def test_ipv6_failure_is_only_logged(compute):
    proc = compute.run(example_args("SlurmQueues"), FAKE_FAIL="ip6tables -I")
    assert compute.rules("iptables") == [IMDS_V4]
    assert compute.journal() == []
    assert "IPv6 not restricted" in proc.stdout


def test_no_imds_restriction_opts_out_and_takes_the_rule_away(compute):
    args = example_args("SlurmQueues")
    compute.run(args)
    assert compute.rules() == [IMDS_V4]
    compute.run([*args, "--no-imds-restriction"])
    assert compute.rules("iptables") == [] and compute.rules("ip6tables") == []
    assert not compute.path(IMDS_UNIT).exists()
    assert ["systemctl", "disable", "slurm-cw-imds-restrict.service"] in compute.calls()
    # And again: nothing to take away.
    compute.log.write_text("")
    compute.run([*args, "--no-imds-restriction"])
    assert compute.mutating_calls() == []


def test_no_imds_restriction_on_a_fresh_node(compute):
    compute.run([*example_args("SlurmQueues"), "--no-imds-restriction"])
    assert_installed(compute, cluster_name="hpc-prod", role="node")
    assert not any("-I" in c for c in compute.calls("iptables"))
    assert not compute.path(IMDS_UNIT).exists()


def test_imds_boot_unit(compute, tmp_path):
    """The boot unit adds the same rule, checked first, and systemd accepts it."""
    compute.run(example_args("SlurmQueues"))
    unit = compute.path(IMDS_UNIT).read_text()
    v4 = " ".join(IMDS_V4)
    assert f"ExecStart=/bin/sh -c 'iptables -w -C {v4} 2>/dev/null || iptables -w -I {v4}'" in unit
    assert "Before=slurmd.service" in unit and "WantedBy=multi-user.target" in unit
    tool = shutil.which("systemd-analyze")
    if tool is None:
        pytest.skip("systemd-analyze is not installed")
    copy = tmp_path / "slurm-cw-imds-restrict.service"
    copy.write_text(unit)
    proc = subprocess.run([tool, "verify", str(copy)], capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, SYSTEMD_LOG_COLOR="0"))
    out = (proc.stdout + proc.stderr).strip()
    assert proc.returncode == 0 and out == "", out


# --- slurm.conf, only when asked -----------------------------------------------------------------


def task_epilog_lines(node):
    return [l for l in node.path(SLURM_CONF).read_text().splitlines() if l.lower().startswith("taskepilog")]


def test_edit_slurm_conf_on_request(head):
    args = [*example_args("HeadNode"), "--edit-slurm-conf"]
    head.run(args)
    assert task_epilog_lines(head) == [TASK_EPILOG_LINE]
    # The original lines are kept, and the unterminated last one was not glued to ours.
    text = head.path(SLURM_CONF).read_text()
    assert text.startswith(SLURM_CONF_TEXT + "\n") and text.endswith(TASK_EPILOG_LINE + "\n")
    calls = head.calls()
    # slurm.conf is changed and slurmctld told only after the shipper runs.
    assert calls.index(["systemctl", "enable", "--now", "slurm-cw-shipper"]) < calls.index(["scontrol", "reconfigure"])
    head.log.write_text("")
    head.run(args)
    assert task_epilog_lines(head) == [TASK_EPILOG_LINE]
    assert head.calls("scontrol") == []


def test_edit_slurm_conf_leaves_an_existing_task_epilog(head):
    (head.root / "opt/slurm/etc/slurm_parallelcluster.conf").write_text("TaskEpilog=/opt/site/task-epilog\n")
    before = head.path(SLURM_CONF).read_text()
    proc = head.run([*example_args("HeadNode"), "--edit-slurm-conf"])
    assert head.path(SLURM_CONF).read_text() == before
    assert head.calls("scontrol") == []
    assert "already has a TaskEpilog" in proc.stdout


def test_edit_slurm_conf_is_for_the_head_node(compute):
    compute.run([*example_args("SlurmQueues"), "--edit-slurm-conf"])
    assert compute.path(SLURM_CONF).read_text() == SLURM_CONF_TEXT


# --- the rest ------------------------------------------------------------------------------------


def test_help():
    proc = subprocess.run(["bash", str(SCRIPT), "--help"], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0 and "--binary SRC" in proc.stdout and "--no-imds-restriction" in proc.stdout


def test_installed_task_epilog_asks_the_daemon(compute, tmp_path):
    """The installed TaskEpilog calls `slurm-cw-shipper --job-ended $SLURM_JOB_ID` and never fails."""
    compute.run(example_args("SlurmQueues"))
    record = tmp_path / "epilog-calls"
    fake_bin = tmp_path / "fake-shipper"
    fake_bin.write_text(f"#!/bin/sh\necho \"$@\" >> '{record}'\nexit 1\n")
    fake_bin.chmod(0o755)
    env = {"PATH": os.environ["PATH"], "SLURM_JOB_ID": "4242", "SLURM_CW_SHIPPER_BIN": str(fake_bin)}
    proc = subprocess.run(["sh", str(compute.path(EPILOG))], env=env, capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0 and proc.stdout == ""
    assert record.read_text() == "--job-ended 4242\n"


def test_embedded_copies_are_current():
    proc = subprocess.run([sys.executable, str(INFRA / "parallelcluster" / "update-embedded.py"), "--check"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr


def test_example_cluster_config():
    config = yaml.safe_load(EXAMPLE.read_text())
    for iam in [config["HeadNode"]["Iam"]] + [q["Iam"] for q in config["Scheduling"]["SlurmQueues"]]:
        policies = [p["Policy"] for p in iam["AdditionalIamPolicies"]]
        assert any(p.startswith("arn:aws:iam::") and ":policy/slurm-cw-shipper-" in p for p in policies), policies
    assert config["Scheduling"]["Scheduler"] == "slurm"
    assert len(config["Scheduling"]["SlurmQueues"]) >= 1
    # TaskEpilog through ParallelCluster, not by editing slurm.conf.
    custom = config["Scheduling"]["SlurmSettings"]["CustomSlurmSettings"]
    assert {"TaskEpilog": TASK_EPILOG} in custom
    head = example_args("HeadNode")
    assert head[head.index("--role") + 1] == "head"
    for q in config["Scheduling"]["SlurmQueues"]:
        args = [str(a) for a in q["CustomActions"]["OnNodeConfigured"]["Args"]]
        assert args[args.index("--role") + 1] == "node"
    for args in [head] + [[str(a) for a in q["CustomActions"]["OnNodeConfigured"]["Args"]] for q in config["Scheduling"]["SlurmQueues"]]:
        assert "--edit-slurm-conf" not in args and "--strict" not in args
    assert config["HeadNode"]["Imds"]["Secured"] is True


@pytest.mark.parametrize("path", [SCRIPT, REPO / "tests/infra/run.sh"], ids=lambda p: p.name)
def test_shellcheck(path):
    tool = shutil.which("shellcheck")
    if tool is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("shellcheck is not installed")
        pytest.skip("shellcheck is not installed (apt-get install shellcheck)")
    proc = subprocess.run([tool, "-x", str(path)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
