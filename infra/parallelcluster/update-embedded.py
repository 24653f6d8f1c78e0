#!/usr/bin/env python3
"""Copies infra/slurm/task-epilog.sh and infra/systemd/slurm-cw-shipper.service into the
here-documents of on-node-configured.sh, which installs them when no --epilog/--unit is given
(so that a cluster needs only the script and the binary in S3).

    python3 infra/parallelcluster/update-embedded.py          rewrite the script
    python3 infra/parallelcluster/update-embedded.py --check  exit 1 if it is out of date

tests/infra/test_bootstrap.py fails when the embedded copies differ from the files."""

import pathlib
import re
import sys

HERE = pathlib.Path(__file__).resolve().parent
SCRIPT = HERE / "on-node-configured.sh"
EMBEDDED = {
    "EPILOG_EOF": HERE.parent / "slurm" / "task-epilog.sh",
    "UNIT_EOF": HERE.parent / "systemd" / "slurm-cw-shipper.service",
}


def embed(text: str) -> str:
    for marker, source in EMBEDDED.items():
        content = source.read_text()
        assert content.endswith("\n") and f"\n{marker}\n" not in content, source
        pattern = re.compile(rf"(<<'{marker}'\n)(.*?)(^{marker}$)", re.S | re.M)
        text, n = pattern.subn(lambda m: m.group(1) + content + m.group(3), text)
        assert n == 1, f"{SCRIPT.name}: expected one <<'{marker}' here-document, found {n}"
    return text


def main() -> int:
    old = SCRIPT.read_text()
    new = embed(old)
    if "--check" in sys.argv[1:]:
        if new != old:
            print(f"{SCRIPT}: embedded copies are out of date; run {sys.argv[0]}", file=sys.stderr)
            return 1
        return 0
    if new != old:
        SCRIPT.write_text(new)
        print(f"updated {SCRIPT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
