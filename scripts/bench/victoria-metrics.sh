#!/usr/bin/env bash
# A real OTLP receiver on this host: Debian trixie's VictoriaMetrics 1.112.0, unpacked once from
# its .deb, run on 127.0.0.1 with its OpenTelemetry endpoint (/opentelemetry/v1/metrics) and its
# Prometheus query API (/api/v1/query, PromQL and MetricsQL). It stands in for the Prometheus
# OTLP receiver the tests would use: Debian's prometheus builds disable theirs (#1080354; see
# prometheus.sh), VictoriaMetrics parses OTLP with its own code and Debian ships it whole.
# Idempotent.
#
#   scripts/bench/victoria-metrics.sh start   install if missing, start, print the variables tests read
#   scripts/bench/victoria-metrics.sh env     print those variables again
#   scripts/bench/victoria-metrics.sh stop
#   scripts/bench/victoria-metrics.sh status
#
# VICTORIA_METRICS_PORT (28428) moves it (below the ephemeral range, as prometheus.sh says).
# Flags: -opentelemetry.usePrometheusNaming gives the names and labels Prometheus' own receiver
# gives (units as suffixes, dots as underscores); -search.latencyOffset=0s answers a query with
# what arrived the moment before (30 s later by default). Needs root (chroot) the first time only.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/bench/service.sh
source "$here/service.sh"
install_dir=${VICTORIA_METRICS_INSTALL_DIR:-/var/cache/slurm-cw-bench/victoria-metrics}
bench=${VICTORIA_METRICS_BENCH_DIR:-${BENCH_HOME:-/tmp/slurm-cw-bench}/victoria-metrics}
port=${VICTORIA_METRICS_PORT:-28428}
want_version=1.112.0
url=http://127.0.0.1:$port
binary=$install_dir/usr/bin/victoria-metrics
pidf=$bench/victoria-metrics-$port.pid
logf=$bench/victoria-metrics-$port.log
data=$bench/data-$port

log() { printf 'victoria-metrics-bench: %s\n' "$*" >&2; }

# The binary prints no version of its own; the package's changelog names it.
installed() {
    [ -x "$binary" ] && zcat "$install_dir/usr/share/doc/victoria-metrics/changelog.Debian.gz" 2>/dev/null \
        | head -n 1 | grep -q "($want_version+"
}

install_if_missing() {
    if installed; then return; fi
    trixie_package victoria-metrics "$install_dir"
    if ! installed; then
        log "the unpacked victoria-metrics is not $want_version"
        exit 1
    fi
    log "installed victoria-metrics $want_version in $install_dir"
}

ready() { curl -fsS -m 2 "$url/health" >/dev/null 2>&1; }

print_env() {
    echo "export BENCH_OTLP_URL=$url/opentelemetry/v1/metrics"
    echo "export BENCH_OTLP_QUERY_URL=$url"
    echo "# stop with: $here/victoria-metrics.sh stop"
}

command_line() {
    cmd=("$binary"
        -httpListenAddr="127.0.0.1:$port"
        -storageDataPath="$data"
        -retentionPeriod=1d
        -opentelemetry.usePrometheusNaming
        -search.latencyOffset=0s
        -search.disableCache
        -loggerLevel=WARN)
}

service_main "$@"
