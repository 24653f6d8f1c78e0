# Shared by the load tests (sourced): the binary, the bench, and running the shipper under
# watch.py. Results go to .bench/load/.
# shellcheck shell=bash

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
duration=${LOAD_SECONDS:-600}
results=$repo/.bench/load
mkdir -p "$results"

log() { printf '==> %s\n' "$*"; }

# The binary under test: $SHIPPER, else dist/ (scripts/release.sh), else a release build.
shipper_binary() {
    if [ -n "${SHIPPER:-}" ]; then echo "$SHIPPER"; return; fi
    local dist
    dist=$repo/dist/slurm-cw-shipper-$(uname -m)
    if [ -x "$dist" ]; then echo "$dist"; return; fi
    (cd "$repo" && cargo build --release --locked -q -p slurm-cw-shipper) >&2
    echo "$repo/target/release/slurm-cw-shipper"
}

localstack_env() {
    local out
    out=$(bash "$repo/scripts/bench/localstack.sh" start) || { echo "LocalStack did not start" >&2; exit 1; }
    eval "$out"
    export AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test AWS_REGION=us-east-1
    export AWS_ENDPOINT_URL_CLOUDWATCH=$BENCH_LOCALSTACK_URL
}

# run_watched NAME ARGS...: runs the shipper with ARGS for $duration seconds under watch.py,
# then SIGTERM; fails when it died, did not exit 0, or grew.
run_watched() {
    local name=$1; shift
    local bin stamp err csv pid rc=0
    bin=$(shipper_binary)
    stamp=$(date -u +%Y%m%dT%H%M%SZ)
    err=$results/$name-$stamp.log
    csv=$results/$name-$stamp.csv
    log "$name: $bin $* for ${duration}s (log $err, samples $csv)"
    "$bin" "$@" 2>"$err" &
    pid=$!
    python3 "$here/watch.py" "$pid" "$duration" "$csv" || rc=1
    if kill -TERM "$pid" 2>/dev/null; then
        wait "$pid" || { echo "the shipper exited $? after SIGTERM" >&2; rc=1; }
    else
        rc=1
    fi
    log "$name: $(grep -c -E 'WARN|ERROR' "$err" || true) warnings or errors in the log"
    grep -E 'WARN|ERROR' "$err" | head -n 5 || true
    return $rc
}
