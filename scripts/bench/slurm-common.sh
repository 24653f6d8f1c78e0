# shellcheck shell=bash
# The caller sets the variables this file reads (see below).
# shellcheck disable=SC2154
# What both Slurm benches share (slurm.sh for 22.05 on this host, slurm-trixie.sh for 24.11 in
# a chroot): one configuration, so that the tests run unchanged on either, and how their daemons
# start, come up and stop. The caller sets
# bench, conf, cluster, ctld_port, first_node_port, nodes (four; the last one has the GPUs) and
# profile (default; pcluster: ParallelCluster's defaults, no ConstrainRAMSpace and no
# JobAcctGatherType; dense: the default with 40 CPUs on the first node, so that the node cycle
# bench runs 32 jobs on one node), and cgroup_automount (yes or no).
#
#   write_bench_config WRITER [EXTRA_SLURM_CONF_LINE...]
#
# writes $conf.new (the caller compares it with $conf to know whether to restart), gres.conf,
# cgroup.conf and the TaskEpilog.
write_bench_config() {
    local writer=$1
    shift
    local host mem port gres line n cpus
    local gpu_node=${nodes[3]}
    host=$(hostname)
    mkdir -p "$bench/etc" "$bench/state" "$bench/log" "$bench/run" "$bench/spool"
    mem=${SLURM_BENCH_NODE_MEMORY_MB:-2000}
    {
        echo "# Written by scripts/bench/$writer; a test bench, not a production config."
        echo "# profile: $profile"
        echo "ClusterName=$cluster"
        echo "SlurmctldHost=$host(127.0.0.1)"
        echo "SlurmctldPort=$ctld_port"
        echo "AuthType=auth/munge"
        echo "CredType=cred/munge"
        echo "SlurmUser=root"
        echo "SlurmdUser=root"
        echo "StateSaveLocation=$bench/state"
        echo "SlurmdSpoolDir=$bench/spool/slurmd.%n"
        echo "SlurmctldPidFile=$bench/run/slurmctld.pid"
        echo "SlurmdPidFile=$bench/run/slurmd.%n.pid"
        echo "SlurmctldLogFile=$bench/log/slurmctld.log"
        echo "SlurmdLogFile=$bench/log/slurmd.%n.log"
        echo "ProctrackType=proctrack/cgroup"
        echo "TaskPlugin=task/cgroup"
        if [ "$profile" != pcluster ]; then
            echo "JobAcctGatherType=jobacct_gather/cgroup"
            echo "JobAcctGatherFrequency=30"
        fi
        echo "SchedulerType=sched/backfill"
        echo "SelectType=select/cons_tres"
        echo "SelectTypeParameters=CR_Core_Memory"
        echo "ReturnToService=1"
        echo "MinJobAge=3600"
        for line in "$@"; do echo "$line"; done
        # Room for the load test's queue (scripts/load/head.sh): 10,000 array tasks and more.
        echo "MaxArraySize=20001"
        echo "MaxJobCount=50000"
        echo "DefMemPerCPU=100"
        echo "SlurmdParameters=config_overrides"
        echo "MpiDefault=none"
        echo "SlurmctldTimeout=30"
        echo "SlurmdTimeout=60"
        echo "InactiveLimit=0"
        echo "KillWait=5"
        echo "SchedulerParameters=bf_interval=30"
        echo "GresTypes=gpu"
        # The final per-job sample (see infra/slurm/task-epilog.sh); tests put the binary they
        # test at $bench/shipper (the file itself: on 24.11 the epilog runs in the chroot), and
        # without it the hook does nothing.
        echo "TaskEpilog=$bench/task-epilog"
        port=$first_node_port
        for n in "${nodes[@]}"; do
            # The last node claims two GPUs: enough for Slurm to schedule and account GPU
            # requests, which is what the head collector reads.
            gres=""
            [ "$n" = "$gpu_node" ] && gres=" Gres=gpu:2"
            cpus=2
            # More CPUs than the host has (SlurmdParameters=config_overrides): jobs that sleep.
            [ "$profile" = dense ] && [ "$n" = "${nodes[0]}" ] && cpus=40
            echo "NodeName=$n NodeHostname=$host NodeAddr=127.0.0.1 Port=$port CPUs=$cpus RealMemory=$mem$gres State=UNKNOWN"
            port=$((port + 1))
        done
        echo "PartitionName=batch Nodes=${nodes[0]},${nodes[1]},${nodes[2]} Default=YES MaxTime=INFINITE State=UP"
        echo "PartitionName=debug Nodes=${nodes[2]},${nodes[3]} MaxTime=INFINITE State=UP"
    } > "$conf.new"
    cat > "$bench/task-epilog" <<EOT
#!/bin/sh
[ -x "$bench/shipper" ] || exit 0
SLURM_CW_NODE__HOOK_SOCKET="$bench/hook.sock" exec "$bench/shipper" --job-ended "\$SLURM_JOB_ID"
EOT
    chmod 755 "$bench/task-epilog"
    # Slurm counts a GPU only with a device file: two character devices like /dev/null stand
    # in (ConstrainDevices=no, so no job is ever given or denied them).
    mkdir -p "$bench/dev"
    for n in 0 1; do
        [ -e "$bench/dev/gpu$n" ] || mknod "$bench/dev/gpu$n" c 1 3
    done
    echo "NodeName=$gpu_node Name=gpu File=$bench/dev/gpu[0-1]" > "$bench/etc/gres.conf"
    {
        echo "CgroupPlugin=cgroup/v1"
        [ "$cgroup_automount" = yes ] && echo "CgroupAutomount=yes"
        echo "ConstrainCores=yes"
        echo "ConstrainRAMSpace=$([ "$profile" != pcluster ] && echo yes || echo no)"
        echo "ConstrainDevices=no"
    } > "$bench/etc/cgroup.conf"
}

