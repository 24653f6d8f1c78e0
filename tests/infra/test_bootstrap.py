"""infra/parallelcluster/on-node-configured.sh (also infra/pcs/*.sh) in a fake root: it downloads
the binary (fake `aws` from a directory, real curl on file:// URLs, or a path), checks its SHA-256
and runs its `install` with the arguments it does not use itself. The binary here is a shell
script that records how it was run; `slurm-cw-shipper install` itself is tested in
shipper/tests/it/install/."""

import hashlib
import json
import os
import pathlib
import subprocess
import sys

import pytest
import yaml

from conftest import INFRA, REPO

SCRIPT = INFRA / "parallelcluster" / "on-node-configured.sh"
EXAMPLE = INFRA / "parallelcluster" / "cluster-config.example.yaml"
BIN = "usr/local/bin/slurm-cw-shipper"
LOG = "var/log/slurm-cw-shipper/install.log"
NAME, NAME_ARM = "slurm-cw-shipper-x86_64", "slurm-cw-shipper-aarch64"
S3_DIR = "my-bucket/slurm-cw"

# A "binary" per machine: records its argv as JSON in $FAKE_RUNS, installs itself under --root
# as `install` would, and exits $FAKE_INSTALL_STATUS.
FAKE_BINARY = """#!/bin/sh
# {machine}
python3 -c 'import json, sys; print(json.dumps(sys.argv[1:]))' "$@" >> "$FAKE_RUNS"
root=; prev=
for a in "$@"; do [ "$prev" = --root ] && root=$a; prev=$a; done
cp "$0" "$root/usr/local/bin/slurm-cw-shipper"
exit "${{FAKE_INSTALL_STATUS:-0}}"
"""
BINARY = FAKE_BINARY.format(machine="x86_64").encode()
BINARY_ARM = FAKE_BINARY.format(machine="aarch64").encode()
# An ELF header for another machine: bash cannot run it (126).
FOREIGN = b"\x7fELF\x02\x01\x01" + bytes(9) + (2).to_bytes(2, "little") + (0xF3).to_bytes(2, "little") + bytes(64)

FAKE = f"#!{sys.executable} -S\n" + """import json, os, pathlib, shutil, sys
name = pathlib.Path(sys.argv[0]).name
args = sys.argv[1:]
with open(os.environ["FAKE_LOG"], "a") as f:
    f.write(json.dumps([name] + args) + "\\n")
if name == "uname":
    print(os.environ.get("FAKE_UNAME_M", "x86_64") if args == ["-m"] else "Linux")
elif name == "aws":
    words = [a for a in args if not a.startswith("--")]
    if "--region" in args:
        words.remove(args[args.index("--region") + 1])
    src, dest = words[2], words[3]
    path = pathlib.Path(os.environ["FAKE_S3"]) / src[len("s3://"):]
    if not path.exists():
        print(f"fatal error: An error occurred (404) when calling the HeadObject operation: Key {src!r} does not exist", file=sys.stderr)
        sys.exit(1)
    shutil.copyfile(path, dest)
"""


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sums(**files: bytes) -> str:
    return "".join(f"{sha256(data)}  {name}\n" for name, data in files.items())


class Node:
    def __init__(self, tmp: pathlib.Path, cfnconfig: bool = True):
        self.root, self.fakes, self.s3 = tmp / "fake root", tmp / "fakes", tmp / "s3"
        self.log, self.runs = tmp / "calls.jsonl", tmp / "runs.jsonl"
        for d in (self.root / "etc/parallelcluster", self.fakes, self.s3 / S3_DIR):
            d.mkdir(parents=True)
        if cfnconfig:
            (self.root / "etc/parallelcluster/cfnconfig").write_text("stack_name=pc\ncfn_region=us-east-1\ncfn_node_type=ComputeFleet\n")
        for name in ("aws", "uname", "logger"):
            (self.fakes / name).write_text(FAKE)
            (self.fakes / name).chmod(0o755)
        self.log.write_text("")
        self.runs.write_text("")
        self.upload(BINARY)

    def upload(self, binary: bytes, arm: bytes = BINARY_ARM, checksums: str | None = None):
        d = self.s3 / S3_DIR
        (d / NAME).write_bytes(binary)
        (d / NAME_ARM).write_bytes(arm)
        (d / "SHA256SUMS").write_text(checksums if checksums is not None else sums(**{NAME: binary, NAME_ARM: arm}))

    def run(self, args, expect_rc=0, **env):
        env = {"PATH": f"{self.fakes}:{os.environ['PATH']}", "ROOT": str(self.root), "FAKE_LOG": str(self.log),
               "FAKE_RUNS": str(self.runs), "FAKE_S3": str(self.s3), "LC_ALL": "C", **env}
        proc = subprocess.run(["bash", str(SCRIPT), *args], env=env, capture_output=True, text=True, timeout=60)
        assert proc.returncode == expect_rc, f"exit {proc.returncode}\n{proc.stderr}"
        self.log_text = (self.root / LOG).read_text() if (self.root / LOG).exists() else ""
        return proc

    def calls(self, name):
        return [c for c in map(json.loads, self.log.read_text().splitlines()) if c[0] == name]

    def installs(self):
        """How the binary's `install` was run."""
        return [json.loads(line) for line in self.runs.read_text().splitlines()]

    def journal(self):
        return self.calls("logger")

    def fetched(self):
        return [c[-2] for c in self.calls("aws")]


