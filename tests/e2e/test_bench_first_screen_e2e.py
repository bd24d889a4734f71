"""benchmarks/bench_first_screen.py on a real `kerneltui open` in tmux: the first table seen in what the pane
writes is the one on screen (first_screen checks it with capture-pane), after the app has started."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from tests.unit.test_bench_first_screen import ROOT, bench_first_screen

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")


def test_the_first_table_of_a_shipped_trace_is_seen_once_the_app_shows_it():
    live: list[float] = []
    seconds = bench_first_screen().first_screen(ROOT / "traces" / "add_relu_1M_eager.json.gz",
                                                {"KERNELTUI_CACHE": "0"}, timeout=60, live=live)
    # well after the pane's first output: a detector that took any output for the table saw the echoed
    # Enter within 3 ms, where the app imports Textual and pandas, reads the trace and draws (~0.8 s here)
    assert 0.1 < seconds < live[0] < 60


def test_each_run_has_a_tmux_server_of_its_own_and_leaves_none():
    before = subprocess.run(["pgrep", "-f", "tmux -L kerneltui-bench-"], capture_output=True, text=True,
                            check=False).stdout
    bench_first_screen().first_screen(ROOT / "traces" / "add_relu_1M_eager.json.gz", {"KERNELTUI_CACHE": "0"},
                                      timeout=60)
    after = subprocess.run(["pgrep", "-f", "tmux -L kerneltui-bench-"], capture_output=True, text=True,
                            check=False).stdout
    assert after == before
