#!/usr/bin/env bash
# The aarch64 (Graviton) shipper, checked on this machine under qemu-user:
#   1. the binary: dist/slurm-cw-shipper-aarch64 when scripts/release.sh built it after the last
#      change to the sources and dist/SHA256SUMS has its checksum, else built here as
#      release.sh builds it (cargo zigbuild, glibc 2.26; several minutes from clean);
#   2. `file` calls it an ELF 64-bit ARM aarch64 executable; it needs no glibc newer than 2.26;
#   3. under qemu-aarch64 (natively on an aarch64 host): `--version`, then `--once --sink stdout`
#      as a compute node over the fixture job (shipper/tests/fixtures: cgroup v2 job 1001 and its
#      /proc; no Slurm, no GPU, no AWS): every line a datum or a job record, every metric one of
#      docs/metrics.md, and the job's figures equal to the fixture's files.
#
# Installs what is missing with apt when root: qemu-user, libc6-arm64-cross and
# libgcc-s1-arm64-cross (the aarch64 loader and libraries qemu runs the binary with, from
# /usr/aarch64-linux-gnu), file. Not root: names the packages and exits 1. Building also needs
# cargo-zigbuild (crates.io) and zig (PyPI), installed as release.sh installs them.
#
#   scripts/arm64-check.sh           build only when dist/ is stale, then check
#   scripts/arm64-check.sh --build   build even when dist/ is fresh
# Exit 0 when every check passed, 1 otherwise.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
cd "$repo"
# shellcheck source=scripts/lib/zigbuild.sh
. "$here/lib/zigbuild.sh"

arm=aarch64-unknown-linux-gnu
dist_bin=dist/slurm-cw-shipper-aarch64
fixtures=$repo/shipper/tests/fixtures
job_dir=$fixtures/cgroup/v2-kernel-docs/system.slice/slurmstepd.scope/job_1001
started=$SECONDS
step() { printf '\n==> arm64-check: %s\n' "$*"; }
die() { printf 'arm64-check: FAILED: %s\n' "$*" >&2; exit 1; }

force_build=no
case ${1:-} in
    '') ;;
    --build) force_build=yes ;;
    *) echo "usage: $0 [--build]" >&2; exit 1 ;;
esac

step "tools"
host=$(uname -m)
need=()
command -v file >/dev/null || need+=(file)
command -v readelf >/dev/null || need+=(binutils)
if [ "$host" != aarch64 ]; then
    command -v qemu-aarch64 >/dev/null || command -v qemu-aarch64-static >/dev/null || need+=(qemu-user)
    [ -e /usr/aarch64-linux-gnu/lib/ld-linux-aarch64.so.1 ] || need+=(libc6-arm64-cross)
    [ -e /usr/aarch64-linux-gnu/lib/libgcc_s.so.1 ] || need+=(libgcc-s1-arm64-cross)
