#!/bin/bash
# Downloads slurm-cw-shipper, checks its SHA-256 and runs `slurm-cw-shipper install`, which does
# the rest (the role and cluster, the configuration, the unit, the TaskEpilog, IMDS, the
# service). The same script serves ParallelCluster (OnNodeConfigured) and AWS PCS (lifecycle
# actions: infra/pcs/node-bootstrapped.sh and login-node.sh are this file).
#
#   on-node-configured.sh --binary SRC [--binary-aarch64 SRC] [--sha256 HEX] [--sha256-aarch64 HEX]
#                         [install's arguments: --role head|node|all --cluster-name NAME
#                          --namespace NS --no-imds-restriction --strict --slurm-conf PATH
#                          --edit-slurm-conf; `slurm-cw-shipper install --help`]
#
#   --binary SRC          the x86_64 binary (scripts/release.sh's dist/slurm-cw-shipper-x86_64):
#                         s3://bucket/key (`aws s3 cp`), https://... (curl) or a path on the node
#   --binary-aarch64 SRC  the aarch64 (Graviton) one; `uname -m` picks, so one set of arguments
#                         serves both. A node with none for its machine installs nothing
#   --sha256 HEX, --sha256-aarch64 HEX
#                         their SHA-256; without it SHA256SUMS beside the binary (as release.sh
#                         writes dist/SHA256SUMS) must have a line `<hex>  <file name>`. A binary
#                         with another checksum, or none, is not run nor installed
#
# It downloads only when the installed binary has another checksum. It never fails a node's
# boot: a failure is written to /var/log/slurm-cw-shipper/install.log (with install's own lines)
# and as one line to the journal (journalctl -t slurm-cw-shipper), and it exits 0, unless
# --strict (then 1; 2 for bad arguments). Paths are under $ROOT (default empty), and aws, curl,
# uname and logger are looked up in PATH, so that tests/infra/test_bootstrap.py can run it in a
# temporary root with recording fakes.
set -uo pipefail

ROOT=${ROOT:-}
BIN=/usr/local/bin/slurm-cw-shipper
LOG=/var/log/slurm-cw-shipper/install.log
umask 022
mkdir -p -- "$ROOT${LOG%/*}" 2>/dev/null

log() {
    printf 'slurm-cw-shipper setup: %s\n' "$*" >&2
    printf '%s %s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$*" >> "$ROOT$LOG" 2>/dev/null
    return 0
}

strict=no
for arg in "$@"; do if [ "$arg" = --strict ]; then strict=yes; fi; done

# fail STATUS MESSAGE: logged, one journal line, exit 0 unless --strict.
fail() {
    log "failed: $2"
    if command -v logger >/dev/null 2>&1; then logger -t slurm-cw-shipper -p user.err -- "setup failed: $2 (see $LOG)"; fi
    if [ "$strict" = yes ]; then exit "$1"; fi
    log "not failing the node's boot (--strict would)"
    exit 0
}

declare -A opt=()
pass=()
while [ $# -gt 0 ]; do
    case $1 in
        --binary | --binary-aarch64 | --sha256 | --sha256-aarch64)
            [ $# -ge 2 ] || fail 2 "bad arguments: $1 needs a value"
            opt[$1]=$2; shift 2 ;;
        --binary=* | --binary-aarch64=* | --sha256=* | --sha256-aarch64=*) opt[${1%%=*}]=${1#*=}; shift ;;
        -h | --help) sed -n '2,/^set -uo/{/^#/s/^# \{0,1\}//p}' "$0"; exit 0 ;;
        *) pass+=("$1"); shift ;;
    esac
done

machine=$(uname -m)
case $machine in
    x86_64 | amd64) src=${opt[--binary]:-} want=${opt[--sha256]:-} ;;
    aarch64 | arm64) src=${opt[--binary-aarch64]:-} want=${opt[--sha256-aarch64]:-} ;;
    *) src='' want='' ;;
esac
if [ -z "${opt[--binary]:-}${opt[--binary-aarch64]:-}" ]; then fail 2 "bad arguments: --binary (or --binary-aarch64) is required"; fi
[ -n "$src" ] || fail 1 "no slurm-cw-shipper binary for this machine ($machine): --binary is x86_64's, --binary-aarch64 aarch64's; nothing installed"
case $src in
    s3://?*/?* | https://?* | file:///* | /*) ;;
    *) fail 2 "bad arguments: $src: give s3://bucket/key, https://... or an absolute path" ;;
