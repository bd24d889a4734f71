"""A keyboard-driven timeline of GPU streams and CPU threads (Line API: draws only what fits).

Public API (the browser and the diff screen both use it)::

    from kerneltui.tui.lanes import Lane, lanes_from_trace
    from kerneltui.tui.widgets.timeline import Timeline

    timeline = Timeline(lanes_from_trace(trace), id="timeline")
    timeline.set_lanes(lanes, bounds=None)   # replace lanes (e.g. filtered); bounds = (start, end) zoom-out limit
    timeline.set_window(start_ns, end_ns)    # show [start, end); clamped; posts WindowChanged if it moved
    timeline.window                          # reactive (start_ns, end_ns)
    timeline.select(id_, reveal=True)        # highlight an id in every lane holding it, pan/zoom it into view
    timeline.selected                        # reactive: the selected id or None
    timeline.set_marked(mask)                # bool array over GPU ids: cells holding a marked id are underlined
    timeline.set_steps(starts, ends, labels, step_of_id=None)  # step row; [ ] move between steps
    timeline.set_memory(curves)              # a row per device: allocated memory over time (memory_paint)
    timeline.zoom(factor, center=None)       # factor > 1 zooms in, around center (default: selection or middle)
    timeline.pan(fraction)                   # move by a fraction of the window (negative: earlier)
    timeline.fit()                           # whole bounds
    timeline.show_span(start, end)           # window on a span, with a margin
    timeline.full_names                      # reactive bool: labels drawn inside wide intervals
    timeline.origin_label                    # text before the axis (e.g. the trace name in a diff)
    timeline.range                           # (start, end) of the range selection, or None
    timeline.set_range(start, end)           # [min, max) of the two; posts RangeSelected if it changed
    timeline.clear_range()                   # posts RangeCleared if there was one
    timeline.wanted_height()                 # rows to show every lane: header rows (axis, steps) + lanes
    timeline.min_lanes = n                   # hold rows for n lanes, fewer set or not (a stable height)
    timeline.lane_top                        # index of the first lane drawn (lanes scroll with the lane cursor)

Ids: >= 0 are GPU rows (a kernel and its launch call); < -1 are CPU events of the
icicle lanes, ``-id - 2`` being their row in ``trace.events`` (``lanes.op_row``).
``Selected``/``Activated`` carry either; ``select`` highlights either.

Messages (each has ``.timeline`` and ``.control``):
    Timeline.WindowChanged(start, end)  any change of the window (keys, mouse or code)
    Timeline.Selected(id)               the user moved the selection inside the timeline
    Timeline.Activated(id)              enter: "show this in the table"
    Timeline.StepShown(index)           [ or ] put step ``index`` (of set_steps) in the window
    Timeline.RangeSelected(start, end)  a range was set (m twice, a mouse drag, or set_range)
    Timeline.RangeCleared()             the range went (escape, a third m, or clear_range)

Keys (focused): ← → event in the lane, ↑ ↓ lane (the lanes scroll; ``+3 lanes ↓``
at the right of the last row says how many are hidden), + - zoom, , . pan, z, w,
[ ], enter; ``m`` marks a range: the first press at the selection's start (or the
window's middle), the second at the selection's end (the range covers both,
whichever came first), a third starts over; ``escape`` clears it (and passes on
when there is none). Mouse: click selects, wheel zooms, press-drag-release over
the lanes selects a range.

Height: the widget wants ``wanted_height()`` rows (``height: auto`` gives it
that); a screen may set any height and the lanes scroll.

Labels (lane margins, names inside intervals, step names, ``origin_label``) are
trace text: ``lanes_from_trace`` makes them printable once per distinct name,
``set_steps`` does it for step labels, and every drawn run goes through
``terminal_text.printable`` again (a no-op on clean text) before it becomes a Segment.

Times are int64 ns in whatever origin the lanes use (``lanes_from_trace`` puts 0
at the trace's start, so two traces share an axis). Two timelines stay in step
by answering one's WindowChanged with the other's ``set_window`` (which posts
nothing when the window is already equal, so the echo stops there).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from rich.segment import Segment
from textual import events
from textual.binding import Binding
from textual.message import Message
from textual.reactive import reactive
from textual.strip import Strip
from textual.widget import Widget

from kerneltui.terminal_text import printable
from kerneltui.tui.lanes import Lane
from kerneltui.tui.memory_paint import MemoryCurve, column_peaks, sparkline
from kerneltui.tui.timeline_paint import (
    Grid,
    LaneView,
    axis_row,
    hidden_hint,
    lane_base,
    lane_row,
    marked_cells,
    step_row,
    with_hint,
)
from kerneltui.tui.widgets.component_styles import ComponentStyles
from kerneltui.tui.window import around, clamp, panned, revealed, step_at, zoomed
from kerneltui.units import ellipsize, fmt_ns

MARKS_KEPT = 4096  # lanes' marked cells kept for one group's codes (a window and kernel each), then dropped


class Timeline(ComponentStyles, Widget, can_focus=True):
    """Lanes of intervals over a shared time axis, zoomed and panned with keys."""

    BINDINGS = [
        Binding("left", "step_selection(-1)", "Previous event", show=False, id="timeline.previous-event"),
        Binding("right", "step_selection(1)", "Next event", show=False, id="timeline.next-event"),
        Binding("up", "move_lane(-1)", "Lane above", show=False, id="timeline.lane-up"),
        Binding("down", "move_lane(1)", "Lane below", show=False, id="timeline.lane-down"),
        Binding("plus,equals_sign", "zoom(2.0)", "Zoom in", id="timeline.zoom-in"),
        Binding("minus", "zoom(0.5)", "Zoom out", id="timeline.zoom-out"),
        Binding("comma,shift+left", "pan(-0.25)", "Pan left", show=False, id="timeline.pan-left"),
        Binding("full_stop,shift+right", "pan(0.25)", "Pan right", show=False, id="timeline.pan-right"),
        Binding("z", "zoom_selection", "Zoom to selection", show=False, id="timeline.zoom-selection"),
        Binding("w", "fit", "Whole trace", show=False, id="timeline.fit"),
        Binding("left_square_bracket", "step(-1)", "Previous step", show=False, id="timeline.previous-step"),
        Binding("right_square_bracket", "step(1)", "Next step", show=False, id="timeline.next-step"),
        Binding("enter", "activate", "Show in table", show=False, id="timeline.activate"),
        Binding("m", "mark", "Mark range", show=False, id="timeline.mark-range",
                tooltip="First press: range start at the selection; second: its end; third: a new range"),
        Binding("escape", "clear_range", "Clear range", show=False, id="timeline.clear-range"),
    ]

    COMPONENT_CLASSES = {
        "timeline--axis", "timeline--label", "timeline--label-cursor", "timeline--gpu", "timeline--cpu",
        "timeline--memcpy", "timeline--memset", "timeline--step", "timeline--selected", "timeline--marked",
        "timeline--bar-text", "timeline--flow", "timeline--range", "timeline--hint", "timeline--memory",
    }

    # Every cue survives NO_COLOR (bold, reverse and underline stay; colours go): the selection is
    # reverse (and its own glyphs), marked is underline, names inside bars are bold, not reverse.
    DEFAULT_CSS = """
    Timeline { height: auto; }
    Timeline > .timeline--axis { color: $text-muted; }
    Timeline > .timeline--label { color: $text-muted; }
    Timeline > .timeline--label-cursor { color: $text; text-style: bold reverse; }
    Timeline > .timeline--gpu { color: $success; }
    Timeline > .timeline--cpu { color: $primary; }
    Timeline > .timeline--memcpy { color: $warning; }
    Timeline > .timeline--memset { color: $secondary; }
    Timeline > .timeline--step { color: $text-muted; }
    Timeline > .timeline--selected { color: $accent; text-style: bold reverse; }
    Timeline > .timeline--marked { text-style: underline; }
    Timeline > .timeline--bar-text { color: $text; text-style: bold; }
    Timeline > .timeline--flow { color: $accent; text-style: dim; }
    Timeline > .timeline--range { color: $accent; background: $accent 20%; }
    Timeline > .timeline--hint { color: $text-muted; text-style: italic; }
    Timeline > .timeline--memory { color: $warning; }
    """

    class _Message(Message):
        def __init__(self, timeline: Timeline) -> None:
            super().__init__()
            self.timeline = timeline

        @property
        def control(self) -> Timeline:
            return self.timeline

    class WindowChanged(_Message):
        def __init__(self, timeline: Timeline, start: int, end: int) -> None:
            super().__init__(timeline)
            self.start, self.end = start, end

    class Selected(_Message):
        def __init__(self, timeline: Timeline, id_: int) -> None:
            super().__init__(timeline)
            self.id = id_

    class Activated(Selected):
        pass

    class StepShown(_Message):
        def __init__(self, timeline: Timeline, index: int) -> None:
            super().__init__(timeline)
            self.index = index

    class RangeSelected(_Message):
        def __init__(self, timeline: Timeline, start: int, end: int) -> None:
            super().__init__(timeline)
            self.start, self.end = start, end

    class WholeAsked(_Message):
        """`w` pressed in the timeline: the whole trace asked for, not only the whole window."""

    class RangeCleared(_Message):
        pass

    window: reactive[tuple[int, int]] = reactive((0, 1), layout=False)
    selected: reactive[int | None] = reactive(None)
    full_names: reactive[bool] = reactive(False)

    def __init__(self, lanes: Sequence[Lane] = (), *, bounds: tuple[int, int] | None = None,
                 label_width: int = 12, waiting: str = "", name: str | None = None, id: str | None = None,
                 classes: str | None = None) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self.lanes: list[Lane] = []
        self._rows: dict[int, tuple] = {}  # id(lane) -> (what its row was drawn for, the row): see _lane_row
        self._bases: dict[int, tuple] = {}  # id(lane) -> (the window it was drawn for, its LaneBase)
        # (id(lane), the window, the marked group's code) -> the lane's cells with marked intervals, for the
        # marks of _marks_for (a group's codes: a launch list's moves come back to the same few kernels)
        self._marks: dict[tuple, np.ndarray] = {}
        self._marks_for: object = None
        self._steps_row: tuple | None = None  # (the window it was drawn for, the steps row)
        self.min_lanes = 0  # rows held for lanes even when fewer are set (see wanted_height)
        self.bounds = (0, 1)
        self._fixed_bounds = False
        self.label_width = label_width
        self.origin_label = ""
        self.lane_cursor = 0
        self._lane_top = 0
        self._marked: np.ndarray | None = None
        self._marked_group: tuple[np.ndarray, int] | None = None
        self._marked_counts: dict = {}
        self._steps: tuple[np.ndarray, np.ndarray, tuple[str, ...]] = (np.empty(0, np.int64), np.empty(0, np.int64), ())
        self._step_of_id: np.ndarray | None = None
        self._memory: tuple[MemoryCurve, ...] = ()
        self._cache_key: tuple | None = None
        self._lines: list[Strip] = []
        self._range: tuple[int, int] | None = None
        self._anchor: tuple[int, int] | None = None  # first `m`: the selection's (start, end), or the middle's
        self._drag: tuple[int, int] | None = None  # mouse down: (time, x)
        self._dragged = False  # the click that ends a drag selects nothing
        self._preview: tuple[int, int] | None = None  # the range being dragged
        self.set_lanes(lanes, bounds)
        # shown, instead of an empty axis and "no GPU work", until the lanes are first set
        self.waiting = waiting
        self.set_reactive(Timeline.window, self.bounds)
        self._invalidate()

    # -- driving it from outside ---------------------------------------------
    def set_lanes(self, lanes: Sequence[Lane], bounds: tuple[int, int] | None = None) -> None:
        """Replace the lanes; the window is kept (clamped to the bounds).

        ``bounds`` (the zoom-out limit) defaults to the bounds given before, else the lanes' extent.
        """
        wanted = self.wanted_height()
        # keyed by id(lane): only while the lanes drawn are held. Those in both lists (the GPU streams,
        # when the icicle follows the selection to another thread) are the same objects: theirs stand
        same = {id(lane) for lane in lanes} & {id(lane) for lane in self.lanes}
        self.lanes = list(lanes)
        self._rows = {k: v for k, v in self._rows.items() if k in same}
        self._bases = {k: v for k, v in self._bases.items() if k in same}
        self._marks = {k: v for k, v in self._marks.items() if k[0] in same}
        self.waiting = ""
        self._marked_counts = {}
        if bounds is None and self._fixed_bounds:
            bounds = self.bounds
        elif bounds is not None:
            self._fixed_bounds = True
        if bounds is None:
            extents = [lane.extent for lane in self.lanes if len(lane)]
            bounds = (min(e[0] for e in extents), max(e[1] for e in extents)) if extents else self.bounds
        self.bounds = (int(bounds[0]), max(int(bounds[1]), int(bounds[0]) + 1))
        self.lane_cursor = min(self.lane_cursor, max(len(self.lanes) - 1, 0))
        clamped = self.validate_window(self.window)
        if self.is_mounted:
            self.window = clamped
        else:
            self.set_reactive(Timeline.window, clamped)
        self._invalidate()
        # the height follows the number of lanes: a relayout only when that changes (the icicle swapped for
        # another thread's as the cursor moves to a launch of that thread keeps it)
        self.refresh(layout=self.wanted_height() != wanted)

    def set_window(self, start: int, end: int) -> None:
        self.window = (int(start), int(end))

    @property
    def range(self) -> tuple[int, int] | None:
        return self._range

    @property
    def lane_top(self) -> int:
        return self._lane_top

    def set_range(self, start: int, end: int) -> None:
        """Range selection [min, max) of the two (at least 1 ns); posts RangeSelected if it changed."""
        start, end = sorted((int(start), int(end)))
        new = (start, max(end, start + 1))
        self._anchor = None
        if new != self._range:
            self._range = new
            self.post_message(self.RangeSelected(self, *new))
        self._invalidate()

    def clear_range(self) -> None:
        self._anchor = None
        if self._range is not None:
            self._range = None
            self.post_message(self.RangeCleared(self))
        self._invalidate()

    def wanted_height(self) -> int:
        """Rows that show every lane: the axis, the step row (if steps are set) and one per lane, at
        least ``min_lanes`` of them (rows kept for lanes that come and go hold the height: no relayout)."""
        return self._header_rows() + max(len(self.lanes), self.min_lanes, 1)

    def set_marked(self, mask: np.ndarray | None, group: tuple[np.ndarray, int] | None = None) -> None:
        """``group``: (codes, code) when ``mask`` is ``codes == code`` (cheaper to draw from)."""
        self._marked = mask
        self._marked_group = group
        self._rows = {}  # keyed by id(mask): only while the mask it was drawn for is held
        marks_for = group[0] if group is not None else mask
        if marks_for is not self._marks_for:
            self._marks, self._marks_for = {}, marks_for
        self._marked_counts = {}
        self._invalidate()

    def set_steps(self, starts: np.ndarray, ends: np.ndarray, labels: Sequence[str],
                  step_of_id: np.ndarray | None = None) -> None:
        """Step spans (sorted by start); ``step_of_id[id]`` (-1: none) says which step an id belongs to,
        so [ and ] count from the selection's own step rather than from where it happens to be drawn."""
        labels = tuple(printable(str(x)) for x in labels)
        self._steps = (np.asarray(starts, np.int64), np.asarray(ends, np.int64), labels)
        self._step_of_id = step_of_id
        self._rows, self._bases = {}, {}
        self._steps_row = None
        self._invalidate()
        self.refresh(layout=True)

    def set_memory(self, curves: Sequence[MemoryCurve]) -> None:
        """A row per device under the steps: allocated memory as a sparkline, █ = the device's peak."""
        self._memory = tuple(curves)
        self._invalidate()
        self.refresh(layout=True)

    def select(self, id_: int | None, reveal: bool = True) -> None:
        self.selected = id_
        if id_ is None:
            return
        found = self._find(id_)
        if found is None:
            return
        lane_index, position = found
        self.lane_cursor = lane_index
        if reveal:
            lane = self.lanes[lane_index]
            self.reveal(int(lane.starts[position]), int(lane.ends[position]))

    def reveal(self, start: int, end: int) -> None:
        """Pan (or zoom out) so that [start, end] is inside the window."""
        self.window = revealed(self.window, start, end)

    def show_span(self, start: int, end: int, margin: float = 0.05) -> None:
        self.window = around(start, end, margin)

    def zoom(self, factor: float, center: int | None = None) -> None:
        w0, w1 = self.window
        if center is None:
            center = self._selection_center()
            if center is None or not w0 <= center <= w1:
                center = (w0 + w1) // 2
        self.window = zoomed(self.window, factor, center)

    def pan(self, fraction: float) -> None:
        self.window = panned(self.window, fraction)

    def fit(self) -> None:
        self.window = self.bounds

    # -- reactive plumbing ----------------------------------------------------
    def validate_window(self, window: tuple[int, int]) -> tuple[int, int]:
        return clamp(window, self.bounds, self._min_span())

    def watch_window(self, old: tuple[int, int], new: tuple[int, int]) -> None:
        self._invalidate()
        if old != new:
            self.post_message(self.WindowChanged(self, *new))

    def watch_selected(self) -> None:
        self._invalidate()

    def watch_full_names(self) -> None:
        self._invalidate()

    def on_resize(self) -> None:
        self._invalidate()

    def get_content_height(self, container, viewport, width: int) -> int:
        return self.wanted_height()

    def _min_span(self) -> int:
        return max(self._plot_width(), 10)  # 1 ns per cell is as fine as Kineto's clock

    def _invalidate(self) -> None:
        self._cache_key = None
        self.refresh()

    # -- actions ---------------------------------------------------------------
    def action_zoom(self, factor: float) -> None:
        self.zoom(factor)

    def action_pan(self, fraction: float) -> None:
        self.pan(fraction)

    def action_fit(self) -> None:
        self.fit()
        self.post_message(self.WholeAsked(self))  # the screen widens what else it scoped (the browser's tables)

    def action_zoom_selection(self) -> None:
        found = self._find(self.selected) if self.selected is not None else None
        if found is not None:
            lane = self.lanes[found[0]]
            start, end = int(lane.starts[found[1]]), int(lane.ends[found[1]])
            # a lone kernel fills a third of the window: its neighbours stay in sight
            self.show_span(start, end, margin=1.0)

    def action_step_selection(self, delta: int) -> None:
        if not self.lanes:
            return
        lane = self.lanes[self.lane_cursor]
        if not len(lane):
            return
        position = lane.position_of(self.selected) if self.selected is not None else -1
        if position < 0:
            w0, w1 = self.window
            position = lane.nearest((w0 + w1) // 2)
        else:
            position = min(max(position + delta, 0), len(lane) - 1)
        self._user_select(int(lane.ids[position]))

    def action_move_lane(self, delta: int) -> None:
        if self.lanes:
            self.lane_cursor = min(max(self.lane_cursor + delta, 0), len(self.lanes) - 1)
            self._invalidate()

    def action_step(self, delta: int) -> None:
        """Window on the previous/next step, counted from the selection (else the window's middle)."""
        starts, ends, _ = self._steps
        if not len(starts):
            return
        own = -1
        if self.selected is not None and self._step_of_id is not None and 0 <= self.selected < len(self._step_of_id):
            own = int(self._step_of_id[self.selected])
        w0, w1 = self.window
        middle = self._selection_center()
        current = step_at(starts, ends, own, (w0 + w1) // 2 if middle is None else middle, delta)
        target = min(max(current + delta, 0), len(starts) - 1)
        self.show_span(int(starts[target]), int(ends[target]), margin=0.02)
        self.post_message(self.StepShown(self, target))

    def action_activate(self) -> None:
        if self.selected is not None:
            self.post_message(self.Activated(self, self.selected))

    def action_mark(self) -> None:
        """Range start at the selection's start, then end at the (second) selection's end; a third starts over."""
        span = self._selection_span()
        if span is None:
            w0, w1 = self.window
            span = ((w0 + w1) // 2,) * 2
        if self._anchor is None:
            if self._range is not None:
                self.clear_range()
            self._anchor = span
            self._invalidate()
            return
        (s1, e1), (s2, e2) = self._anchor, span
        self.set_range(min(s1, s2), max(e1, e2))

    def action_clear_range(self) -> None:
        self.clear_range()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "clear_range":
            return self._range is not None or self._anchor is not None  # else escape goes on to the screen
        return True

    # -- mouse (optional, never needed) ----------------------------------------
    def on_click(self, event: events.Click) -> None:
        if self._dragged:
            self._dragged = False
            return
        offset = event.get_content_offset(self)
        if offset is None:
            return
        lane_index = self._lane_at_row(offset.y)
        x = offset.x - self.label_width - 1
        if lane_index is None or x < 0:
            return
        self.lane_cursor = lane_index
        lane = self.lanes[lane_index]
        w0, w1 = self.window
        t = w0 + (w1 - w0) * (x + 0.5) / max(self._plot_width(), 1)
        position = lane.nearest(int(t))
        if position >= 0:
            self._user_select(int(lane.ids[position]), reveal=False)

    def on_mouse_down(self, event: events.MouseDown) -> None:
        offset = event.get_content_offset(self)
        self._dragged = False
        if offset is None or event.button != 1 or offset.x < self.label_width + 1:
            return
        self._drag = (self._time_at(offset.x), offset.x)
        self.capture_mouse()

    def on_mouse_move(self, event: events.MouseMove) -> None:
        if self._drag is None:
            return
        x = event.get_content_offset_capture(self).x
        if x != self._drag[1]:
            self._drag_range(x, final=False)

    def on_mouse_up(self, event: events.MouseUp) -> None:
        if self._drag is None:
            return
        x = event.get_content_offset_capture(self).x
        self.release_mouse()
        if x != self._drag[1]:
            self._drag_range(x, final=True)
            self._dragged = True
        self._drag = None

    def _drag_range(self, x: int, final: bool) -> None:
        """The cells from the press to x, both included (the range grows as the mouse moves)."""
        x0 = self._drag[1]
        lo, hi = sorted((x0, x))
        start, end = self._time_at(lo), self._time_at(hi + 1)
        self._preview = None if final else (start, max(end, start + 1))  # drawn while dragging
        if final:
            self.set_range(start, end)  # posted on release
        else:
            self._invalidate()

    def on_mouse_scroll_up(self, event: events.MouseScrollUp) -> None:
        self.zoom(1.5, self._time_at(event.x))
        event.stop()

    def on_mouse_scroll_down(self, event: events.MouseScrollDown) -> None:
        self.zoom(1 / 1.5, self._time_at(event.x))
        event.stop()

    # -- helpers ----------------------------------------------------------------
    def _user_select(self, id_: int, reveal: bool = True) -> None:
        lane_cursor = self.lane_cursor
        self.select(id_, reveal=reveal)
        if 0 <= lane_cursor < len(self.lanes) and self.lanes[lane_cursor].position_of(id_) >= 0:
            self.lane_cursor = lane_cursor  # stay on the lane the user is walking
        self.post_message(self.Selected(self, id_))

    def _find(self, id_: int) -> tuple[int, int] | None:
        order = [self.lane_cursor] + [i for i in range(len(self.lanes)) if i != self.lane_cursor]
        for i in order:
            if i < len(self.lanes):
                position = self.lanes[i].position_of(id_)
                if position >= 0:
                    return i, position
        return None

    def _selection_span(self) -> tuple[int, int] | None:
        found = self._find(self.selected) if self.selected is not None else None
        if found is None:
            return None
        lane = self.lanes[found[0]]
        return int(lane.starts[found[1]]), int(lane.ends[found[1]])

    def _selection_center(self) -> int | None:
        span = self._selection_span()
        return None if span is None else (span[0] + span[1]) // 2

    def _flow_from(self) -> int | None:
        """The start of the selected GPU launch's launch call (its CPU lane), if the selection is one."""
        if self.selected is None or self.selected < 0:
            return None
        for lane in self.lanes:
            if lane.key.startswith("cpu"):
                position = lane.position_of(self.selected)
                if position >= 0:
                    return int(lane.starts[position])
        return None

    def _time_at(self, x: int) -> int:
        w0, w1 = self.window
        cell = min(max(x - self.label_width - 1, 0), self._plot_width())
        return int(w0 + (w1 - w0) * cell / max(self._plot_width(), 1))

    def _plot_width(self) -> int:
        return max(self.size.width - self.label_width - 1, 1)

    def _header_rows(self) -> int:
        return (2 if len(self._steps[0]) else 1) + len(self._memory)

    def _lane_rows(self) -> int:
        return max(self.size.height - self._header_rows(), 0)

    def _lane_at_row(self, y: int) -> int | None:
        index = self._lane_top + y - self._header_rows()
        if y < self._header_rows() or not 0 <= index < len(self.lanes):
            return None
        return index

    # -- drawing ------------------------------------------------------------------
    def render_line(self, y: int) -> Strip:
        key = (self.size, self.window, self.selected, self.lane_cursor, self.full_names, self.has_focus,
               self._range, self._anchor, self._preview)
        if key != self._cache_key:
            self._lines = self._draw()
            self._cache_key = key
        if y < len(self._lines):
            return self._lines[y]
        return Strip.blank(self.size.width, self.rich_style)

    def on_focus(self) -> None:
        self._invalidate()

    def on_blur(self) -> None:
        self._invalidate()

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self.forget_styles()
        self._cache_key = None

    def _draw(self) -> list[Strip]:
        if self.waiting:
            return [self._line("", ("timeline--label",), [(self.waiting, ("timeline--label",))])]
        plot = self._plot_width()
        grid = Grid.of(self.window, plot)
        w0, w1 = self.window
        span = fmt_ns(w1 - w0)
        axis_label = self.origin_label or (f"span {span}" if len(span) + 5 <= self.label_width else span)
        anchor = self._anchor[0] if self._anchor is not None else None
        shown_range = self._preview or self._range
        lines = [self._line(axis_label, ("timeline--axis",),
                            axis_row(grid, self._selection_center(), shown_range, anchor))]
        starts, ends, labels = self._steps
        if len(starts):
            key = ("steps", grid.w0, grid.w1, grid.plot)  # the steps row moves with the window only
            if self._steps_row is None or self._steps_row[0] != key:
                self._steps_row = (key, step_row(grid, starts, ends, labels))
            lines.append(self._line("steps", ("timeline--axis",), self._steps_row[1]))
        for curve in self._memory:
            spark = sparkline(column_peaks(curve.ts, curve.allocated, grid.edges), curve.peak_allocated)
            lines.append(self._line(curve.label, ("timeline--axis",), [(spark, ("timeline--memory",))]))
        rows = self._lane_rows()
        if self.lane_cursor < self._lane_top:
            self._lane_top = self.lane_cursor
        elif rows and self.lane_cursor >= self._lane_top + rows:
            self._lane_top = self.lane_cursor - rows + 1
        self._lane_top = max(min(self._lane_top, len(self.lanes) - rows), 0)
        if not self.lanes:
            lines.append(self._line("", ("timeline--label",), [("no GPU work to draw", ("timeline--label",))]))
        view = LaneView(self.selected, self._marked, starts if len(starts) else None, self.full_names,
                        self._marked_counts, self._flow_from(), shown_range, self._marked_group)
        shown = range(self._lane_top, min(self._lane_top + rows, len(self.lanes)))
        for index in shown:
            lane = self.lanes[index]
            cursor = index == self.lane_cursor and self.has_focus
            margin = ("timeline--label-cursor",) if cursor else ("timeline--label",)
            body = self._lane_row(grid, lane, view)
            if len(shown) and index == shown[-1]:
                body = with_hint(body, hidden_hint(self._lane_top, len(shown), len(self.lanes)), plot)
            lines.append(self._line(lane.label, margin, body))
        return lines

    def _lane_row(self, grid: Grid, lane: Lane, view: LaneView) -> list:
        """lane_row, reused while nothing it draws changed: a move of the selection redraws the lanes
        that held it or hold it now, not every lane (the rest cost ~1.5 ms each on a 1M-event lane);
        and those from their kept base and marks (a new kernel's marks: the marks alone)."""
        holds = view.selected is not None and lane.position_of(view.selected) >= 0
        key = (grid.w0, grid.w1, grid.plot, len(lane), id(view.marked), id(view.step_starts), view.full_names,
               view.range_, view.selected if holds else None, view.flow_from if holds else None)
        kept = self._rows.get(id(lane))
        if kept is not None and kept[0] == key:
            return kept[1]
        window = (grid.w0, grid.w1, grid.plot, len(lane))
        base = self._bases.get(id(lane))
        if base is None or base[0] != (window, view.full_names):  # the steps: set_steps forgets the bases
            base = self._bases[id(lane)] = ((window, view.full_names), lane_base(grid, lane, view))
        code = view.marked_group[1] if view.marked_group is not None else None
        marks = self._marks.get((id(lane), window, code))
        if marks is None:
            if len(self._marks) >= MARKS_KEPT:  # a window and kernel each: a long pan would add them forever
                self._marks.clear()
            marks = self._marks[(id(lane), window, code)] = marked_cells(grid, lane, view)
        body = lane_row(grid, lane, view, base[1], marks)
        self._rows[id(lane)] = (key, body)
        return body

    def _line(self, label: str, margin: tuple[str, ...], body: list) -> Strip:
        text = ellipsize(printable(label), self.label_width).ljust(self.label_width) + "│"
        segments = [Segment(text, self._style(margin))]
        segments += [Segment(printable(chunk), self._style(classes)) for chunk, classes in body]
        return Strip(segments).adjust_cell_length(self.size.width, self._style(()))  # rich_style, kept
