#!/usr/bin/env bash
# The GPU check on a real NVIDIA GPU host: exits 1 where the shipper's job figures disagree with
# NVML's own. Needs root, the driver, and a Python with torch and pynvml (nvidia-ml-py).
#
#   scripts/gpu-check.sh [--mps] [path/to/slurm-cw-shipper]
#                                   (default target/release/slurm-cw-shipper)
#
# --mps runs the jobs' CUDA through an MPS daemon it starts (and quits) itself, as Slurm's
# gres/mps has them: NVML then lists the load as an MPS client and gives its SM samples to the
# server, so the load's job reads no utilisation of its own (absent) and the rest as without.
#
# It makes job cgroups where Slurm makes them (cgroup v2:
# system.slice/slurmstepd.scope/job_N/step_0/user/task_0, controllers enabled down the tree;
# v1: <controller>/slurm/uid_0/job_N/step_0/task_0 in cpuacct and memory) for three jobs:
#   A  a CUDA load on GPU 0 (a known allocation, then fp16 matrix products),
#   B  allocated the same GPU 0, with only a sleeping process,
#   C  allocated GPU 1 with only a sleeping process (hosts with two GPUs or more).
# Without Slurm the shipper learns allocations from the job processes' environment
# (SLURM_JOB_GPUS, CUDA_VISIBLE_DEVICES by UUID): each job's process carries them, and the
# shipper is pointed at an empty slurm.bin_dir so that a host's real scontrol (which knows none
# of these jobs) is not asked. It runs the shipper's node role with --sink stdout for a few
# cycles while gpu_check.py samples NVML and `nvidia-smi dmon` reads GPM, ends the jobs (their
# cgroups go: summaries), and compares (scripts/gpu_check.py compare: the tolerances are there).
#
# Under 2 minutes. Writes ${OUT:-/tmp}/gpu-check/: shipper.jsonl, shipper.log, nvml.json,
# dmon.txt, jobs.log, report.txt. Leaves nothing else behind: every process it starts is
# killed and reaped by pid, every cgroup it made removed, leaf first.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
mps=
if [ "${1:-}" = --mps ]; then
    mps=1
    shift
fi
bin=${1:-$repo/target/release/slurm-cw-shipper}
py=${PYTHON:-python3}
check=$here/gpu_check.py
out=${OUT:-/tmp}/gpu-check
root=/sys/fs/cgroup
ids=(4242421 4242422 4242423)
collect=2 flush=4
# The jobs end this long after the shipper starts; it stops `run` seconds after it started.
end_at=14 run=24
load_mib=4096

fail() {
    echo "gpu-check: $*" >&2
    exit 1
}

[ "$(id -u)" -eq 0 ] || fail "run as root: it makes job cgroups"
if [ -n "$mps" ]; then
    command -v nvidia-cuda-mps-control >/dev/null || fail "--mps: no nvidia-cuda-mps-control here"
    ! pgrep -x nvidia-cuda-mps >/dev/null || fail "--mps: an MPS daemon runs here already (run without --mps: the jobs go through it)"
fi
[ -x "$bin" ] || fail "no shipper binary at $bin (cargo build --release -p slurm-cw-shipper)"
command -v nvidia-smi >/dev/null || fail "no nvidia-smi: no NVIDIA driver here"
timeout 20 nvidia-smi -L >/dev/null 2>&1 || fail "nvidia-smi -L fails: no working NVIDIA driver here"
timeout 60 "$py" -c 'import torch, pynvml' 2>/dev/null ||
    fail "$py cannot import torch and pynvml (pip install torch nvidia-ml-py; or set PYTHON)"
timeout 60 "$py" -c 'import sys, torch; sys.exit(not torch.cuda.is_available())' ||
    fail "torch sees no CUDA device"
gpus=$(timeout 20 "$py" "$check" count) || fail "NVML cannot count the GPUs"
for id in "${ids[@]}"; do
    if [ -e "$root/system.slice/slurmstepd.scope/job_$id" ] || [ -e "$root/cpuacct/slurm/uid_0/job_$id" ]; then
        fail "job $id's cgroup exists already (an earlier run left it?)"
    fi
done

mkdir -p "$out"
rm -f "$out"/{shipper.jsonl,shipper.log,nvml.json,dmon.txt,jobs.log,report.txt}
tmp=$(mktemp -d)
made=()    # cgroup directories this run made, in the order made
started=() # processes this run started

# Whether process $1 still runs (a zombie no longer does).
alive() {
    local state
    state=$(sed -E 's/^.*\) ([A-Z]).*$/\1/' "/proc/$1/stat" 2>/dev/null) || return 1
    [ -n "$state" ] && [ "$state" != Z ]
}

