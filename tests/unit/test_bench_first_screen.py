"""benchmarks/bench_first_screen.py's detector: a text is on screen once the pane has written it, found in
what tmux pipes out of the pane (not by polling capture-pane, whose processes took CPU from the app)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def bench_first_screen():
    """benchmarks/bench_first_screen.py, imported by path (benchmarks/ is no package)."""
    path = ROOT / "benchmarks" / "bench_first_screen.py"
    spec = importlib.util.spec_from_file_location("kerneltui_bench_first_screen", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_text_is_found_once_when_written_whether_split_across_reads_or_ending_one(tmp_path):
    written = tmp_path / "pane"
    written.write_bytes(b"")
    with open(written, "rb") as piped, open(written, "ab", buffering=0) as pane:
        stream = bench_first_screen().PaneStream(piped)
        assert not stream.shows("Count")  # nothing written yet
        pane.write(b"\x1b[1;3H\x1b[38;5;253mLoading ... Co")
        assert not stream.shows("Count")
        pane.write(b"unt\x1b[0m  Total")
        assert stream.shows("Count")  # its two halves in two reads
        assert not stream.shows("Count")  # nothing new
        pane.write(b" ... Count")  # written again, ending the read
        assert stream.shows("Count")
        pane.write(b"\x1b[0m")
        assert not stream.shows("Count")  # what ended the last read is not found again
        pane.write(b"escape clo")
        assert not stream.shows("Count")  # (another text looked for meanwhile)
        pane.write(b"ses")
        assert stream.shows("escape closes")  # split across reads made for other texts