fi
if [ ${#need[@]} -gt 0 ]; then
    if [ "$(id -u)" -ne 0 ]; then
        die "missing ${need[*]}: run as root, or: sudo apt-get install ${need[*]}"
    fi
    echo "installing ${need[*]} (apt)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null || die "apt-get update failed"
    apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null \
        || die "apt-get install ${need[*]} failed"
fi

# dist/ is fresh when release.sh wrote it after every change to what the shipper is built from.
dist_is_fresh() {
    [ -f "$dist_bin" ] && [ -f dist/SHA256SUMS ] || return 1
    (cd dist && grep -E '^[0-9a-f]{64} [ *]slurm-cw-shipper-aarch64$' SHA256SUMS | sha256sum --check --status) || return 1
    [ -z "$(find Cargo.toml Cargo.lock catalog formats sink shipper -type f -newer "$dist_bin" -print -quit)" ]
}

if [ "$force_build" = no ] && dist_is_fresh; then
    bin=$repo/$dist_bin
    step "binary: $dist_bin (newer than the sources, its SHA256SUMS line matches)"
else
    step "binary: cargo zigbuild --release -p slurm-cw-shipper --target $arm.$GLIBC"
    zigbuild_tools "$arm"
    cargo zigbuild --release --locked -p slurm-cw-shipper --target "$arm.$GLIBC" \
        || die "cargo zigbuild for $arm failed"
    bin=$(cargo_target_dir)/$arm/release/slurm-cw-shipper
fi

step "what it is"
kind=$(file -b "$bin")
echo "file: $kind"
[[ $kind == "ELF 64-bit LSB "*"ARM aarch64"* ]] || die "$bin is not an ELF 64-bit ARM aarch64 executable"
check_machine "$bin" aarch64 || die "$bin: wrong machine"
check_glibc "$bin" || die "$bin needs a newer glibc than Amazon Linux 2's $GLIBC"

tmp=$(mktemp -d)
trap 'rm -rf -- "$tmp"' EXIT

runner_for aarch64 || die "no qemu-aarch64 and /usr/aarch64-linux-gnu to run it with"
step "--version (${runner[*]:-native})"
status=0
version=$(timeout 60 "${runner[@]}" "$bin" --version 2>&1) || status=$?
[ "$status" -eq 0 ] || die "--version exited $status: $version"
echo "$version"
want_version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n 1)
[[ $version == "slurm-cw-shipper $want_version"* ]] || die "--version printed '$version', not slurm-cw-shipper $want_version"

step "--once --sink stdout, role node, over the fixture job 1001 (cgroup v2)"
# No Slurm commands (an empty bin_dir), no GPUs, no spool, a socket of its own: only the files.
mkdir "$tmp/no-slurm"
cat > "$tmp/config.toml" <<EOF
cluster_name = "arm64-check"
node_name = "arm64-check-node"
role = "node"

[slurm]
bin_dir = "$tmp/no-slurm"

[node]
cgroup_root = "$fixtures/cgroup/v2-kernel-docs"
cgroup_version = "v2"
proc_root = "$fixtures/proc/slurm-job-1001"
hook_socket = "$tmp/hook.sock"
job_metrics = "both"

[spool]
enabled = false

[gpu]
enabled = "off"
EOF
status=0
timeout 120 "${runner[@]}" "$bin" --config "$tmp/config.toml" --once --sink stdout > "$tmp/out.jsonl" 2> "$tmp/err.txt" || status=$?
if [ "$status" -ne 0 ]; then
    cat "$tmp/err.txt" >&2
    die "--once --sink stdout exited $status"
fi
echo "$(wc -l < "$tmp/out.jsonl") lines; standard error: $(wc -l < "$tmp/err.txt") lines"

python3 - "$tmp/out.jsonl" docs/metrics.md "$job_dir" <<'EOF' || die "the output of --once --sink stdout is not what the fixture holds"
import json, pathlib, re, sys

out, catalog, job = sys.argv[1], pathlib.Path(sys.argv[2]), pathlib.Path(sys.argv[3])
names = set(re.findall(r"^\| `([A-Za-z0-9]+)` \|", catalog.read_text(), re.M))
assert len(names) > 100, f"{catalog}: only {len(names)} metric names found"

datums, records = [], []
for n, line in enumerate(open(out), 1):
    d = json.loads(line)
    if "record" in d:
        records.append(d["record"])
        continue
    assert {"namespace", "metric", "dimensions", "unit", "timestamp"} <= d.keys(), (n, line)
    assert d["namespace"] == "Slurm/arm64-check" and d["dimensions"]["ClusterName"] == "arm64-check", (n, line)
    assert d["metric"] in names, f"line {n}: {d['metric']} is not in {catalog}"
    assert ("value" in d) + ("values" in d) + ("stats" in d) == 1, (n, line)
    datums.append(d)
assert datums, "no datums"

def job_value(metric):
    found = [d["value"] for d in datums if d["metric"] == metric and d["dimensions"].get("JobId") == "1001"]
    assert len(found) == 1, (metric, found)
    return found[0]

def cpus(spec):
    n = 0
    for part in spec.strip().split(","):
        lo, _, hi = part.partition("-")
        n += int(hi or lo) - int(lo) + 1
    return n

want = {
    "MemoryUsage": int((job / "memory.current").read_text()),
    "MemoryMax": int((job / "memory.peak").read_text()),
    "MemoryLimit": int((job / "memory.max").read_text()),
    "CpusAllocated": cpus((job / "cpuset.cpus.effective").read_text()),
}
for metric, value in want.items():
    assert job_value(metric) == value, (metric, job_value(metric), value)
[on_node] = [d["value"] for d in datums if d["metric"] == "JobsOnNode"]
assert on_node == 1, on_node

[sample] = [r for r in records if r.get("Type") == "job_sample"]
assert sample["JobId"] == "1001" and sample["NodeName"] == "arm64-check-node", sample
for metric, value in want.items():
    assert sample[metric] == value, (metric, sample[metric], value)
print(f"{len(datums)} datums of {len({d['metric'] for d in datums})} catalog metrics, "
      f"{len(records)} job record(s); job 1001: " + ", ".join(f"{k}={v}" for k, v in want.items()))
EOF

step "passed in $((SECONDS - started)) s"
