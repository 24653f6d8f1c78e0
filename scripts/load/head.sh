#!/usr/bin/env bash
# Load test of the head role: a real Slurm queue of 10,000 held array tasks plus a few thousand
# short jobs that keep starting and ending, collected every 10 s for LOAD_SECONDS (600) against
# LocalStack. Prints the shipper's RSS and CPU per minute and fails if memory grew.
#
#   scripts/load/head.sh          (root; starts the Slurm bench and LocalStack if needed)
set -euo pipefail
# shellcheck source=scripts/load/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

held=${LOAD_HELD_JOBS:-10000}
churn=${LOAD_CHURN_JOBS:-3000}

out=$(bash "$repo/scripts/bench/slurm.sh" start) || { echo "the Slurm bench did not start" >&2; exit 1; }
eval "$out"
export SLURM_CONF=$BENCH_SLURM_CONF
if [ "$(scontrol show config | awk '$1 == "MaxArraySize" {print $3}')" -le "$held" ]; then
    echo "MaxArraySize is too small for $held tasks: restart the bench (scripts/bench/slurm.sh stop; start)" >&2
    exit 1
fi
localstack_env

jobs=()
# shellcheck disable=SC2317  # run by the EXIT trap
cleanup() {
    if [ ${#jobs[@]} -gt 0 ]; then scancel "${jobs[@]}" || true; fi
}
trap cleanup EXIT
log "submitting $held held array tasks and $churn short jobs, 8 at a time"
jobs+=("$(sbatch --parsable --hold --array="1-$held" --partition=batch --output=/dev/null --wrap='sleep 1')")
jobs+=("$(sbatch --parsable --array="1-$churn%8" --partition=batch,debug --output=/dev/null --wrap='sleep 15')")
queued=$(squeue --noheader --array --states=all | wc -l)
log "squeue lists $queued jobs"

export SLURM_CW_CLUSTER_NAME=load SLURM_CW_NAMESPACE=SlurmLoad
export SLURM_CW_COLLECT_INTERVAL=10s SLURM_CW_FLUSH_INTERVAL=60s
export SLURM_CW_SPOOL__DIR=$results/spool-head
rc=0
run_watched head --role head || rc=$?
log "squeue lists $(squeue --noheader --array --states=all | wc -l) jobs at the end"
exit $rc
