"""benchmarks/bench_first_screen.py's detector: a text is on screen once the pane has written it, found in
what tmux pipes out of the pane (not by polling capture-pane, whose processes took CPU from the app)."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _bench():
    """benchmarks/bench_first_screen.py, imported by path (benchmarks/ is no package)."""
    path = ROOT / "benchmarks" / "bench_first_screen.py"
    spec = importlib.util.spec_from_file_location("kerneltui_bench_first_screen", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_text_written_across_two_reads_is_found_once(tmp_path):
    written = tmp_path / "pane"
    written.write_bytes(b"")
    with open(written, "rb") as piped, open(written, "ab", buffering=0) as pane:
        stream = _bench().PaneStream(piped)
        assert not stream.shows("Count")  # nothing written yet
        pane.write(b"\x1b[1;3H\x1b[38;5;253mLoading ... Co")
        assert not stream.shows("Count")
        pane.write(b"unt\x1b[0m  Total")
        assert stream.shows("Count")  # its two halves in two reads
        assert not stream.shows("Count")  # written once: found once
        pane.write(b" ... Count")
        assert stream.shows("Count")  # written again


@pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")
def test_the_first_table_of_a_shipped_trace_is_seen_in_the_pane():
    """The whole detector: a real `kerneltui open` in tmux, its kernel table's header seen in the pane's
    output, and the app's answer to a key (its help screen) after it."""
    live: list[float] = []
    seconds = _bench().first_screen(ROOT / "traces" / "add_relu_1M_eager.json.gz", {"KERNELTUI_CACHE": "0"},
                                    timeout=60, live=live)
    assert 0 < seconds < live[0] < 60
