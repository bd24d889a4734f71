"""Shared fixtures: the real traces kept in tests/data/ and the project's example traces/.

tests/data/traces/    the H200 corpus: NAME.json.gz with torch's own key_averages() in NAME.truth.json
tests/data/external/  traces written by other projects (ROCm, torch 1.8, NCCL ranks...), no truth files

The data is part of the repository, so a missing file is a failure, never a skip.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"
SHARED_TRACES = DATA / "traces"
EXTERNAL_TRACES = DATA / "external"
PROJECT_TRACES = ROOT / "traces"


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
