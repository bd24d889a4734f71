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
    timeline.set_marked(mask)                # bool array over ids: cells holding a marked id are underlined
    timeline.set_steps(starts, ends, labels) # step spans drawn on the step row; [ ] keys move between them
    timeline.zoom(factor, center=None)       # factor > 1 zooms in, around center (default: selection or middle)
    timeline.pan(fraction)                   # move by a fraction of the window (negative: earlier)
    timeline.fit()                           # whole bounds
    timeline.show_span(start, end)           # window on a span, with a margin
    timeline.full_names                      # reactive bool: labels drawn inside wide intervals
    timeline.origin_label                    # text before the axis (e.g. the trace name in a diff)

Messages (each has ``.timeline`` and ``.control``):
    Timeline.WindowChanged(start, end)  any change of the window (keys, mouse or code)
    Timeline.Selected(id)               the user moved the selection inside the timeline
    Timeline.Activated(id)              enter: "show this in the table"
    Timeline.StepShown(index)           [ or ] put step ``index`` (of set_steps) in the window

Times are int64 ns in whatever origin the lanes use (``lanes_from_trace`` puts 0
at the trace's start, so two traces share an axis). Two timelines stay in step
by answering one's WindowChanged with the other's ``set_window`` (which posts
nothing when the window is already equal, so the echo stops there).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.binding import Binding
from textual.message import Message
from textual.reactive import reactive
from textual.strip import Strip
from textual.widget import Widget

from kerneltui.trace.schema import Kind
from kerneltui.tui.lanes import Lane, nice_step
from kerneltui.units import ellipsize, fmt_ns

SHADES = " ░▒▓█"  # busy share of a cell, so dense regions read as density, not as noise
MIN_LABEL_CELLS = 6  # an interval this wide (in cells) gets its name drawn inside it
KIND_CLASS = {Kind.MEMCPY: "timeline--memcpy", Kind.MEMSET: "timeline--memset", Kind.RUNTIME: "timeline--cpu"}


def tick_label(ns: int) -> str:
    return "0" if ns == 0 else fmt_ns(ns)


class Timeline(Widget, can_focus=True):
    """Lanes of intervals over a shared time axis, zoomed and panned with keys."""

    BINDINGS = [
        Binding("left", "step_selection(-1)", "Previous event", show=False, id="timeline.previous-event"),
        Binding("right", "step_selection(1)", "Next event", show=False, id="timeline.next-event"),
        Binding("up", "move_lane(-1)", "Lane above", show=False, id="timeline.lane-up"),
        Binding("down", "move_lane(1)", "Lane below", show=False, id="timeline.lane-down"),
        Binding("plus,equals_sign", "zoom_in", "Zoom in", id="timeline.zoom-in"),
        Binding("minus", "zoom_out", "Zoom out", id="timeline.zoom-out"),
        Binding("comma,shift+left", "pan(-0.25)", "Pan left", show=False, id="timeline.pan-left"),
        Binding("full_stop,shift+right", "pan(0.25)", "Pan right", show=False, id="timeline.pan-right"),
        Binding("z", "zoom_selection", "Zoom to selection", show=False, id="timeline.zoom-selection"),
        Binding("w", "fit", "Whole trace", show=False, id="timeline.fit"),
        Binding("left_square_bracket", "step(-1)", "Previous step", show=False, id="timeline.previous-step"),
        Binding("right_square_bracket", "step(1)", "Next step", show=False, id="timeline.next-step"),
        Binding("enter", "activate", "Show in table", show=False, id="timeline.activate"),
    ]

    COMPONENT_CLASSES = {
        "timeline--axis", "timeline--label", "timeline--label-cursor", "timeline--gpu", "timeline--cpu",
        "timeline--memcpy", "timeline--memset", "timeline--step", "timeline--selected", "timeline--marked",
        "timeline--bar-text",
    }

    DEFAULT_CSS = """
    Timeline { height: auto; max-height: 12; }
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
    Timeline > .timeline--bar-text { text-style: reverse; }
    """

    class WindowChanged(Message):
        def __init__(self, timeline: Timeline, start: int, end: int) -> None:
            super().__init__()
            self.timeline, self.start, self.end = timeline, start, end

        @property
        def control(self) -> Timeline:
            return self.timeline

    class Selected(Message):
        def __init__(self, timeline: Timeline, id_: int) -> None:
            super().__init__()
            self.timeline, self.id = timeline, id_

        @property
        def control(self) -> Timeline:
            return self.timeline

    class Activated(Selected):
        pass

    class StepShown(Message):
        def __init__(self, timeline: Timeline, index: int) -> None:
            super().__init__()
            self.timeline, self.index = timeline, index

        @property
        def control(self) -> Timeline:
            return self.timeline

    window: reactive[tuple[int, int]] = reactive((0, 1), layout=False)
    selected: reactive[int | None] = reactive(None)
    full_names: reactive[bool] = reactive(False)

    def __init__(self, lanes: Sequence[Lane] = (), *, bounds: tuple[int, int] | None = None,
                 label_width: int = 12, name: str | None = None, id: str | None = None,
                 classes: str | None = None) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self.lanes: list[Lane] = []
        self.bounds = (0, 1)
        self._fixed_bounds = False
        self.label_width = label_width
        self.origin_label = ""
        self.lane_cursor = 0
        self._lane_top = 0
        self._marked: np.ndarray | None = None
        self._steps: tuple[np.ndarray, np.ndarray, tuple[str, ...]] = (np.empty(0, np.int64), np.empty(0, np.int64), ())
        self._cache_key: tuple | None = None
        self._lines: list[Strip] = []
        self.set_lanes(lanes, bounds)
        self.set_reactive(Timeline.window, self.bounds)
        self._invalidate()

    # -- driving it from outside ---------------------------------------------
    def set_lanes(self, lanes: Sequence[Lane], bounds: tuple[int, int] | None = None) -> None:
        """Replace the lanes; the window is kept (clamped to the bounds).

        ``bounds`` (the zoom-out limit) defaults to the bounds given before, else the lanes' extent.
        """
        self.lanes = list(lanes)
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
        self.refresh(layout=True)  # the height follows the number of lanes

    def set_window(self, start: int, end: int) -> None:
        self.window = (int(start), int(end))

    def set_marked(self, mask: np.ndarray | None) -> None:
        self._marked = mask
        self._invalidate()

    def set_steps(self, starts: np.ndarray, ends: np.ndarray, labels: Sequence[str]) -> None:
        self._steps = (np.asarray(starts, np.int64), np.asarray(ends, np.int64), tuple(labels))
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
        w0, w1 = self.window
        span = w1 - w0
        if start >= w0 and end <= w1:
            return
        if end - start > span * 0.9:
            self.show_span(start, end)
            return
        middle = (start + end) // 2
        self.window = (middle - span // 2, middle - span // 2 + span)

    def show_span(self, start: int, end: int, margin: float = 0.05) -> None:
        pad = max(int((end - start) * margin), 1)
        self.window = (start - pad, end + pad)

    def zoom(self, factor: float, center: int | None = None) -> None:
        w0, w1 = self.window
        if center is None:
            center = self._selection_center()
            if center is None or not w0 <= center <= w1:
                center = (w0 + w1) // 2
        self.window = (int(center - (center - w0) / factor), int(center + (w1 - center) / factor))

    def pan(self, fraction: float) -> None:
        w0, w1 = self.window
        shift = int((w1 - w0) * fraction) or (1 if fraction > 0 else -1)
        self.window = (w0 + shift, w1 + shift)

    def fit(self) -> None:
        self.window = self.bounds

    # -- reactive plumbing ----------------------------------------------------
    def validate_window(self, window: tuple[int, int]) -> tuple[int, int]:
        b0, b1 = self.bounds
        start, end = int(window[0]), int(window[1])
        full = b1 - b0
        span = min(max(end - start, self._min_span()), full)
        start = min(max(start, b0), b1 - span)
        return (start, start + span)

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
        return self._header_rows() + max(len(self.lanes), 1)

    def _min_span(self) -> int:
        return max(self._plot_width(), 10)  # 1 ns per cell is as fine as Kineto's clock

    def _invalidate(self) -> None:
        self._cache_key = None
        self.refresh()

    # -- actions ---------------------------------------------------------------
    def action_zoom_in(self) -> None:
        self.zoom(2.0)

    def action_zoom_out(self) -> None:
        self.zoom(0.5)

    def action_pan(self, fraction: float) -> None:
        self.pan(fraction)

    def action_fit(self) -> None:
        self.fit()

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
        """Window on the previous/next step span relative to the window's middle."""
        starts, ends, _ = self._steps
        if not len(starts):
            return
        w0, w1 = self.window
        middle = (w0 + w1) // 2
        current = int(np.searchsorted(starts, middle, side="right")) - 1
        if delta < 0 and current >= 0 and middle > ends[current]:
            current += 1  # between two steps: "previous" is the one just before
        target = min(max(current + delta, 0), len(starts) - 1)
        self.show_span(int(starts[target]), int(ends[target]), margin=0.02)
        self.post_message(self.StepShown(self, target))

    def action_activate(self) -> None:
        if self.selected is not None:
            self.post_message(self.Activated(self, self.selected))

    # -- mouse (optional, never needed) ----------------------------------------
    def on_click(self, event: events.Click) -> None:
        lane_index = self._lane_at_row(event.y)
        x = event.x - self.label_width - 1
        if lane_index is None or x < 0:
            return
        self.lane_cursor = lane_index
        lane = self.lanes[lane_index]
        w0, w1 = self.window
        t = w0 + (w1 - w0) * (x + 0.5) / max(self._plot_width(), 1)
        position = lane.nearest(int(t))
        if position >= 0:
            self._user_select(int(lane.ids[position]), reveal=False)

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

    def _selection_center(self) -> int | None:
        found = self._find(self.selected) if self.selected is not None else None
        if found is None:
            return None
        lane = self.lanes[found[0]]
        return int((lane.starts[found[1]] + lane.ends[found[1]]) // 2)

    def _time_at(self, x: int) -> int:
        w0, w1 = self.window
        cell = min(max(x - self.label_width - 1, 0), self._plot_width())
        return int(w0 + (w1 - w0) * cell / max(self._plot_width(), 1))

    def _plot_width(self) -> int:
        return max(self.size.width - self.label_width - 1, 1)

    def _header_rows(self) -> int:
        return 2 if len(self._steps[0]) else 1

    def _lane_rows(self) -> int:
        return max(self.size.height - self._header_rows(), 0)

    def _lane_at_row(self, y: int) -> int | None:
        index = self._lane_top + y - self._header_rows()
        if y < self._header_rows() or not 0 <= index < len(self.lanes):
            return None
        return index

    # -- drawing ------------------------------------------------------------------
    def render_line(self, y: int) -> Strip:
        key = (self.size, self.window, self.selected, self.lane_cursor, self.full_names, self.has_focus)
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

    def _style(self, name: str) -> Style:
        return self.rich_style + self.get_component_rich_style(name, partial=True)

    def _draw(self) -> list[Strip]:
        width, plot = self.size.width, self._plot_width()
        w0, w1 = self.window
        edges = w0 + (np.arange(plot + 1, dtype=np.int64) * (w1 - w0)) // plot
        lines = [self._axis(edges)]
        if len(self._steps[0]):
            lines.append(self._step_row(edges))
        rows = self._lane_rows()
        if self.lane_cursor < self._lane_top:
            self._lane_top = self.lane_cursor
        elif rows and self.lane_cursor >= self._lane_top + rows:
            self._lane_top = self.lane_cursor - rows + 1
        if not self.lanes:
            text = ellipsize("  no GPU work to draw", width)
            lines.append(Strip([Segment(text.ljust(width), self._style("timeline--label"))], width))
        for index in range(self._lane_top, min(self._lane_top + rows, len(self.lanes))):
            lines.append(self._lane_row(index, edges))
        return lines

    def _margin(self, text: str, style_name: str) -> Segment:
        return Segment(ellipsize(text, self.label_width).ljust(self.label_width) + "│", self._style(style_name))

    def _axis(self, edges: np.ndarray) -> Strip:
        plot = len(edges) - 1
        w0, w1 = int(edges[0]), int(edges[-1])
        chars = [" "] * plot
        center = self._selection_center()
        marker = min(int((center - w0) * plot // (w1 - w0)), plot - 1) if center is not None and w0 <= center < w1 else -9
        step = nice_step(w1 - w0, plot, 10)
        t = -(-w0 // step) * step
        while t < w1:
            col = int((t - w0) * plot // (w1 - w0))
            label = "╵" + tick_label(t)
            if col + len(label) <= plot and not col - 1 <= marker <= col + len(label):
                chars[col : col + len(label)] = label
            t += step
        if marker >= 0:
            chars[marker] = "▼"  # where the selection is, even when it is thinner than a cell
        label = self.origin_label or f"span {fmt_ns(w1 - w0)}"
        return self._strip([self._margin(label, "timeline--axis"), Segment("".join(chars), self._style("timeline--axis"))])

    def _step_row(self, edges: np.ndarray) -> Strip:
        plot = len(edges) - 1
        w0, w1 = int(edges[0]), int(edges[-1])
        starts, ends, labels = self._steps
        chars = [" "] * plot
        # a step's GPU work runs into the next step's CPU span: draw each up to the next start
        drawn_ends = np.minimum(ends, np.append(starts[1:], np.iinfo(np.int64).max))
        visible = np.flatnonzero((drawn_ends > w0) & (starts < w1))
        for i in visible:
            c0 = int((max(starts[i], w0) - w0) * plot // (w1 - w0))
            c1 = min(int((min(drawn_ends[i], w1) - w0) * plot // (w1 - w0)), plot - 1)
            for c in range(c0, c1 + 1):
                chars[c] = "─"
            if starts[i] >= w0:
                chars[c0] = "├"
            if drawn_ends[i] < w1 and drawn_ends[i] == ends[i]:
                chars[c1] = "┤"
            text = f" {labels[i]} " if c1 - c0 > len(labels[i]) + 3 else f"{i + 1}"
            if c1 - c0 >= len(text) + 2:
                at = c0 + (c1 - c0 - len(text)) // 2 + 1
                chars[at : at + len(text)] = text
        return self._strip([self._margin("steps", "timeline--axis"), Segment("".join(chars), self._style("timeline--step"))])

    def _lane_row(self, index: int, edges: np.ndarray) -> Strip:
        lane = self.lanes[index]
        plot = len(edges) - 1
        w0, w1 = int(edges[0]), int(edges[-1])
        cells = lane.cells(edges)
        level = np.ceil(cells.fraction * (len(SHADES) - 1)).astype(np.int64)
        level = np.where(cells.count > 0, np.maximum(level, 1), 0)
        chars = [SHADES[v] for v in level]
        base = "timeline--gpu" if lane.key.startswith("gpu") else "timeline--cpu"
        styles = [base] * plot
        single = np.flatnonzero(cells.count == 1)
        for c in single:  # a cell of one event takes that event's colour (memcpy, memset)
            kind = int(lane.kinds[cells.last[c]]) if cells.last[c] >= 0 else -1
            if kind in KIND_CLASS and base == "timeline--gpu":
                styles[c] = KIND_CLASS[kind]
        self._draw_step_marks(chars, cells.count, edges)
        sl = lane.window_slice(w0, w1)
        self._draw_labels(lane, sl, chars, styles, edges)
        extra = [""] * plot
        if self._marked is not None and sl.stop > sl.start:
            for c in np.flatnonzero(self._covered(lane, sl, self._marked[lane.ids[sl]], edges)):
                extra[c] = "timeline--marked"
        if self.selected is not None:
            position = lane.position_of(self.selected)
            if position >= 0 and lane.ends[position] >= w0 and lane.starts[position] < w1:
                c0, c1 = self._columns(int(lane.starts[position]), int(lane.ends[position]), edges)
                for c in range(c0, c1 + 1):
                    styles[c] = "timeline--selected"
                    if chars[c] == " ":
                        chars[c] = "█"
        cursor = index == self.lane_cursor and self.has_focus
        segments = [self._margin(lane.label, "timeline--label-cursor" if cursor else "timeline--label")]
        run_start = 0
        for c in range(1, plot + 1):
            if c == plot or styles[c] != styles[run_start] or extra[c] != extra[run_start]:
                style = self._style(styles[run_start])
                if extra[run_start]:
                    style += self.get_component_rich_style(extra[run_start], partial=True)
                segments.append(Segment("".join(chars[run_start:c]), style))
                run_start = c
        return self._strip(segments)

    def _columns(self, start: int, end: int, edges: np.ndarray) -> tuple[int, int]:
        plot = len(edges) - 1
        w0, w1 = int(edges[0]), int(edges[-1])
        c0 = int((max(start, w0) - w0) * plot // (w1 - w0))
        c1 = int((min(max(end - 1, start), w1 - 1) - w0) * plot // (w1 - w0))
        return min(max(c0, 0), plot - 1), min(max(c1, c0), plot - 1)

    def _covered(self, lane: Lane, sl: slice, which: np.ndarray, edges: np.ndarray) -> np.ndarray:
        """Cells overlapped by the slice's intervals where ``which`` is true (a difference array)."""
        plot = len(edges) - 1
        w0, w1 = int(edges[0]), int(edges[-1])
        starts, ends = lane.starts[sl][which], lane.ends[sl][which]
        c0 = np.clip((np.maximum(starts, w0) - w0) * plot // (w1 - w0), 0, plot - 1)
        c1 = np.clip((np.minimum(np.maximum(ends - 1, starts), w1 - 1) - w0) * plot // (w1 - w0), 0, plot - 1)
        diff = np.zeros(plot + 1, np.int64)
        np.add.at(diff, c0, 1)
        np.add.at(diff, np.maximum(c1, c0) + 1, -1)
        return np.cumsum(diff[:-1]) > 0

    def _draw_labels(self, lane: Lane, sl: slice, chars: list[str], styles: list[str], edges: np.ndarray) -> None:
        w0, w1 = int(edges[0]), int(edges[-1])
        plot = len(edges) - 1
        min_ns = MIN_LABEL_CELLS * (w1 - w0) / plot
        wide = sl.start + np.flatnonzero((lane.ends[sl] - lane.starts[sl]) >= min_ns)
        for position in wide[:plot]:
            c0, c1 = self._columns(int(lane.starts[position]), int(lane.ends[position]), edges)
            text = ellipsize(lane.label_of(int(position), self.full_names), c1 - c0 - 1)
            for i, ch in enumerate(text):
                chars[c0 + 1 + i] = ch
                styles[c0 + 1 + i] = "timeline--bar-text"

    def _draw_step_marks(self, chars: list[str], count: np.ndarray, edges: np.ndarray) -> None:
        starts = self._steps[0]
        if not len(starts):
            return
        w0, w1 = int(edges[0]), int(edges[-1])
        plot = len(edges) - 1
        inside = starts[(starts >= w0) & (starts < w1)]
        for t in inside:
            c = int((t - w0) * plot // (w1 - w0))
            if count[c] == 0:
                chars[c] = "┊"

    def _strip(self, segments: list[Segment]) -> Strip:
        return Strip(segments).adjust_cell_length(self.size.width, self.rich_style)
