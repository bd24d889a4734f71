"""The browser and the diff screen on a hostile trace: its text is drawn escaped, never as control bytes or markup.

Two levels: what each widget draws (every Segment of ``render_line``, every
Static's text) holds no control, C1 or bidi character and shows the exact
escaped name; and the frame Textual would write to the terminal, once
Textual's own CSI sequences are taken out, holds no control character but its
line breaks (and none of the trace's OSC/CSI sequences at all).
Rich markup in names (``[bold red]x[/]``, ``[link=...]``) is shown as text.
"""

from __future__ import annotations

import re
from contextlib import asynccontextmanager


from kerneltui.tui.diff.app import build_app as build_diff_app
from kerneltui.tui.diff.screen import DiffScreen
from kerneltui.tui.diff.table import MatchTable
from kerneltui.tui.diff.timelines import PairedTimelines
from kerneltui.tui.screens.loading import LoadingScreen
from kerneltui.tui.widgets.details import DetailsPane
from tests.tui.helpers import opened, parts, rows, wait_for_diff
from tests.unit.test_terminal_text import (
    DEVICE_SHOWN,
    KERNEL_SHOWN,
    MODULE_SHOWN,
    OP_SHOWN,
    SOURCE_SHOWN,
    STEP_SHOWN,
    THREAD_SHOWN,
    TRITON_SHOWN,
    hostile_trace,
    unsafe_in,
)

CSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]")  # what Textual itself writes: SGR colours, cursor moves
RAW_FROM_TRACE = ("\x1b]", "\x1b[31mRED", "\x1b[2J", "\x1b[5m", "\x1b[1m_0", "\x07", "\x9b", "\u202e", "\x00", "\x7f")


def frame(app) -> str:
    """The whole screen as the terminal would receive it."""
    return app.screen._compositor.render_update(full=True).render_segments(app.console)


def assert_frame_inert(app) -> str:
    data = frame(app)
    leaked = [s for s in RAW_FROM_TRACE if s in data]
    assert leaked == [], f"trace control sequences reach the terminal: {leaked}"
    text = CSI.sub("", data)
    assert unsafe_in(text.replace("\n", "")) == []
    return text


def segments_of(widget) -> list[str]:
    """Every Segment text a Line-API widget draws now."""
    return [seg.text for y in range(widget.size.height) for seg in widget.render_line(y)]


def assert_widget_inert(widget) -> str:
    texts = segments_of(widget)
    assert [t for t in texts if unsafe_in(t)] == []
    return "\n".join(texts)


def static_text(app, selector: str) -> str:
    text = str(app.screen.query_one(selector).render())
    assert unsafe_in(text) == []
    return text


def pane_title(pane: DetailsPane) -> str:
    return "".join(part for _, part, kind in pane._lines if kind == "details--title")


def pane_rows(pane: DetailsPane) -> dict[str, str]:
    """label -> value as the pane draws them (wrapped lines joined again)."""
    out: dict[str, str] = {}
    label = ""
    for margin, part, kind in pane._lines:
        if kind != "details--value":
            continue
        if margin.strip():
            label = margin.strip()
            out[label] = part
        else:
            out[label] += " " + part
    return out


async def test_kernel_table_header_and_details_show_escaped_text(tmp_path):
    path = hostile_trace(tmp_path, "h\x1b[31m.json")
    async with opened(path, size=(200, 50)) as (app, pilot):
        screen, table, launches, timeline = parts(app)
        names = [r[0] for r in rows(table)]
        assert names[0] == KERNEL_SHOWN
        assert set(names[1:]) == {rf"{TRITON_SHOWN}@\x1b[31mA", rf"{TRITON_SHOWN}@\x1b]52;B"}  # kernel_hash
        assert {r[-1] for r in rows(table)} == {OP_SHOWN, TRITON_SHOWN}
        drawn = assert_widget_inert(table)
        assert "[bold red]x[/]" in drawn and r"evil\x1b]52;c;cHdu" in drawn  # markup as text; cut after escaping

        header = static_text(app, "#header")
        assert header.startswith(r"h\x1b[31m.json · 4 launches · 3 kernels")
        assert header.endswith(f" · {DEVICE_SHOWN} · healthy")  # [link=...] is text: no hyperlink

        pane = screen.query_one(DetailsPane)
        assert_widget_inert(pane)
        assert pane_title(pane) == KERNEL_SHOWN
        shown = pane_rows(pane)
        assert shown["op"] == f"{STEP_SHOWN} › {OP_SHOWN}"
        assert shown["source"] == f"{SOURCE_SHOWN}  [{MODULE_SHOWN}]"
        assert shown["step"] == f"{STEP_SHOWN} #1  (call 1 of 2)"

        text = assert_frame_inert(app)
        assert r"evil\x1b]52;c;cHduZWQ=\x07" in text
        assert "[bold]op[/" in text and "[link=https://evil.example]click[/link]" in text


