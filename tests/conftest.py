"""Shared fixtures: the real traces in ../shared/traces and the project's traces/."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED_TRACES = ROOT.parent / "shared" / "traces"
PROJECT_TRACES = ROOT / "traces"


def shared_trace_names() -> list[str]:
    """Every trace with a truth file beside it (empty when ../shared is not there)."""
    return sorted(p.name[: -len(".truth.json")] for p in SHARED_TRACES.glob("*.truth.json"))


def shared_trace(name: str) -> Path:
    path = SHARED_TRACES / f"{name}.json.gz"
    if not path.exists():
        pytest.skip(f"{path} is not here (the shared traces travel beside the checkout)")
    return path


def truth(name: str) -> dict:
    return json.loads((SHARED_TRACES / f"{name}.truth.json").read_text())


@pytest.fixture
def example_pair() -> tuple[Path, Path]:
    return PROJECT_TRACES / "add_relu_1M_eager.json.gz", PROJECT_TRACES / "add_relu_1M_compiled.json.gz"
