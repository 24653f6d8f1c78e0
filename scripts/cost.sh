#!/usr/bin/env bash
# What the shipper costs in CloudWatch a month, for the two clusters of docs/cost.md: runs
# shipper/benches/cost.rs (the shipper's own pipeline and sinks, the real head collector, the
# real Lambda) against LocalStack and prints one line of counts and one of dollars per run.
#
#   scripts/cost.sh                                    both scenarios, default and baseline
#   COST_SCENARIOS=A COST_MODES=logs scripts/cost.sh   one scenario, no baseline
#
# Uses BENCH_LOCALSTACK_URL when set, else the LocalStack of scripts/bench/localstack.sh,
# starting it when none runs and then stopping it at the end (only the one it started).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

if [ -z "${BENCH_LOCALSTACK_URL:-}" ]; then
    if scripts/bench/localstack.sh status >/dev/null 2>&1; then
        eval "$(scripts/bench/localstack.sh env)"
    else
        eval "$(scripts/bench/localstack.sh start)"
        trap 'scripts/bench/localstack.sh stop' EXIT
    fi
fi
export BENCH_LOCALSTACK_URL

# The Lambda runs as its own binary, as in AWS; a debug build is enough for counting its reads.
cargo build -q -p slurm-cw-lambda --bin bootstrap
export COST_LAMBDA_BOOTSTRAP="${CARGO_TARGET_DIR:-$root/target}/debug/bootstrap"
cargo bench -q -p slurm-cw-shipper --bench cost
