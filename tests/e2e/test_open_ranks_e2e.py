"""The real `kerneltui open DIR` in a real terminal (tmux at 80x24, NO_COLOR): a job of 8 ranks."""

from __future__ import annotations

import re
import shutil
import time

import pytest

from kerneltui import ranks_report
from kerneltui.analysis.ranks.job import summarize_job
from kerneltui.ranks_report import time_cell
from kerneltui.tui.ranks.model import TIME_KEYS
from tests.e2e.conftest import kerneltui_command
from tests.support.rank_job import make_job

REVERSE = re.compile(r"\x1b\[(?:\d+;)*7(?:;\d+)*m")  # an SGR that turns reverse video on (alone or with bold)

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed (apt-get install tmux)")


def test_open_a_job_directory_rows_clock_rank_browser_and_back_at_80x24(terminal, tmp_path):
    truth = make_job(tmp_path / "job", ranks=8, straggler=3)
    job = summarize_job([str(tmp_path / "job")])
    t = terminal(f"{kerneltui_command()} open {tmp_path / 'job'}", env="NO_COLOR=1")
    t.wait_for("⏎ Open rank")  # the keys bar
    screen = t.wait_for(" straggler: rank 3 reaches the collectives")  # the notes: under load they may come a frame later
    assert screen[0].startswith(" 8/8 ranks · step ") and screen[0].endswith(" · aligned")
    assert screen[1].startswith(" straggler: rank 3 reaches the collectives")
    at = next(i for i, line in enumerate(screen) if line.split()[:2] == ["rank", "step"])
    assert screen[at].split() == ["rank", "step", "busy", "compute", "comm", "exposed", "idle", "offset", "late"]
    for i, row in enumerate(ranks_report.rank_rows(job)):
        mark = ["◀"] if row["rank"] == truth.straggler else []
        assert screen[at + 1 + i].split() == [str(row["rank"]), *mark, *(time_cell(k, row[k]) for k in TIME_KEYS)]
    lanes = [line.split("│")[0].strip() for line in screen if "│" in line][1:]  # below the axis
    assert lanes == [f"r{r}" + (" ◀" if r == truth.straggler else "") for r in range(8)]
    assert screen[-1] == " ? Help  ⏎ Open rank  c Clocks  i Notes  q Quit  ^p palette"

    # without colour the cursor is still there: reverse video on rank 0's row, and on its lane's label
    coloured = t.tmux("capture-pane", "-p", "-e", "-t", t.name, check=True).stdout.splitlines()
    assert REVERSE.search(coloured[at + 1]) and not REVERSE.search(coloured[at + 2])
    assert REVERSE.search(next(line for line in coloured if "r0" in line and "│" in line))
    assert not REVERSE.search(next(line for line in coloured if "r1" in line and "│" in line))

    t.keys("c")
    assert t.wait_for(" · raw")[0].endswith(" · raw")
    t.keys("Down", "Down", "Down")
    t.wait_for(" rank 3 · ◀ straggler")
    t.keys("Enter")
    screen = t.wait_for("t Timeline")  # the browser on rank 3's trace
    assert screen[0].startswith(" worker3") and "3,774 launches" in screen[0]
    t.keys("b")
    screen = t.wait_for("⏎ Open rank")
    assert any(line.startswith(" rank 3 · ◀ straggler") for line in screen)  # the cursor stayed on it
    time.sleep(0.2)
    t.keys("q")
    assert "EXIT=0" in t.wait_for("EXIT=")
