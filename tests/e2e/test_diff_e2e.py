"""The real `kerneltui diff` in a real terminal (tmux at 80x24), read back with capture-pane."""

from __future__ import annotations

import shutil
import time
import uuid
from pathlib import Path

import pytest

from tests.e2e.conftest import kerneltui_command

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed (apt-get install tmux)")

COMMAND = "diff traces/add_relu_1M_eager.json.gz traces/add_relu_1M_compiled.json.gz"


def test_diff_of_the_example_pair_at_80x24(terminal):
    t = terminal(f"{kerneltui_command()} {COMMAND}")
    t.wait_for("first launch")
    time.sleep(0.5)  # let the last frame land
    lines = t.screen()
    assert lines[0].rstrip() == " 2 kernels → 1 per call · 5 array-sized transfers → 3"
    assert lines[1].rstrip() == " B is 1.68x faster (GPU time per call 4.26 → 2.53 µs). Every profiled call of A"
    assert lines[2].rstrip() == " and B held the profiler's start-up, so whether the CPU decides is unknown."
    assert lines[3].rstrip() == "           A add_relu_1M_eager.json.gz     B add_relu_1M_compiled.json.gz   B/A"
    # one profiled call each, holding the profiler's start-up: its span is unknown, not the CPU's window
    assert lines[4].rstrip() == " GPU·span  4.26µs · unknown (start-up)     2.53µs · unknown (start-up)    0.59x"
    assert lines[5].startswith("▔rows: largest change first▔")  # the order, in words, and its arrow below
    assert lines[6].rstrip() == "kernel (A → B)                                 n/call      GPU µs/call     Δ µs▼"
    assert lines[7].rstrip() == "add + clamp_min → triton_poi_fused_add_relu_0   2 → 1      4.26 → 2.53     -1.73"
    assert any(line.startswith(" fused · high: all of the forward's kernels on both sides") for line in lines)
    assert any(line.startswith("A add_relu_…│╵0 ") for line in lines)
    assert any(line.startswith("B add_relu_…│╵0 ") for line in lines)
    assert lines[-1].rstrip() == " ? Help  / Search  d Sort by Δ  i Verdict  q Quit  ^p palette"
    assert all(len(line) <= 80 for line in lines) and len(lines) == 24

    t.keys("s")
    t.wait_for("own scales")
    t.keys("q")
    assert t.wait_for("EXIT=")[0].startswith("EXIT=0") or any(line.startswith("EXIT=0") for line in t.screen())


def test_a_bad_file_exits_2_with_one_line(terminal, tmp_path_factory):
    bad = Path("/tmp") / f"kt-{uuid.uuid4().hex[:6]}.json"  # short: the error line must fit 80 columns
    bad.write_text("{not json")
    t = terminal(f"{kerneltui_command()} diff traces/add_relu_1M_eager.json.gz {bad}", env="NO_COLOR=1")
    t.wait_for("press q to quit")
    t.keys("q")
    lines = t.wait_for("EXIT=")
    errors = [line for line in lines if line.startswith("kerneltui: ")]
    assert len(errors) == 1 and str(bad) in errors[0]
    assert any(line.startswith("EXIT=2") for line in lines)
    bad.unlink()
