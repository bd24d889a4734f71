"""The examples captured once per test session: each compiled capture costs seconds."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.capture.support import EXAMPLE_OPTIONS, EXAMPLES, STEPS, capture


@pytest.fixture(scope="session")
def captured(tmp_path_factory) -> dict[str, tuple[int, str, str, Path]]:
    """Each example, eager and compiled (with its provenance), into a directory of its own."""
    pytest.importorskip("torch")
    results = {}
    for name, (options, _) in EXAMPLE_OPTIONS.items():
        out_dir = tmp_path_factory.mktemp(name)
        rc, out, err = capture(str(EXAMPLES / f"{name}.py"), *options, "--steps", str(STEPS), "--warmup", "1",
                               "-o", str(out_dir))
        results[name] = (rc, out, err, out_dir)
    return results


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: takes tens of seconds (several processes start torch)")