def example_args(section: str):
    config = yaml.safe_load(EXAMPLE.read_text())
    node = config["HeadNode"] if section == "HeadNode" else config["Scheduling"]["SlurmQueues"][0]
    action = node["CustomActions"]["OnNodeConfigured"]
    assert action["Script"].endswith("/on-node-configured.sh")
    return [str(a) for a in action["Args"]]


def assert_failed(node, *words):
    (line,) = node.journal()
    assert line[:5] == ["logger", "-t", "slurm-cw-shipper", "-p", "user.err"], line
    for w in words:
        assert w in line[-1] and w in node.log_text, (w, line, node.log_text)
    assert node.installs() == []


@pytest.fixture
def node(tmp_path):
    return Node(tmp_path)


@pytest.mark.parametrize("section,role", [("HeadNode", "head"), ("SlurmQueues", "node")])
def test_example_args_download_check_and_install(node, section, role):
    node.run(example_args(section))
    assert node.fetched() == [f"s3://{S3_DIR}/SHA256SUMS", f"s3://{S3_DIR}/{NAME}"]
    assert all(c[c.index("--region") + 1] == "us-east-1" for c in node.calls("aws"))
    assert node.installs() == [["install", "--root", str(node.root), "--role", role, "--cluster-name", "hpc-prod"]]
    assert (node.root / BIN).read_bytes() == BINARY
    assert node.journal() == [] and not list((node.root / "usr/local/bin").glob(".slurm-cw-shipper.*"))
    # Again: the installed binary has the checksum, so it runs without a download.
    node.log.write_text("")
    node.run(example_args(section))
    assert node.fetched() == [f"s3://{S3_DIR}/SHA256SUMS"]
    assert node.installs()[-1][0] == "install" and len(node.installs()) == 2


def test_pcs_https_source_with_sha256_and_no_cfnconfig(tmp_path):
    """A PCS node: no cfnconfig (no --region), the binary over curl (file:// here)."""
    node = Node(tmp_path, cfnconfig=False)
    src = f"file://{node.s3}/{S3_DIR}/{NAME}"
    node.run(["--binary", src, "--sha256", sha256(BINARY).upper(), "--role", "node", "--cluster-name", "pcs-demo"])
    assert node.installs() == [["install", "--root", str(node.root), "--role", "node", "--cluster-name", "pcs-demo"]]
    assert node.calls("aws") == []
    for script in ("node-bootstrapped.sh", "login-node.sh"):
        assert (INFRA / "pcs" / script).resolve() == SCRIPT.resolve()


def test_aarch64_node_runs_the_aarch64_binary(node):
    node.run(example_args("SlurmQueues"), FAKE_UNAME_M="aarch64")
    assert node.fetched() == [f"s3://{S3_DIR}/SHA256SUMS", f"s3://{S3_DIR}/{NAME_ARM}"]
    assert (node.root / BIN).read_bytes() == BINARY_ARM


@pytest.mark.parametrize("case", ["wrong --sha256", "SHA256SUMS mismatch", "no SHA256SUMS", "no line"])
def test_wrong_or_missing_checksum_refused(node, case):
    args = ["--binary", f"s3://{S3_DIR}/{NAME}", "--role", "node"]
    if case == "wrong --sha256":
        args += ["--sha256", "0" * 64]
    elif case == "SHA256SUMS mismatch":
        node.upload(BINARY, checksums=sums(**{NAME: BINARY + b"v2"}))
    elif case == "no SHA256SUMS":
        (node.s3 / S3_DIR / "SHA256SUMS").unlink()
    else:
        node.upload(BINARY, checksums=sums(other=BINARY))
    node.run(args)
    assert_failed(node, "refused" if "sha256" in case.lower() and "no" not in case else "SHA256SUMS")
    assert not (node.root / BIN).exists()
    node.log.write_text("")
    node.run([*args, "--strict"], expect_rc=1)


def test_failed_download_logged(node):
    (node.s3 / S3_DIR / NAME).unlink()
    node.run(example_args("SlurmQueues"))
    assert_failed(node, f"could not fetch s3://{S3_DIR}/{NAME}")
    assert "does not exist" in node.log_text


def test_binary_for_another_machine_refused(node):
    (node.s3 / S3_DIR / "foreign").write_bytes(FOREIGN)
    node.run(["--binary", f"s3://{S3_DIR}/foreign", "--sha256", sha256(FOREIGN)])
    (line,) = node.journal()
    assert "does not run on this machine (x86_64)" in line[-1]


