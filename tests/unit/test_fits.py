"""A trace whose load would not fit in memory is refused up front, in one line (trace/fits.py)."""

from __future__ import annotations

import pytest

from kerneltui.cli import main
from kerneltui.errors import TraceError
from kerneltui.trace import fits, load_trace
from tests.conftest import PROJECT_TRACES

EAGER = PROJECT_TRACES / "add_relu_1M_eager.json.gz"


def test_a_load_that_would_not_fit_is_one_line_and_exit_2(capsys, monkeypatch, tmp_path):
    big = tmp_path / "big.json"
    with open(big, "wb") as f:
        f.truncate(3_000_000_000)  # sparse: 3 GB on paper, nothing on disk
    monkeypatch.setattr(fits, "available_memory", lambda: 2_000_000_000)
    assert main(["summary", str(big), "--no-cache"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err == (f"kerneltui: {big}: loading it needs about 3.5 GB of memory (3.0 GB of JSON) and 2.0 GB is"
                   " available: free some memory or open it on a larger machine (KERNELTUI_MEMORY_CHECK=0 loads"
                   " it anyway, swapping)\n")


def test_a_gzipped_trace_is_judged_by_its_json_guessed_low(monkeypatch):
    size = EAGER.stat().st_size
    monkeypatch.setattr(fits, "available_memory", lambda: fits.load_needs(12 * size) - 1)
    with pytest.raises(TraceError, match=r"\(0\.0 GB gzipped, about 0\.0 GB of JSON\)"):
        load_trace(EAGER, cache=False)
    monkeypatch.setattr(fits, "available_memory", lambda: fits.load_needs(12 * size))
    assert len(load_trace(EAGER, cache=False).gpu) == 2


def test_the_check_can_be_skipped_and_a_cached_load_is_not_checked(monkeypatch):
    monkeypatch.setattr(fits, "available_memory", lambda: 1)
    monkeypatch.setenv("KERNELTUI_MEMORY_CHECK", "0")
    assert len(load_trace(EAGER).gpu) == 2  # loaded, and its columns cached
    monkeypatch.delenv("KERNELTUI_MEMORY_CHECK")
    assert len(load_trace(EAGER).gpu) == 2  # from the cache: mapped, not decoded
    with pytest.raises(TraceError, match="loading it needs about 0.2 GB"):
        load_trace(EAGER, cache=False)


def test_where_the_memory_available_is_unknown_nothing_is_refused(monkeypatch):
    monkeypatch.setattr(fits, "available_memory", lambda: None)
    assert len(load_trace(EAGER, cache=False).gpu) == 2


def test_the_available_memory_is_read_from_proc():
    available = fits.available_memory()
    assert available is None or available > 10_000_000
