"""The systemd unit and the example configuration.

The unit is checked twice: an offline parse in Python that asserts every hardening key the
shipper's collectors allow (and that nothing hides what they read), and, where systemd is
installed, `systemd-analyze verify` (no warning allowed) and `systemd-analyze security
--offline` (an exposure score threshold). Both systemd checks work without a running systemd."""

import os
import re
import shutil
import subprocess
import tomllib

import pytest

from conftest import INFRA, REPO

UNIT = INFRA / "systemd" / "slurm-cw-shipper.service"
EXAMPLE = INFRA / "systemd" / "config.toml.example"
EXEC = "/usr/local/bin/slurm-cw-shipper"


def parse_unit(text: str) -> dict[str, dict[str, list[str]]]:
    """section -> key -> values (in order; systemd allows a key several times)."""
    sections: dict[str, dict[str, list[str]]] = {}
    current = None
    lines = iter(text.splitlines())
    for raw in lines:
        line = raw.strip()
        while line.endswith("\\"):  # continuation
            line = line[:-1] + " " + next(lines).strip()
        if not line or line[0] in "#;":
            continue
        m = re.fullmatch(r"\[([A-Za-z]+)\]", line)
        if m:
            current = sections.setdefault(m.group(1), {})
            continue
        assert current is not None, f"key outside a section: {line}"
        key, sep, value = line.partition("=")
        assert sep, f"not key=value: {line}"
        current.setdefault(key.strip(), []).append(value.strip())
    return sections


@pytest.fixture(scope="module")
def unit():
    return parse_unit(UNIT.read_text())


def value(unit, section, key):
    values = unit[section].get(key)
    assert values, f"[{section}] {key} is not set"
    assert len(values) == 1, f"[{section}] {key} is set {len(values)} times"
    return values[0]


def test_exec_start(unit):
    assert value(unit, "Service", "ExecStart") == f"{EXEC} --config /etc/slurm-cw-shipper/config.toml"
    # One unit for every node: the role is detected by the binary, not passed here.
    assert "--role" not in UNIT.read_text().split("ExecStart=", 1)[1].splitlines()[0]
    assert value(unit, "Install", "WantedBy") == "multi-user.target"


@pytest.mark.parametrize(
    "key,expected",
    [
        ("NoNewPrivileges", "yes"),
        ("ProtectSystem", "strict"),
        ("PrivateTmp", "yes"),
        ("ProtectKernelTunables", "yes"),
        ("ProtectKernelModules", "yes"),
        ("ProtectControlGroups", "yes"),
        ("StateDirectory", "slurm-cw-shipper"),
        ("RuntimeDirectory", "slurm-cw-shipper"),
        ("RuntimeDirectoryMode", "0755"),
        ("Restart", "always"),
        ("RestartSec", "5s"),
        ("CPUQuota", "10%"),
        ("MemoryMax", "128M"),
        # a Slurm command killed for memory in the unit must not stop the daemon
        ("OOMPolicy", "continue"),
        ("TasksMax", "64"),
        ("Nice", "10"),
        ("TimeoutStopSec", "30"),
        # A flood of hook connections must not leave no descriptor for /proc and cgroup reads.
        ("LimitNOFILE", "65536"),
        ("DevicePolicy", "closed"),
    ],
)
def test_service_setting(unit, key, expected):
    assert value(unit, "Service", key) == expected


def test_protect_home_lets_root_read_its_aws_profile(unit):
    assert value(unit, "Service", "ProtectHome") in ("read-only", "yes")


def test_capabilities_are_exactly_what_the_collectors_need(unit):
    caps = value(unit, "Service", "CapabilityBoundingSet").split()
    assert sorted(caps) == ["CAP_DAC_READ_SEARCH", "CAP_SYS_PTRACE"]
    # Root keeps them through exec: nothing may take them away (noroot) or add more.
    assert "SecureBits" not in unit["Service"]
    assert not unit["Service"].get("AmbientCapabilities", [""])[0]
    assert value(unit, "Service", "User") == "root"


