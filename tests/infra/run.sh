#!/usr/bin/env bash
# The infrastructure tests, one entry point:
#   terraform/               python-hcl2 and checkov, plus `terraform fmt`, `validate` and the
#                            module's mocked `terraform test` where a terraform binary (and a
#                            hashicorp/aws 5.x or 6.x provider in $TF_PLUGIN_DIR, default
#                            /opt/tf-plugins; each major found is tested) is installed: nothing
#                            is downloaded
#   infra/systemd/           the unit (offline checks, systemd-analyze verify and security)
#   infra/parallelcluster/   the boot script (download, checksum, `install`) in a fake root with
#                            recording fakes; `install` itself: shipper/tests/it/install/
#   the IAM check            every AWS call in the Rust code against the module's policies
#
#   tests/infra/run.sh              everything
#   tests/infra/run.sh -k checkov   extra arguments for pytest
#
# Installs the pinned requirements into .venv-infra (pytest, python-hcl2, PyYAML) and
# .venv-infra-checkov (checkov, apart: its bc-python-hcl2 would replace python-hcl2's `hcl2`
# module) in the repository root when they are missing or the requirements changed: about 2
# minutes once. Then about 1 minute on 2 cores, most of it `terraform test`. Exits non-zero on
# any failure.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
cd "$repo"

python=${PYTHON:-}
if [ -z "$python" ]; then
    for p in python3.11 python3.12 python3.13 python3; do
        if command -v "$p" >/dev/null; then python=$p; break; fi
    done
fi
if [ -z "$python" ] || ! "$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
    echo "tests/infra: Python 3.11 or newer is needed (set PYTHON)" >&2
    exit 1
fi

# ensure_venv DIR REQUIREMENTS: DIR holds exactly what REQUIREMENTS pins.
ensure_venv() {
    local venv=$1 req=$2 stamp want
    stamp=$venv/.requirements.sha256
    want=$(sha256sum "$req" | cut -d' ' -f1)
    if [ -x "$venv/bin/python" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
        return 0
    fi
    echo "==> tests/infra: installing ${req#"$repo"/} into ${venv#"$repo"/}"
    if ! [ -x "$venv/bin/python" ]; then "$python" -m venv "$venv"; fi
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$req"
    echo "$want" > "$stamp"
}

ensure_venv "$repo/.venv-infra" "$here/requirements.txt"
ensure_venv "$repo/.venv-infra-checkov" "$here/requirements-checkov.txt"

export CHECKOV="$repo/.venv-infra-checkov/bin/checkov"
export PYTHONDONTWRITEBYTECODE=1
echo "==> tests/infra: pytest"
start=$SECONDS
status=0
"$repo/.venv-infra/bin/python" -m pytest -q -p no:cacheprovider tests/infra "$@" || status=$?
echo "==> tests/infra: $((SECONDS - start)) s"
exit "$status"
