"""What the diff screen shows, computed from two traces without Textual.

``build_view`` runs in the loading worker: it diffs the traces and prepares one
set of timeline lanes per side, each relative to its own alignment point, so
that time 0 is the same moment of the matched step/call on both timelines. The
result is frozen and published once; the UI thread only reads it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kerneltui.analysis.compare.diff import TraceDiff, diff_traces
from kerneltui.analysis.health import Health, trace_health
from kerneltui.trace.model import Trace
from kerneltui.trace.text_columns import text_values
from kerneltui.tui.lanes import Lane, lanes_from_trace


@dataclass(frozen=True)
class SideView:
    label: str  # "A" or "B"
    name: str  # file name
    lanes: tuple[Lane, ...]  # times relative to ``origin``
    origin: int  # absolute ns of lane time 0
    calls: tuple[tuple[int, int], ...]  # (align, end) per step/call, absolute ns
    call_labels: tuple[str, ...]
    whole_trace: bool  # no steps/calls found: aligned at the first launch instead
    keys: np.ndarray  # kernel key per GPU row (= lane id)
    starts: np.ndarray  # absolute ns per GPU row: a matched row's extent, to zoom to it
    ends: np.ndarray
    iteration: np.ndarray  # step/call per GPU row
    path: str = ""
    health: Health | None = None  # analysis/health: what the trace cannot be trusted for

    def lanes_at(self, call: int) -> tuple[Lane, ...]:
        """The lanes with time 0 at a call's alignment point (a shift: no rebuild)."""
        return tuple(shift(lane, self.calls[call][0] - self.origin) for lane in self.lanes)

    def extent(self, call: int) -> tuple[int, int]:
        """The part of a call worth seeing, relative to its alignment point: 0 to its last GPU end."""
        align, end = self.calls[call]
        return 0, max(end - align, 1)


@dataclass(frozen=True)
class DiffView:
    diff: TraceDiff
    a: SideView
    b: SideView
    default_call: int  # the first call absorbs profiler start-up: show the second when there is one
    haystack: tuple[str, ...] = ()  # per matches row: the text `/` searches (names, keys, ops of both sides)
    a_row_of: np.ndarray | None = None  # per GPU row of A: the matches row holding it, or -1
    b_row_of: np.ndarray | None = None

    def row_of(self, side: str, gpu_row: int) -> int:
        table = self.a_row_of if side == "A" else self.b_row_of
        if table is None or not 0 <= gpu_row < len(table):
            return -1
        return int(table[gpu_row])

    @property
    def common_calls(self) -> int:
        return min(len(self.a.calls), len(self.b.calls))


def shift(lane: Lane, delta: int) -> Lane:
    if delta == 0:
        return lane
    return Lane(lane.key, lane.label, lane.starts - delta, lane.ends - delta, lane.ids, lane.kinds, lane.names,
                lane.labels, lane.full_labels)


def call_spans(trace: Trace) -> tuple[tuple[tuple[int, int], ...], bool]:
    """(align, end) per step/call: aligned at its start, ending at its last GPU work.

    A trace with no steps or calls is one "whole trace" call whose start is the
    profiler's own start, milliseconds before any work: align it at the first
    launch instead.
    """
    its = trace.iterations
    g = trace.gpu
    whole = its.source == "whole trace"
    spans = []
    iteration = g["iteration"].to_numpy()
    for i in range(its.count):
        mine = iteration == i
        start, end = int(its.starts[i]), int(its.ends[i])
        if mine.any():
            if whole:
                start = int(g["launch_ts"].to_numpy()[mine].min())
            end = max(end if not whole else start, int(g["end"].to_numpy()[mine].max()))
        spans.append((start, end))
    return tuple(spans), whole


def _side(label: str, trace: Trace, call: int) -> SideView:
    calls, whole = call_spans(trace)
    origin = calls[min(call, len(calls) - 1)][0] if calls else trace.window[0]
    return SideView(
        label=label,
        name=trace.meta.path.rsplit("/", 1)[-1],
        lanes=tuple(lanes_from_trace(trace, origin=origin, op_depths=0)),  # the ops would crowd two timelines
        origin=origin,
        calls=calls or ((origin, origin + 1),),
        call_labels=tuple(trace.iterations.labels) or ("whole trace",),
        whole_trace=whole,
        keys=text_values(trace.gpu["key"]),
        starts=trace.gpu["ts"].to_numpy(),
        ends=trace.gpu["end"].to_numpy(),
        iteration=trace.gpu["iteration"].to_numpy(),
        path=trace.meta.path,
        health=trace_health(trace),
    )


def build_view(a: Trace, b: Trace, diff: TraceDiff | None = None) -> DiffView:
    diff = diff or diff_traces(a, b)
    common = min(a.iterations.count, b.iterations.count)
    default = 1 if common >= 2 else 0
    m = diff.matches
    return DiffView(diff, _side("A", a, default), _side("B", b, default), default,
                    haystack=haystacks(m, a, b), a_row_of=_row_of(m["a_rows"] if len(m) else (), len(a.gpu)),
                    b_row_of=_row_of(m["b_rows"] if len(m) else (), len(b.gpu)))


def haystacks(matches, a: Trace, b: Trace) -> tuple[str, ...]:
    """Per matched row: its name, each side's kernel names (short and full) and launching ops, one string."""
    out = []
    sides = ((a.gpu, "a_rows"), (b.gpu, "b_rows"))
    columns = {id(g): (text_values(g["short"]), text_values(g["full_name"]),
                       text_values(g["op"])) for g, _ in sides}
    for _, row in matches.iterrows():
        parts = {str(row["name"])}
        for g, field in sides:
            short, full, op = columns[id(g)]
            rows = np.asarray(row[field], np.int64)
            for values in (short, full, op):
                parts.update(values[rows].tolist())
        out.append("\n".join(sorted(parts)))
    return tuple(out)


def _row_of(rows_per_match, n: int) -> np.ndarray:
    out = np.full(n, -1, np.int64)
    for i, rows in enumerate(rows_per_match):
        rows = np.asarray(rows, np.int64)
        out[rows[out[rows] < 0]] = i  # a kernel in two rows (a moved anchor) belongs to the first
    out.flags.writeable = False
    return out


def shared_bounds(a: tuple[Lane, ...], b: tuple[Lane, ...]) -> tuple[int, int]:
    """One zoom-out limit for both timelines, so the same window means the same times."""
    extents = [lane.extent for lane in (*a, *b) if len(lane)]
    if not extents:
        return 0, 1
    return min(e[0] for e in extents), max(e[1] for e in extents)


def own_bounds(lanes: tuple[Lane, ...]) -> tuple[int, int]:
    return shared_bounds(lanes, ())


def marked(side: SideView, rows: tuple[int, ...]) -> np.ndarray:
    """Boolean mask over a side's GPU rows (lane ids): the kernels of one matched row."""
    mask = np.zeros(len(side.keys), bool)
    mask[np.asarray(rows, np.int64)] = True
    return mask


def row_extent(side: SideView, rows: tuple[int, ...], call: int) -> tuple[int, int] | None:
    """Where a matched row's kernels ran in one call, relative to that call's alignment point."""
    index = min(call, len(side.calls) - 1)
    rows = np.asarray(rows, np.int64)
    rows = rows[side.iteration[rows] == index] if len(rows) else rows
    if not len(rows):
        return None
    align = side.calls[index][0]
    return int(side.starts[rows].min()) - align, int(side.ends[rows].max()) - align
