#!/usr/bin/env bash
# A real Prometheus on this host: Debian trixie's prometheus 2.53.3, unpacked once from its
# .deb (Debian 12's own is 2.42), run on 127.0.0.1, scraping the shipper's pull endpoint every
# second, and with its OTLP receiver (/api/v1/otlp/v1/metrics) on when the binary has one.
# Debian's builds do not: their changelog disables OTLP ingestion until
# golang-opentelemetry-collector is in Debian (#1080354; sid's 3.5.3 too), and 2.53.3 warns
# "Unknown option for --enable-feature: otlp-write-receiver". BENCH_PROMETHEUS_OTLP_URL is
# printed only when the receiver exists (PROMETHEUS_BINARY may name another build). Idempotent.
#
#   scripts/bench/prometheus.sh start    install if missing, start, print the variables tests read
#   scripts/bench/prometheus.sh env      print those variables again
#   scripts/bench/prometheus.sh stop
#   scripts/bench/prometheus.sh status
#
# PROMETHEUS_PORT (29090), PROMETHEUS_SCRAPE (127.0.0.1:29100, where the tests run a
# shipper's pull endpoint) and PROMETHEUS_SCRAPE_GUARDED (127.0.0.1:29101, one guarded by a
# bearer token, scraped with the token in $bench/scrape-token, root's, and without) move it;
# all three are below the kernel's ephemeral range (32768 up), so an outgoing connection never
# holds them. The .deb comes through apt in the trixie root the Slurm
# 24.11 bench made (scripts/bench/slurm-trixie.sh); needs root (chroot) the first time only.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/bench/service.sh
source "$here/service.sh"
install_dir=${PROMETHEUS_INSTALL_DIR:-/var/cache/slurm-cw-bench/prometheus}
bench=${PROMETHEUS_BENCH_DIR:-${BENCH_HOME:-/tmp/slurm-cw-bench}/prometheus}
port=${PROMETHEUS_PORT:-29090}
scrape=${PROMETHEUS_SCRAPE:-127.0.0.1:29100}
scrape_guarded=${PROMETHEUS_SCRAPE_GUARDED:-127.0.0.1:29101}
want_version=2.53.3
url=http://127.0.0.1:$port
binary=${PROMETHEUS_BINARY:-$install_dir/usr/bin/prometheus}
pidf=$bench/prometheus-$port.pid
logf=$bench/prometheus-$port.log
data=$bench/data-$port
token_file=$bench/scrape-token

log() { printf 'prometheus-bench: %s\n' "$*" >&2; }

installed() {
    [ -x "$binary" ] && { [ -n "${PROMETHEUS_BINARY:-}" ] || "$binary" --version 2>/dev/null | grep -q "version $want_version"; }
}

# Whether this build has the OTLP receiver (2.47 to 2.54 name it as a feature flag).
has_otlp() { "$binary" --help 2>&1 | grep -q 'otlp-write-receiver'; }

install_if_missing() {
    if installed; then return; fi
    trixie_package prometheus "$install_dir"
    if ! installed; then
        log "the unpacked prometheus is not $want_version: $("$binary" --version 2>&1 | head -n 1)"
        exit 1
    fi
    log "installed $("$binary" --version 2>&1 | head -n 1) in $install_dir"
}

ready() { curl -fsS -m 2 "$url/-/ready" >/dev/null 2>&1; }

print_env() {
    echo "export BENCH_PROMETHEUS_URL=$url"
    # One started before the guarded scrapes were added has neither: said, and left unset.
    if [ -s "$token_file" ] && grep -q slurm-cw-shipper-token "$bench/prometheus.yml" 2>/dev/null; then
        echo "export BENCH_PROMETHEUS_TOKEN_FILE=$token_file"
    else
        log "this Prometheus scrapes no guarded endpoint: stop and start it again for BENCH_PROMETHEUS_TOKEN_FILE"
    fi
    if has_otlp; then
        echo "export BENCH_PROMETHEUS_OTLP_URL=$url/api/v1/otlp/v1/metrics"
    else
        log "this prometheus has no OTLP receiver (Debian disables it): BENCH_PROMETHEUS_OTLP_URL not set"
        # Said, not left out: the OTLP read-back tests report themselves blocked instead of failing.
        echo "export BENCH_PROMETHEUS_OTLP=missing"
    fi
    echo "# stop with: $here/prometheus.sh stop"
}

write_config() {
    # The endpoint guarded by prometheus.bearer_token_file: scraped with its token and without.
    if [ ! -s "$token_file" ]; then
        (umask 077 && head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$token_file")
    fi
    cat > "$bench/prometheus.yml" <<YML
global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: slurm-cw-shipper
    scrape_interval: 1s
    scrape_timeout: 1s
    static_configs:
      - targets: ["$scrape"]
  - job_name: slurm-cw-shipper-token
    scrape_interval: 1s
    scrape_timeout: 1s
    authorization:
      credentials_file: $token_file
    static_configs:
      - targets: ["$scrape_guarded"]
  - job_name: slurm-cw-shipper-no-token
    scrape_interval: 1s
    scrape_timeout: 1s
    static_configs:
      - targets: ["$scrape_guarded"]
YML
}

# Scrapes and OTLP in, PromQL out, loopback only.
command_line() {
    write_config
    cmd=("$binary"
        --config.file="$bench/prometheus.yml"
        --storage.tsdb.path="$data"
        --storage.tsdb.retention.time=1d
        --web.listen-address="127.0.0.1:$port"
        --log.level=warn)
    if has_otlp; then cmd+=(--enable-feature=otlp-write-receiver); fi
}

service_main "$@"
