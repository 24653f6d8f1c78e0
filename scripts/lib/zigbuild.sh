# shellcheck shell=bash
# Sourced by scripts/release.sh and scripts/arm64-check.sh: what `cargo zigbuild` needs to build
# the release binaries for x86_64 and aarch64 Linux against glibc $GLIBC.
#
# Zig links both targets (no gcc cross toolchain, no linker setting in a cargo config): cargo-zigbuild
# passes zig as the linker and C compiler of the target it builds for, so other builds are
# untouched. Zig comes from PyPI (`ziglang`) into .venv-zig; cargo-zigbuild runs
# `python3 -m ziglang` when no `zig` is on PATH.
#
# Needs $repo (the repository root).
: "${repo:?the repository root}"

GLIBC=2.26
ZIG_VERSION=0.15.2

# zigbuild_tools TRIPLE...: cargo-zigbuild, zig $ZIG_VERSION and the Rust standard library of
# each TRIPLE (rustup), each installed when missing; puts .venv-zig/bin first on PATH.
zigbuild_tools() {
    command -v cargo-zigbuild >/dev/null || cargo install cargo-zigbuild --locked --quiet
    if ! "$repo/.venv-zig/bin/python" -c 'import ziglang' 2>/dev/null; then
        python3 -m venv "$repo/.venv-zig"
        "$repo/.venv-zig/bin/pip" install --quiet --disable-pip-version-check "ziglang==$ZIG_VERSION"
    fi
    export PATH="$repo/.venv-zig/bin:$PATH"
    local installed triple
    installed=$(rustup target list --installed 2>/dev/null || true)
    for triple in "$@"; do
        grep -qx "$triple" <<< "$installed" || rustup target add "$triple"
    done
}

# cargo_target_dir: where cargo puts its output (CARGO_TARGET_DIR, a config's build.target-dir,
# else target/ in the workspace).
cargo_target_dir() {
    cargo metadata --format-version 1 --no-deps --locked \
        | python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])'
}

# newest_glibc BINARY: the newest GLIBC_x.y symbol version BINARY needs (readelf reads any
# machine's ELF, unlike the host's objdump).
newest_glibc() {
    readelf -W --version-info "$1" | grep -o 'GLIBC_[0-9.]*' | sed 's/GLIBC_//' | sort -uV | tail -n 1
}

# check_glibc BINARY: fails when BINARY needs a glibc newer than $GLIBC.
check_glibc() {
    local newest
    newest=$(newest_glibc "$1")
    if [ -z "$newest" ]; then
        echo "$1: no GLIBC symbol versions found (not a glibc binary?)" >&2
        return 1
    fi
    if [ "$(printf '%s\n%s\n' "$newest" "$GLIBC" | sort -V | tail -n 1)" != "$GLIBC" ]; then
        echo "$1 needs glibc $newest, newer than $GLIBC" >&2
        return 1
    fi
    echo "$(basename "$1"): newest glibc symbol version $newest (<= $GLIBC)"
}

# check_machine BINARY ARCH: fails unless BINARY is a 64-bit ELF executable for ARCH (x86_64 or
# aarch64), as readelf names the machine.
check_machine() {
    local want got
    case $2 in
        x86_64) want='Advanced Micro Devices X86-64' ;;
        aarch64) want='AArch64' ;;
        *) echo "check_machine: unknown architecture $2" >&2; return 1 ;;
    esac
    got=$(readelf -h "$1" | sed -n 's/^ *Machine: *//p')
    if [ "$got" != "$want" ] || ! readelf -h "$1" | grep -q 'Class: *ELF64'; then
        echo "$1: machine '$got', not $2 ($want)" >&2
        return 1
    fi
    echo "$(basename "$1"): ELF64 $got"
}

# runner_for ARCH: sets the array `runner` to what runs an ARCH binary here: nothing on an ARCH
# host, else qemu-user (qemu-ARCH or qemu-ARCH-static) with the cross libc in /usr/ARCH-linux-gnu.
# Returns 1 when there is no such qemu or libc.
runner_for() {
    local qemu
    runner=()
    if [ "$(uname -m)" = "$1" ]; then return 0; fi
    qemu=$(command -v "qemu-$1" || command -v "qemu-$1-static") || return 1
    [ -d "/usr/$1-linux-gnu" ] || return 1
    runner=("$qemu" -L "/usr/$1-linux-gnu")
}
