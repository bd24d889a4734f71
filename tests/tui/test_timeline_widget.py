"""The Timeline widget alone, in a small app: NO_COLOR cues, range selection, height, icicle ids."""

from __future__ import annotations

import numpy as np
from textual import on
from textual.app import App, ComposeResult

from kerneltui.trace import load_trace
from kerneltui.trace.schema import Kind
from kerneltui.tui.lanes import Lane, lanes_from_trace, op_row
from kerneltui.tui.widgets.timeline import Timeline
from tests.conftest import shared_trace
from tests.tui.helpers import screen_text

PLOT_X = 13  # label_width 12 + "│"


def lane(key, spans, ids, labels=("k",), kind=Kind.KERNEL) -> Lane:
    n = len(spans)
    return Lane(key, key.split(":")[0].upper(), np.array([s for s, _ in spans], np.int64),
                np.array([e for _, e in spans], np.int64), np.asarray(ids, np.int64),
                np.full(n, kind, np.int8), np.zeros(n, np.int32), labels)


def small_lanes() -> list[Lane]:
    """Window 0..1000 ns: a one-cell kernel at 100, a wide named one at 400..900, their launch calls."""
    return [
        lane("gpu:0:7", [(100, 104), (400, 900)], [0, 1], labels=("aten::addmm",)),
        lane("cpu:1", [(20, 30), (300, 310)], [0, 1], labels=("aten::mm",), kind=Kind.RUNTIME),
    ]


class One(App):
    def __init__(self, lanes, height: int | None = None, bounds=(0, 1000)) -> None:
        super().__init__()
        self.lanes, self.height, self.bounds, self.messages = lanes, height, bounds, []

    def compose(self) -> ComposeResult:
        timeline = Timeline(self.lanes, bounds=self.bounds, id="timeline")
        if self.height is not None:
            timeline.styles.height = self.height
        yield timeline

    def on_mount(self) -> None:
        self.query_one(Timeline).focus()

    @on(Timeline.Selected)
    @on(Timeline.RangeSelected)
    @on(Timeline.RangeCleared)
    def _record(self, message) -> None:
        self.messages.append(message)


def styles_at(timeline: Timeline, y: int) -> list[tuple[str, object]]:
    """(character, Rich style) per cell of a drawn line."""
    return [(ch, seg.style) for seg in timeline.render_line(y) for ch in seg.text]


async def test_no_color_keeps_selection_labels_and_marks_apart(monkeypatch):
    monkeypatch.setenv("NO_COLOR", "1")
    app = One(small_lanes())
    async with app.run_test(size=(113, 8)) as pilot:  # 100 plot cells of 10 ns
        assert app.no_color  # Textual read NO_COLOR at App start: colours are filtered to monochrome
        timeline = app.query_one(Timeline)
        timeline.set_marked(np.array([False, True]))
        timeline.select(0)
        await pilot.pause()
        gpu = styles_at(timeline, 1)[PLOT_X:]
        char, style = gpu[10]
        assert char == "◆" and style.reverse and style.bold  # a selected one-cell kernel is a visible glyph
        label = [(c, s) for c, s in gpu[41:52]]
        assert "".join(c for c, _ in label) == "aten::addmm"
        assert all(s.bold and not s.reverse and s.underline for _, s in label)  # label: bold; marked: underline
        assert gpu[60][0] == "█" and gpu[60][1].underline and not gpu[60][1].reverse
        shot = app.export_screenshot()
        assert "◆" in shot and "aten::addmm" in shot
        # the selection walks to the wide kernel: reverse over ━ and its name, never blank cells
        await pilot.press("right")
        gpu = styles_at(timeline, 1)[PLOT_X:]
        assert "".join(c for c, _ in gpu[40:90]) == "━aten::addmm" + "━" * 38
        assert all(s.reverse for _, s in gpu[40:90])


