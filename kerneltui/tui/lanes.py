"""Timeline lanes: rows of non-overlapping intervals, and per-cell aggregation of them.

No Textual here: the timeline widget draws what these functions compute, and
tests check the numbers without a terminal. A lane answers "how much of the
time between two edges is busy" in O(log n) from a cumulative sum, so drawing a
window costs the same for ten events or a million (one binary search per cell).

Public API::

    lanes_from_trace(trace, origin=None, op_depths=8) -> list[Lane]
    filter_lanes(lanes, keep_ids) -> list[Lane]      # keep_ids: bool mask over GPU ids; CPU event ids always kept
    op_id(row) -> int / op_row(id_) -> int           # CPU event row <-> lane id (see "Ids")
    Lane(key, label, starts, ends, ids, kinds, names, labels=(), full_labels=())
    lane.position_of(id_), lane.nearest(t), lane.cells(edges), lane.window_slice(t0, t1), lane.subset(mask)
    nice_step(span, cells, min_cells_per_tick)

Lanes, in order (``lanes_from_trace``):

* one per GPU (device, stream): key ``gpu:<device>:<stream>``, label ``GPU0 s7``;
  a stream whose work is all memcpy says its direction and host memory instead:
  ``s20 H2D pin``, ``s21 D2H page``, ``s22 D2D`` (``copy`` when its copies go several
  ways; ``0:s20 H2D pin`` when the trace has several devices);
* one per CPU thread that launched GPU work, holding its launch calls (labelled
  by the op around each): key ``cpu:<lane>``, label ``CPU t416`` / ``CPU autograd``;
  the main thread first (the thread with the most launches, threads named
  "autograd" after the others), then the rest by number of launches, most first;
* the main thread's ops as an icicle: one lane per nesting depth ``d`` (0 =
  outermost, at most ``op_depths``) holding its cpu_op and user_annotation
  intervals (ProfilerStep#N included when it is on that thread), labelled by op
  name: key ``op:<lane>:<depth>``, label ``ops d0``, ``ops d1``, ...

Ids: an id >= 0 is a row of ``trace.gpu`` (a kernel in its stream lane, and its
launch call in its thread lane: selecting one highlights both). An id < -1 is a
CPU event: ``-id - 2`` is its row in ``trace.events`` (``op_id(row)`` / ``op_row(id_)``).
-1 is never an id (it reads "none" elsewhere).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from kerneltui.analysis.traffic import copy_kind
from kerneltui.terminal_text import printable
from kerneltui.trace.link import names_per_key
from kerneltui.trace.model import Trace
from kerneltui.trace.schema import Kind
from kerneltui.trace.threads import shared_pool


def op_id(row):
    """The lane id of a CPU event row of ``trace.events`` (works on arrays)."""
    return -(row + 2)


def op_row(id_):
    """The ``trace.events`` row of a CPU event id (< -1); meaningless for GPU ids (>= 0)."""
    return -id_ - 2


def _frozen(a) -> np.ndarray:
    a = np.ascontiguousarray(a)
    a.flags.writeable = False
    return a


@dataclass(frozen=True, eq=False)
class Lane:
    """One timeline row: intervals [starts, ends) sorted by start, each with an id.

    ``ids`` are the caller's handles (the browser uses row positions in
    ``trace.gpu``, and ``op_id(row)`` < -1 for CPU events), so that selecting an
    id highlights it in every lane holding it (a kernel in its stream lane, its
    launch call in its thread lane). They need not be increasing: ``position_of``
    builds a sorted index on first use.
    ``names`` gives each interval a label code into ``labels`` (drawn inside the
    interval once it is wide enough); ``kinds`` holds a schema.Kind per interval.
    """

    key: str  # stable identity, e.g. "gpu:0:7" or "cpu:0"
    label: str  # what the lane's left margin shows
    starts: np.ndarray
    ends: np.ndarray
    ids: np.ndarray
    kinds: np.ndarray
    names: np.ndarray
    labels: tuple[str, ...] = ()
    full_labels: tuple[str, ...] = ()  # labels when full names are on (defaults to labels)
    longest: int = field(init=False, repr=False)  # ns: no interval is wider (skips label search)
    min_id: int = field(init=False, repr=False)  # < 0: the lane holds CPU event ids
    _cum: np.ndarray = field(init=False, repr=False)
    _sorted_ends: np.ndarray = field(init=False, repr=False)
    _index: dict = field(init=False, repr=False, default_factory=dict)  # lazily built lookups

    def __post_init__(self) -> None:
        for name in ("starts", "ends", "ids", "kinds", "names"):
            object.__setattr__(self, name, _frozen(getattr(self, name)))
        durations = np.maximum(self.ends - self.starts, 0)
        cum = np.zeros(len(durations) + 1, np.int64)
        np.cumsum(durations, out=cum[1:])
        object.__setattr__(self, "_cum", _frozen(cum))
        ends = self.ends
        if len(ends) > 1 and not bool(np.all(ends[1:] >= ends[:-1])):
            ends = np.sort(ends)  # rare: overlapping intervals on one stream
        object.__setattr__(self, "_sorted_ends", _frozen(ends))
        if not self.full_labels:
            object.__setattr__(self, "full_labels", self.labels)
        object.__setattr__(self, "longest", int(durations.max()) if len(durations) else 0)
        object.__setattr__(self, "min_id", int(self.ids.min()) if len(self.ids) else 0)
        ids = self.ids
        self._index["sorted"] = len(ids) < 2 or bool(np.all(ids[1:] >= ids[:-1]))

    def __len__(self) -> int:
        return len(self.starts)

    @property
    def extent(self) -> tuple[int, int]:
        if not len(self):
            return 0, 0
        return int(self.starts[0]), int(self._sorted_ends[-1])

    def busy_before(self, t: np.ndarray) -> np.ndarray:
        """Busy time in (-inf, t) for each t: whole intervals before t plus the part of the one around t."""
        t = np.asarray(t, np.int64)
        at = np.searchsorted(self.starts, t, side="right")  # intervals starting at or before t
        done = self._cum[at]
        last = np.clip(at - 1, 0, None)
        if not len(self):
            return np.zeros(len(t), np.int64)
        overhang = np.where(at > 0, np.maximum(self.ends[last] - t, 0), 0)
        return done - overhang

    def cells(self, edges: np.ndarray) -> Cells:
        """Aggregate the lane over cells [edges[k], edges[k+1]): busy fraction, event count, one event."""
        edges = np.asarray(edges, np.int64)
        lo, hi = edges[:-1], edges[1:]
        width = np.maximum(hi - lo, 1)
        busy = self.busy_before(hi) - self.busy_before(lo)
        started = np.searchsorted(self.starts, hi, side="left")  # intervals starting before the cell ends
        ended = np.searchsorted(self._sorted_ends, lo, side="right")  # intervals ending at or before it starts
        count = np.maximum(started - ended, 0)
        return Cells(np.clip(busy / width, 0.0, 1.0), count, started - 1)

    def starting_in(self, edges: np.ndarray, counts: np.ndarray) -> np.ndarray:
        """Per cell, how many intervals start in it, from a cumulative count over the lane."""
        at = np.searchsorted(self.starts, edges, side="left")
        return np.diff(counts[at])

    def window_slice(self, start: int, end: int) -> slice:
        """Positions of intervals that may overlap [start, end)."""
        lo = int(np.searchsorted(self._sorted_ends, start, side="right"))
        hi = int(np.searchsorted(self.starts, end, side="left"))
        return slice(min(lo, hi), hi)

    def position_of(self, id_: int) -> int:
        """Position of an id in the lane, or -1: a binary search (over a sorted index when ids aren't increasing)."""
        ids = self.ids
        if self._index["sorted"]:
            at = int(np.searchsorted(ids, id_))
            return at if at < len(ids) and ids[at] == id_ else -1
        order = self._index.get("order")
        if order is None:
            order = np.argsort(ids, kind="stable")
            self._index["order"], self._index["sorted_ids"] = order, ids[order]
        sorted_ids = self._index["sorted_ids"]
        at = int(np.searchsorted(sorted_ids, id_))
        return int(order[at]) if at < len(sorted_ids) and sorted_ids[at] == id_ else -1

    def kept(self, keep_ids: np.ndarray) -> np.ndarray:
        """Per interval: ``keep_ids[id]`` for GPU ids (>= 0); CPU event ids (< 0) are always kept."""
        if self.min_id >= 0:
            return keep_ids[self.ids]
        out = self.ids < 0
        gpu = ~out
        out[gpu] = keep_ids[self.ids[gpu]]
        return out

    def codes_of(self, codes: np.ndarray) -> np.ndarray:
        """Per interval: ``codes[id]`` for GPU ids, and for CPU event ids a value no code has (kept
        for the last ``codes`` asked: a grouping's codes are asked again on every move)."""
        kept = self._index.get("codes")
        if kept is not None and kept[0] is codes:
            return kept[1]
        ids = self.ids
        if self.min_id >= 0:
            out = codes[ids]
        else:
            out = np.full(len(ids), np.iinfo(np.int64).min, np.int64)
            gpu = ids >= 0
            out[gpu] = codes[ids[gpu]]
        self._index["codes"] = (codes, out)
        return out

    def mask_of(self, mask: np.ndarray, sl: slice | None = None) -> np.ndarray:
        """Per interval (of ``sl``): ``mask[id]`` for GPU ids, False for CPU event ids."""
        ids = self.ids if sl is None else self.ids[sl]
        if self.min_id >= 0:
            return mask[ids]
        gpu = ids >= 0
        out = np.zeros(len(ids), bool)
        out[gpu] = mask[ids[gpu]]
        return out

    def nearest(self, t: int) -> int:
        """Position of the interval containing t, else the closest one; -1 for an empty lane."""
        if not len(self):
            return -1
        at = int(np.searchsorted(self.starts, t, side="right")) - 1
        if at >= 0 and self.ends[at] >= t:
            return at
        before = at if at >= 0 else None
        after = at + 1 if at + 1 < len(self) else None
        if before is None:
            return after
        if after is None:
            return before
        return before if t - self.ends[before] <= self.starts[after] - t else after

    def label_of(self, position: int, full: bool = False) -> str:
        table = self.full_labels if full else self.labels
        code = int(self.names[position])
        return table[code] if 0 <= code < len(table) else ""

    def subset(self, keep_ids: np.ndarray) -> Lane:
        """The lane restricted to ids where ``keep_ids[id]`` is true (a filter over all ids)."""
        at = np.flatnonzero(self.kept(keep_ids))
        if len(at) == len(self):
            return self
        # one index array and take() (a boolean mask per column costs twice as much at 1M), and what a part
        # of a lane inherits instead of re-checking it: sorted ends and ids stay sorted, the longest
        # interval bounds its parts' (a search re-filters the big lanes on every keystroke)
        lane = object.__new__(Lane)
        put = object.__setattr__
        for name in ("key", "label", "labels", "full_labels", "longest"):
            put(lane, name, getattr(self, name))
        for name in ("starts", "ends", "ids", "kinds", "names"):
            put(lane, name, _frozen(getattr(self, name).take(at)))
        cum = np.zeros(len(at) + 1, np.int64)
        np.cumsum(np.maximum(lane.ends - lane.starts, 0), out=cum[1:])
        put(lane, "_cum", _frozen(cum))
        ends_sorted = self._sorted_ends is self.ends
        put(lane, "_sorted_ends", lane.ends if ends_sorted else _frozen(np.sort(lane.ends)))
        ids_sorted = self._index["sorted"]
        put(lane, "min_id", int(lane.ids[0] if ids_sorted else lane.ids.min()) if len(at) else 0)
        put(lane, "_index", {"sorted": ids_sorted})
        return lane


@dataclass(frozen=True)
class Cells:
    fraction: np.ndarray  # busy share of each cell, 0..1
    count: np.ndarray  # intervals overlapping each cell
    last: np.ndarray  # position of the last interval starting before the cell's end (-1: none)


def lanes_from_trace(trace: Trace, origin: int | None = None, op_depths: int = 8) -> list[Lane]:
    """GPU stream lanes, then CPU launch-call lanes, then the main thread's op icicle (see the module docstring).

    Times are relative to ``origin`` (default: the start of the trace's window),
    so two traces drawn one above the other share a time axis that starts at 0.
    GPU and launch-call lanes hold ids = positions in ``trace.gpu``; a CPU lane
    holds the launch calls, each with the id of the GPU event it launched, and
    is labelled with the op. Icicle lanes (``op_depths`` of them at most; 0: none)
    hold ``op_id(row)`` of cpu_op / user_annotation rows of ``trace.events``.
    Labels are drawn text: made printable here, once per distinct name.
    """
    g = trace.gpu
    origin = trace.window[0] if origin is None else origin
    if not len(g):
        return []
    ids = np.arange(len(g), dtype=np.int64)
    key = g["key"].cat
    codes = key.codes.to_numpy()
    # names through their categoricals: astype(str) would build a million strings
    full_names = NamesByCode(g["full_name"])
    short_by_key, full_by_key = (tuple(map(printable, names)) for names in names_per_key(g, "short", "full_name"))
    lanes = []
    ts, end = g["ts"].to_numpy() - origin, g["end"].to_numpy() - origin
    kinds = g["kind"].to_numpy()
    devices, streams = g["device"].to_numpy(), g["stream"].to_numpy()
    pairs = g[["device", "stream"]].drop_duplicates().sort_values(["device", "stream"])
    devices_seen = set(pairs["device"].tolist())
    for device, stream in pairs.itertuples(index=False):
        mask = (devices == device) & (streams == stream)
        label = f"GPU{device} s{stream}"
        direction = _copy_direction(kinds[mask], full_names[mask])
        if direction:
            # the margin is 12 cells: a copy stream says its direction and host memory before its device
            label = f"s{stream} {direction}" if len(devices_seen) == 1 else f"{device}:s{stream} {direction}"
        at = np.flatnonzero(mask)
        for row, part in enumerate(stacked_rows(ts[at], end[at])):
            if row:
                part_key, part_label = f"gpu:{device}:{stream}:{row}", f"{label} +{row}"
            else:
                part_key, part_label = f"gpu:{device}:{stream}", label
            mine = at[part]
            lanes.append(Lane(part_key, part_label, ts[mine], end[mine], ids[mine], kinds[mine], codes[mine],
                              short_by_key, full_by_key))
    launch_lane = g["launch_lane"].to_numpy()
    op = g["op"].cat
    op_labels = tuple(printable(str(c)) for c in op.categories)
    launch_ts, launch_dur = g["launch_ts"].to_numpy(), g["launch_dur"].to_numpy()
    op_codes = op.codes.to_numpy()
    threads = _threads_by_launches(trace.lanes, launch_lane)
    for lane in threads:
        mask = launch_lane == lane
        starts = launch_ts[mask] - origin
        order = np.argsort(starts, kind="stable")
        ends = starts + launch_dur[mask]
        lanes.append(Lane(f"cpu:{lane}", _thread_label(trace.lanes, lane), starts[order], ends[order],
                          ids[mask][order], np.full(int(mask.sum()), Kind.RUNTIME, np.int8),
                          op_codes[mask][order], op_labels))
    if threads and op_depths > 0:
        lanes += op_lanes(trace, threads[0], origin, op_depths)
    return lanes


MAX_STACKED = 8  # rows one stream may take; overlaps deeper than that share the last row
FIRST_FIT_LIMIT = 10_000  # a run of overlapping events longer than this is peeled (vectorised) instead


def stacked_rows(starts: np.ndarray, ends: np.ndarray) -> list[np.ndarray]:
    """A stream's intervals (sorted by start) split into rows in which none overlaps another: the
    positions in each row, the first row first. One row in a sound trace.

    Where events overlap on their stream (programmatic dependent launch, graph branches, damage:
    analysis/health), each run of them is laid out first-fit: an event takes the first row free at
    its start, so a chain of PDL kernels each overlapping the last takes two rows. A run longer than
    FIRST_FIT_LIMIT (a bad 31-year kernel under everything after it) is peeled instead, a vectorised
    round per row: each round keeps the events that start after every earlier one has ended.
    """
    n = len(starts)
    row = np.zeros(n, np.int64)
    if n > 1:
        reach = np.maximum.accumulate(ends)
        joins = np.zeros(n, bool)
        joins[1:] = starts[1:] < reach[:-1]  # overlaps something before it: same run as its predecessor
        if joins.any():
            run_start = np.flatnonzero(~joins)
            bounds = np.append(run_start, n)
            long_runs = np.flatnonzero(np.diff(bounds) > 1)
            for i in long_runs.tolist():
                lo, hi = int(bounds[i]), int(bounds[i + 1])
                place = _first_fit if hi - lo <= FIRST_FIT_LIMIT else _peeled
                row[lo:hi] = place(starts[lo:hi], ends[lo:hi])
    return [np.flatnonzero(row == r) for r in range(int(row.max()) + 1 if n else 1)]


def _first_fit(starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    free_at: list[int] = []  # per row: when its last event ends
    rows = np.empty(len(starts), np.int64)
    for i, (s, e) in enumerate(zip(starts.tolist(), ends.tolist())):
        r = next((k for k, t in enumerate(free_at) if t <= s), len(free_at))
        r = min(r, MAX_STACKED - 1)
        if r == len(free_at):
            free_at.append(e)
        else:
            free_at[r] = max(free_at[r], e)
        rows[i] = r
    return rows


def _peeled(starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    rows = np.full(len(starts), MAX_STACKED - 1, np.int64)
    left = np.arange(len(starts))
    for r in range(MAX_STACKED - 1):
        if not len(left):
            break
        reach = np.maximum.accumulate(ends[left])
        clear = np.ones(len(left), bool)
        clear[1:] = starts[left][1:] >= reach[:-1]
        rows[left[clear]] = r
        left = left[~clear]
    return rows


def op_lanes(trace: Trace, lane: int, origin: int, op_depths: int = 8) -> list[Lane]:
    """The icicle of one thread: a lane per nesting depth < op_depths of its cpu_op and user_annotation events.

    Depths are those of ``trace.op_stack(lane)`` (its Nesting, computed once per
    thread and shared with the linking); runtime and driver calls are its leaves,
    so they change no op's depth. Vectorised: the nesting's positions per depth, one unique over names.
    """
    stack = trace.op_stack(lane)
    if stack is None:
        return []
    n = stack.nesting
    sorted_kinds = stack.kinds[n.order]
    op = (sorted_kinds == Kind.CPU_OP) | (sorted_kinds == Kind.ANNOTATION)
    # the ops' positions per depth, still by start (the nesting's groups, ascending depth; depths without an op left out)
    parts = [(d, positions[op[positions]]) for d, positions in sorted(n.by_depth.items()) if d < op_depths]
    parts = [(d, positions) for d, positions in parts if len(positions)]
    if not parts:
        return []
    by_depth = np.concatenate([positions for _, positions in parts])
    rows = stack.rows[n.order[by_depth]]
    ev = trace.events
    names, name_codes = np.unique(ev["name"].to_numpy()[rows], return_inverse=True)
    labels = tuple(printable(trace.name(int(c))) for c in names)
    kinds = stack.kinds[n.order[by_depth]]
    starts, ends = n.starts[by_depth] - origin, n.ends[by_depth] - origin
    out, at = [], 0
    for d, positions in parts:
        part = slice(at, at + len(positions))
        at += len(positions)
        out.append(Lane(f"op:{lane}:{d}", f"ops d{d}", starts[part], ends[part], op_id(rows[part]),
                        kinds[part].astype(np.int8), name_codes.reshape(-1)[part], labels))
    return out


def _threads_by_launches(lanes: pd.DataFrame, launch_lane: np.ndarray) -> list[int]:
    """Launching threads, most launches first; autograd threads after the others (so the main thread leads)."""
    present, counts = np.unique(launch_lane[launch_lane >= 0], return_counts=True)
    autograd = [_is_autograd(lanes, int(x)) for x in present]
    order = sorted(range(len(present)), key=lambda i: (autograd[i], -int(counts[i]), int(present[i])))
    return [int(present[i]) for i in order]


def _is_autograd(lanes: pd.DataFrame, lane: int) -> bool:
    return "autograd" in str(lanes.iloc[lane]["thread"])


def _copy_direction(kinds: np.ndarray, names: np.ndarray) -> str:
    """``H2D``/``D2H``/``D2D``/``P2P``/``H2H`` for a stream doing only copies one way, ``copy`` for several, "" otherwise."""
    if not len(kinds) or not bool(np.all(kinds == Kind.MEMCPY)):
        return ""
    kinds_seen = {copy_kind(str(name))[0] for name in np.unique(names)}  # "H2D pinned", "D2H pageable", "D2D"...
    directions = {k.split(" ")[0] for k in kinds_seen}
    if len(directions) != 1:
        return "copy"
    memory = {k.partition(" ")[2] for k in kinds_seen}
    short = {"pinned": "pin", "pageable": "page"}
    host = short.get(memory.pop(), "") if len(memory) == 1 else ""
    return f"{directions.pop()} {host}".strip()


class NamesByCode:
    """A str column read lazily: ``names[rows]`` gives the strings of those rows only (categories when categorical)."""

    def __init__(self, column: pd.Series):
        if isinstance(column.dtype, pd.CategoricalDtype):
            self.codes = column.cat.codes.to_numpy()
            self.categories = np.array([str(c) for c in column.cat.categories] + [""], dtype=object)
        else:
            self.codes, self.categories = None, column.astype(str).to_numpy()

    def __getitem__(self, rows):
        if self.codes is None:
            return self.categories[rows]
        return self.categories[self.codes[rows]]  # code -1 (missing) reads the trailing ""


def _thread_label(lanes: pd.DataFrame, lane: int) -> str:
    row = lanes.iloc[lane]
    thread = str(row["thread"])
    if "autograd" in thread:
        return "CPU autograd"
    return printable(f"CPU t{row['tid']}")


PARALLEL_FROM = 200_000  # intervals in all: below this, threads cost more than they save


def filter_lanes(lanes: Sequence[Lane], keep_ids: np.ndarray | None) -> list[Lane]:
    """Every lane restricted to the kept ids (None keeps all). Big lanes are cut on threads at once:
    numpy's gathers let go of the GIL, and a search typed over a million launches re-cuts them all
    on every key (18 ms on one core, 9 ms on two, for four lanes of 500k)."""
    if keep_ids is None:
        return list(lanes)
    if sum(len(lane) for lane in lanes) < PARALLEL_FROM or len(lanes) < 2:
        return [lane.subset(keep_ids) for lane in lanes]
    return list(shared_pool("kerneltui-lanes").map(lambda lane: lane.subset(keep_ids), lanes))


def nice_step(span: float, cells: int, min_cells_per_tick: int) -> int:
    """A tick step of 1, 2 or 5 x 10^k ns giving ticks at least min_cells_per_tick apart."""
    if span <= 0 or cells <= 0:
        return 1
    target = span * min_cells_per_tick / cells
    exponent = 10 ** int(np.floor(np.log10(max(target, 1))))
    for factor in (1, 2, 5, 10):
        if factor * exponent >= target:
            return int(factor * exponent)
    return int(10 * exponent)
