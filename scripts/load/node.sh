#!/usr/bin/env bash
# Load test of the node role: 512 (LOAD_JOBS) job cgroups made here the way Slurm makes them,
# each with a process (half of them another user's), collected every 10 s for LOAD_SECONDS
# (600) against LocalStack. Prints the shipper's RSS and CPU per minute and fails if memory
# grew. The job cgroups live under their own Slurm directory name, so a real slurmd on this
# host is not disturbed; everything is removed at the end.
#
#   scripts/load/node.sh          (root)
set -euo pipefail
# shellcheck source=scripts/load/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

njobs=${LOAD_JOBS:-512}
cg=/sys/fs/cgroup
dir_name=slurm_cwload
[ "$(id -u)" -eq 0 ] || { echo "needs root (makes cgroups)" >&2; exit 1; }

if [ -f "$cg/cgroup.controllers" ]; then
    version=v2
    base=$cg/system.slice/cwload_slurmstepd.scope
    controllers=(.)
else
    version=v1
    controllers=(memory cpuacct pids freezer)
fi

job_dir() { # controller, job, uid
    if [ $version = v2 ]; then echo "$base/job_$2"; else echo "$cg/$1/$dir_name/uid_$3/job_$2"; fi
}

pids=()
cleanup() {
    [ ${#pids[@]} -eq 0 ] || kill "${pids[@]}" 2>/dev/null || true
    wait 2>/dev/null || true
    for c in "${controllers[@]}"; do
        local top=$cg/$c/$dir_name
        [ $version = v2 ] && top=$base
        if [ -d "$top" ]; then find "$top" -depth -type d -exec rmdir {} + 2>/dev/null || true; fi
    done
}
trap cleanup EXIT

if [ $version = v2 ]; then
    echo "+memory +cpu +io +pids" >"$cg/system.slice/cgroup.subtree_control"
    mkdir -p "$base"
    echo "+memory +cpu +io +pids" >"$base/cgroup.subtree_control"
fi
log "making $njobs job cgroups ($version) with a process each"
for i in $(seq 1 "$njobs"); do
    job=$((700000 + i))
    if [ $((i % 2)) -eq 0 ]; then uid=0; else uid=65534; fi
    for c in "${controllers[@]}"; do
        d=$(job_dir "$c" "$job" "$uid")
        if [ $version = v2 ]; then
            mkdir -p "$d/step_0/user/task_0"
            echo "+memory +cpu +io +pids" >"$d/cgroup.subtree_control"
            echo "+memory +cpu +io +pids" >"$d/step_0/cgroup.subtree_control"
            echo "+memory +cpu +io +pids" >"$d/step_0/user/cgroup.subtree_control"
        else
            mkdir -p "$d/step_0/task_0"
        fi
    done
    # setpriv execs (runuser would fork, and its child could start outside the cgroup).
    SLURM_JOB_ID=$job SLURM_JOB_ACCOUNT=load setpriv --reuid="$uid" --regid="$uid" --clear-groups -- sleep $((duration + 300)) &
    pid=$!
    pids+=("$pid")
    for c in "${controllers[@]}"; do
        d=$(job_dir "$c" "$job" "$uid")
        if [ $version = v2 ]; then echo "$pid" >"$d/step_0/user/task_0/cgroup.procs"; else echo "$pid" >"$d/step_0/task_0/cgroup.procs"; fi
    done
done
localstack_env

export SLURM_CW_CLUSTER_NAME=load SLURM_CW_NAMESPACE=SlurmLoad SLURM_CW_NODE_NAME=loadnode
export SLURM_CW_COLLECT_INTERVAL=10s SLURM_CW_FLUSH_INTERVAL=60s SLURM_CW_GPU__ENABLED=off
export SLURM_CW_NODE__V1_SLURM_DIR=$dir_name SLURM_CW_NODE__V2_SCOPE=cwload_slurmstepd.scope
export SLURM_CW_NODE__HOOK_SOCKET=$results/hook.sock SLURM_CW_SPOOL__DIR=$results/spool-node

seen=$("$(shipper_binary)" --role node --once --sink stdout 2>/dev/null | grep -c '"metric":"MemoryUsage"' || true)
log "one collection sees $seen of $njobs jobs"
[ "$seen" -eq "$njobs" ] || { echo "the shipper should see every job" >&2; exit 1; }
run_watched node --role node
