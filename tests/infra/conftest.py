"""Shared helpers of the infrastructure tests (tests/infra/run.sh runs them)."""

import os
import pathlib
import shutil

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
TERRAFORM = REPO / "terraform"
INFRA = REPO / "infra"


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() == "true"


def find_tool(name: str, env: str | None = None, venv_bin: pathlib.Path | None = None) -> str | None:
    """A tool from $env, else the given venv's bin, else PATH."""
    if env and os.environ.get(env):
        return os.environ[env]
    if venv_bin is not None and (venv_bin / name).is_file():
        return str(venv_bin / name)
    return shutil.which(name)


@pytest.fixture(scope="session")
def repo() -> pathlib.Path:
    return REPO