async def test_mark_range_with_keys():
    app = One(small_lanes())
    async with app.run_test(size=(113, 8)) as pilot:
        timeline = app.query_one(Timeline)
        timeline.select(0)
        await pilot.press("m", "right")  # start: the selected kernel's start
        assert timeline.range is None
        assert screen_text(timeline)[0][PLOT_X + 10] == "┃"  # the pending start
        await pilot.press("m")  # end: the (now selected) next kernel's end
        assert timeline.range == (100, 900)
        assert [type(m) for m in app.messages if not isinstance(m, Timeline.Selected)] == [Timeline.RangeSelected]
        rs = app.messages[-1]
        assert (rs.start, rs.end, rs.timeline) == (100, 900, timeline)
        axis = screen_text(timeline)[0][PLOT_X:]
        assert axis[10:90] == "├" + "━" * 35 + " 0.80µs " + "━" * 11 + "▼" + "━" * 23 + "┤"  # ▼: the selection
        assert axis[:10] == "╵0        " and axis[90:] == "╵0.9µs    "
        # order-independent: from the later kernel back to the earlier one gives the same range
        await pilot.press("m")  # a third press starts a new range
        assert timeline.range is None and isinstance(app.messages[-1], Timeline.RangeCleared)
        await pilot.press("left", "m")
        assert timeline.range == (100, 900)
        await pilot.press("escape")
        assert timeline.range is None and isinstance(app.messages[-1], Timeline.RangeCleared)
        # no selection: the window's middle, then the middle again -> at least 1 ns
        timeline.select(None)
        await pilot.press("m", "m")
        assert timeline.range == (500, 501)
        timeline.set_range(700, 300)
        assert timeline.range == (300, 700)


async def test_drag_selects_a_range_and_a_click_still_selects():
    app = One(small_lanes())
    async with app.run_test(size=(113, 8)) as pilot:
        timeline = app.query_one(Timeline)
        await pilot.mouse_down(timeline, offset=(PLOT_X + 20, 1))
        await pilot.hover(timeline, offset=(PLOT_X + 35, 2))
        axis = screen_text(timeline)[0][PLOT_X:]
        assert axis[20] == "├" and axis[35] == "┤" and timeline.range is None  # drawn while dragging
        await pilot.mouse_up(timeline, offset=(PLOT_X + 49, 2))
        await pilot.pause()
        assert timeline.range == (200, 500)  # cells 20..49, both included
        assert isinstance(app.messages[-1], Timeline.RangeSelected) and timeline.selected is None
        axis = screen_text(timeline)[0][PLOT_X:]
        assert axis[20] == "├" and axis[49] == "┤"
        await pilot.click(timeline, offset=(PLOT_X + 10, 1))  # a plain click: the kernel under it
        assert timeline.selected == 0 and timeline.range == (200, 500)
        # partly off-window: the edge inside stays, the other side says it goes on
        timeline.set_window(300, 800)
        await pilot.pause()
        axis = screen_text(timeline)[0][PLOT_X:]
        assert axis[0] == "◀" and axis[39] == "┤"


async def test_height_lane_hint_and_scrolling_lanes():
    lanes = [lane(f"gpu:0:{i}", [(10 * i, 10 * i + 50)], [i]) for i in range(6)]
    app = One(lanes, height=4)  # axis + 3 lane rows for 6 lanes
    async with app.run_test(size=(80, 10)) as pilot:
        timeline = app.query_one(Timeline)
        assert timeline.wanted_height() == 7 and timeline.size.height == 4
        text = screen_text(timeline)
        assert text[3].endswith(" +3 lanes ↓")
        await pilot.press("down", "down", "down")
        assert timeline.lane_cursor == 3 and timeline.lane_top == 1
        assert screen_text(timeline)[3].endswith(" +1↑ +2↓ lanes")
        await pilot.press("down", "down")
        assert timeline.lane_top == 3 and screen_text(timeline)[3].endswith(" +3 lanes ↑")
        timeline.styles.height = timeline.wanted_height()
        await pilot.pause()
        assert "lanes" not in "".join(screen_text(timeline))
        timeline.set_steps(np.array([0]), np.array([100]), ["ProfilerStep#7"])
        assert timeline.wanted_height() == 8


async def test_icicle_lane_walk_posts_cpu_event_ids():
    trace = load_trace(shared_trace("gpt_train_eager"))
    lanes = lanes_from_trace(trace)
    app = One(lanes, bounds=None)
    async with app.run_test(size=(120, 16)) as pilot:
        timeline = app.query_one(Timeline)
        keys = [x.key for x in timeline.lanes]
        d1 = keys.index("op:1:1")
        await pilot.press(*["down"] * d1)
        assert timeline.lane_cursor == d1
        await pilot.press("right")
        selected = app.messages[-1]
        assert isinstance(selected, Timeline.Selected) and selected.id < -1
        row = op_row(selected.id)
        assert trace.events["kind"].iat[row] in (Kind.CPU_OP, Kind.ANNOTATION)
        await pilot.press("right")
        assert app.messages[-1].id < -1 and app.messages[-1].id != selected.id
        # select() from outside highlights an op id: the cursor goes to its lane, the axis marks it
        depth0 = timeline.lanes[keys.index("op:1:0")]
        timeline.select(int(depth0.ids[1]))
        await pilot.pause()
        assert timeline.lane_cursor == keys.index("op:1:0")
        w0, w1 = timeline.window
        assert w0 <= depth0.starts[1] and depth0.ends[1] <= w1
        drawn = "".join(screen_text(timeline))
        assert "▼" in drawn and ("━" in drawn or "◆" in drawn)


