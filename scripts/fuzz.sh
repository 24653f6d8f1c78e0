#!/usr/bin/env bash
# Runs every fuzz target (fuzz/fuzz_targets, one per parser of slurm-cw-formats) for a bounded
# time, seeded with the real and built Slurm outputs, cgroup files and datums the tests use.
# A crash fails the run; libFuzzer leaves the input in fuzz/artifacts/<target>/. Fix the parser,
# then keep the input in fuzz/regressions/<target>/ (slurm-cw-formats' tests replay them).
#
#   scripts/fuzz.sh [SECONDS_PER_TARGET]     default 20
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
secs=${1:-20}
fixtures=$repo/shipper/tests/fixtures

if ! rustup toolchain list | grep -q '^nightly'; then
    echo "fuzzing needs the nightly toolchain (rustup toolchain install nightly)" >&2
    exit 1
fi
if ! command -v cargo-fuzz >/dev/null; then
    echo "==> installing cargo-fuzz"
    cargo install cargo-fuzz --locked --quiet
fi

seeds() {
    case "$1" in
        sinfo_text) find "$repo/formats/tests/fixtures/slurm" -name 'sinfo*.txt' ;;
        sinfo_json) find "$repo/formats/tests/fixtures/slurm" -name 'sinfo*.json' ;;
        squeue_text) find "$repo/formats/tests/fixtures/slurm" -name 'squeue*.txt' ;;
        squeue_json) find "$repo/formats/tests/fixtures/slurm" -name 'squeue*.json' ;;
        sdiag_text) find "$repo/formats/tests/fixtures/slurm" -name 'sdiag*.txt' ;;
        sdiag_json) find "$repo/formats/tests/fixtures/slurm" -name 'sdiag*.json' ;;
        scontrol_job) find "$repo/formats/tests/fixtures/slurm" -name 'scontrol*show-job*.txt' ;;
        openmetrics) find "$repo/formats/tests/fixtures/slurm" -name 'openmetrics-*.txt'; find "$repo/fuzz/seeds/openmetrics" -type f ;;
        cgroup_files) find "$fixtures/cgroup" -type f \( -name 'memory.*' -o -name 'cpu*' -o -name 'io.stat' -o -name 'cgroup.procs' \) | head -n 40 ;;
        lustre_stats) find "$fixtures/sys" "$fixtures/proc" -path '*lustre*' -name stats ;;
        datum_line | spool_file | infiniband_counters | powercap_energy | gres_conf | aws_prices) find "$repo/fuzz/seeds/$1" -type f ;;
    esac
    if [ -d "$repo/fuzz/regressions/$1" ]; then find "$repo/fuzz/regressions/$1" -type f; fi
}

cd "$repo/fuzz"
# No sanitizer: the parsers are safe Rust, so what fuzzing looks for is a panic (a failed
# slice, an overflow with debug assertions on, an assertion of the target); that also keeps
# the build and the runs fast enough for CI.
cargo +nightly fuzz build --sanitizer none --debug-assertions >/dev/null
status=0
for target in $(cargo +nightly fuzz list); do
    corpus=$(mktemp -d)
    n=0
    while read -r f; do n=$((n + 1)); cp "$f" "$corpus/$n-$(basename "$f")"; done < <(seeds "$target")
    echo "==> fuzz $target for ${secs}s ($(find "$corpus" -type f | wc -l) seeds)"
    log=$(mktemp)
    rc=0
    cargo +nightly fuzz run --sanitizer none --debug-assertions "$target" "$corpus" -- \
        -max_total_time="$secs" -max_len=262144 -rss_limit_mb=2048 -print_final_stats=1 >"$log" 2>&1 || rc=$?
    grep -E '^(stat::number_of_executed_units|stat::peak_rss_mb)' "$log" | tr '\n' ' '; echo
    if [ "$rc" -ne 0 ]; then
        grep -E "panicked|SUMMARY|artifact_prefix|Test unit written" "$log" >&2 || tail -n 20 "$log" >&2
        echo "!! $target found a crash: see fuzz/artifacts/$target/" >&2
        status=1
    fi
    rm -f "$log"
    rm -rf "$corpus"
done
exit $status