def test_nothing_hides_what_the_collectors_read(unit):
    service = unit["Service"]
    # Every job's processes in /proc; /sys/fs/cgroup (read-only is fine); GPUs in /dev.
    assert service.get("ProtectProc", ["default"])[0] == "default"
    assert service.get("ProcSubset", ["all"])[0] == "all"
    assert service.get("PrivateDevices", ["no"])[0] == "no"
    assert service.get("PrivateUsers", ["no"])[0] == "no"
    assert service.get("PrivateNetwork", ["no"])[0] == "no"
    hidden = " ".join(service.get("InaccessiblePaths", []) + service.get("TemporaryFileSystem", []))
    for path in ("/proc", "/sys", "/run/munge", "/opt/slurm", "/etc/slurm", "/usr/bin", "/dev"):
        assert path not in hidden, f"{path} must stay visible"
    # Network: CloudWatch over HTTPS, slurmctld, munge's socket, getaddrinfo's netlink.
    families = set(value(unit, "Service", "RestrictAddressFamilies").split())
    assert {"AF_UNIX", "AF_INET", "AF_INET6", "AF_NETLINK"} <= families


def test_devices_are_exactly_what_nvml_opens(unit):
    """DevicePolicy=closed with the NVIDIA driver's device groups: /dev/nvidiactl and
    /dev/nvidia<N> (major 195: "nvidiactl"/"nvidia" on current drivers, "nvidia-frontend" on
    older ones) and /dev/nvidia-caps/ read-only (MIG). Not nvidia-uvm (CUDA's)."""
    allowed = [v.split() for v in unit["Service"]["DeviceAllow"]]
    assert sorted(map(tuple, allowed)) == sorted([
        ("char-nvidiactl", "rw"), ("char-nvidia-frontend", "rw"), ("char-nvidia-caps", "r"),
    ])
    for spec, _ in allowed:
        # systemd takes globs in device group names only, never in /dev paths.
        assert spec.startswith(("char-", "block-")) or ("*" not in spec and "[" not in spec and "?" not in spec), spec


def test_bad_configuration_is_not_restarted(unit):
    # Exit status 2 is a bad configuration: restarting every 5 s cannot fix it.
    assert "2" in value(unit, "Service", "RestartPreventExitStatus").split()


def verifiable_copy(tmp_path):
    """The unit with ExecStart pointing at an executable that exists here (verify checks it)."""
    fake = tmp_path / "slurm-cw-shipper"
    fake.write_text("#!/bin/sh\nexit 0\n")
    fake.chmod(0o755)
    copy = tmp_path / "slurm-cw-shipper.service"
    copy.write_text(UNIT.read_text().replace(f"ExecStart={EXEC} ", f"ExecStart={fake} "))
    return copy


def systemd_analyze():
    tool = shutil.which("systemd-analyze")
    if tool is None:
        pytest.skip("systemd-analyze is not installed (apt-get install systemd): offline checks only")
    return tool


def test_systemd_analyze_verify(tmp_path):
    tool = systemd_analyze()
    copy = verifiable_copy(tmp_path)
    proc = subprocess.run([tool, "verify", str(copy)], capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, SYSTEMD_LOG_COLOR="0", SYSTEMD_PAGER=""))
    out = (proc.stdout + proc.stderr).strip()
    assert proc.returncode == 0, out
    # verify exits 0 on unknown keys and bad values (it ignores them): any line is a failure.
    assert out == "", f"systemd-analyze verify complained:\n{out}"


def test_the_socket_unit_verifies_and_holds_the_default_prometheus_address(tmp_path):
    """slurm-cw-shipper.socket, beside the service it passes its socket to: no warning, and
    the address it holds is the endpoint's default (the daemon takes the socket passed for
    prometheus.address)."""
    tool = systemd_analyze()
    service = verifiable_copy(tmp_path)
    socket = tmp_path / "slurm-cw-shipper.socket"
    socket.write_text((INFRA / "systemd" / "slurm-cw-shipper.socket").read_text())
    proc = subprocess.run([tool, "verify", str(socket), str(service)], capture_output=True, text=True,
                          timeout=120, env=dict(os.environ, SYSTEMD_LOG_COLOR="0", SYSTEMD_PAGER=""))
    out = (proc.stdout + proc.stderr).strip()
    assert proc.returncode == 0 and out == "", f"systemd-analyze verify complained:\n{out}"
    sections = parse_unit(socket.read_text())
    assert sections["Socket"]["ListenStream"] == ["127.0.0.1:9817"]
    assert sections["Socket"]["Service"] == ["slurm-cw-shipper.service"]
    example = tomllib.loads(uncommented(EXAMPLE.read_text()))
    assert example.get("prometheus", {}).get("address", "127.0.0.1:9817") == "127.0.0.1:9817"