async def test_launch_list_and_cpu_events_show_escaped_text(tmp_path):
    async with opened(hostile_trace(tmp_path), size=(200, 50)) as (app, pilot):
        screen, table, launches, timeline = parts(app)
        await pilot.press("v")
        await pilot.pause()
        shown = rows(launches)
        assert [r[4] for r in shown].count(KERNEL_SHOWN) == 2
        assert {r[5] for r in shown} == {OP_SHOWN, TRITON_SHOWN}
        assert "[bold red]x[/]" in assert_widget_inert(launches)
        assert_frame_inert(app)

        await pilot.press("f")  # full names
        await pilot.pause()
        assert [r[4] for r in rows(launches)].count(KERNEL_SHOWN) == 2
        assert_widget_inert(launches)

        for key in ("R", "O", "A"):  # runtime calls, CPU ops, annotations: CPU events' own names
            await pilot.press(key)
            await pilot.pause()
        names = {r[4] for r in rows(launches)}
        assert {STEP_SHOWN, OP_SHOWN, TRITON_SHOWN, "cudaLaunchKernel"} <= names
        step_row = next(i for i, r in enumerate(rows(launches)) if r[4] == STEP_SHOWN)
        launches.move_cursor(step_row)
        await pilot.pause()
        pane = screen.query_one(DetailsPane)
        assert pane_rows(pane)["thread"] == THREAD_SHOWN
        assert pane_title(pane) == STEP_SHOWN
        assert_widget_inert(pane)
        assert_widget_inert(launches)
        assert_frame_inert(app)


async def test_timeline_labels_and_steps_are_escaped(tmp_path):
    async with opened(hostile_trace(tmp_path), size=(200, 50)) as (app, pilot):
        screen, table, launches, timeline = parts(app)
        assert_widget_inert(timeline)
        lane_labels = {label for lane in timeline.lanes for label in (*lane.labels, *lane.full_labels, lane.label)}
        assert KERNEL_SHOWN in lane_labels and OP_SHOWN in lane_labels
        assert all(not unsafe_in(label) for label in lane_labels)
        assert timeline._steps[2] == (f"{STEP_SHOWN} #1", f"{STEP_SHOWN} #2")

        screen.select_launch(0, source=None)
        timeline.action_zoom_selection()  # the kernel fills a third of the window: its name is drawn in it
        await pilot.pause()
        drawn = assert_widget_inert(timeline)
        assert r"evil\x1b]52;c;cH" in drawn
        cpu = next(lane for lane in timeline.lanes if lane.key.startswith("cpu"))
        timeline.show_span(int(cpu.starts[0]), int(cpu.ends[0]), margin=1.0)
        await pilot.pause()
        assert r"aten::evil\x1b[2J" in assert_widget_inert(timeline)  # a launch call, labelled with its op
        starts, ends, _ = timeline._steps
        timeline.show_span(int(starts[0]), int(ends[0]), margin=0.02)
        await pilot.pause()
        assert f"{STEP_SHOWN} #1" in assert_widget_inert(timeline)
        assert_frame_inert(app)