# The Debian roots' helpers (slurm-trixie.sh's chroots, vm.sh's image); remove_tree logs with
# the caller's log.
#
# debian_mirror [OVERRIDE]: OVERRIDE when given, else the Debian mirror apt uses here (deb822
# `URIs:` or one-line `deb` entries), else Debian's own.
debian_mirror() {
    if [ -n "${1:-}" ]; then echo "$1"; return; fi
    local f uri
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.sources /etc/apt/sources.list.d/*.list; do
        [ -f "$f" ] || continue
        while read -r uri; do
            uri=${uri%/}
            case "$uri" in
                */debian) echo "$uri"; return ;;
            esac
        done < <(sed -nE -e 's/^URIs:[[:space:]]*//p' \
            -e 's/^deb[[:space:]]+(\[[^]]*\][[:space:]]+)?([^[:space:]]+).*/\2/p' "$f" | tr ' ' '\n')
    done
    echo http://deb.debian.org/debian
}

# Mount points at or under $1, deepest first.
mounts_under() {
    awk -v p="$1" '$2 == p || index($2, p "/") == 1 { print $2 }' /proc/mounts | sort -r
}

# Lazily unmounts whatever is mounted at or under $1 (debootstrap mounts /proc and /sys in its
# target; a failed run can leave them).
unmount_under() {
    local m
    for m in $(mounts_under "$1"); do umount -l "$m" || true; done
}

# remove_tree DIR: removes a directory that may hold leftover mounts: unmounts first and never
# deletes through a mount (then logs and exits 1). No DIR: nothing to do.
remove_tree() {
    [ -e "$1" ] || return 0
    unmount_under "$1"
    if [ -n "$(mounts_under "$1")" ]; then
        log "$1 still has mounts; not removing it"; exit 1
    fi
    rm -rf --one-file-system "$1"
}

# A pid file may go between the test and the read (a daemon stopping): then not alive.
alive() { [ -f "$1" ] && kill -0 "$(cat "$1" 2>/dev/null)" 2>/dev/null; }

# start_with_config SINFO SBIN: writes the configuration and starts the bench's daemons from
# SBIN; a running slurmctld is kept when the configuration is unchanged, restarted (clean, -c:
# no jobs or node states from an earlier run) when it changed. Then waits for the nodes.
start_with_config() {
    local sinfo=$1 sbin=$2 before=""
    [ -f "$conf" ] && before=$(cat "$conf")
    write_config
    if alive "$bench/run/slurmctld.pid" && "$sinfo" -h >/dev/null 2>&1; then
        if [ "$before" = "$(cat "$conf.new")" ]; then
            log "already running"
            rm -f "$conf.new"
        else
            log "configuration changed: restarting"
            stop_daemons
            mv "$conf.new" "$conf"
            "$sbin/slurmctld" -c
        fi
    else
        mv "$conf.new" "$conf"
        "$sbin/slurmctld" -c
    fi
    start_slurmds "$sbin/slurmd"
    wait_ready "$sinfo"
}

# start_slurmds SLURMD: one slurmd per node that does not run yet.
start_slurmds() {
    local n
    for n in "${nodes[@]}"; do
        if ! alive "$bench/run/slurmd.$n.pid"; then
            mkdir -p "$bench/spool/slurmd.$n"
            "$1" -N "$n"
        fi
    done
}

# wait_ready SINFO: prints the bench's variables once every node has registered (idle, or any
# state that is not unknown/down*); fails after 30 s.
wait_ready() {
    local sinfo=$1 states
    for _ in $(seq 150); do
        states=$("$sinfo" -h -N -o '%N %t' 2>/dev/null | sort -u || true)
        if [ -n "$states" ] && ! grep -Eq ' (unk|down\*|idle\*|unk\*|inval)' <<<"$states" \
            && [ "$(wc -l <<<"$states")" -ge "${#nodes[@]}" ]; then
            log "ready: $(tr '\n' ' ' <<<"$states")"
            print_env
            return
        fi
        sleep 0.2
    done
    log "nodes did not come up; see $bench/log"
    "$sinfo" -N >&2 || true
    exit 1
}

# stop_daemons: slurmctld and every slurmd of this bench, waited for.
stop_daemons() {
    local pidf any
    for pidf in "$bench"/run/slurmd.*.pid "$bench/run/slurmctld.pid"; do
        [ -f "$pidf" ] || continue
        if alive "$pidf"; then kill "$(cat "$pidf")" 2>/dev/null || true; fi
    done
    for _ in $(seq 50); do
        any=0
        for pidf in "$bench"/run/*.pid; do
            [ -f "$pidf" ] && alive "$pidf" && any=1
        done
        [ $any -eq 0 ] && break
        sleep 0.2
    done
    rm -f "$bench"/run/*.pid
}