@pytest.mark.parametrize("machine,args", [("riscv64", ["--binary", "/b"]), ("aarch64", ["--binary", "/b"]), ("x86_64", ["--binary-aarch64", "/b"])])
def test_no_binary_for_the_machine(node, machine, args):
    node.run(args, FAKE_UNAME_M=machine)
    assert_failed(node, f"no slurm-cw-shipper binary for this machine ({machine})")
    node.log.write_text("")
    node.run([*args, "--strict"], expect_rc=1, FAKE_UNAME_M=machine)


@pytest.mark.parametrize("status", [1, 2])
def test_install_status_fails_the_boot_only_with_strict(node, status):
    node.run(example_args("SlurmQueues"), FAKE_INSTALL_STATUS=str(status))
    assert f"install exited {status}; not failing" in node.log_text
    node.run([*example_args("SlurmQueues"), "--strict"], expect_rc=status, FAKE_INSTALL_STATUS=str(status))
    assert node.installs()[-1][-1] == "--strict", "--strict goes on to install"


@pytest.mark.parametrize("args", [[], ["--binary"], ["--binary", "bucket/key"], ["--binary", "/b", "--sha256", "abc"]])
def test_bad_arguments(node, args):
    node.run(args)
    assert_failed(node, "bad arguments")
    node.log.write_text("")
    node.run([*args, "--strict"], expect_rc=2)


def test_help():
    proc = subprocess.run(["bash", str(SCRIPT), "--help"], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0 and "--binary SRC" in proc.stdout and "--sha256" in proc.stdout


def test_release_names_match_the_example():
    release = (REPO / "scripts" / "release.sh").read_text()
    (line,) = [l for l in release.splitlines() if "> SHA256SUMS" in l]
    summed = line.split("sha256sum", 1)[1].split(">")[0].split()
    for section in ("HeadNode", "SlurmQueues"):
        args = example_args(section)
        for flag, name in (("--binary", NAME), ("--binary-aarch64", NAME_ARM)):
            assert args[args.index(flag) + 1] == f"s3://{S3_DIR}/{name}", (section, flag)
            assert name in summed and f"dist/{name}" in release, name


def test_example_cluster_config():
    config = yaml.safe_load(EXAMPLE.read_text())
    for iam in [config["HeadNode"]["Iam"]] + [q["Iam"] for q in config["Scheduling"]["SlurmQueues"]]:
        policies = [p["Policy"] for p in iam["AdditionalIamPolicies"]]
        assert any(p.startswith("arn:aws:iam::") and ":policy/slurm-cw-shipper-" in p for p in policies), policies
    custom = config["Scheduling"]["SlurmSettings"]["CustomSlurmSettings"]
    assert {"TaskEpilog": "/opt/slurm-cw-shipper/task-epilog.sh"} in custom
    head = example_args("HeadNode")
    assert head[head.index("--role") + 1] == "head"
    queues = [[str(a) for a in q["CustomActions"]["OnNodeConfigured"]["Args"]] for q in config["Scheduling"]["SlurmQueues"]]
    assert all(a[a.index("--role") + 1] == "node" for a in queues)
    assert all("--edit-slurm-conf" not in a and "--strict" not in a for a in [head, *queues])
    assert config["HeadNode"]["Imds"]["Secured"] is True


@pytest.mark.parametrize("writable", ["the directory", "SHA256SUMS"])
def test_a_local_source_a_user_could_write_needs_sha256(node, writable):
    """A path on the node without --sha256: the SHA256SUMS beside it proves something only where
    no user could have put both there (a world-writable directory such as /tmp, a file a user
    may rewrite); with --sha256 the same source is fine."""
    d = node.root / "opt/drop"
    d.mkdir(parents=True)
    (d / NAME).write_bytes(BINARY)
    (d / "SHA256SUMS").write_text(sums(**{NAME: BINARY}))
    (d if writable == "the directory" else d / "SHA256SUMS").chmod(0o1777 if writable == "the directory" else 0o666)
    node.run(["--binary", f"/opt/drop/{NAME}", "--role", "node"])
    assert_failed(node, "can be written by a user other than root: give --sha256")
    assert not (node.root / BIN).exists()
    node.log.write_text("")
    node.run(["--binary", f"/opt/drop/{NAME}", "--sha256", sha256(BINARY), "--role", "node"])
    assert (node.root / BIN).read_bytes() == BINARY
    # Only root can write it: its SHA256SUMS is taken.
    d.chmod(0o755)
    (d / "SHA256SUMS").chmod(0o644)
    (node.root / BIN).unlink()
    node.run(["--binary", f"/opt/drop/{NAME}", "--role", "node"])
    assert (node.root / BIN).read_bytes() == BINARY


def test_a_download_over_the_size_bound_is_refused(node, tmp_path):
    """A source that sends more than 256 MiB is not the shipper, and must not fill the disk: a
    sparse 300 MiB file over curl (file://) is cut off and refused."""
    big = tmp_path / "big"
    with open(big, "wb") as f:
        f.truncate(300 * 1024 * 1024)
    node.run(["--binary", f"file://{big}", "--sha256", "0" * 64, "--role", "node"])
    assert_failed(node, f"could not fetch file://{big}")
    assert not (node.root / BIN).exists()