async def test_rows_kept_between_moves_draw_what_a_fresh_draw_does():
    """The timeline keeps each lane's row while what it draws is unchanged (a move redraws only the
    lanes that held or hold the selection); every kept row equals the row drawn afresh."""
    from kerneltui.tui.screens.browser import BrowserScreen
    from tests.tui.helpers import opened

    async with opened(shared_trace("gpt_train_eager"), size=(160, 45)) as (app, pilot):
        screen = app.screen
        assert isinstance(screen, BrowserScreen)
        timeline = screen.query_one(Timeline)
        for key in ["down"] * 3 + ["plus", "full_stop", "minus", "v"] + ["down"] * 4 + ["end", "up"]:
            await pilot.press(key)
            await pilot.pause()
            kept = screen_text(timeline)
            assert timeline._rows and timeline._bases and timeline._marks  # rows and their parts were kept...
            timeline._rows, timeline._bases, timeline._marks, timeline._cache_key = {}, {}, {}, None
            assert screen_text(timeline) == kept  # ...and are what a fresh draw gives


async def test_a_move_redraws_no_stream_base_and_a_kernel_seen_before_no_marks(monkeypatch):
    """A move of the selection keeps every GPU stream's base (shades, names: the window is the same), also
    when the icicle follows the selection to another thread; a new kernel computes each drawn stream's
    marked cells once, and going back to a kernel seen before none."""
    from kerneltui.tui.screens.browser import BrowserScreen
    from kerneltui.tui.widgets import timeline as widget
    from tests.tui.helpers import opened

    calls: dict[str, list[str]] = {"base": [], "marks": []}

    def counted(name, real):
        def count(grid, lane, view):
            if lane.key.startswith("gpu"):
                calls[name].append(lane.key)
            return real(grid, lane, view)
        return count

    monkeypatch.setattr(widget, "lane_base", counted("base", widget.lane_base))
    monkeypatch.setattr(widget, "marked_cells", counted("marks", widget.marked_cells))
    async with opened(shared_trace("gpt_train_eager"), size=(160, 45)) as (app, pilot):
        screen = app.screen
        assert isinstance(screen, BrowserScreen)
        timeline = screen.query_one(Timeline)
        screen.set_focus(screen.query_one("#kernels"))
        await pilot.pause()
        streams = ["gpu:0:7"]
        assert [lane.key for lane in timeline.lanes if lane.key.startswith("gpu")] == streams
        threads = set()
        for key, marks in (("down", streams), ("down", streams), ("down", streams), ("up", []), ("up", []),
                           ("down", [])):
            calls.update(base=[], marks=[])
            await pilot.press(key)
            await pilot.pause()
            screen_text(timeline)
            threads.add(screen._icicle_thread)
            assert calls == {"base": [], "marks": marks}, key
        assert len(threads) == 2  # the icicle went from one thread to the other and back


async def test_marked_cells_kept_for_at_most_marks_kept_entries_while_panning(monkeypatch):
    """The lanes' marked cells are kept per window and kernel: a long pan with one kernel marked drops them
    past MARKS_KEPT entries instead of keeping one more set a window, and every row drawn stays what a
    fresh draw gives."""
    from kerneltui.tui.widgets import timeline as widget

    monkeypatch.setattr(widget, "MARKS_KEPT", 3)
    app = One(small_lanes())
    async with app.run_test(size=(113, 8)) as pilot:
        timeline = app.query_one(Timeline)
        codes = np.array([5, 6])
        timeline.set_marked(codes == 6, (codes, 6))
        timeline.set_window(0, 400)
        await pilot.pause()
        sizes = []
        for _ in range(8):
            await pilot.press("full_stop")  # pan right a quarter window: a new window each time
            await pilot.pause()
            screen_text(timeline)
            sizes.append(len(timeline._marks))  # two lanes' cells a window
        assert max(sizes) <= 3 and timeline.window != (0, 400)
        kept = screen_text(timeline)
        timeline._rows, timeline._bases, timeline._marks, timeline._cache_key = {}, {}, {}, None
        assert screen_text(timeline) == kept
