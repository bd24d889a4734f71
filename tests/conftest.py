"""Shared fixtures: the real traces kept in tests/data/ and the project's example traces/.

tests/data/traces/    the H200 corpus: NAME.json.gz with torch's own key_averages() in NAME.truth.json
tests/data/external/  traces written by other projects (ROCm, torch 1.8, NCCL ranks...), no truth files

The data is part of the repository, so a missing file is a failure, never a skip.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"
SHARED_TRACES = DATA / "traces"
EXTERNAL_TRACES = DATA / "external"
PROJECT_TRACES = ROOT / "traces"


_session_cache: str | None = None


def pytest_configure(config) -> None:
    """Before any fixture (session-scoped ones too): the column cache in a temporary directory."""
    global _session_cache
    _session_cache = tempfile.mkdtemp(prefix="kerneltui-test-cache-")
    os.environ["XDG_CACHE_HOME"] = _session_cache


def pytest_unconfigure(config) -> None:
    if _session_cache is not None:
        shutil.rmtree(_session_cache, ignore_errors=True)


@pytest.fixture(autouse=True)
def private_cache(tmp_path_factory, monkeypatch) -> Path:
    """Every test's column cache lives in a temporary directory, never the user's ~/.cache.

    Subprocesses inherit it through XDG_CACHE_HOME (helpers that build an env pass it on).
    """
    base = tmp_path_factory.mktemp("xdg-cache")
    monkeypatch.setenv("XDG_CACHE_HOME", str(base))
    monkeypatch.delenv("KERNELTUI_CACHE", raising=False)
    monkeypatch.delenv("KERNELTUI_CACHE_MAX", raising=False)
    return base / "kerneltui"


def cache_env() -> dict[str, str]:
    """The part of the environment a test's subprocess needs to use the test's own cache."""
    return {"XDG_CACHE_HOME": os.environ["XDG_CACHE_HOME"]}


def _existing(path: Path) -> Path:
    if not path.is_file():
        pytest.fail(f"{path} is missing: the test data is part of the repository (tests/data/)", pytrace=False)
    return path


def shared_trace_names() -> list[str]:
    """Every trace in tests/data/traces with a truth file beside it."""
    names = sorted(p.name[: -len(".truth.json")] for p in SHARED_TRACES.glob("*.truth.json"))
    if not names:
        # Called at collection time (parametrize): raise, so collection errors instead of running nothing.
        raise FileNotFoundError(f"no *.truth.json in {SHARED_TRACES}: the test data is part of the repository")
    return names


def shared_trace(name: str) -> Path:
    """tests/data/traces/NAME.json.gz (a real H200 trace); fails when it is not there."""
    return _existing(SHARED_TRACES / f"{name}.json.gz")


def external_trace(filename: str) -> Path:
    """tests/data/external/FILENAME (the whole file name, e.g. 'hta__trace_filter__sampled_rank-0.json.gz')."""
    return _existing(EXTERNAL_TRACES / filename)


def truth(name: str) -> dict:
    return json.loads(_existing(SHARED_TRACES / f"{name}.truth.json").read_text())


@pytest.fixture
def example_pair() -> tuple[Path, Path]:
    return PROJECT_TRACES / "add_relu_1M_eager.json.gz", PROJECT_TRACES / "add_relu_1M_compiled.json.gz"
