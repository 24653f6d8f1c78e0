#!/usr/bin/env bash
# A real Slurm test bench on this host: munge, one slurmctld and several slurmd (one per node)
# on 127.0.0.1, real cgroup v1 job cgroups. Idempotent.
#
#   scripts/bench/slurm.sh start   install if missing, start, print the variables tests read
#   scripts/bench/slurm.sh env     print those variables again
#   scripts/bench/slurm.sh stop    stop everything this script started
#   scripts/bench/slurm.sh status
#
# With `--version 24.11` (after the command) the same commands run Slurm 24.11.5, the release
# AWS ParallelCluster 3.14 ships, from a Debian 13 root in a chroot (scripts/bench/slurm-trixie.sh):
# nodes n1..n4, other ports, its own munged; both benches can run at once. With `--version 26.05`
# Debian sid's Slurm 26.05.5 the same way (nodes m1..m4, slurmctld's OpenMetrics endpoint on).
# The default is Debian 12's own Slurm 22.05.
#
# With `--profile pcluster` (22.05) the bench takes AWS ParallelCluster's default Slurm settings
# where they differ from ours: no ConstrainRAMSpace (it is written only with memory-based
# scheduling) and no JobAcctGatherType (written only with accounting), so jobs get no memory or
# cpuacct cgroup. With `--profile dense` the first node has 40 CPUs (more than the host: jobs
# that sleep), so that the node cycle bench runs 32 jobs on one node (`node_cycle -- --versus`).
# `start` with another profile than the running one restarts the bench.
#
# Layout (the integration tests rely on it):
#   nodes c1..c4, 2 CPUs and 2000 MB each (the host's 2 cores, shared);
#   partition "batch" (default) = c1,c2,c3; partition "debug" = c3,c4;
#   c4 has two (count-only) GPUs.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/bench/slurm-common.sh
source "$here/slurm-common.sh"
# Machine-wide, like the ports: every checkout finds the one bench that runs.
bench=${SLURM_BENCH_DIR:-${BENCH_HOME:-/tmp/slurm-cw-bench}/slurm}
conf=$bench/etc/slurm.conf
nodes=(c1 c2 c3 c4)
ctld_port=${SLURM_BENCH_CTLD_PORT:-16817}
first_node_port=${SLURM_BENCH_NODE_PORT:-17001}
cluster=${SLURM_BENCH_CLUSTER:-benchcluster}
cgroup_automount=yes

log() { printf 'slurm-bench: %s\n' "$*" >&2; }

need_root() {
    if [ "$(id -u)" -ne 0 ]; then
        log "needs root (slurmd manages job cgroups)"; exit 1
    fi
}

install_if_missing() {
    if command -v slurmctld >/dev/null && command -v slurmd >/dev/null && command -v munged >/dev/null \
        && command -v sbatch >/dev/null; then
        return
    fi
    log "installing slurm-wlm and munge from Debian"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq slurm-wlm slurm-client munge >/dev/null
}

start_munge() {
    if [ -S /run/munge/munge.socket.2 ] && pgrep -x munged >/dev/null; then return; fi
    if [ ! -s /etc/munge/munge.key ]; then
        log "creating /etc/munge/munge.key"
        mungekey -c -f -k /etc/munge/munge.key
        chown munge:munge /etc/munge/munge.key
        chmod 600 /etc/munge/munge.key
    fi
    install -d -o munge -g munge -m 0755 /run/munge
    install -d -o munge -g munge -m 0700 /var/log/munge /var/lib/munge
    runuser -u munge -- /usr/sbin/munged
    for _ in $(seq 50); do [ -S /run/munge/munge.socket.2 ] && return; sleep 0.1; done
    log "munged did not create its socket"; exit 1
}

write_config() {
    write_bench_config slurm.sh
}

print_env() {
    local bin sbin version
    bin=$(dirname "$(command -v sinfo)")
    sbin=$(dirname "$(command -v slurmctld)")
    version=$(SLURM_CONF=$conf sinfo --version | awk '{split($2, v, "."); print v[1] "." v[2]}')
    echo "export SLURM_CONF=$conf"
    echo "export BENCH_SLURM_CONF=$conf"
    echo "export BENCH_SLURM_NODES='${nodes[*]}'"
    echo "export BENCH_SLURM_VERSION=$version"
    echo "export BENCH_SLURM_BIN_DIR=$bin"
    echo "export BENCH_SLURM_SBIN_DIR=$sbin"
    echo "export BENCH_SLURM_PROFILE=$(sed -n 's/^# profile: //p' "$conf")"
    echo "# stop with: $here/slurm.sh stop"
}

start() {
    need_root
    install_if_missing
    start_munge
    export SLURM_CONF=$conf
    start_with_config sinfo /usr/sbin
}

stop() {
    stop_daemons
    log "stopped (munged left running: it is shared by every Slurm on this host)"
}

status() {
    export SLURM_CONF=$conf
    sinfo -N -o '%N %P %t' || exit 1
}

command=${1:-start}
[ $# -gt 0 ] && shift
version=22.05
profile=default
while [ $# -gt 0 ]; do
    case "$1" in
        --profile) profile=${2:-}; shift 2 || { echo "--profile needs a value" >&2; exit 2; } ;;
        --profile=*) profile=${1#--profile=}; shift ;;
        --version) version=${2:-}; shift 2 || { echo "--version needs a value" >&2; exit 2; } ;;
        --version=*) version=${1#--version=}; shift ;;
        *) echo "unknown argument: $1" >&2; exit 2 ;;
    esac
done
case "$profile" in
    default | pcluster | dense) ;;
    *) echo "profiles of this bench: default, pcluster (ParallelCluster's Slurm defaults), dense (40 CPUs on the first node)" >&2; exit 2 ;;
esac
case "$version" in
    22.05) ;;
    24.11 | 26.05) exec bash "$here/slurm-trixie.sh" "$command" --version "$version" ;;
    *) echo "Slurm versions of this bench: 22.05 (Debian 12), 24.11 (Debian 13 in a chroot), 26.05 (Debian sid in a chroot)" >&2; exit 2 ;;
esac

case "$command" in
    start) start ;;
    stop) stop ;;
    env) print_env ;;
    status) status ;;
    *) echo "usage: $0 start|stop|env|status [--version 22.05|24.11|26.05] [--profile default|pcluster|dense]" >&2; exit 2 ;;
esac
