#!/usr/bin/env bash
# The README's first command: starts a real Slurm and LocalStack on this machine (installing
# them if missing), submits a job, and runs the shipper once to standard output and once to
# LocalStack's CloudWatch and CloudWatch Logs. Needs root (Slurm manages job cgroups). Leaves
# both running; stop them with scripts/bench/slurm.sh stop and scripts/bench/localstack.sh stop.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cd "$here/.."

eval "$(bash scripts/bench/slurm.sh start)"
eval "$(bash scripts/bench/localstack.sh start)"

echo "==> building slurm-cw-shipper"
# --workspace: the features the tests build with, so scripts/test.sh builds the shipper once.
cargo build --quiet --workspace --bin slurm-cw-shipper
bin=target/debug/slurm-cw-shipper
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

echo "==> a job that holds 200 MB for a minute (its output goes nowhere, not into this tree)"
job=$(sbatch --parsable --output=/dev/null --chdir=/tmp --mem=300M \
    --wrap "python3 $PWD/scripts/bench/workload.py memory 200 60")
for _ in $(seq 60); do
    [ "$(squeue -h -j "$job" -o %T)" = RUNNING ] && break
    sleep 1
done
sleep 3

echo "==> what the shipper sees here (--sink stdout): job $job's record"
"$bin" --once --role all --sink stdout > "$out/once.jsonl"
python3 - "$out/once.jsonl" "$job" <<'PY'
import json, sys
lines = open(sys.argv[1]).read().splitlines()
records = [json.loads(l)["record"] for l in lines if l.startswith('{"time"')]
for r in records:
    if r.get("JobId") == sys.argv[2] and r.get("Type") == "job_sample":
        mib = lambda k: f"{r.get(k, 0) / 2**20:.1f} MiB"
        print(f"  job {r['JobId']} of {r['User']} ({r['Account']}, partition {r['Partition']}) on {r['NodeName']}:")
        print(f"  memory in use {mib('MemoryUsage')}, RSS {mib('MemoryRss')}, limit {mib('MemoryLimit')}, "
              f"{r.get('ProcessCount', '?')} processes, {r.get('CpusAllocated', '?')} CPU(s)")
print(f"  ({len(records)} job record(s) and {len(lines) - len(records)} metric datums in all)")
PY

echo "==> the first lines as they come, into a pipe that closes early (the shipper exits 0)"
"$bin" --once --role all --sink stdout | head -n 3

echo "==> the same, sent to CloudWatch and CloudWatch Logs (LocalStack on 127.0.0.1:4566)"
bash scripts/bench/localstack.sh log-group /slurm-cw/benchcluster/jobs
SLURM_CW_LOG__LEVEL=info "$bin" --once --role all
echo "==> done: try '$bin --check --role all' next"
