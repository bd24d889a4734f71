"""`o` (the overview: step split, figures, try next) and `u` (GPU memory), and the timeline's memory row.

Figures are the shared GPT step's, as `summary --overview` / `--memory` print them (those
are recounted from the JSON in tests/unit/test_overview.py and test_memory.py).
"""

from __future__ import annotations

from kerneltui.analysis.memory import CAPTURE_HINT
from kerneltui.overview_report import NO_STEPS
from kerneltui.tui.screens.browser import BrowserScreen
from kerneltui.tui.screens.memory import MemoryScreen
from kerneltui.tui.screens.overview import OverviewScreen, StepTable
from kerneltui.tui.widgets.timeline import Timeline
from tests.conftest import shared_trace
from tests.tui.helpers import opened, rows, screen_text


async def test_o_shows_each_steps_split_and_enter_scopes_to_that_step():
    async with opened(shared_trace("gpt_train_eager")) as (app, pilot):
        await pilot.press("o")
        assert isinstance(app.screen, OverviewScreen)
        table = app.screen.query_one(StepTable)
        got = rows(table)
        # no step has comm or DataLoader time: those columns are left out, and the head says so
        assert [c.label for c in table.columns()][3:] == ["kernel", "memcpy", "memset", "CPU-only", "other"]
        assert [r[:2] + r[3:] for r in got] == [
            ["2", "12.73ms", "3.90ms", "6.11µs", "35.6µs", "5.58ms", "3.21ms"],
            ["3", "12.01ms", "3.86ms", "6.11µs", "34.7µs", "5.89ms", "2.22ms"],
            ["4", "12.61ms", "3.90ms", "6.05µs", "34.1µs", "5.65ms", "3.02ms"],
            ["mean", "12.45ms", "3.88ms", "6.09µs", "34.8µs", "5.71ms", "2.82ms"],
            ["share", "", "31.2%", "0.0%", "0.3%", "45.8%", "22.6%"],
        ]
        bars = [r[2] for r in got[:3]]  # the longest step (2) has the longest bar; none is an outlier
        assert len(bars[0]) > len(bars[1]) and not any(b.startswith("!") for b in bars)
        head = str(app.screen.query_one("#overview-head").render())
        assert "3 steps · mean 12.45ms · GPU busy 31.5%" in head and "none in any step: comm, loader" in head
        await pilot.press("tab")  # to the findings, which scroll
        assert app.screen.focused is app.screen.query_one("#overview-more")
        await pilot.press("tab")
        assert app.screen.focused is table
        more = str(app.screen.query_one("#overview-text").render())
        assert "GPU utilization       31.5% of the steps' time (GPU busy)" in more
        assert "1. the steps are CPU-bound: the GPU waits while the CPU runs ops" in more
        await pilot.press("down", "enter")  # ProfilerStep#3: the browser's second step
        assert isinstance(app.screen, BrowserScreen)
        assert app.screen.query_state.scope.iteration == 1
        await pilot.press("o", "escape")  # back without a step: the scope stays
        assert isinstance(app.screen, BrowserScreen) and app.screen.query_state.scope.iteration == 1


async def test_u_shows_the_memory_chart_peaks_and_ops():
    async with opened(shared_trace("gpt_train_eager"), size=(120, 50)) as (app, pilot):
        await pilot.press("u")
        assert isinstance(app.screen, MemoryScreen)
        lines = app.screen.text(100).plain.split("\n")
        assert "cuda:0  peak allocated 1.5 GB (1,514,776,576 B) at 5.70ms" in lines
        assert "        peak reserved  1.8 GB (1,816,133,632 B)" in lines
        chart = [line for line in lines if "│" in line][:8]
        assert chart[0].startswith("  1.8 GB│") and chart[-1].startswith("     0 B│")
        # the peak allocated reaches 1.5/1.8 of the 8 rows: 6.7 rows, the 7th row's block 5/8 high
        assert "█" not in chart[0] + chart[1] and "░" in chart[0] and "▅" in chart[1] and "█" in chart[2]
        assert "       2  1.5 GB (1,514,776,576 B)" in lines
        assert any(line.startswith("   287.6 MB     34  aten::empty_strided") for line in lines)
        await pilot.press("escape")
        assert isinstance(app.screen, BrowserScreen)


async def test_the_timeline_draws_allocated_memory_under_the_steps():
    async with opened(shared_trace("gpt_train_eager"), size=(120, 40)) as (app, _pilot):
        timeline = app.screen.query_one(Timeline)
        drawn = screen_text(timeline)
        assert drawn[1].startswith("steps") and drawn[2].startswith("mem0 1.5G   │")
        row = drawn[2].split("│", 1)[1]
        memory = app.screen.browse.memory.devices[0]
        peak_at = memory.peak_allocated_ts - app.screen.kernels.origin
        w0, w1 = timeline.window
        cell = int((peak_at - w0) * (len(row)) / (w1 - w0))
        assert row[cell] == "█" and row[0] == " "  # before the first [memory] event: nothing known
        assert set(row.strip()) <= set("▁▂▃▄▅▆▇█")  # after it, every cell has a level


async def test_without_memory_events_or_steps_the_views_say_what_to_do():
    async with opened(shared_trace("add_relu_1M_eager")) as (app, pilot):
        timeline = app.screen.query_one(Timeline)
        assert not any(line.startswith("mem") for line in screen_text(timeline))
        await pilot.press("u")
        assert app.screen.text(80).plain.split("\n")[1] == CAPTURE_HINT
        await pilot.press("escape", "o")
        assert isinstance(app.screen, OverviewScreen)
        table = app.screen.query_one(StepTable)
        assert table.row_count() == 0 and not table.display  # no empty table: the head says why
        head = str(app.screen.query_one("#overview-head").render()).split("\n")
        assert head[1] == NO_STEPS == ("no ProfilerStep#N annotations in this trace: no step to split (profile with a"
                                       " schedule and prof.step())")
        assert app.screen.focused is app.screen.query_one("#overview-more")
