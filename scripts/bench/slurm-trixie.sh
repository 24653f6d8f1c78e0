#!/usr/bin/env bash
# A newer Slurm, for real, beside the Debian 12 bench: a Debian root made once with debootstrap
# runs munged, slurmctld and four slurmd in a chroot on this host's cgroup v1. Job cgroups
# appear under the host's /sys/fs/cgroup (memory/slurm_n1/uid_0/job_<id>), where the node role
# reads them. Called by `scripts/bench/slurm.sh ... --version 24.11|26.05`; idempotent.
#
#   slurm-trixie.sh start [--version V]   make the root if missing (a minute or two), start, print variables
#   slurm-trixie.sh env [--version V]     print those variables again
#   slurm-trixie.sh stop [--version V]    stop everything this script started, unmount what it mounted
#   slurm-trixie.sh status [--version V]
#
# Versions (each with its own root, names and ports, so that all benches can run at once):
#   24.11 (default; the release AWS ParallelCluster 3.14 ships): Debian 13 (trixie), root
#         /var/cache/slurm-cw-bench/trixie, nodes n1..n4, job ids from 10000000, cluster
#         "bench2411", ports 26817 and 27001..27004.
#   26.05: Debian sid (26.05.5), root /var/cache/slurm-cw-bench/sid, nodes m1..m4, job ids
#         from 20000000, cluster "bench2605", ports 28817 and 29001..29004 (below the kernel's
#         ephemeral range, 32768 up, where an outgoing connection may hold a slurmd's port),
#         and slurmctld's own OpenMetrics endpoint (MetricsType=metrics/openmetrics) on 28817.
# Layout as the 22.05 bench's: partition "batch" (default) = nodes 1..3, "debug" = nodes 3,4;
# node 4 has two count-only GPUs.
#
# The bench directory is bind-mounted into the root at its own path, so the configuration,
# state, logs, pid files, the TaskEpilog, the shipper the tests put there and the hook socket
# have one path inside and outside the chroot. Slurm's commands are wrappers in $bench/bin
# (`chroot ROOT /usr/bin/sinfo "$@"`): that is the shipper's slurm.bin_dir.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/bench/slurm-common.sh
source "$here/slurm-common.sh"

command=${1:-start}
[ $# -gt 0 ] && shift
want_version=24.11
while [ $# -gt 0 ]; do
    case "$1" in
        --version) want_version=${2:-}; shift 2 || { echo "--version needs a value" >&2; exit 2; } ;;
        --version=*) want_version=${1#--version=}; shift ;;
        *) echo "unknown argument: $1" >&2; exit 2 ;;
    esac
done
# Per version: the Debian suite, names, ports and slurm.conf lines the common part lacks. The
# 24.11 bench keeps its SLURM_TRIXIE_* overrides; 26.05 takes SLURM_SID_*.
case "$want_version" in
    24.11)
        suite=trixie
        root=${SLURM_TRIXIE_ROOT:-/var/cache/slurm-cw-bench/trixie}
        bench=${SLURM_TRIXIE_BENCH_DIR:-${BENCH_HOME:-/tmp/slurm-cw-bench}/slurm-24.11}
        nodes=(n1 n2 n3 n4)
        ctld_port=${SLURM_TRIXIE_CTLD_PORT:-26817}
        first_node_port=${SLURM_TRIXIE_NODE_PORT:-27001}
        cluster=bench2411
        # Job ids never equal the 22.05 bench's, whose job cgroups may sit beside these.
        extra_conf=("FirstJobId=10000000")
        mirror_override=${SLURM_TRIXIE_MIRROR:-}
        ;;
    26.05)
        suite=sid
        root=${SLURM_SID_ROOT:-/var/cache/slurm-cw-bench/sid}
        bench=${SLURM_SID_BENCH_DIR:-${BENCH_HOME:-/tmp/slurm-cw-bench}/slurm-26.05}
        nodes=(m1 m2 m3 m4)
        ctld_port=${SLURM_SID_CTLD_PORT:-28817}
        first_node_port=${SLURM_SID_NODE_PORT:-29001}
        cluster=bench2605
        extra_conf=("FirstJobId=20000000" "MetricsType=metrics/openmetrics")
        mirror_override=${SLURM_SID_MIRROR:-}
        ;;
    *) echo "Slurm versions of this script: 24.11 (Debian trixie), 26.05 (Debian sid)" >&2; exit 2 ;;
esac
conf=$bench/etc/slurm.conf
profile=default
cgroup_automount=no
# What the jobs of the tests need besides Slurm: python3 for scripts/bench/workload.py.
packages=slurmctld,slurmd,slurm-client,munge,python3

log() { printf 'slurm-bench-%s: %s\n' "$want_version" "$*" >&2; }

need_root() {
    if [ "$(id -u)" -ne 0 ]; then
        log "needs root (chroot, mounts, and slurmd manages job cgroups)"; exit 1
    fi
}

# One maker of a root at a time: test.sh makes the roots in the background while other steps
# may ask for them.
make_root() {
    if [ -f "$root/.slurm-cw-bench" ]; then return; fi
    mkdir -p "$(dirname "$root")"
    exec 8> "$root.lock"
    flock 8
    make_root_locked
    # Released, and closed so that no daemon started later holds it.
    flock -u 8
    exec 8>&-
}

