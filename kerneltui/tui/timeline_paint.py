"""The timeline's rows as text and style-class names, computed without Textual.

Each row is a list of runs ``(text, classes)``; the widget turns class tuples
into Rich styles. Cells are time buckets of equal width: a lane's cell shows its
busy share as a shade (``lanes.Lane.cells``), an interval at least
MIN_LABEL_CELLS wide carries its name, the selection is drawn over everything.

Every cue has a glyph or a text style, never colour alone (NO_COLOR keeps only
bold, reverse and underline): the selection is reverse video over its own glyphs
(``◆`` for an interval within one cell, ``━`` across the cells it covers, its
name kept), the selected kernel's other launches are underlined, names inside
bars are bold (not reverse: that is the selection's cue), the queueing delay
from a launch call to its kernel is a ``╌╌▸`` run, a range is ``├━━ 3.2ms ━━┤``
on the axis (``◀``/``▶`` where it runs off the window).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from kerneltui.trace.schema import Kind
from kerneltui.tui.lanes import Lane, nice_step
from kerneltui.units import ellipsize, fmt_ns, fmt_tick, tick_unit

SHADES = " ░▒▓█"  # busy share of a cell, so dense regions read as density, not as noise
SELECTED_CELL = "◆"  # a selected interval within one cell (reverse video of █ would read as a blank)
SELECTED_BAR = "━"  # the cells a wider selected interval covers (its name, if drawn, stays)
FLOW, FLOW_HEAD = "╌", "▸"  # launch call's start -> its kernel's start, in the kernel's lane
RANGE_BAR, RANGE_START, RANGE_END, RANGE_BEFORE, RANGE_AFTER = "━", "├", "┤", "◀", "▶"
RANGE_ANCHOR = "┃"  # the first `m` of a range, until the second
MIN_TICK_CELLS = 10  # tick labels at least this far apart, more when the labels are longer
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
        """Edge k is w0 + floor(k * span / plot), computed as k * (span // plot) + k * (span % plot) // plot:
        k * span itself overflows int64 on a window of decades (a trace with a stray event at ts 0)."""
        w0, w1 = int(window[0]), int(window[1])
        whole, part = divmod(w1 - w0, plot)
        k = np.arange(plot + 1, dtype=np.int64)
        return cls(w0 + k * whole + (k * part) // plot)

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
        return (int(t) - self.w0) * self.plot // (self.w1 - self.w0)  # Python ints: no overflow

    def columns(self, start: int, end: int) -> tuple[int, int]:
        """First and last cell an interval [start, end) touches, clipped to the window."""
        c0 = self.column(max(start, self.w0))
        c1 = self.column(min(max(end - 1, start), self.w1 - 1))
        c0 = min(max(c0, 0), self.plot - 1)
        return c0, min(max(c1, c0), self.plot - 1)


def tick_label(ns: int, step: int = 1, unit: int | None = None) -> str:
    """A tick's text: exact to the tick step (``units.fmt_tick``)."""
    return fmt_tick(ns, step, unit)


def ticks(grid: Grid) -> tuple[int, list[tuple[int, int, str]]]:
    """The tick step and the ticks ``(column, time, label)`` of the axis.

    The step is a 1-2-5 x 10^k ns step wide enough for its widest label (plus the
    ``╵`` and a blank): labels are exact to the step, so they always differ.
    """
    plot, w0, w1 = grid.plot, grid.w0, grid.w1
    unit = tick_unit(max(abs(w0), abs(w1)))
    min_cells = MIN_TICK_CELLS
    for _ in range(4):
        step = nice_step(w1 - w0, plot, min_cells)
        first = -(-w0 // step) * step
        widest = max(len(tick_label(t, step, unit)) for t in (first, first + step, (w1 - 1) // step * step))
        if step * plot >= (widest + 2) * (w1 - w0):
            break
        min_cells = widest + 2
    out = []
    t = first
    while t < w1:
        out.append((grid.column(t), t, tick_label(t, step, unit)))
        t += step
    return step, out


def runs(chars: list[str], classes: list[tuple[str, ...]]) -> list[Run]:
    """Cells with equal classes joined into runs."""
    out: list[Run] = []
    start = 0
    for c in range(1, len(chars) + 1):
        if c == len(chars) or classes[c] != classes[start]:
            out.append(("".join(chars[start:c]), classes[start]))
            start = c
    return out


def axis_row(grid: Grid, marker_at: int | None, range_: tuple[int, int] | None = None,
             anchor: int | None = None) -> list[Run]:
    """Tick labels with units, a range as a band, and ▼ over the selection (which may be thinner than a cell)."""
    plot, w0, w1 = grid.plot, grid.w0, grid.w1
    chars = [" "] * plot
    classes: list[tuple[str, ...]] = [("timeline--axis",)] * plot
    marker = grid.column(marker_at) if marker_at is not None and w0 <= marker_at < w1 else -9
    for col, _, text in ticks(grid)[1]:
        label = "╵" + text
        if col + len(label) <= plot and not col - 1 <= marker <= col + len(label):
            chars[col : col + len(label)] = label
    if range_ is not None and range_[1] > w0 and range_[0] < w1:
        r0, r1 = range_
        c0, c1 = grid.columns(r0, r1)
        chars[c0 : c1 + 1] = RANGE_BAR * (c1 - c0 + 1)
        classes[c0 : c1 + 1] = [("timeline--range",)] * (c1 - c0 + 1)
        text = f" {fmt_ns(r1 - r0)} "
        if c1 - c0 + 1 >= len(text) + 4:
            at = c0 + (c1 - c0 + 1 - len(text)) // 2
            chars[at : at + len(text)] = text
        chars[c0] = RANGE_START if r0 >= w0 else RANGE_BEFORE
        if c1 != c0 or r1 > w1:
            chars[c1] = RANGE_END if r1 <= w1 else RANGE_AFTER
    elif anchor is not None and w0 <= anchor < w1:
        c = grid.column(anchor)
        chars[c], classes[c] = RANGE_ANCHOR, ("timeline--range",)
    if marker >= 0:
        chars[min(marker, plot - 1)] = "▼"
    return runs(chars, classes)


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
        # the whole label, else its number (#2), else the number without "#" (tight: 3 cells)
        for text in (f" {labels[i]} ", short_step_label(labels[i], i), short_step_label(labels[i], i).lstrip("#")):
            if c1 - c0 >= len(text) + 2:
                at = c0 + (c1 - c0 - len(text)) // 2 + 1
                chars[at : at + len(text)] = text
                break
    return [("".join(chars), ("timeline--step",))]


def short_step_label(label: str, index: int) -> str:
    """A step's label where the whole one doesn't fit: ``#2`` from ``ProfilerStep#2`` (its trailing
    digits), else its 1-based ``index + 1``."""
    digits = len(label) - len(label.rstrip("0123456789"))
    return f"#{label[len(label) - digits:]}" if digits else f"{index + 1}"


@dataclass(frozen=True, eq=False)
class LaneView:
    """What a lane row needs besides the lane: the selection, marked ids, step starts, names."""

    selected: int | None = None
    marked: np.ndarray | None = None  # bool per id
    step_starts: np.ndarray | None = None
    full_names: bool = False
    counts_cache: dict | None = None  # lane key -> cumulative marked counts, kept while marked is
    flow_from: int | None = None  # the selected kernel's launch-call start: ╌╌▸ up to the kernel
    range_: tuple[int, int] | None = None  # cells in it get timeline--range

    marked_group: tuple[np.ndarray, int] | None = None  # (codes per id, code): marked is codes == code
    _memo: dict = field(default_factory=dict, repr=False)  # what every lane of one draw shares

    def step_columns(self, grid: Grid) -> list[int]:
        """The cells the steps start in, in the window (the same for every lane: once a draw)."""
        key = ("steps", grid.w0, grid.w1, grid.plot)
        columns = self._memo.get(key)
        if columns is None:
            starts = self.step_starts[(self.step_starts >= grid.w0) & (self.step_starts < grid.w1)]
            columns = self._memo[key] = [grid.column(int(t)) for t in starts]
        return columns

    def marked_counts(self, lane: Lane) -> np.ndarray:
        """counts[i] = marked intervals among the lane's first i (computed once per lane and mask)."""
        cache = self.counts_cache if self.counts_cache is not None else {}
        counts = cache.get((lane.key, len(lane)))
        if counts is None:
            counts = np.zeros(len(lane) + 1, np.int64)
            np.cumsum(lane.mask_of(self.marked), out=counts[1:])
            cache[(lane.key, len(lane))] = counts
        return counts

    def marked_starting_in(self, lane: Lane, edges: np.ndarray) -> np.ndarray:
        """Per cell, how many marked intervals start in it. From the marked group's positions in the
        lane when it is known (the lane's codes are kept: ~0.4 ms a move on a 500k-interval lane,
        against ~1.5 ms to gather the mask and count it)."""
        if self.marked_group is None:
            return lane.starting_in(edges, self.marked_counts(lane))
        codes, code = self.marked_group
        positions = np.flatnonzero(lane.codes_of(codes) == code)
        at = np.searchsorted(lane.starts, edges, side="left")
        return np.diff(np.searchsorted(positions, at, side="left"))


@dataclass(frozen=True)
class LaneBase:
    """What a lane's row shows whatever is selected, marked or ranged: its shades, the colour of cells
    of one event, step marks in empty cells and the names inside bars (the timeline keeps it per lane
    while the window is the same: a move of the selection then redraws none of it)."""

    chars: tuple[str, ...]
    colour: tuple[str, ...]
    extra: tuple[tuple[str, ...], ...]


def lane_base(grid: Grid, lane: Lane, view: LaneView) -> LaneBase:
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
        for c in view.step_columns(grid):
            if cells.count[c] == 0:
                chars[c] = "┊"
    _labels(grid, lane, lane.window_slice(grid.w0, grid.w1), chars, extra, view.full_names)
    return LaneBase(tuple(chars), tuple(colour), tuple(extra))


def marked_cells(grid: Grid, lane: Lane, view: LaneView) -> np.ndarray:
    """The cells that show a marked interval (``view.marked``): underlined in the row."""
    sl = lane.window_slice(grid.w0, grid.w1)
    if view.marked is None or sl.stop <= sl.start:
        return np.empty(0, np.int64)
    if sl.stop - sl.start <= EXACT_MARKS_UP_TO:
        return np.flatnonzero(_covered(grid, lane, sl, lane.mask_of(view.marked, sl)))
    # zoomed out on a big lane: cells where a marked interval starts, O(cells log n)
    return np.flatnonzero(view.marked_starting_in(lane, grid.edges) > 0)


def lane_row(grid: Grid, lane: Lane, view: LaneView, base: LaneBase | None = None,
             marked: np.ndarray | None = None) -> list[Run]:
    """The lane's row; ``base`` and ``marked`` (its cells with marked intervals), where the caller kept
    them, are not computed again."""
    plot = grid.plot
    base = base if base is not None else lane_base(grid, lane, view)
    chars, colour, extra = list(base.chars), list(base.colour), list(base.extra)
    for c in (marked if marked is not None else marked_cells(grid, lane, view)).tolist():
        extra[c] = extra[c] + ("timeline--marked",)
    if view.range_ is not None and view.range_[1] > grid.w0 and view.range_[0] < grid.w1:
        r0, r1 = grid.columns(*view.range_)
        for c in range(r0, r1 + 1):
            extra[c] = extra[c] + ("timeline--range",)
    if view.selected is not None:
        position = lane.position_of(view.selected)
        if position >= 0:
            _selection(grid, lane, position, view, chars, colour, extra)
    return runs(chars, [(colour[c],) + extra[c] for c in range(plot)])


def _selection(grid: Grid, lane: Lane, position: int, view: LaneView, chars: list[str], colour: list[str],
               extra: list) -> None:
    start, end = int(lane.starts[position]), int(lane.ends[position])
    if view.flow_from is not None and lane.key.startswith("gpu") and view.flow_from < start and start > grid.w0:
        f0 = grid.column(max(view.flow_from, grid.w0))
        k0 = grid.column(min(start, grid.w1)) if start < grid.w1 else grid.plot
        for c in range(f0, k0):
            if chars[c] in (" ", "┊"):
                chars[c] = FLOW_HEAD if c == k0 - 1 else FLOW
                colour[c] = "timeline--flow"
    if end < grid.w0 or start >= grid.w1:
        return
    c0, c1 = grid.columns(start, end)
    for c in range(c0, c1 + 1):
        colour[c] = "timeline--selected"
        if chars[c] in SHADES:
            chars[c] = SELECTED_CELL if c0 == c1 else SELECTED_BAR
        extra[c] = tuple(x for x in extra[c] if x != "timeline--bar-text")


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


def hidden_hint(top: int, shown: int, total: int) -> str:
    """``+3 lanes ↓`` (lanes below the last one drawn), ``+2 lanes ↑`` (above), ``+2↑ +3↓ lanes`` (both)."""
    above, below = top, max(total - top - shown, 0)
    if above and below:
        return f"+{above}↑ +{below}↓ lanes"
    if below:
        return f"+{below} lane{'s' if below > 1 else ''} ↓"
    if above:
        return f"+{above} lane{'s' if above > 1 else ''} ↑"
    return ""


def with_hint(body: list[Run], hint: str, plot: int) -> list[Run]:
    """The row with ``hint`` over its last cells (style timeline--hint), a blank before it."""
    if not hint or len(hint) + 2 > plot:
        return body
    text = " " + hint
    keep, out, used = plot - len(text), [], 0
    for chunk, classes in body:
        if used >= keep:
            break
        piece = chunk[: keep - used]
        out.append((piece, classes))
        used += len(piece)
    out.append((text, ("timeline--hint",)))
    return out