esac
[[ -z $want || $want =~ ^[0-9A-Fa-f]{64}$ ]] || fail 2 "bad arguments: bad SHA-256 '$want': 64 hexadecimal digits"

region=$(sed -n 's/^cfn_region=//p' "$ROOT/etc/parallelcluster/cfnconfig" 2>/dev/null | tail -n 1 | tr -d "\"'[:space:]")

# The most a download may be: the shipper is about 20 MB; a source that sends more is not it,
# and must not fill the root disk.
MAX_BYTES=268435456

# fetch SRC DEST: the reason logged when it cannot.
fetch() {
    local out
    case $1 in
        s3://*) out=$(aws s3 cp --only-show-errors ${region:+--region "$region"} "$1" "$2" 2>&1) ;;
        https://* | file://*) out=$(curl -fsSL --proto '=https,file' --retry 3 --max-time 600 --max-filesize "$MAX_BYTES" -o "$2" -- "$1" 2>&1) ;;
        *) out=$(cp -- "$ROOT$1" "$2" 2>&1) ;;
    esac || { log "$1: $out"; return 1; }
    [ -s "$2" ] || { log "$1 is empty"; return 1; }
    [ "$(stat -c %s -- "$2")" -le "$MAX_BYTES" ] || { log "$1 is over $MAX_BYTES bytes: refused"; return 1; }
}

# private PATH: whether only root can have written PATH and every directory above it (a local
# source whose SHA256SUMS beside it a user could replace proves nothing).
private() {
    local p=$1 owner mode
    while :; do
        [ -e "$p" ] || return 1
        owner=$(stat -Lc %u -- "$p") mode=$(stat -Lc %a -- "$p")
        [ "$owner" = 0 ] || return 1
        # Group or others may write (sticky directories such as /tmp included: any user may put
        # a file there first).
        (( (8#$mode & 8#022) == 0 )) || return 1
        if [ "$p" = / ] || [ "$p" = "${ROOT:-/}" ]; then break; fi
        p=$(dirname -- "$p")
    done
}

tmp=$(mkdir -p -- "$ROOT${BIN%/*}" && mktemp "$ROOT${BIN%/*}/.slurm-cw-shipper.XXXXXX") || fail 1 "cannot create a file in ${BIN%/*}"
trap 'rm -f -- "$tmp"' EXIT

if [ -n "$want" ]; then
    want=${want,,}
else
    # A local source's checksum file proves something only where no user could have put both.
    case $src in
        /*) local_src=$ROOT$src ;;
        file://*) local_src=${src#file://} ;;
        *) local_src='' ;;
    esac
    if [ -n "$local_src" ] && ! { private "$local_src" && private "${local_src%/*}/SHA256SUMS"; }; then
        fail 1 "$src or the SHA256SUMS beside it can be written by a user other than root: give --sha256"
    fi
    fetch "${src%/*}/SHA256SUMS" "$tmp" || fail 1 "no checksum for $src: give --sha256, or put SHA256SUMS (scripts/release.sh writes it) beside it"
    want=$(awk -v f="${src##*/}" '{ n = $2; sub(/^\*/, "", n); if (n == f) { print tolower($1); exit } }' "$tmp")
    [[ $want =~ ^[0-9a-f]{64}$ ]] || fail 1 "SHA256SUMS beside $src has no line for ${src##*/}: give --sha256"
fi

if [ -f "$ROOT$BIN" ] && [ "$(sha256sum < "$ROOT$BIN" | cut -d' ' -f1)" = "$want" ]; then
    log "$BIN is already $src (sha256 $want)"
    exe=$ROOT$BIN
else
    fetch "$src" "$tmp" || fail 1 "could not fetch $src: $BIN left as it was"
    got=$(sha256sum < "$tmp" | cut -d' ' -f1)
    [ "$got" = "$want" ] || fail 1 "$src has sha256 $got, not $want: refused, $BIN left as it was"
    chmod 0755 "$tmp"
    log "fetched $src (sha256 $want)"
    exe=$tmp
fi

# ${pass[@]+...}: bash before 4.4 calls an empty array unbound.
"$exe" install ${ROOT:+--root "$ROOT"} ${pass[@]+"${pass[@]}"}
status=$?
case $status in
    0) exit 0 ;;
    126) fail 1 "$src does not run on this machine ($machine): refused, $BIN left as it was" ;;
esac
# install logged why and wrote the journal line.
if [ "$strict" = yes ]; then exit "$status"; fi
log "install exited $status; not failing the node's boot (--strict would)"
exit 0
