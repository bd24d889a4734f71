"""The timeline's rows as text and style-class names, computed without Textual.

Each row is a list of runs ``(text, classes)``; the widget turns class tuples
into Rich styles. Cells are time buckets of equal width: a lane's cell shows its
busy share as a shade (``lanes.Lane.cells``), an interval at least
MIN_LABEL_CELLS wide carries its name, the selection is drawn over everything.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kerneltui.trace.schema import Kind
from kerneltui.tui.lanes import Lane, nice_step
from kerneltui.units import ellipsize, fmt_ns

SHADES = " ░▒▓█"  # busy share of a cell, so dense regions read as density, not as noise
MIN_LABEL_CELLS = 6  # an interval this wide (in cells) gets its name drawn inside it
EXACT_MARKS_UP_TO = 20_000  # intervals in the window; beyond, marks use per-lane cumulative counts
KIND_CLASS = {Kind.MEMCPY: "timeline--memcpy", Kind.MEMSET: "timeline--memset"}

Run = tuple[str, tuple[str, ...]]


@dataclass(frozen=True)
class Grid:
    """The window cut into ``plot`` cells; ``edges`` has plot + 1 times."""

    edges: np.ndarray

    @classmethod
    def of(cls, window: tuple[int, int], plot: int) -> Grid:
        w0, w1 = window
        return cls(w0 + (np.arange(plot + 1, dtype=np.int64) * (w1 - w0)) // plot)

    @property
    def plot(self) -> int:
        return len(self.edges) - 1

    @property
    def w0(self) -> int:
        return int(self.edges[0])

    @property
    def w1(self) -> int:
        return int(self.edges[-1])

    def column(self, t: int) -> int:
        return int((t - self.w0) * self.plot // (self.w1 - self.w0))

    def columns(self, start: int, end: int) -> tuple[int, int]:
        """First and last cell an interval [start, end) touches, clipped to the window."""
        c0 = self.column(max(start, self.w0))
        c1 = self.column(min(max(end - 1, start), self.w1 - 1))
        c0 = min(max(c0, 0), self.plot - 1)
        return c0, min(max(c1, c0), self.plot - 1)


def tick_label(ns: int) -> str:
    return "0" if ns == 0 else fmt_ns(ns)


def runs(chars: list[str], classes: list[tuple[str, ...]]) -> list[Run]:
    """Cells with equal classes joined into runs."""
    out: list[Run] = []
    start = 0
    for c in range(1, len(chars) + 1):
        if c == len(chars) or classes[c] != classes[start]:
            out.append(("".join(chars[start:c]), classes[start]))
            start = c
    return out


def axis_row(grid: Grid, marker_at: int | None) -> list[Run]:
    """Tick labels with units, and ▼ over the selection (which may be thinner than a cell)."""
    plot, w0, w1 = grid.plot, grid.w0, grid.w1
    chars = [" "] * plot
    marker = grid.column(marker_at) if marker_at is not None and w0 <= marker_at < w1 else -9
    step = nice_step(w1 - w0, plot, 10)
    t = -(-w0 // step) * step
    while t < w1:
        col = grid.column(t)
        label = "╵" + tick_label(t)
        if col + len(label) <= plot and not col - 1 <= marker <= col + len(label):
            chars[col : col + len(label)] = label
        t += step
    if marker >= 0:
        chars[min(marker, plot - 1)] = "▼"
    return [("".join(chars), ("timeline--axis",))]


def step_row(grid: Grid, starts: np.ndarray, ends: np.ndarray, labels: tuple[str, ...]) -> list[Run]:
    plot, w0, w1 = grid.plot, grid.w0, grid.w1
    chars = [" "] * plot
    # a step's GPU work runs into the next step's CPU span: draw each up to the next start
    drawn_ends = np.minimum(ends, np.append(starts[1:], np.iinfo(np.int64).max))
    for i in np.flatnonzero((drawn_ends > w0) & (starts < w1)):
        c0, c1 = grid.column(max(starts[i], w0)), min(grid.column(min(drawn_ends[i], w1)), plot - 1)
        chars[c0 : c1 + 1] = "─" * (c1 - c0 + 1)
        if starts[i] >= w0:
            chars[c0] = "├"
        if drawn_ends[i] < w1 and drawn_ends[i] == ends[i]:
            chars[c1] = "┤"
        text = f" {labels[i]} " if c1 - c0 > len(labels[i]) + 3 else f"{i + 1}"
        if c1 - c0 >= len(text) + 2:
            at = c0 + (c1 - c0 - len(text)) // 2 + 1
            chars[at : at + len(text)] = text
    return [("".join(chars), ("timeline--step",))]


@dataclass(frozen=True, eq=False)
class LaneView:
    """What a lane row needs besides the lane: the selection, marked ids, step starts, names."""

    selected: int | None = None
    marked: np.ndarray | None = None  # bool per id
    step_starts: np.ndarray | None = None
    full_names: bool = False
    counts_cache: dict | None = None  # lane key -> cumulative marked counts, kept while marked is

    def marked_counts(self, lane: Lane) -> np.ndarray:
        """counts[i] = marked intervals among the lane's first i (computed once per lane and mask)."""
        cache = self.counts_cache if self.counts_cache is not None else {}
        counts = cache.get((lane.key, len(lane)))
        if counts is None:
            counts = np.zeros(len(lane) + 1, np.int64)
            np.cumsum(self.marked[lane.ids], out=counts[1:])
            cache[(lane.key, len(lane))] = counts
        return counts


