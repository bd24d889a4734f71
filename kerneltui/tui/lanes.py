"""Timeline lanes: rows of non-overlapping intervals, and per-cell aggregation of them.

No Textual here: the timeline widget draws what these functions compute, and
tests check the numbers without a terminal. A lane answers "how much of the
time between two edges is busy" in O(log n) from a cumulative sum, so drawing a
window costs the same for ten events or a million (one binary search per cell).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from kerneltui.terminal_text import printable
from kerneltui.trace.model import Trace
from kerneltui.trace.schema import Kind


def _frozen(a) -> np.ndarray:
    a = np.ascontiguousarray(a)
    a.flags.writeable = False
    return a


@dataclass(frozen=True, eq=False)
class Lane:
    """One timeline row: intervals [starts, ends) sorted by start, each with an id.

    ``ids`` are the caller's handles (the browser uses row positions in
    ``trace.gpu``), so that selecting an id highlights it in every lane holding
    it (a kernel in its stream lane, its launch call in its thread lane).
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
    _cum: np.ndarray = field(init=False, repr=False)
    _sorted_ends: np.ndarray = field(init=False, repr=False)

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
        """Position of an id in the lane, or -1 (ids are increasing in lanes built here)."""
        at = int(np.searchsorted(self.ids, id_))
        if at < len(self.ids) and self.ids[at] == id_:
            return at
        found = np.flatnonzero(self.ids == id_)  # ids not sorted: a caller's own lane
        return int(found[0]) if len(found) else -1

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
        at = np.flatnonzero(keep_ids[self.ids])
        if len(at) == len(self):
            return self
        # one index array and take(): a boolean mask per column costs twice as much at 1M
        return Lane(
            self.key, self.label, self.starts.take(at), self.ends.take(at), self.ids.take(at),
            self.kinds.take(at), self.names.take(at), self.labels, self.full_labels,
        )


@dataclass(frozen=True)
class Cells:
    fraction: np.ndarray  # busy share of each cell, 0..1
    count: np.ndarray  # intervals overlapping each cell
    last: np.ndarray  # position of the last interval starting before the cell's end (-1: none)


def lanes_from_trace(trace: Trace, origin: int | None = None) -> list[Lane]:
    """One lane per GPU (device, stream), then one per CPU thread that launched GPU work.

    Times are relative to ``origin`` (default: the start of the trace's window),
    so two traces drawn one above the other share a time axis that starts at 0.
    Ids are positions in ``trace.gpu``; a CPU lane holds the launch calls, each
    with the id of the GPU event it launched, and is labelled with the op.
    Labels are drawn text: made printable here, once per distinct name.
    """
    g = trace.gpu
    origin = trace.window[0] if origin is None else origin
    if not len(g):
        return []
    ids = np.arange(len(g), dtype=np.int64)
    key = g["key"].cat
    short_by_key = _first_per_code(key.codes.to_numpy(), g["short"].astype(str).to_numpy(), len(key.categories))
    full_by_key = _first_per_code(key.codes.to_numpy(), g["full_name"].astype(str).to_numpy(), len(key.categories))
    lanes = []
    ts, end = g["ts"].to_numpy() - origin, g["end"].to_numpy() - origin
    kinds = g["kind"].to_numpy()
    codes = key.codes.to_numpy()
    pairs = g[["device", "stream"]].drop_duplicates().sort_values(["device", "stream"])
    for device, stream in pairs.itertuples(index=False):
        mask = (g["device"].to_numpy() == device) & (g["stream"].to_numpy() == stream)
        label = f"GPU{device} s{stream}"
        lanes.append(Lane(f"gpu:{device}:{stream}", label, ts[mask], end[mask], ids[mask], kinds[mask],
                          codes[mask], short_by_key, full_by_key))
    launch_lane = g["launch_lane"].to_numpy()
    op = g["op"].cat
    op_labels = tuple(printable(str(c)) for c in op.categories)
    for lane in sorted(int(x) for x in np.unique(launch_lane[launch_lane >= 0])):
        mask = launch_lane == lane
        starts = g["launch_ts"].to_numpy()[mask] - origin
        order = np.argsort(starts, kind="stable")
        ends = starts + g["launch_dur"].to_numpy()[mask]
        lanes.append(Lane(f"cpu:{lane}", _thread_label(trace.lanes, lane), starts[order], ends[order],
                          ids[mask][order], np.full(int(mask.sum()), Kind.RUNTIME, np.int8),
                          op.codes.to_numpy()[mask][order], op_labels))
    return lanes


def _first_per_code(codes: np.ndarray, values: np.ndarray, n: int) -> tuple[str, ...]:
    out = [""] * n
    first = pd.Series(np.arange(len(codes))).groupby(codes).first()
    for code, at in first.items():
        if code >= 0:
            out[int(code)] = printable(str(values[at]))
    return tuple(out)


def _thread_label(lanes: pd.DataFrame, lane: int) -> str:
    row = lanes.iloc[lane]
    thread = str(row["thread"])
    if "autograd" in thread:
        return "CPU autograd"
    return printable(f"CPU t{row['tid']}")


def filter_lanes(lanes: Sequence[Lane], keep_ids: np.ndarray | None) -> list[Lane]:
    """Every lane restricted to the kept ids (None keeps all)."""
    if keep_ids is None:
        return list(lanes)
    return [lane.subset(keep_ids) for lane in lanes]


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