# reap PID SECONDS: waits for our child PID, killing it once it has had SECONDS; then forgets
# it (a reaped pid may be another process's next).
reap() {
    local pid=$1 deadline=$((SECONDS + $2)) p keep=()
    while alive "$pid" && [ "$SECONDS" -lt "$deadline" ]; do sleep 0.2; done
    if alive "$pid"; then
        kill -TERM "$pid" 2>/dev/null || true
        sleep 1
        kill -KILL "$pid" 2>/dev/null || true
    fi
    wait "$pid" 2>/dev/null || true
    for p in ${started[@]+"${started[@]}"}; do
        if [ "$p" != "$pid" ]; then keep+=("$p"); fi
    done
    started=(${keep[@]+"${keep[@]}"})
}

# Removes the cgroups made whose path contains $1 ("" for all), leaf first.
remove_cgroups() {
    local i d
    for ((i = ${#made[@]} - 1; i >= 0; i--)); do
        d=${made[i]}
        if [ -d "$d" ] && [[ $d == *"$1"* ]]; then
            rmdir "$d" || echo "gpu-check: could not remove $d" >&2
        fi
    done
}

# shellcheck disable=SC2317 # the EXIT trap runs it
cleanup() {
    local rc=$? p
    for p in ${started[@]+"${started[@]}"}; do kill -TERM "$p" 2>/dev/null || true; done
    for p in ${started[@]+"${started[@]}"}; do reap "$p" 5; done
    if [ -n "$mps" ] && [ -n "${CUDA_MPS_PIPE_DIRECTORY:-}" ]; then
        echo quit | timeout 10 nvidia-cuda-mps-control >/dev/null 2>&1 || true
        for _ in $(seq 50); do pgrep -x nvidia-cuda-mps >/dev/null || break; sleep 0.2; done
        ! pgrep -x nvidia-cuda-mps >/dev/null || echo "gpu-check: the MPS daemon did not quit" >&2
    fi
    remove_cgroups ""
    rm -rf "$tmp"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# v2: the controllers $1 has, enabled for its children (as Slurm's cgroup/v2 plugin does).
enable() {
    local c want=()
    for c in cpu memory pids; do
        if grep -qw "$c" "$1/cgroup.controllers"; then want+=("+$c"); fi
    done
    [ ${#want[@]} -gt 0 ] || return 0
    echo "${want[*]}" >"$1/cgroup.subtree_control" 2>/dev/null ||
        echo "gpu-check: cannot enable ${want[*]} below $1: the job's figures from them will be missing" >&2
}

# make_dirs BASE REL V2: makes each missing directory of BASE/REL, remembering it.
make_dirs() {
    local d=$1 part
    local -a parts
    IFS=/ read -r -a parts <<<"$2"
    for part in "${parts[@]}"; do
        if [ "$3" = v2 ]; then enable "$d"; fi
        d=$d/$part
        if [ ! -d "$d" ]; then
            mkdir "$d"
            made+=("$d")
        fi
    done
}

# The cgroup.procs files of job $1's task (made): one on v2, one a controller on v1.
task_procs() {
    local c
    if [ -f "$root/cgroup.controllers" ]; then
        make_dirs "$root" "system.slice/slurmstepd.scope/job_$1/step_0/user/task_0" v2
        echo "$root/system.slice/slurmstepd.scope/job_$1/step_0/user/task_0/cgroup.procs"
    else
        for c in cpuacct memory; do
            [ -d "$root/$c" ] || continue
            make_dirs "$root/$c" "slurm/uid_0/job_$1/step_0/task_0" v1
            echo "$root/$c/slurm/uid_0/job_$1/step_0/task_0/cgroup.procs"
        done
    fi
}

# start_in JOB GPU CMD...: CMD as job JOB's process (in its cgroup from its first instruction,
# with the environment of a job given NVML's GPU GPU); its pid in $pid.
start_in() {
    local job=$1 gpu=$2 env procs
    shift 2
    env=$(timeout 20 "$py" "$check" env "$gpu" "$job") || fail "no environment for GPU $gpu"
    # Made here, not in the subshell below: `made` must list them for the cleanup.
    task_procs "$job" >"$tmp/procs"
    procs=$(tr '\n' ' ' <"$tmp/procs")
    [ -n "$procs" ] || fail "no cgroup for job $job (neither v2 nor v1 cpuacct/memory here)"
    # shellcheck disable=SC2016 # expanded by the inner shell
    # shellcheck disable=SC2086 # $env is words, as `env` takes them
    PROCS=$procs sh -c 'for f in $PROCS; do echo $$ >"$f" || exit 97; done; exec "$@"' sh \
        env $env "$@" >>"$out/jobs.log" 2>&1 &
    pid=$!
    started+=("$pid")
}

# wait_for_file FILE PID SECONDS WHAT: until process PID (WHAT) writes FILE; fails if it ends
# first or takes longer.
wait_for_file() {
    local i
    for ((i = 0; i < $3 * 2; i++)); do
        [ -e "$1" ] && return 0
        alive "$2" || fail "$4 ended before it was ready (see $out/jobs.log)"
        sleep 0.5
    done
    [ -e "$1" ] || fail "$4 was not ready within $3 s (see $out/jobs.log)"
}

if [ -n "$mps" ]; then
    export CUDA_MPS_PIPE_DIRECTORY=$tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=$tmp/mps-log
    mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
    timeout 20 nvidia-cuda-mps-control -d || fail "--mps: the MPS daemon did not start"
fi
echo "gpu-check: $gpus GPU(s); jobs ${ids[*]}; output in $out${mps:+; through MPS}"
start_in "${ids[0]}" 0 "$py" "$check" load "$load_mib" "$tmp/ready" --seconds 100
load=$pid
start_in "${ids[1]}" 0 sleep 100
job_pids=("$load" "$pid")
idle=
if [ "$gpus" -ge 2 ]; then
    start_in "${ids[2]}" 1 sleep 100
    idle=$pid
    job_pids+=("$pid")
fi
wait_for_file "$tmp/ready" "$load" 60 "the CUDA load"

"$py" "$check" sample "$out/nvml.json" "$tmp/stop" --started "$tmp/sampling" --max-seconds 90 \
    2>>"$out/jobs.log" &
sampler=$!
started+=("$sampler")
# NVML's counters must be read before the shipper's first reading.
wait_for_file "$tmp/sampling" "$sampler" 20 "the NVML sampler"
timeout $((end_at + 10)) nvidia-smi dmon -i 0 --gpm-metrics 2 -d 1 -c "$end_at" >"$out/dmon.txt" 2>&1 &
dmon=$!
started+=("$dmon")
mkdir "$tmp/bin"
SLURM_CW_CLUSTER_NAME=gpucheck SLURM_CW_COLLECT_INTERVAL=${collect}s SLURM_CW_FLUSH_INTERVAL=${flush}s \
    SLURM_CW_DELIVERY__FLUSH_JITTER=false SLURM_CW_NODE__HOOK_SOCKET="$tmp/hook.sock" \
    SLURM_CW_SLURM__BIN_DIR="$tmp/bin" SLURM_CW_LOG__LEVEL=info \
    timeout --signal=TERM --kill-after=5 "$run" "$bin" --role node --sink stdout \
    >"$out/shipper.jsonl" 2>"$out/shipper.log" &
shipper=$!
started+=("$shipper")

# The jobs end while the shipper runs. A's end is one step as the shipper sees it: the load leaves
# its cgroup and A's cgroups go at once, so that no collection catches the load dying, nor A's
# cgroup without the load in it. (A collection that did would be right to call A's GPU idle for
# that collection, as it would for a job whose epilog outlives its processes, but NVML would
# still show the load's memory and power: the first run on an H200 failed on exactly that.)
# Then the sleeps are reaped and the other jobs' cgroups go.
sleep "$end_at"
if [ -f "$root/cgroup.controllers" ]; then
    echo "$load" >"$root/cgroup.procs" || echo "gpu-check: the load did not leave its cgroup" >&2
else
    for c in cpuacct memory; do
        if [ -d "$root/$c" ]; then
            echo "$load" >"$root/$c/cgroup.procs" || echo "gpu-check: the load did not leave $c" >&2
        fi
    done
fi
remove_cgroups "/job_${ids[0]}"
for p in "${job_pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
for p in "${job_pids[@]}"; do reap "$p" 10; done
remove_cgroups /job_

reap "$shipper" $((run - end_at + 10))
touch "$tmp/stop"
reap "$sampler" 10
reap "$dmon" 10
grep -E ' GPU ' "$out/shipper.log" || true

args=(--a "${ids[0]}:$load:0" --b "${ids[1]}:0" --collect "$collect" --flush "$flush")
if [ -n "$idle" ]; then args+=(--c "${ids[2]}:1"); fi
status=0
"$py" "$check" compare --shipper "$out/shipper.jsonl" --nvml "$out/nvml.json" --dmon "$out/dmon.txt" \
    "${args[@]}" >"$out/report.txt" || status=$?
cat "$out/report.txt"
exit "$status"
