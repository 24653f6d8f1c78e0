#!/usr/bin/env bash
# The whole test suite on a fresh machine: installs what is missing, starts LocalStack and a
# real Slurm on 127.0.0.1, runs every test, and stops what it started.
#
#   scripts/test.sh            everything
#   scripts/test.sh -- ARGS    extra arguments for `cargo test` (a filter, say)
#   FUZZ_SECONDS=N             seconds per fuzz target (default 10, 0 skips fuzzing)
#   SLURM_24_11=0              skips the second run of the real-Slurm tests on Slurm 24.11
#   SLURM_26_05=0              skips the head tests on Slurm 26.05 (slurmctld's OpenMetrics endpoint)
#   SLURM_VM=0                 skips the cgroup v2 VM bench (scripts/bench/vm.sh; about 7 min)
#
# With CI=true a test whose bench is missing fails instead of skipping.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
cd "$repo"

extra=()
if [ "${1:-}" = "--" ]; then shift; extra=("$@"); fi

step() { printf '\n==> %s\n' "$*"; }
started=()
# Background work (see `prepare`), by name: its pid, and its output under $prep_dir.
declare -A prep_pid=()
prep_dir=$(mktemp -d)

cleanup() {
    local rc=$?
    local p
    # What still runs in the background (a failed step ended the run): it and its children.
    for p in "${prep_pid[@]}"; do
        pkill -TERM -P "$p" 2>/dev/null || true
        kill "$p" 2>/dev/null || true
    done
    rm -rf "$prep_dir"
    for s in "${started[@]}"; do
        # "slurm@24.11": the bench slurm.sh with --version 24.11.
        if [ "${s#*@}" != "$s" ]; then
            bash "$here/bench/${s%@*}.sh" stop --version "${s#*@}" || true
        else
            bash "$here/bench/$s.sh" stop || true
        fi
    done
    exit $rc
}
trap cleanup EXIT

step "tools"
if ! command -v cargo >/dev/null; then
    echo "cargo is missing: install Rust from https://rustup.rs" >&2
    exit 1
fi
need_apt=()
command -v curl >/dev/null || need_apt+=(curl)
command -v shellcheck >/dev/null || need_apt+=(shellcheck)
# report's sparklines read back from a tmux pane (bench::report)
command -v tmux >/dev/null || need_apt+=(tmux)
# systemd-analyze (the unit's checks) and systemd-socket-activate (prometheus_socket)
command -v systemd-socket-activate >/dev/null || need_apt+=(systemd)
if [ "$(id -u)" -eq 0 ]; then
    command -v slurmctld >/dev/null || need_apt+=(slurm-wlm slurm-client munge)
    # The Slurm 24.11 and 26.05 benches' Debian roots.
    command -v debootstrap >/dev/null || need_apt+=(debootstrap)
    # The cgroup v2 VM bench (scripts/bench/vm.sh).
    command -v qemu-system-x86_64 >/dev/null || need_apt+=(qemu-system-x86)
    command -v debugfs >/dev/null || need_apt+=(e2fsprogs)
    # The installer's IMDS restriction, loaded for real in a network namespace.
    command -v nft >/dev/null || [ -x /usr/sbin/nft ] || need_apt+=(nftables)
    command -v ip >/dev/null || [ -x /usr/sbin/ip ] || need_apt+=(iproute2)
