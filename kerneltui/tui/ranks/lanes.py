"""The job timeline: an axis and one lane per rank, on the clock the screen chose (Line API).

Not focusable: the table's cursor is the selection, and the screen's keys zoom and pan, so
one focus serves the whole screen. The selected rank's lane is always drawn (the lanes scroll
to it), its label in reverse video; a straggler's label carries ◀.
"""

from __future__ import annotations

from rich.segment import Segment
from textual import events
from textual.message import Message
from textual.strip import Strip
from textual.widget import Widget

from kerneltui.analysis.ranks.job import Job
from kerneltui.terminal_text import printable
from kerneltui.tui.ranks.model import (
    DAMAGED_MARK,
    STRAGGLER_MARK,
    Clock,
    clock_of,
    short_error,
)
from kerneltui.tui.ranks.paint import IDLE, lane_rows, lane_shares
from kerneltui.tui.timeline_paint import Grid, axis_row, hidden_hint, with_hint
from kerneltui.tui.widgets.component_styles import ComponentStyles
from kerneltui.tui.window import clamp, panned, zoomed
from kerneltui.units import ellipsize, fmt_ns


class RankLanes(ComponentStyles, Widget):
    COMPONENT_CLASSES = {"ranks--axis", "ranks--label", "ranks--label-cursor", "ranks--straggler", "ranks--compute",
                         "ranks--comm", "ranks--idle", "ranks--failed", "ranks--hint"}
    DEFAULT_CSS = """
    RankLanes { height: auto; }
    RankLanes > .ranks--axis { color: $text-muted; }
    RankLanes > .ranks--label { color: $text-muted; }
    RankLanes > .ranks--label-cursor { color: $text; text-style: bold reverse; }
    RankLanes > .ranks--straggler { color: $error; text-style: bold; }
    RankLanes > .ranks--compute { color: $success; }
    RankLanes > .ranks--comm { color: $warning; text-style: bold; }
    RankLanes > .ranks--failed { color: $text-muted; text-style: italic; }
    RankLanes > .ranks--hint { color: $text-muted; text-style: italic; }
    """

    class Clicked(Message):
        """A lane was clicked: the screen moves its table to that rank."""

        def __init__(self, index: int) -> None:
            super().__init__()
            self.index = index

    def __init__(self, job: Job, **kwargs) -> None:
        super().__init__(**kwargs)
        self.job = job
        self.clock: Clock = clock_of(job, aligned=True)
        self.window = self.clock.bounds
        self.selected = 0  # index into job.ranks
        self.lane_height = 1  # rows per lane: 2 splits compute and communication, 3 adds a gap
        self.lane_top = 0
        stragglers = set(job.stragglers)
        hurt = set(job.damaged)
        self.labels = [f"r{r.rank}" + (f" {STRAGGLER_MARK}" if r.rank in stragglers else f" {DAMAGED_MARK}"
                                       if r.rank in hurt else "") for r in job.ranks]
        self.label_width = max(max(len(label) for label in self.labels), 8)  # the axis's span: 222.37ms
        self._key: tuple | None = None
        self._lines: list[Strip] = []

    # -- driving it -----------------------------------------------------------
    def set_clock(self, clock: Clock) -> None:
        """Aligned or raw: new bounds, and the whole job in view."""
        self.clock = clock
        self.window = clock.bounds
        self.refresh()

    def select(self, index: int) -> None:
        self.selected = index
        self.refresh()

    def set_lane_height(self, rows: int) -> None:
        if rows != self.lane_height:
            self.lane_height = rows
            self.refresh(layout=True)

    def wanted_height(self, lane_height: int | None = None) -> int:
        return 1 + len(self.job.ranks) * (lane_height or self.lane_height)

    def zoom(self, factor: float) -> None:
        w0, w1 = self.window
        self._set_window(zoomed(self.window, factor, (w0 + w1) // 2))

    def pan(self, fraction: float) -> None:
        self._set_window(panned(self.window, fraction))

    def fit(self) -> None:
        self._set_window(self.clock.bounds)

    def _set_window(self, window: tuple[int, int]) -> None:
        self.window = clamp(window, self.clock.bounds, max(self._plot_width(), 10))
        self.refresh()

    # -- geometry -------------------------------------------------------------
    def get_content_height(self, container, viewport, width: int) -> int:
        return self.wanted_height()

    def _plot_width(self) -> int:
        return max(self.size.width - self.label_width - 1, 1)

    def _lanes_shown(self) -> int:
        return max((self.size.height - 1) // self.lane_height, 1)

    def on_click(self, event: events.Click) -> None:
        offset = event.get_content_offset(self)
        if offset is not None and offset.y >= 1:
            index = self.lane_top + (offset.y - 1) // self.lane_height
            if index < len(self.job.ranks):
                self.post_message(self.Clicked(index))

    # -- drawing --------------------------------------------------------------
    def render_line(self, y: int) -> Strip:
        key = (self.size, self.window, self.selected, id(self.clock), self.lane_height)
        if key != self._key:
            self._lines = self._draw()
            self._key = key
        return self._lines[y] if y < len(self._lines) else Strip.blank(self.size.width, self.rich_style)

    def _draw(self) -> list[Strip]:
        plot = self._plot_width()
        grid = Grid.of(self.window, plot)
        w0, w1 = self.window
        lines = [self._line(f"{fmt_ns(w1 - w0)}", ("ranks--axis",), _axis(grid))]
        shown = self._lanes_shown()
        if self.selected < self.lane_top:
            self.lane_top = self.selected
        elif self.selected >= self.lane_top + shown:
            self.lane_top = self.selected - shown + 1
        self.lane_top = max(min(self.lane_top, len(self.job.ranks) - shown), 0)
        last = min(self.lane_top + shown, len(self.job.ranks)) - 1
        for index in range(self.lane_top, last + 1):
            rows = self._lane(index, grid)
            if index == last:
                hint = hidden_hint(self.lane_top, shown, len(self.job.ranks))
                rows[-1] = [(chunk, ("ranks--hint",) if classes == ("timeline--hint",) else classes)
                            for chunk, classes in with_hint(rows[-1], hint, plot)]
            for sub, body in enumerate(rows):
                label = self.labels[index] if sub == 0 else ""
                lines.append(self._line(label, self._label_classes(index), body))
        return lines

    def _lane(self, index: int, grid: Grid) -> list[list]:
        rank = self.job.ranks[index]
        if rank.error:
            text = ellipsize(f" failed: {short_error(rank.error, rank.path)}", grid.plot)
            return [[(text, ("ranks--failed",))]] + [[("", (IDLE,))]] * (self.lane_height - 1)
        compute, comm = lane_shares(rank, self.clock.shift[rank.rank], grid.edges)
        rows = lane_rows(compute, comm, min(self.lane_height, 2))
        return rows + [[("", (IDLE,))]] * (self.lane_height - len(rows))  # the gap to the next rank

    def _label_classes(self, index: int) -> tuple[str, ...]:
        if index == self.selected:
            return ("ranks--label-cursor",)
        return ("ranks--straggler",) if self.job.ranks[index].rank in self.job.stragglers else ("ranks--label",)

    def _line(self, label: str, margin: tuple[str, ...], body: list) -> Strip:
        text = ellipsize(printable(label), self.label_width).ljust(self.label_width)
        segments = [Segment(text, self._style(margin)), Segment("│", self._style(("ranks--axis",)))]
        segments += [Segment(printable(chunk), self._style(classes)) for chunk, classes in body]
        return Strip(segments).adjust_cell_length(self.size.width, self.rich_style)

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self.forget_styles()
        self._key = None


def _axis(grid: Grid) -> list:
    """The browser's axis (ticks exact to their step), in this widget's axis style."""
    return [(text, ("ranks--axis",)) for text, _ in axis_row(grid, None)]
