#!/usr/bin/env bash
# The GPU check on a real NVIDIA GPU (run as root on a machine with the driver and PyTorch):
# starts a CUDA load inside a cgroup named like a Slurm job, runs the shipper's node role with
# --sink stdout for a few cycles, and prints the job's GPU figures (GpuUtilization,
# GpuMemoryUsed, GpuPower and the GPM figures on Hopper and newer), each GPU's minor number,
# PCI bus id and energy counter as the shipper reads them (beside nvidia-smi's), and the job's
# job_summary record with GpuEnergyKwh (the load ends, and its cgroup goes, before the shipper
# stops).
#
#   scripts/gpu-check.sh [path/to/slurm-cw-shipper]
#
# Leaves nothing behind: the load is stopped and the cgroup removed.
set -euo pipefail

bin=${1:-target/release/slurm-cw-shipper}
job=${GPU_CHECK_JOB:-424242}
seconds=${GPU_CHECK_SECONDS:-16}
root=/sys/fs/cgroup
[ -x "$bin" ] || { echo "no shipper binary at $bin" >&2; exit 1; }
nvidia-smi -L || { echo "no NVIDIA driver here" >&2; exit 1; }

# A job cgroup where Slurm would make it (v2 layout; v1 memory/cpuacct hierarchy otherwise).
if [ -f "$root/cgroup.controllers" ]; then
    jobdir=$root/system.slice/slurmstepd.scope/job_$job
    task=$jobdir/step_0/user/task_0
    mkdir -p "$task"
    dirs=("$task" "$jobdir/step_0/user" "$jobdir/step_0" "$jobdir")
else
    jobdir=$root/cpuacct/slurm/uid_0/job_$job
    task=$jobdir/step_0/task_0
    mkdir -p "$task"
    dirs=("$task" "$jobdir/step_0" "$jobdir")
fi

python3 - "$seconds" <<'EOF' &
import os, sys, time
import torch
os.environ.setdefault("SLURM_JOB_ACCOUNT", "gpucheck")
end = time.time() + float(sys.argv[1]) - 4
a = torch.randn(8192, 8192, device="cuda", dtype=torch.float16)
b = torch.randn(8192, 8192, device="cuda", dtype=torch.float16)
while time.time() < end:
    c = a @ b
torch.cuda.synchronize()
EOF
load=$!
echo "$load" > "$task/cgroup.procs"
cleanup() {
    kill "$load" 2>/dev/null || true
    wait "$load" 2>/dev/null || true
    for d in "${dirs[@]}"; do rmdir "$d" 2>/dev/null || true; done
}
trap cleanup EXIT
sleep 4

# The job ends (its load stops, its cgroup goes) 6 s before the shipper stops: a job_summary.
(
    sleep $((seconds - 6))
    kill "$load" 2>/dev/null || true
    sleep 1
    for d in "${dirs[@]}"; do rmdir "$d" 2>/dev/null || true; done
) &

out=$(mktemp)
log=$(mktemp)
SLURM_CW_CLUSTER_NAME=gpucheck SLURM_CW_COLLECT_INTERVAL=2s SLURM_CW_FLUSH_INTERVAL=4s \
SLURM_CW_DELIVERY__FLUSH_JITTER=false SLURM_CW_NODE__HOOK_SOCKET=/tmp/gpu-check-hook.sock \
SLURM_CW_LOG__LEVEL=info \
    timeout --signal=TERM "$seconds" "$bin" --role node --sink stdout > "$out" 2> "$log" || true
echo "== GPUs as the shipper reads them (index, minor number, PCI bus id, energy counter in mJ)"
grep -E ' GPU ' "$log" || echo "(none: see $log)"
echo "== GPUs as nvidia-smi names them"
nvidia-smi --query-gpu=index,pci.bus_id,uuid --format=csv,noheader || true
nvidia-smi -q | grep -E 'Minor Number|Bus Id' || true
echo "== the job's GPU figures (JobId=$job)"
grep "\"JobId\":\"$job\"" "$out" | grep '"metric":"Gpu' || echo "(none: see $out)"
echo "== node GPU figures"
grep -E '"metric":"(GpuNoJobCount|GpuErrors)"' "$out" || true
echo "== the job's summary (GpuEnergyKwh)"
grep '"Type":"job_summary"' "$out" | grep "\"JobId\":\"$job\"" || echo "(none: see $out)"