fi
if [ ${#need_apt[@]} -gt 0 ]; then
    if [ "$(id -u)" -eq 0 ]; then
        echo "installing ${need_apt[*]}"
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq
        apt-get install -y -qq "${need_apt[@]}" >/dev/null
    else
        echo "not root: cannot install ${need_apt[*]}; tests that need them will skip (or fail under CI)" >&2
    fi
fi

# One build serves every step, and a fresh machine's disk is not unlimited (a CI run once ran out
# of it while linking): under CI no incremental state (about 1.3 GB that a single build never
# reads) and no debug info in the workspace's own binaries (about 45 test binaries; a panic still
# names its file and line). Every build names `--workspace`, so the shipper that the VM, the tests
# and the demo run is built once, with one set of features.
if [ "${CI:-}" = true ]; then
    export CARGO_INCREMENTAL=0 CARGO_PROFILE_DEV_DEBUG=false CARGO_PROFILE_DEV_STRIP=debuginfo
fi
target_dir=${CARGO_TARGET_DIR:-$repo/target}
mkdir -p "$target_dir"
free_gb=$(df -Pk "$target_dir" | awk 'NR == 2 { print int($4 / 1048576) }')
echo "free disk beside $target_dir: ${free_gb} GB (the build needs about 2.5 GB there at most under CI, and the Slurm roots and VM images 2 GB under /var/cache)"
if [ "$free_gb" -lt 6 ]; then
    echo "warning: under 6 GB free; the build may run out of disk" >&2
fi

# prepare NAME COMMAND...: runs COMMAND in the background, its output in $prep_dir/NAME.log;
# `await NAME` waits for it. What a fresh machine makes once (Debian roots, VM images; about
# five minutes) is made so while LocalStack and Slurm start and the build runs. A part that
# fails there is made again by the step that needs it, which fails as before; the scripts lock
# what they make, so two makers never write one root.
prepare() {
    local name=$1
    shift
    "$@" > "$prep_dir/$name.log" 2>&1 &
    prep_pid[$name]=$!
}
# finish NAME: waits for what NAME started in the background; its exit status.
finish() {
    local pid=${prep_pid[$1]}
    unset "prep_pid[$1]"
    wait "$pid"
}
await() {
    local name=$1
    [ -n "${prep_pid[$name]:-}" ] || return 0
    if finish "$name"; then
        echo "made in the background: $name"
    else
        echo "making $name in the background failed; made again here:" >&2
        tail -n 5 "$prep_dir/$name.log" >&2
    fi
}
vm_images() {
    bash "$here/bench/vm.sh" build --version 24.11 && bash "$here/bench/vm.sh" build --version 26.05
}
if [ "$(id -u)" -eq 0 ]; then
    # The 24.11 root is also where Prometheus and VictoriaMetrics come from.
    prepare root-24.11 bash "$here/bench/slurm-trixie.sh" root --version 24.11
    [ "${SLURM_26_05:-1}" = 0 ] || prepare root-26.05 bash "$here/bench/slurm-trixie.sh" root --version 26.05
    [ "${SLURM_VM:-1}" = 0 ] || prepare vm-images vm_images
fi

# bench_begin NAME: starts scripts/bench/NAME.sh in the background (stopped at the end when this
# script started it); bench_end NAME WHAT takes the variables it printed.
bench_begin() {
    if ! bash "$here/bench/$1.sh" status >/dev/null 2>&1; then started+=("$1"); fi
    bash "$here/bench/$1.sh" start > "$prep_dir/$1.env" &
    prep_pid[$1]=$!
}
bench_end() {
    if finish "$1"; then
        eval "$(cat "$prep_dir/$1.env")"
    else
        echo "$2 did not start" >&2
    fi
}
bench_up() {
    bench_begin "$1"
    bench_end "$1" "$2"
}

step "LocalStack and Slurm"
bench_begin localstack
if [ "$(id -u)" -eq 0 ]; then
    bench_begin slurm
    bench_end slurm Slurm
else
    echo "not root: the Slurm bench needs root; Slurm tests will skip (or fail under CI)" >&2
fi
bench_end localstack LocalStack

# A real Prometheus (Debian trixie's 2.53.3, unpacked once): it scrapes the pull endpoint the
# prometheus sink's tests run on 127.0.0.1:29100 and answers their PromQL. Debian's build has no
# OTLP receiver (the tests say so, BENCH_PROMETHEUS_OTLP): the OTLP sink's real receiver is
# VictoriaMetrics (Debian trixie's 1.112.0, unpacked once), read back with PromQL.
step "Prometheus and VictoriaMetrics"
if [ "$(id -u)" -eq 0 ]; then
    await root-24.11
    bench_up prometheus Prometheus
    bench_up victoria-metrics VictoriaMetrics
else
    echo "not root: the Prometheus and VictoriaMetrics benches need root the first time; their tests will skip (or fail under CI)" >&2
fi

step "shellcheck"
if command -v shellcheck >/dev/null; then
    shellcheck -x scripts/*.sh scripts/bench/*.sh scripts/bench/vm/*.sh scripts/load/*.sh .ci/run infra/*/*.sh tests/infra/run.sh
fi

# cgroup v2 (what ParallelCluster 3.15+ images run; this host mounts v1 only): real Slurm 24.11
# (Debian trixie) and 26.05 (Debian sid) booted in a VM, the node role run there; `cargo test`
# below reads what they left (shipper/tests/it/bench/vm_cgroup_v2.rs, through BENCH_VM_OUT_*). Images are made
# once (a few minutes each) and cached.
step "cgroup v2: the node role on Slurm 24.11 and 26.05 in a VM (SLURM_VM=0 skips)"
if [ "${SLURM_VM:-1}" = 0 ]; then
    echo "skipped"
elif [ "$(id -u)" -eq 0 ]; then
    vm_t0=$SECONDS
    cargo build --workspace --locked --bin slurm-cw-shipper
    await vm-images
    for v in 24.11 26.05; do
        t0=$SECONDS
        if ! bash "$here/bench/vm.sh" build --version "$v"; then
            echo "the Slurm $v VM image was not made" >&2
            [ "${CI:-}" = true ] && exit 1
            continue
        fi
        echo "Slurm $v VM image ready in $((SECONDS - t0)) s"
        t0=$SECONDS
        vm_out=${BENCH_HOME:-/tmp/slurm-cw-bench}/vm-$v
        # The tests read what a failed run left too, and say what is wrong.
        bash "$here/bench/vm.sh" test --version "$v" --out "$vm_out" \
            || echo "the Slurm $v VM run failed; see $vm_out" >&2
        export "BENCH_VM_OUT_${v/./_}=$vm_out"
        echo "Slurm $v VM run took $((SECONDS - t0)) s"
    done
    echo "the VM step took $((SECONDS - vm_t0)) s"
else
    echo "not root: the VM bench needs root; its tests will skip (or fail under CI)" >&2
fi

# Tests that need a bench are #[ignore]d, so a plain `cargo test` lists them as skipped; here the
# benches are up and they run (and, with CI=true, fail when their bench is missing).
ignored=(-- --include-ignored)
for a in "${extra[@]}"; do [ "$a" = -- ] && ignored=(--include-ignored); done

# The tests that need a bench are modules of each crate's one integration binary
# (shipper/tests/it/bench/, lambda/tests/it/bench/); they run a module at a time, each module's
# tests beside each other, as they were written to.
bench_modules() { sed -n 's/^mod \([a-z0-9_]*\);$/\1/p' {shipper,lambda}/tests/it/bench/mod.rs; }
in_turn() {
    local m
    for m in "$@"; do
        cargo test --workspace --locked --test it -- --include-ignored "bench::$m::"
    done
}

step "cargo test"
if [ ${#extra[@]} -gt 0 ]; then
    cargo test --workspace --locked "${extra[@]}" "${ignored[@]}"
else
    cargo test --workspace --locked -- --include-ignored --skip bench::
    # shellcheck disable=SC2046 # one module name a word
    in_turn $(bench_modules)
fi

# slurm_bench_tests VERSION SKIP_VARIABLE TEST...: starts the chroot bench of Slurm VERSION
# (slurm.sh --version; stopped at the end when this script started it) and runs the bench test
# modules TEST... there (the -- arguments instead, when given), unless SKIP_VARIABLE=0.
# --workspace, as above, so that nothing is built again. With CI=true a bench that cannot be
# had fails.
slurm_bench_tests() {
    local v=$1 skip=$2 t0 env_out
    shift 2
    local slurm_tests=()
    if [ "${!skip:-1}" = 0 ]; then
        echo "skipped"
    elif [ "$(id -u)" -eq 0 ]; then
        if ! bash "$here/bench/slurm.sh" status --version "$v" >/dev/null 2>&1; then started+=("slurm@$v"); fi
        t0=$SECONDS
        if env_out=$(bash "$here/bench/slurm.sh" start --version "$v"); then
            echo "Slurm $v bench up in $((SECONDS - t0)) s"
            t0=$SECONDS
            if [ ${#extra[@]} -gt 0 ]; then
                slurm_tests=("${extra[@]}")
                (eval "$env_out" && cargo test --workspace --locked "${slurm_tests[@]}" "${ignored[@]}")
            else
                (eval "$env_out" && in_turn "$@")
            fi
            if [ "$v" = 26.05 ] && [ ${#extra[@]} -eq 0 ]; then
                # The node role's attribution from `scontrol show job --json` and its bounded
                # cgroup walks, on 26.05's job lookups too (its jobs' cgroups are this host's v1
                # ones).
                (eval "$env_out" && cargo test --workspace --locked --test it -- --include-ignored \
                    bench::node_slurm::attribution::)
            fi
            echo "Slurm $v tests took $((SECONDS - t0)) s"
        else
            echo "Slurm $v did not start" >&2
            [ "${CI:-}" = true ] && exit 1
        fi
    else
        echo "not root: the Slurm $v bench needs root; skipped" >&2
        [ "${CI:-}" = true ] && exit 1
    fi
}

# The tests that talk to the real Slurm, again on Slurm 24.11 (AWS ParallelCluster 3.14's
# release): Debian 13's packages in a chroot beside the 22.05 bench, made once (about a minute)
# and cached.
step "Slurm 24.11: the real-Slurm tests again (SLURM_24_11=0 skips)"
slurm_bench_tests 24.11 SLURM_24_11 node_slurm node_leftover job_cost head_once head_scenario report

# The head role on Slurm 26.05 (Debian sid's, in a chroot like 24.11's; made once, about a
# minute, and cached): slurmctld's own OpenMetrics endpoint as the node source, checked against
# sinfo and squeue (head_openmetrics), and the existing head tests on 26.05 (with sinfo: auto
# keeps it there, as the bench's GPUs are not tracked by accounting).
step "Slurm 26.05: the head role with slurmctld's OpenMetrics endpoint (SLURM_26_05=0 skips)"
await root-26.05
slurm_bench_tests 26.05 SLURM_26_05 head_openmetrics head_once head_scenario report job_cost

# AWS ParallelCluster's default Slurm settings (no ConstrainRAMSpace, no JobAcctGatherType): jobs
# have no memory or cpuacct cgroup; the node role measures them from their processes. The
# 22.05 bench restarts with that profile for one test, then goes back to the default.
step "ParallelCluster's default Slurm settings: a job's memory and CPU without its cgroups"
if [ "$(id -u)" -eq 0 ] && [ ${#extra[@]} -eq 0 ]; then
    if env_out=$(bash "$here/bench/slurm.sh" start --profile pcluster); then
        (eval "$env_out" && cargo test --workspace --locked --test it -- --nocapture --include-ignored \
            bench::node_pcluster::) \
            || { bash "$here/bench/slurm.sh" start >/dev/null; exit 1; }
        bash "$here/bench/slurm.sh" start >/dev/null
    else
        echo "the bench did not start with ParallelCluster's defaults" >&2
        [ "${CI:-}" = true ] && exit 1
    fi
elif [ "$(id -u)" -ne 0 ]; then
    echo "not root: the Slurm bench needs root; skipped" >&2
    [ "${CI:-}" = true ] && exit 1
fi

step "the README's quick start: scripts/demo.sh"
if [ "$(id -u)" -eq 0 ]; then
    bash scripts/demo.sh
else
    echo "not root: the demo needs the Slurm bench; skipped" >&2
    [ "${CI:-}" = true ] && exit 1
fi

# The steps below build their own (fuzz/target, the aarch64 release): under CI the debug build's
# 2.4 GB go first, so the build output on disk never holds much more than that.
if [ "${CI:-}" = true ]; then
    rm -rf "$target_dir/debug"
fi

# The aarch64 check's release build (several minutes, CPU alone) runs beside the fuzzing (one
# core) and the infrastructure checks (mostly downloads); its output is shown in its own step.
# Not beside the Slurm tests: their jobs burn a known number of cores.
prepare arm64 bash scripts/arm64-check.sh

step "fuzz every parser for ${FUZZ_SECONDS:-10}s each (FUZZ_SECONDS=0 skips)"
if [ "${FUZZ_SECONDS:-10}" != 0 ]; then
    if command -v rustup >/dev/null && ! rustup toolchain list | grep -q '^nightly'; then
        rustup toolchain install nightly --profile minimal >/dev/null
    fi
    bash scripts/fuzz.sh "${FUZZ_SECONDS:-10}"
fi

step "infrastructure checks (terraform, checkov, systemd, ParallelCluster bootstrap, IAM)"
bash tests/infra/run.sh

step "aarch64 (Graviton) shipper under qemu-user (begun beside the fuzzing)"
arm64_rc=0
finish arm64 || arm64_rc=$?
cat "$prep_dir/arm64.log"
[ "$arm64_rc" -eq 0 ] || exit "$arm64_rc"
