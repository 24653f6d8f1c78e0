"""infra/parallelcluster/on-node-configured.sh in a fake ParallelCluster root: a temporary
directory with /etc/parallelcluster/cfnconfig and /opt/slurm/etc/slurm.conf, and recording
fakes of systemctl, scontrol and aws first in PATH. Runs it with the Args of
cluster-config.example.yaml, for a head node and a compute node."""

import json
import os
import pathlib
import shutil
import stat
import subprocess
import sys

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
SLURM_CONF = "opt/slurm/etc/slurm.conf"
TASK_EPILOG_LINE = "TaskEpilog=/opt/slurm-cw-shipper/task-epilog.sh"
BINARY = b"\x7fELF fake slurm-cw-shipper\n"

# A fake records its argv as one JSON line; systemctl keeps "active" state in a file so that a
# second run sees the service running.
FAKE = """#!/usr/bin/env python3
import json, os, pathlib, shutil, sys
name = pathlib.Path(sys.argv[0]).name
with open(os.environ["FAKE_LOG"], "a") as f:
    f.write(json.dumps([name] + sys.argv[1:]) + "\\n")
state = pathlib.Path(os.environ["FAKE_STATE"])
if name == "systemctl":
    args = sys.argv[1:]
    if args[:1] == ["is-active"]:
        sys.exit(0 if (state / "active").exists() else 3)
    if args[:2] == ["enable", "--now"] or args[:1] in (["start"], ["restart"]):
        (state / "active").touch()
elif name == "aws":
    # aws s3 cp [options] s3://bucket/key DEST: from $FAKE_S3/bucket/key
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    if "--region" in sys.argv:
        args.remove(sys.argv[sys.argv.index("--region") + 1])
    assert args[:2] == ["s3", "cp"], args
    src, dest = args[2], args[3]
    path = pathlib.Path(os.environ["FAKE_S3"]) / src[len("s3://"):]
    if not path.exists():
        print(f"fatal error: An error occurred (404) when calling the HeadObject operation: Key {src!r} does not exist", file=sys.stderr)
        sys.exit(1)
    shutil.copyfile(path, dest)
"""

SLURM_CONF_TEXT = """# slurm.conf written by ParallelCluster
ClusterName=pc-test
SlurmctldHost=ip-10-0-0-10(10.0.0.10)
SlurmUser=slurm
ProctrackType=proctrack/cgroup
include slurm_parallelcluster.conf"""  # no final newline: the script must add one


class Node:
    def __init__(self, tmp_path: pathlib.Path, node_type: str):
        # A space in the root catches unquoted paths.
        self.root = tmp_path / "fake root"
        self.fakes = tmp_path / "fakes"
        self.s3 = tmp_path / "s3"
        self.state = tmp_path / "state"
        self.log = tmp_path / "calls.jsonl"
        for d in (self.root / "etc/parallelcluster", self.root / "opt/slurm/etc", self.fakes,
                  self.s3 / "my-bucket/slurm-cw", self.state):
            d.mkdir(parents=True, exist_ok=True)
        (self.root / "etc/parallelcluster/cfnconfig").write_text(
            f"stack_name=pc-stack\ncfn_region=us-east-1\ncfn_node_type={node_type}\ncfn_cluster_user=ec2-user\n"
        )
        (self.root / SLURM_CONF).write_text(SLURM_CONF_TEXT)
        (self.root / "opt/slurm/etc/slurm_parallelcluster.conf").write_text("SchedulerParameters=nohold_on_prolog_fail\n")
        for name in ("systemctl", "scontrol", "aws"):
            fake = self.fakes / name
            fake.write_text(FAKE)
            fake.chmod(0o755)
        (self.s3 / "my-bucket/slurm-cw/slurm-cw-shipper").write_bytes(BINARY)
        self.log.write_text("")

    def run(self, args, expect_rc=0, root=None):
        env = {
            "PATH": f"{self.fakes}:{os.environ['PATH']}",
            "ROOT": str(self.root if root is None else root),
            "FAKE_LOG": str(self.log),
            "FAKE_STATE": str(self.state),
            "FAKE_S3": str(self.s3),
            "LC_ALL": "C",
        }
        proc = subprocess.run(["bash", str(SCRIPT), *args], env=env, capture_output=True, text=True, timeout=60)
        assert proc.returncode == expect_rc, f"exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
        return proc

    def calls(self):
        return [json.loads(line) for line in self.log.read_text().splitlines()]

    def path(self, rel):
        return self.root / rel


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


def assert_installed(node: Node, cluster_name: str, namespace: str = "Slurm"):
    assert node.path(BIN).read_bytes() == BINARY
    assert mode(node.path(BIN)) == 0o755
    # The built-in copies are the repository's files.
    assert node.path(EPILOG).read_text() == EPILOG_SRC.read_text(), \
        "the TaskEpilog built into on-node-configured.sh is out of date: run infra/parallelcluster/update-embedded.py"
    assert mode(node.path(EPILOG)) == 0o755
    assert node.path(UNIT).read_text() == UNIT_SRC.read_text(), \
        "the unit built into on-node-configured.sh is out of date: run infra/parallelcluster/update-embedded.py"
    assert mode(node.path(UNIT)) == 0o644
    import tomllib
    config = tomllib.loads(node.path(CONFIG).read_text())
    assert config == {"cluster_name": cluster_name, "namespace": namespace}
    assert mode(node.path(CONFIG)) == 0o644
    calls = node.calls()
    assert ["systemctl", "daemon-reload"] in calls
    assert ["systemctl", "enable", "--now", "slurm-cw-shipper"] in calls
    assert calls.index(["systemctl", "daemon-reload"]) < calls.index(["systemctl", "enable", "--now", "slurm-cw-shipper"])
    leftovers = [p for p in node.root.rglob("*.new.*")]
    assert not leftovers, leftovers


