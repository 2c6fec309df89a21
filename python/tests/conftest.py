"""Shared fixtures: the provider libraries cargo built, and helpers.

`scripts/test-python` builds the libraries and points GUARDHOST_LIB_DIR at
them (default: <repo>/target/debug/deps, where the workspace's test build
leaves them). A missing library fails the test that
needs it; nothing is skipped.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import stat

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
LIB_DIR = pathlib.Path(os.environ.get("GUARDHOST_LIB_DIR", REPO / "target" / "debug" / "deps"))


def library(name: str) -> pathlib.Path:
    """The path of a cargo-built provider library, which must exist."""
    path = LIB_DIR / f"lib{name}.so"
    assert path.is_file(), f"{path} is missing: run scripts/test-python (it builds the provider libraries)"
    return path


@pytest.fixture(scope="session")
def libs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, pathlib.Path]:
    """The provider libraries, copied where only their owner can write (guardhost
    refuses a library writable by group or others)."""
    directory = tmp_path_factory.mktemp("libs")
    directory.chmod(0o700)
    out = {}
    for name in ("guardhost_allowlist", "guardhost_oap", "guardhost_test_providers"):
        target = directory / f"lib{name}.so"
        shutil.copyfile(library(name), target)
        target.chmod(stat.S_IRUSR | stat.S_IWUSR | stat.S_IXUSR)
        out[name] = target
    return out


@pytest.fixture(scope="session")
def allowlist_so(libs: dict[str, pathlib.Path]) -> str:
    return f"{libs['guardhost_allowlist']}:AllowlistProvider"


@pytest.fixture(scope="session")
def oap_so(libs: dict[str, pathlib.Path]) -> str:
    return f"{libs['guardhost_oap']}:OAPGuardrailProvider"


@pytest.fixture(scope="session")
def test_so(libs: dict[str, pathlib.Path]):
    """`use:` of a provider in the test-providers library, by symbol."""
    return lambda symbol: f"{libs['guardhost_test_providers']}:{symbol}"


@pytest.fixture(scope="session")
def passport() -> pathlib.Path:
    return REPO / "examples" / "oap" / "passport.json"
