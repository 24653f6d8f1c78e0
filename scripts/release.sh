#!/usr/bin/env bash
# Builds what gets deployed into dist/:
#   dist/slurm-cw-shipper-x86_64    the node/head daemon for x86_64 nodes
#   dist/slurm-cw-shipper-aarch64   the same for aarch64 (Graviton: hpc7g, c7g, g5g, ...) nodes
#   dist/slurm-cw-lambda.zip        the Lambda package (`bootstrap`, x86_64), terraform's
#                                   lambda_zip_path
#   dist/SHA256SUMS                 `sha256sum` lines of the three
# The binaries' names end in what `uname -m` prints on the node: on-node-configured.sh takes
# --binary (x86_64) and --binary-aarch64 and checks each against its line in SHA256SUMS.
#
# Linked against glibc 2.26 through cargo-zigbuild (scripts/lib/zigbuild.sh), so one binary per
# machine runs on every ParallelCluster OS (Amazon Linux 2 has glibc 2.26; Ubuntu 20.04+,
# RHEL 8+ and Lambda's provided.al2023 are newer). Not static musl: NVML is loaded with dlopen,
# which a static musl binary cannot do. The aarch64 binary is run here under qemu-user when it
# is installed; scripts/arm64-check.sh installs it and runs a whole collection.
#
#   scripts/release.sh
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
cd "$repo"
# shellcheck source=scripts/lib/zigbuild.sh
. "$here/lib/zigbuild.sh"

x86=x86_64-unknown-linux-gnu
arm=aarch64-unknown-linux-gnu
step() { printf '\n==> %s\n' "$*"; }

step "tools (cargo-zigbuild, zig $ZIG_VERSION, Rust std for $x86 and $arm)"
zigbuild_tools "$x86" "$arm"

step "cargo zigbuild --release for $x86, glibc $GLIBC (several minutes from clean)"
cargo zigbuild --release --locked -p slurm-cw-shipper -p slurm-cw-lambda --target "$x86.$GLIBC"
step "cargo zigbuild --release for $arm, glibc $GLIBC (several minutes from clean)"
cargo zigbuild --release --locked -p slurm-cw-shipper --target "$arm.$GLIBC"

target_dir=$(cargo_target_dir)
rm -rf dist
mkdir -p dist
cp "$target_dir/$x86/release/slurm-cw-shipper" dist/slurm-cw-shipper-x86_64
cp "$target_dir/$arm/release/slurm-cw-shipper" dist/slurm-cw-shipper-aarch64
python3 - "$target_dir/$x86/release/bootstrap" dist/slurm-cw-lambda.zip <<'EOF'
import sys, zipfile
src, dst = sys.argv[1], sys.argv[2]
info = zipfile.ZipInfo("bootstrap", date_time=(2020, 1, 1, 0, 0, 0))
info.external_attr = 0o100755 << 16  # a regular file Lambda may execute
info.compress_type = zipfile.ZIP_DEFLATED
with open(src, "rb") as f, zipfile.ZipFile(dst, "w") as z:
    z.writestr(info, f.read())
EOF

step "checks"
# Each binary is for its machine, and every versioned glibc symbol it needs exists in glibc
# $GLIBC.
for arch in x86_64 aarch64; do
    check_machine "dist/slurm-cw-shipper-$arch" "$arch"
    check_glibc "dist/slurm-cw-shipper-$arch"
done
check_machine "$target_dir/$x86/release/bootstrap" x86_64
check_glibc "$target_dir/$x86/release/bootstrap"
for arch in x86_64 aarch64; do
    if runner_for "$arch"; then
        version=$("${runner[@]}" "dist/slurm-cw-shipper-$arch" --version)
        echo "slurm-cw-shipper-$arch --version (${runner[*]:-native}): $version"
    else
        echo "dist/slurm-cw-shipper-$arch: not run here (no qemu-$arch and /usr/$arch-linux-gnu; scripts/arm64-check.sh installs them)"
    fi
done
python3 - dist/slurm-cw-lambda.zip <<'EOF'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    [info] = z.infolist()
    assert info.filename == "bootstrap", info.filename
    assert (info.external_attr >> 16) & 0o111, "bootstrap is not executable"
    print(f"slurm-cw-lambda.zip: bootstrap, {info.file_size / 1e6:.1f} MB unpacked")
EOF
(cd dist && sha256sum slurm-cw-shipper-x86_64 slurm-cw-shipper-aarch64 slurm-cw-lambda.zip > SHA256SUMS)
ls -l dist