def task_epilog_lines(node):
    return [l for l in node.path(SLURM_CONF).read_text().splitlines() if l.lower().startswith("taskepilog")]


@pytest.fixture
def head(tmp_path):
    return Node(tmp_path, "HeadNode")


@pytest.fixture
def compute(tmp_path):
    return Node(tmp_path, "ComputeFleet")


def test_head_node(head):
    head.run(example_args("HeadNode"))
    assert_installed(head, cluster_name="hpc-prod")
    calls = head.calls()
    assert any(c[:3] == ["aws", "s3", "cp"] and "s3://my-bucket/slurm-cw/slurm-cw-shipper" in c
               and "us-east-1" in c for c in calls), calls
    assert task_epilog_lines(head) == [TASK_EPILOG_LINE]
    # The original lines are kept, and the unterminated last one was not glued to ours.
    text = head.path(SLURM_CONF).read_text()
    assert text.startswith(SLURM_CONF_TEXT + "\n") and text.endswith(TASK_EPILOG_LINE + "\n")
    assert ["scontrol", "reconfigure"] in calls
    # slurm.conf is changed and slurmctld told only after the shipper runs.
    assert calls.index(["systemctl", "enable", "--now", "slurm-cw-shipper"]) < calls.index(["scontrol", "reconfigure"])


def test_compute_node(compute):
    compute.run(example_args("SlurmQueues"))
    assert_installed(compute, cluster_name="hpc-prod")
    assert task_epilog_lines(compute) == []
    assert compute.path(SLURM_CONF).read_text() == SLURM_CONF_TEXT
    assert not any(c[0] == "scontrol" for c in compute.calls())


@pytest.mark.parametrize("node_type", ["HeadNode", "ComputeFleet"])
def test_cluster_name_from_slurm_conf_and_local_binary(tmp_path, node_type):
    node = Node(tmp_path, node_type)
    shared = node.root / "shared/slurm-cw"
    shared.mkdir(parents=True)
    (shared / "slurm-cw-shipper").write_bytes(BINARY)
    node.run(["--binary", "/shared/slurm-cw/slurm-cw-shipper", "--namespace", "Slurm/Test"])
    assert_installed(node, cluster_name="pc-test", namespace="Slurm/Test")
    assert not any(c[0] == "aws" for c in node.calls())


def test_cluster_name_falls_back_to_the_parallelcluster_name(compute):
    (compute.root / SLURM_CONF).unlink()
    compute.run(["--binary", "s3://my-bucket/slurm-cw/slurm-cw-shipper", "--namespace=Slurm"])
    assert_installed(compute, cluster_name="pc-stack")


def test_second_run_restarts_and_adds_nothing(head):
    args = example_args("HeadNode")
    head.run(args)
    head.log.write_text("")
    head.run(args)
    calls = head.calls()
    assert ["systemctl", "restart", "slurm-cw-shipper"] in calls
    assert task_epilog_lines(head) == [TASK_EPILOG_LINE]
    assert ["scontrol", "reconfigure"] not in calls


def test_existing_task_epilog_is_left_alone(head):
    (head.root / "opt/slurm/etc/slurm_parallelcluster.conf").write_text("TaskEpilog=/opt/site/task-epilog\n")
    before = head.path(SLURM_CONF).read_text()
    proc = head.run(example_args("HeadNode"))
    assert head.path(SLURM_CONF).read_text() == before
    assert ["scontrol", "reconfigure"] not in head.calls()
    assert "already has a TaskEpilog" in proc.stdout


def test_login_node_does_nothing(tmp_path):
    node = Node(tmp_path, "LoginNode")
    node.run(example_args("HeadNode"))
    assert not node.path(BIN).exists() and node.calls() == []


@pytest.mark.parametrize(
    "args",
    [
        [],
        ["--namespace", "Slurm"],
        ["--binary"],
        ["--binary", "s3://b/k", "--bogus"],
        ["--binary", "s3://b/k", "--namespace", "AWS/EC2"],
        ["--binary", "s3://b/k", "--cluster-name", "bad name"],
        ["--binary", "https://example.com/slurm-cw-shipper"],
    ],
)
def test_bad_arguments_exit_2(compute, args):
    proc = compute.run(args, expect_rc=2)
    assert "usage:" in proc.stderr or "bad" in proc.stderr or "s3://" in proc.stderr
    assert not compute.path(BIN).exists()
    assert not any(c[0] == "systemctl" for c in compute.calls())


def test_failures_exit_1(tmp_path):
    node = Node(tmp_path, "ComputeFleet")
    node.run(["--binary", "s3://my-bucket/slurm-cw/missing"], expect_rc=1)
    assert not node.path(BIN).exists()
    assert not any(c[0] == "systemctl" for c in node.calls())
    node.run(["--binary", "/nowhere/slurm-cw-shipper"], expect_rc=1)
    (node.root / "etc/parallelcluster/cfnconfig").unlink()
    node.run(["--binary", "s3://my-bucket/slurm-cw/slurm-cw-shipper"], expect_rc=1)


def test_help():
    proc = subprocess.run(["bash", str(SCRIPT), "--help"], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0 and "--binary SRC" in proc.stdout


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


@pytest.mark.parametrize("path", [SCRIPT, REPO / "tests/infra/run.sh"], ids=lambda p: p.name)
def test_shellcheck(path):
    tool = shutil.which("shellcheck")
    if tool is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("shellcheck is not installed")
        pytest.skip("shellcheck is not installed (apt-get install shellcheck)")
    proc = subprocess.run([tool, "-x", str(path)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