def test_systemd_analyze_verify_catches_mistakes(tmp_path):
    """The check above would see a misspelt key or a bad value."""
    tool = systemd_analyze()
    copy = verifiable_copy(tmp_path)
    copy.write_text(copy.read_text().replace("ProtectSystem=strict", "ProtectSystem=strickt\nProtectKernelTunable=yes"))
    proc = subprocess.run([tool, "verify", str(copy)], capture_output=True, text=True, timeout=120)
    out = proc.stdout + proc.stderr
    assert "ProtectKernelTunable" in out and "protect system" in out.lower(), out


def test_systemd_analyze_security_exposure(tmp_path):
    tool = systemd_analyze()
    copy = verifiable_copy(tmp_path)
    # --threshold is in tenths of the printed 0.0-10.0 exposure level; the unit scores about 2.8 (systemd 252).
    proc = subprocess.run([tool, "security", "--offline=yes", "--threshold=35", "--no-pager", str(copy)],
                          capture_output=True, text=True, timeout=120)
    out = proc.stdout + proc.stderr
    if "--offline" in out and "unrecognized" in out:
        pytest.skip("this systemd-analyze has no --offline (systemd < 250)")
    level = re.search(r"Overall exposure level for \S+: (\d+\.\d+)", out)
    assert proc.returncode == 0 and level, out
    print(f"systemd-analyze security: exposure {level.group(1)}")


# --- config.toml.example ----------------------------------------------------------------------


def uncommented(text: str) -> str:
    return re.sub(r"(?m)^# ([a-z_0-9]+ = )", r"\1", text)


def example_keys() -> set[str]:
    keys, section = set(), ""
    for line in uncommented(EXAMPLE.read_text()).splitlines():
        m = re.fullmatch(r"\[([a-z.]+)\]", line.strip())  # [node.findings] too
        if m:
            section = m.group(1) + "."
        m = re.match(r"([a-z_0-9]+) = ", line)
        if m:
            keys.add(section + m.group(1))
    return keys


def test_config_example_parses_as_is_and_uncommented():
    assert tomllib.loads(EXAMPLE.read_text()) is not None
    data = tomllib.loads(uncommented(EXAMPLE.read_text()))
    # The default for the cluster name shown: the cluster's own namespace.
    assert data["namespace"] == f"Slurm/{data['cluster_name']}"
    assert data["node"]["hook_socket"] == "/run/slurm-cw-shipper/hook.sock"
    assert data["cloudwatch"]["max_retries"] == 6


def test_config_example_has_every_documented_key():
    """Every key of the configuration table (docs/configuration.md) is in the example, and no other."""
    page = (REPO / "docs" / "configuration.md").read_text()
    table = page.split("<!-- configuration table", 1)[1].split("<!-- end of the configuration table", 1)[0]
    # The sections compared; spool.* and logs.* (whose example shows one key) are not.
    compared = lambda key: "." not in key or key.startswith(("cloudwatch.", "slurm.", "head.", "node.", "gpu.", "log."))
    documented = set()
    for cell in re.findall(r"(?m)^\| `([^`|]+)`(?: / `([^`|]+)`)? \|", table):
        for key in filter(None, cell):
            if compared(key):
                documented.add(key)
    # "node.v2_parent / node.v2_scope" is one row for two keys; slurm.conf is [slurm] conf; a row
    # "section.*" stands for every key of that section in the example.
    documented = {"slurm.conf_key" if k == "slurm.conf" else k for k in documented}
    keys = {"slurm.conf_key" if k == "slurm.conf" else k for k in example_keys() if compared(k)}
    for wildcard in [k for k in documented if k.endswith(".*")]:
        covered = {k for k in keys if k.startswith(wildcard[:-1])}
        assert covered, f"docs/configuration.md documents {wildcard}, which the example has no key of"
        documented = (documented - {wildcard}) | covered
    assert len(documented) > 30, documented
    assert documented - keys == set(), f"keys documented in docs/configuration.md but not in the example: {sorted(documented - keys)}"
    assert keys - documented == set(), f"keys in the example not documented in docs/configuration.md: {sorted(keys - documented)}"
