#!/usr/bin/env bash
# Builds what gets deployed, for x86_64 Linux, into dist/:
#   dist/slurm-cw-shipper        the node/head daemon (copy to S3 for on-node-configured.sh)
#   dist/slurm-cw-lambda.zip     the Lambda package (`bootstrap`), terraform's lambda_zip_path
#   dist/SHA256SUMS
#
# Linked against glibc 2.26 through cargo-zigbuild, so one binary runs on every ParallelCluster
# OS (Amazon Linux 2 has glibc 2.26; Ubuntu 20.04+, RHEL 8+ and Lambda's provided.al2023 are
# newer). Not static musl: NVML is loaded with dlopen, which a static musl binary cannot do.
# Zig comes from PyPI (`ziglang`) in .venv-zig.
#
#   scripts/release.sh
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
cd "$repo"

target=x86_64-unknown-linux-gnu
glibc=2.26
zig_version=0.15.2
step() { printf '\n==> %s\n' "$*"; }

step "tools (cargo-zigbuild, zig $zig_version)"
command -v cargo-zigbuild >/dev/null || cargo install cargo-zigbuild --locked --quiet
if ! .venv-zig/bin/python -c 'import ziglang' 2>/dev/null; then
    python3 -m venv .venv-zig
    .venv-zig/bin/pip install --quiet "ziglang==$zig_version"
fi
# cargo-zigbuild runs `python3 -m ziglang` when no `zig` is on PATH.
export PATH="$repo/.venv-zig/bin:$PATH"
rustup target list --installed 2>/dev/null | grep -qx "$target" || rustup target add "$target"

step "cargo zigbuild --release for $target, glibc $glibc (several minutes from clean)"
cargo zigbuild --release --locked -p slurm-cw-shipper -p slurm-cw-lambda --target "$target.$glibc"

out=target/$target/release
rm -rf dist
mkdir -p dist
cp "$out/slurm-cw-shipper" dist/slurm-cw-shipper
python3 - "$out/bootstrap" dist/slurm-cw-lambda.zip <<'EOF'
import sys, zipfile
src, dst = sys.argv[1], sys.argv[2]
info = zipfile.ZipInfo("bootstrap", date_time=(2020, 1, 1, 0, 0, 0))
info.external_attr = 0o100755 << 16  # a regular file Lambda may execute
info.compress_type = zipfile.ZIP_DEFLATED
with open(src, "rb") as f, zipfile.ZipFile(dst, "w") as z:
    z.writestr(info, f.read())
EOF

step "checks"
# Every versioned glibc symbol the binaries need must exist in glibc $glibc.
for bin in "$out/slurm-cw-shipper" "$out/bootstrap"; do
    newest=$(objdump -T "$bin" | grep -o 'GLIBC_[0-9.]*' | sed 's/GLIBC_//' | sort -uV | tail -n 1)
    if [ "$(printf '%s\n%s\n' "$newest" "$glibc" | sort -V | tail -n 1)" != "$glibc" ]; then
        echo "$bin needs glibc $newest, newer than $glibc" >&2
        exit 1
    fi
    echo "$(basename "$bin"): newest glibc symbol version $newest (<= $glibc)"
done
dist/slurm-cw-shipper --version
python3 - dist/slurm-cw-lambda.zip <<'EOF'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    [info] = z.infolist()
    assert info.filename == "bootstrap", info.filename
    assert (info.external_attr >> 16) & 0o111, "bootstrap is not executable"
    print(f"slurm-cw-lambda.zip: bootstrap, {info.file_size / 1e6:.1f} MB unpacked")
EOF
(cd dist && sha256sum slurm-cw-shipper slurm-cw-lambda.zip > SHA256SUMS)
ls -l dist
