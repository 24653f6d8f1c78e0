#!/usr/bin/env bash
# A real CloudWatch-compatible service on this host: LocalStack (PyPI localstack-core), run
# directly under Python, no Docker, listening on 127.0.0.1 only. Idempotent.
#
#   scripts/bench/localstack.sh start   install if missing, start, print the variables tests read
#   scripts/bench/localstack.sh env     print those variables again
#   scripts/bench/localstack.sh stop
#   scripts/bench/localstack.sh status
#   scripts/bench/localstack.sh log-group NAME   create a log group (a cluster's job log group)
#
# LOCALSTACK_PORT picks another port (one LocalStack per port). LOCALSTACK_INDEXED_CW=1 starts
# it with indexed CloudWatch storage (localstack_indexed_cw.py), for the Lambda bench at cluster
# scale; tests use LocalStack unchanged.
#
# The version pins come from ../shared/REFERENCE.md section 2: newer cbor2, pyOpenSSL and
# cryptography break localstack-core 4.13.1, and 4.14+ needs Python 3.12.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/bench/service.sh
source "$here/service.sh"
# Machine-wide, like the port: every checkout finds the one LocalStack that runs, and the
# virtual environment is installed once per machine.
bench=${LOCALSTACK_BENCH_DIR:-${BENCH_HOME:-/tmp/slurm-cw-bench}/localstack}
venv=${LOCALSTACK_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/slurm-cw-bench/localstack-venv}
port=${LOCALSTACK_PORT:-4566}
url=http://127.0.0.1:$port

log() { printf 'localstack-bench: %s\n' "$*" >&2; }

pick_python() {
    local p
    for p in python3.11 python3.12 python3; do
        if command -v "$p" >/dev/null; then echo "$p"; return; fi
    done
    log "no python3 found"; exit 1
}

install_if_missing() {
    if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c 'import localstack' 2>/dev/null; then
        return
    fi
    log "installing localstack-core 4.13.1 into $venv (a minute or two)"
    "$(pick_python)" -m venv "$venv"
    # Every version pinned, so nothing resolves differently from one day to the next.
    "$venv/bin/pip" install -q --disable-pip-version-check --no-deps \
        -r "$here/localstack-requirements.txt"
}

# LocalStack keeps CloudWatch's datapoints in SQLite under $TMPDIR/localstack; on tmpfs its
# inserts are 100 times faster than on a disk that syncs. Each start begins empty and stop
# removes it: GetMetricData reads every stored row of a metric once per period (its only index
# is on metric name and namespace), so an old one of a few hundred MB makes every query slow.
state=$bench/tmp
if [ -d /dev/shm ] && [ -w /dev/shm ]; then state=/dev/shm/slurm-cw-bench-localstack-$port; fi

pidf=$bench/localstack-$port.pid
logf=$bench/localstack-$port.log

healthy() { curl -fsS -m 2 "$url/_localstack/health" >/dev/null 2>&1; }

print_env() {
    echo "export AWS_ENDPOINT_URL=$url"
    echo "export AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test AWS_REGION=us-east-1"
    echo "export BENCH_LOCALSTACK_URL=$url"
    echo "# stop with: $here/localstack.sh stop"
}

start() {
    if healthy; then
        log "already running on $url"
        print_env
        return
    fi
    install_if_missing
    mkdir -p "$bench/volume"
    rm -rf "$state"
    mkdir -p "$state"
    local main=(-m localstack.runtime.main)
    if [ "${LOCALSTACK_INDEXED_CW:-0}" = 1 ]; then
        main=(-c "import sys; sys.path.insert(0, '$here'); import localstack_indexed_cw, runpy; runpy.run_module('localstack.runtime.main', run_name='__main__')")
        log "with indexed CloudWatch storage (localstack_indexed_cw.py)"
    fi
    # DNS_ADDRESS=0 and DISABLE_EVENTS=1 keep it off the internet; the gateway binds loopback only.
    service_start "$pidf" "$logf" healthy 300 0.2 -- env \
        TMPDIR="$state" \
        SERVICES=cloudwatch,sns,sqs,logs,events,iam,sts,ec2 \
        GATEWAY_LISTEN="127.0.0.1:$port" \
        LOCALSTACK_VOLUME_DIR="$bench/volume" \
        DNS_ADDRESS=0 DISABLE_EVENTS=1 SKIP_SSL_CERT_DOWNLOAD=1 \
        "$venv/bin/python" "${main[@]}"
    log "ready on $url (log: $logf)"
    print_env
}

stop() {
    service_stop "$pidf"
    rm -rf "$state"
    log "stopped"
}

# The job log group a cluster's nodes write to (the Terraform module creates it in AWS).
create_log_group() {
    [ -n "${1:-}" ] || { echo "usage: $0 log-group NAME" >&2; exit 2; }
    AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test "$venv/bin/python" - "$url" "$1" <<'PY'
import sys
import boto3
logs = boto3.client("logs", endpoint_url=sys.argv[1], region_name="us-east-1")
try:
    logs.create_log_group(logGroupName=sys.argv[2])
except logs.exceptions.ResourceAlreadyExistsException:
    pass
PY
}

case "${1:-start}" in
    start) start ;;
    stop) stop ;;
    env) print_env ;;
    status) if healthy; then echo "up on $url"; else echo "down"; exit 1; fi ;;
    log-group) create_log_group "${2:-}" ;;
    *) echo "usage: $0 start|stop|env|status|log-group NAME" >&2; exit 2 ;;
esac