make_root_locked() {
    if [ -f "$root/.slurm-cw-bench" ]; then return; fi
    if ! command -v debootstrap >/dev/null; then
        log "installing debootstrap"
        export DEBIAN_FRONTEND=noninteractive
        apt-get install -y -qq debootstrap >/dev/null 2>&1 || {
            apt-get update -qq && apt-get install -y -qq debootstrap >/dev/null
        }
    fi
    local m t0
    m=$(debian_mirror "$mirror_override")
    t0=$(date +%s)
    log "making the $suite root in $root from $m (once; a minute or two)"
    mkdir -p "$(dirname "$root")"
    remove_tree "$root.new"
    if ! debootstrap --variant=minbase --include="$packages" "$suite" "$root.new" "$m" \
        > "$root.debootstrap.log" 2>&1; then
        log "debootstrap failed; see $root.debootstrap.log"
        remove_tree "$root.new"
        exit 1
    fi
    unmount_under "$root.new"
    local v
    v=$(chroot "$root.new" /usr/sbin/slurmctld -V | awk '{print $2}')
    case "$v" in
        "$want_version".*) ;;
        *) log "$suite's slurmctld is $v, not $want_version"; remove_tree "$root.new"; exit 1 ;;
    esac
    echo "$v" > "$root.new/.slurm-cw-bench"
    remove_tree "$root"
    mv "$root.new" "$root"
    log "root made in $(( $(date +%s) - t0 )) s: Slurm $v"
}

mount_all() {
    # rbind: /sys carries the cgroup mounts, /dev its pts and shm; rslave: unmounting here
    # never reaches the host's own mounts.
    local what
    for what in proc sys dev; do
        mountpoint -q "$root/$what" && continue
        if [ "$what" = proc ]; then
            mount --bind /proc "$root/proc"
        else
            mount --rbind "/$what" "$root/$what"
            mount --make-rslave "$root/$what"
        fi
    done
    mkdir -p "$root$bench"
    mountpoint -q "$root$bench" || mount --bind "$bench" "$root$bench"
    # The host name must resolve inside, as it does outside.
    cp /etc/hosts "$root/etc/hosts"
}

unmount_all() {
    local m
    for m in "$root$bench" "$root/dev" "$root/sys" "$root/proc"; do
        if mountpoint -q "$m"; then umount -R "$m" 2>/dev/null || umount -l -R "$m" || true; fi
    done
}

in_root() { chroot "$root" "$@"; }

start_munge() {
    if alive "$root/run/munge/munged.pid" && [ -S "$root/run/munge/munge.socket.2" ]; then return; fi
    in_root install -d -o munge -g munge -m 0755 /run/munge
    in_root install -d -o munge -g munge -m 0700 /var/log/munge /var/lib/munge
    if [ ! -s "$root/etc/munge/munge.key" ]; then
        in_root mungekey -c -f -k /etc/munge/munge.key
    fi
    in_root chown munge:munge /etc/munge /etc/munge/munge.key
    in_root chmod 600 /etc/munge/munge.key
    in_root runuser -u munge -- /usr/sbin/munged
    for _ in $(seq 50); do [ -S "$root/run/munge/munge.socket.2" ] && return; sleep 0.1; done
    log "munged did not create its socket"; exit 1
}

write_wrappers() {
    local c
    mkdir -p "$bench/bin" "$bench/sbin"
    for c in sinfo squeue sdiag scontrol sbatch scancel srun salloc sacct sprio sshare; do
        printf '#!/bin/sh\n# Slurm %s in the %s root (scripts/bench/slurm-trixie.sh).\nSLURM_CONF=%s exec chroot %s /usr/bin/%s "$@"\n' \
            "$want_version" "$suite" "$conf" "$root" "$c" > "$bench/bin/$c"
        chmod 755 "$bench/bin/$c"
    done
    for c in slurmctld slurmd; do
        printf '#!/bin/sh\n# Slurm %s in the %s root (scripts/bench/slurm-trixie.sh).\nSLURM_CONF=%s exec chroot %s /usr/sbin/%s "$@"\n' \
            "$want_version" "$suite" "$conf" "$root" "$c" > "$bench/sbin/$c"
        chmod 755 "$bench/sbin/$c"
    done
}

write_config() {
    write_bench_config slurm-trixie.sh "${extra_conf[@]}"
}

print_env() {
    echo "export SLURM_CONF=$conf"
    echo "export BENCH_SLURM_CONF=$conf"
    echo "export BENCH_SLURM_NODES='${nodes[*]}'"
    echo "export BENCH_SLURM_VERSION=$want_version"
    echo "export BENCH_SLURM_BIN_DIR=$bench/bin"
    echo "export BENCH_SLURM_SBIN_DIR=$bench/sbin"
    echo "# stop with: $here/slurm.sh stop --version $want_version"
}

sinfo_in() { "$bench/bin/sinfo" "$@"; }

start() {
    need_root
    make_root
    mkdir -p "$bench"
    mount_all
    start_munge
    write_wrappers
    start_with_config sinfo_in "$bench/sbin"
}

stop() {
    need_root
    stop_daemons
    # This munged is the root's own (the host's does not serve it).
    local pidf=$root/run/munge/munged.pid
    if alive "$pidf"; then
        kill "$(cat "$pidf")" 2>/dev/null || true
        for _ in $(seq 50); do alive "$pidf" || break; sleep 0.1; done
    fi
    unmount_all
    log "stopped"
}

status() {
    [ -x "$bench/bin/sinfo" ] && alive "$bench/run/slurmctld.pid" || exit 1
    sinfo_in -N -o '%N %P %t' || exit 1
}

case "$command" in
    start) start ;;
    stop) stop ;;
    env) print_env ;;
    status) status ;;
    # The Debian root alone (scripts/bench/prometheus.sh downloads trixie's prometheus with it).
    root) need_root; make_root ;;
    *) echo "usage: $0 start|stop|env|status|root [--version 24.11|26.05]" >&2; exit 2 ;;
esac
