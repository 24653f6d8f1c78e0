#!/usr/bin/env bash
# The whole test suite on a fresh machine: installs what is missing, starts LocalStack and a
# real Slurm on 127.0.0.1, runs every test, and stops what it started.
#
#   scripts/test.sh            everything
#   scripts/test.sh -- ARGS    extra arguments for `cargo test` (a filter, say)
#   FUZZ_SECONDS=N             seconds per fuzz target (default 10, 0 skips fuzzing)
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

cleanup() {
    local rc=$?
    for s in "${started[@]}"; do
        bash "$here/bench/$s.sh" stop || true
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
if [ "$(id -u)" -eq 0 ]; then
    command -v slurmctld >/dev/null || need_apt+=(slurm-wlm slurm-client munge)
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

step "LocalStack"
if ! bash "$here/bench/localstack.sh" status >/dev/null 2>&1; then started+=(localstack); fi
if env_out=$(bash "$here/bench/localstack.sh" start); then
    eval "$env_out"
else
    echo "LocalStack did not start" >&2
fi

step "Slurm"
if [ "$(id -u)" -eq 0 ]; then
    if ! bash "$here/bench/slurm.sh" status >/dev/null 2>&1; then started+=(slurm); fi
    if env_out=$(bash "$here/bench/slurm.sh" start); then
        eval "$env_out"
    else
        echo "Slurm did not start" >&2
    fi
else
    echo "not root: the Slurm bench needs root; Slurm tests will skip (or fail under CI)" >&2
fi

step "shellcheck"
if command -v shellcheck >/dev/null; then
    shellcheck -x scripts/*.sh scripts/bench/*.sh scripts/load/*.sh .ci/run
fi

step "cargo test"
cargo test --workspace --locked "${extra[@]}"

step "the README's quick start: scripts/demo.sh"
if [ "$(id -u)" -eq 0 ]; then
    bash scripts/demo.sh
else
    echo "not root: the demo needs the Slurm bench; skipped" >&2
    [ "${CI:-}" = true ] && exit 1
fi

step "fuzz every parser for ${FUZZ_SECONDS:-10}s each (FUZZ_SECONDS=0 skips)"
if [ "${FUZZ_SECONDS:-10}" != 0 ]; then
    if command -v rustup >/dev/null && ! rustup toolchain list | grep -q '^nightly'; then
        rustup toolchain install nightly --profile minimal >/dev/null
    fi
    bash scripts/fuzz.sh "${FUZZ_SECONDS:-10}"
fi

step "infrastructure checks (terraform, checkov, systemd, ParallelCluster bootstrap, IAM)"
bash tests/infra/run.sh

step "aarch64 (Graviton) shipper under qemu-user"
bash scripts/arm64-check.sh