async def test_a_path_with_an_escape_in_the_load_error(tmp_path):
    missing = tmp_path / "nope\x1b[31m\x07.json"
    async with opened(missing) as (app, pilot):
        assert isinstance(app.screen, LoadingScreen)
        assert static_text(app, "#loading-title") == f"kerneltui: {tmp_path}/nope\\x1b[31m\\x07.json: no such file"
        assert_frame_inert(app)
        await pilot.press("q")
    assert app.return_code == 2


@asynccontextmanager
async def opened_diff(a, b, size=(200, 50)):
    app = build_diff_app(str(a), str(b))
    async with app.run_test(size=size) as pilot:
        await wait_for_diff(pilot)
        yield app, pilot


async def test_diff_screen_shows_escaped_text_and_no_markup(tmp_path):
    a, b = hostile_trace(tmp_path, "a.json"), hostile_trace(tmp_path, "b\x1b[31m.json")
    async with opened_diff(a, b) as (app, pilot):
        assert isinstance(app.screen, DiffScreen)
        for selector in ("#diff-headline", "#diff-verdict", "#diff-notes", "#match-detail"):
            static_text(app, selector)
        text = assert_frame_inert(app)
        assert r"B b\x1b[31m.json" in text  # the side's panel and its timeline
        # cells of a Rich Table: a str there would be parsed as markup ([link=...] a hyperlink)
        assert f"device    {DEVICE_SHOWN[:50]}" in text  # (cut to its column)
        assert f"2 ({STEP_SHOWN})" in text
        assert f"0 = start of {STEP_SHOWN} #2 · s switches" in text  # the border title: markup not parsed

        table = app.screen.query_one(MatchTable)
        assert any(cell.startswith(KERNEL_SHOWN + " + ") for cell in (table.cells(i)[0] for i in range(table.row_count())))
        assert r"\x00\x7f[bold" in assert_widget_inert(table)

        pair = app.screen.query_one(PairedTimelines)
        for timeline in pair.timelines:
            drawn = assert_widget_inert(timeline)
            assert all(not unsafe_in(lane.label) and not any(map(unsafe_in, lane.labels)) for lane in timeline.lanes)
        assert drawn.startswith(r"B b\x1b[31m…│")  # the origin label of timeline B, cut to its 12 cells

        await pilot.press("i")  # the verdict and notes as a panel of Rich Text: device names escaped, markup off
        await pilot.pause()
        text = app.screen.plain(400)
        assert not unsafe_in(text)
        assert "[link=https://evil.example]click[/link]" in text  # [link=...] in a note stays text
        assert_frame_inert(app)
        await pilot.press("escape", "enter")  # the row panel: kernel names and ops from the trace
        await pilot.pause()
        assert not unsafe_in(app.screen.plain(400))
        assert_frame_inert(app)


async def test_warnings_in_the_header_and_the_notification_are_escaped(tmp_path):
    path = hostile_trace(tmp_path, "cut\x1b]0;t\x07.json", cut=True)
    async with opened(path, size=(200, 50)) as (app, pilot):
        header = static_text(app, "#header")
        assert header.startswith(r"cut\x1b]0;t\x07.json · ")
        assert "⚠ trace is cut off" in header
        notes = list(app._notifications)
        assert notes and not any(n.markup for n in notes)
        assert all(not unsafe_in(n.message) for n in notes)
        assert_frame_inert(app)


async def test_diff_screen_steps_row_is_escaped(tmp_path):
    a, b = hostile_trace(tmp_path, "a.json"), hostile_trace(tmp_path, "b.json")
    async with opened_diff(a, b, size=(200, 50)) as (app, pilot):  # tall: the call spans get a row
        pair = app.screen.query_one(PairedTimelines)
        for timeline in pair.timelines:
            assert timeline._steps[2] == (f"{STEP_SHOWN} #1", f"{STEP_SHOWN} #2")
            starts, ends, _ = timeline._steps
            timeline.show_span(int(starts[1]), int(ends[1]), margin=0.02)
        await pilot.pause()
        assert any(f"{STEP_SHOWN} #2" in assert_widget_inert(t) for t in pair.timelines)
        assert_frame_inert(app)
