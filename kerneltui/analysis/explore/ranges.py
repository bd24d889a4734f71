"""What the GPU did in a time range: launches, GPU time, busy time, bytes and the top kernels.

``trace.gpu`` is in start order, but ends are not: a long kernel that starts well before
the range may still overlap it. With the running maximum of ``end`` (non-decreasing), the
first event that can overlap ``start`` is one binary search away, and the last is the last
start before ``end``: a query reads only those candidates, O(log n + k).

An event overlaps [start, end) when it starts before ``end`` and ends after ``start``; an
event of zero duration overlaps when it starts in [start, end).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from kerneltui.analysis.explore.context import frozen
from kerneltui.trace.link import names_per_key
from kerneltui.trace.model import Trace
from kerneltui.trace.per_trace import PerTrace
from kerneltui.trace.schema import Kind

TOP = 5


@dataclass(frozen=True)
class RangeTotals:
    start: int  # absolute ns, as given
    end: int
    launches: int  # GPU events overlapping [start, end) (that the mask keeps)
    kernels: int  # of those, Kind.KERNEL
    partial: int  # of those, how many an edge of the range cuts
    gpu_ns: int  # their durations clipped to the range, summed
    busy_ns: int  # the union of their clipped intervals (all streams and devices together)
    bytes: float  # summed bytes of those whose bytes are known (whole events, not prorated)
    bytes_unknown: int  # of those, how many have no byte count
    top: tuple[tuple[str, int, int], ...]  # up to 5 (short name, launches, clipped ns), most time first


@dataclass(frozen=True, eq=False)
class RangeIndex:
    """Per trace: starts, ends, their running maximum, and per launch the kernel code and kind."""

    ts: np.ndarray
    end: np.ndarray
    reach: np.ndarray  # running maximum of end
    key_codes: np.ndarray
    key_short: tuple[str, ...]
    is_kernel: np.ndarray
    own_bytes: np.ndarray  # memcpy/memset bytes from the event itself (NaN for kernels, unknown): no traffic table

    def candidates(self, start: int, end: int) -> tuple[int, int]:
        """[lo, hi): the only rows that can overlap [start, end)."""
        hi = int(np.searchsorted(self.ts, end, side="left"))
        lo = min(int(np.searchsorted(self.reach, start, side="right")), int(np.searchsorted(self.ts, start, side="left")))
        return lo, max(lo, hi)


def _build(trace: Trace) -> RangeIndex:
    g = trace.gpu
    ts = g["ts"].to_numpy()
    end = g["end"].to_numpy()
    key = g["key"].cat
    codes = key.codes.to_numpy().astype(np.int64)
    (short,) = names_per_key(g, "short")
    kind = g["kind"].to_numpy()
    own = g["bytes"].to_numpy().astype(np.float64)
    own = np.where((kind != Kind.KERNEL) & (own >= 0), own, np.nan)
    return RangeIndex(
        ts=frozen(ts),
        end=frozen(end),
        reach=frozen(np.maximum.accumulate(end) if len(end) else end),
        key_codes=frozen(codes),
        key_short=tuple(short),
        is_kernel=frozen(kind == Kind.KERNEL),
        own_bytes=frozen(own),
    )


_INDEXES: PerTrace[RangeIndex] = PerTrace(_build)


def range_index(trace: Trace) -> RangeIndex:
    """The trace's RangeIndex, built once (call it in the loading worker to have it ready)."""
    return _INDEXES(trace)


def range_totals(trace: Trace, start: int, end: int, mask: np.ndarray | None = None,
                 traffic: pd.DataFrame | None = None) -> RangeTotals:
    """Totals of the GPU events overlapping [start, end) that ``mask`` (bool per trace.gpu row) keeps.

    ``traffic`` is ``compute_traffic(trace).table`` (column ``bytes``, NaN unknown); without it,
    memcpy and memset bytes come from the events themselves and kernels' bytes are unknown.
    """
    start, end = int(start), int(end)
    index = range_index(trace)
    lo, hi = index.candidates(start, end) if end > start else (0, 0)
    s, e = index.ts[lo:hi], index.end[lo:hi]
    keep = (e > start) | (s >= start)
    if mask is not None:
        keep &= np.asarray(mask, bool)[lo:hi]
    if keep.all():  # the usual case: every candidate counts, so slices (views), not gathers
        rows = slice(lo, hi)
    else:
        rows = np.flatnonzero(keep) + lo
        s, e = index.ts[rows], index.end[rows]
    cut_s = np.maximum(s, start)
    cut_e = np.minimum(e, end)
    clipped = cut_e - cut_s
    launches = len(s)
    partial = int(np.count_nonzero((s < start) | (e > end)))
    gpu_ns = int(clipped.sum())
    busy = _union(cut_s, cut_e)
    bytes_column = traffic["bytes"].to_numpy(np.float64) if traffic is not None else index.own_bytes
    moved = bytes_column[rows]
    known = ~np.isnan(moved)
    codes = index.key_codes[rows]
    n_keys = len(index.key_short)
    counts = np.bincount(codes, minlength=n_keys) if launches else np.zeros(n_keys, np.int64)
    times = np.rint(np.bincount(codes, weights=clipped, minlength=n_keys)).astype(np.int64) if launches else counts
    present = np.flatnonzero(counts)
    order = present[np.lexsort((present, -counts[present], -times[present]))][:TOP]
    return RangeTotals(
        start=start,
        end=end,
        launches=launches,
        kernels=int(np.count_nonzero(index.is_kernel[rows])),
        partial=partial,
        gpu_ns=gpu_ns,
        busy_ns=busy,
        bytes=float(moved[known].sum()),
        bytes_unknown=int(launches - np.count_nonzero(known)),
        top=tuple((index.key_short[k], int(counts[k]), int(times[k])) for k in order.tolist()),
    )


def _union(starts: np.ndarray, ends: np.ndarray) -> int:
    """Length covered by intervals given in start order (intervals.union_length, without its sort)."""
    if not len(starts):
        return 0
    reach = np.maximum.accumulate(ends)
    new_run = np.empty(len(starts), bool)
    new_run[0] = True
    np.greater(starts[1:], reach[:-1], out=new_run[1:])
    first = np.flatnonzero(new_run)
    last = np.append(first[1:] - 1, len(starts) - 1)
    return int((reach[last] - starts[first]).sum())
