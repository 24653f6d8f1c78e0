"""The terraform/ module as python-hcl2 reads it, for the infrastructure tests: its files,
blocks, resources and locals."""

import copy
import functools
import pathlib

import hcl2
from hcl2.utils import SerializationOptions

from conftest import TERRAFORM

TF_FILES = sorted(p for p in TERRAFORM.rglob("*.tf") if ".terraform" not in p.parts)
MODULE_FILES = sorted(TERRAFORM.glob("*.tf"))


@functools.cache
def _parse(path: pathlib.Path) -> dict:
    opts = SerializationOptions(strip_string_quotes=True, explicit_blocks=False, with_comments=False)
    with path.open() as f:
        return hcl2.load(f, serialization_options=opts)


def parse(path: pathlib.Path) -> dict:
    """The file as python-hcl2 reads it: string literals unquoted, expressions as "${...}"."""
    return copy.deepcopy(_parse(path))


def blocks(kind: str, files=MODULE_FILES) -> dict:
    """name -> body of every `kind` block (variable, output) in the module."""
    out = {}
    for f in files:
        for entry in parse(f).get(kind, []):
            for name, body in entry.items():
                assert name not in out, f"{kind} {name} is declared twice"
                out[name] = body
    return out


def resources() -> dict:
    """(type, name) -> body of every resource in the module."""
    out = {}
    for f in MODULE_FILES:
        for entry in parse(f).get("resource", []):
            for rtype, named in entry.items():
                for name, body in named.items():
                    out[(rtype, name)] = body
    return out


def module_locals() -> dict:
    out = {}
    for f in MODULE_FILES:
        for entry in parse(f).get("locals", []):
            for k, v in entry.items():
                assert k not in out, f"local {k} is declared twice"
                out[k] = v
    return out


def one(x):
    """A block's body: python-hcl2 gives nested blocks as lists."""
    if isinstance(x, list):
        assert len(x) == 1, x
        return x[0]
    return x


def as_list(x):
    return x if isinstance(x, list) else [x]
