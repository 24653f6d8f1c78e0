#!/usr/bin/env bash
# The README's first command: starts a real Slurm and LocalStack on this machine (installing
# them if missing), submits a job, and runs the shipper once to standard output and once to
# LocalStack's CloudWatch. Needs root (Slurm manages job cgroups). Leaves both running; stop
# them with scripts/bench/slurm.sh stop and scripts/bench/localstack.sh stop.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cd "$here/.."

eval "$(bash scripts/bench/slurm.sh start)"
eval "$(bash scripts/bench/localstack.sh start)"

echo "==> building slurm-cw-shipper"
cargo build --quiet --release -p slurm-cw-shipper
bin=target/release/slurm-cw-shipper

echo "==> a job that holds 200 MB for a minute"
sbatch --quiet --mem=300M --wrap "python3 $PWD/scripts/bench/workload.py memory 200 60" || true
sleep 3

echo "==> what the shipper sees here (--sink stdout, first 15 lines)"
"$bin" --once --role all --sink stdout | head -n 15

echo "==> the same, sent to CloudWatch (LocalStack on 127.0.0.1:4566)"
SLURM_CW_LOG__LEVEL=info "$bin" --once --role all
echo "==> done: try '$bin --check --role all' next"