def lane_row(grid: Grid, lane: Lane, view: LaneView) -> list[Run]:
    plot = grid.plot
    cells = lane.cells(grid.edges)
    level = np.ceil(cells.fraction * (len(SHADES) - 1)).astype(np.int64)
    level = np.where(cells.count > 0, np.maximum(level, 1), 0)  # one tiny kernel still shows
    chars = [SHADES[v] for v in level]
    base = "timeline--gpu" if lane.key.startswith("gpu") else "timeline--cpu"
    colour = [base] * plot
    if base == "timeline--gpu":
        for c in np.flatnonzero(cells.count == 1):  # a cell of one event takes its kind's colour
            kind = int(lane.kinds[cells.last[c]]) if cells.last[c] >= 0 else -1
            colour[c] = KIND_CLASS.get(kind, base)
    extra: list[tuple[str, ...]] = [()] * plot
    if view.step_starts is not None:
        for t in view.step_starts[(view.step_starts >= grid.w0) & (view.step_starts < grid.w1)]:
            c = grid.column(int(t))
            if cells.count[c] == 0:
                chars[c] = "┊"
    sl = lane.window_slice(grid.w0, grid.w1)
    _labels(grid, lane, sl, chars, extra, view.full_names)
    if view.marked is not None and sl.stop > sl.start:
        if sl.stop - sl.start <= EXACT_MARKS_UP_TO:
            cells_marked = _covered(grid, lane, sl, view.marked[lane.ids[sl]])
        else:  # zoomed out on a big lane: cells where a marked interval starts, O(cells log n)
            cells_marked = lane.starting_in(grid.edges, view.marked_counts(lane)) > 0
        for c in np.flatnonzero(cells_marked):
            extra[c] = extra[c] + ("timeline--marked",)
    if view.selected is not None:
        position = lane.position_of(view.selected)
        if position >= 0 and lane.ends[position] >= grid.w0 and lane.starts[position] < grid.w1:
            c0, c1 = grid.columns(int(lane.starts[position]), int(lane.ends[position]))
            for c in range(c0, c1 + 1):
                colour[c] = "timeline--selected"
                chars[c] = "█" if chars[c] in SHADES else chars[c]
    return runs(chars, [(colour[c],) + extra[c] for c in range(plot)])


def _labels(grid: Grid, lane: Lane, sl: slice, chars: list[str], extra: list, full: bool) -> None:
    min_ns = MIN_LABEL_CELLS * (grid.w1 - grid.w0) / grid.plot
    if lane.longest < min_ns:
        return  # zoomed out: nothing is wide enough, and there may be a million to check
    wide = sl.start + np.flatnonzero((lane.ends[sl] - lane.starts[sl]) >= min_ns)
    for position in wide[: grid.plot]:
        c0, c1 = grid.columns(int(lane.starts[position]), int(lane.ends[position]))
        text = ellipsize(lane.label_of(int(position), full), c1 - c0 - 1)
        for i, ch in enumerate(text):
            chars[c0 + 1 + i] = ch
            extra[c0 + 1 + i] = ("timeline--bar-text",)


def _covered(grid: Grid, lane: Lane, sl: slice, which: np.ndarray) -> np.ndarray:
    """Cells overlapped by the slice's intervals where ``which`` is true (a difference array)."""
    plot, w0, w1 = grid.plot, grid.w0, grid.w1
    starts, ends = lane.starts[sl][which], lane.ends[sl][which]
    c0 = np.clip((np.maximum(starts, w0) - w0) * plot // (w1 - w0), 0, plot - 1)
    c1 = np.clip((np.minimum(np.maximum(ends - 1, starts), w1 - 1) - w0) * plot // (w1 - w0), 0, plot - 1)
    diff = np.zeros(plot + 1, np.int64)
    np.add.at(diff, c0, 1)
    np.add.at(diff, np.maximum(c1, c0) + 1, -1)
    return np.cumsum(diff[:-1]) > 0
