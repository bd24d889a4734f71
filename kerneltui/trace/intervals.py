"""Vectorised queries over properly nested intervals (one thread's op stack).

Kineto's cpu_op, user_annotation and runtime/driver events on one thread never
partially overlap, so "which interval encloses t most tightly" needs no tree:
the number of intervals open at t is its depth, and the innermost enclosing
interval is the latest-starting interval of that depth.
"""

from __future__ import annotations

import numpy as np

from kerneltui.trace.scanner import _scan


def index_dtype(n: int) -> type:
    """The integer type for positions into ``n`` things: int32 where it holds them, half int64's memory
    (a 5 GB trace's browser keeps tens of millions of such positions)."""
    return np.int32 if n < 2**31 else np.int64


def stable_argsort(values: np.ndarray) -> np.ndarray:
    """``np.argsort(values, kind="stable")``. Integers within a range of 2**16 (depths, lane numbers) are
    sorted as uint16, for which numpy uses a radix sort: ~4x faster than the timsort it uses for wider ones
    on unsorted values (700k depths: 38 ms, 10 ms as uint16)."""
    if values.dtype.kind in "iu" and values.itemsize > 2 and values.size:
        low, high = int(values.min()), int(values.max())
        if high - low < 2**16:
            values = (values - low).astype(np.uint16)  # order kept: every value shifted alike, none wrapped
    return np.argsort(values, kind="stable")


def search_ascending(a: np.ndarray, v: np.ndarray, side: str = "left") -> np.ndarray:
    """``np.searchsorted(a, v, side)`` (``a`` ascending, as numpy asks) for ``v`` ascending too, as an op
    stack's starts are: one merge pass over both, in the C scanner's module where it is built, for 1-D
    int64 arrays of which ``v`` is not far the shorter (numpy's binary search a key, even from the last
    key's place: 27 ms for a million keys among a million, the merge 9). numpy's search otherwise, and
    where ``v`` turns out not to be ascending."""
    search = getattr(_scan, "search_ascending", None)
    if (search is not None and side in ("left", "right") and a.ndim == 1 and v.ndim == 1 and a.dtype == np.int64
            and v.dtype == np.int64 and len(v) * 16 >= len(a)):
        found = search(np.ascontiguousarray(a), np.ascontiguousarray(v), side == "right")
        if found is not None:
            return np.frombuffer(found, np.int64)
    return np.searchsorted(a, v, side=side)


def split_by(keys: np.ndarray, values: np.ndarray) -> dict[int, np.ndarray]:
    """values split by key (each part in its original order), in one sort: a radix sort where the keys
    span under 2**16 (threads), and the parts' bounds read off the sorted keys (np.unique sorted them
    again: 0.1 s a call at a million launches)."""
    order = stable_argsort(keys)
    keys, values = keys[order], values[order]
    bounds = np.flatnonzero(keys[1:] != keys[:-1]) + 1
    starts = np.concatenate(([0], bounds)) if len(keys) else bounds
    return dict(zip(map(int, keys[starts].tolist()), np.split(values, bounds)))


def nesting_order(starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """``np.lexsort((-ends, starts))`` for integer starts (ns; a NaN start, never equal to another, would
    keep its input order): by start, the longer first on equal starts, then input order.

    One stable sort of the starts, then the runs of tied starts alone sorted again: a trace's starts come
    nearly sorted, which numpy's stable sort (timsort) runs through in about a pass. One thread's 700k
    ops of the 1 GB trace, none tied: 75 ms with lexsort, 7.8 ms so; many ties would gain less."""
    order = np.argsort(starts, kind="stable")
    ordered = starts[order]
    tie = ordered[1:] == ordered[:-1]
    if tie.any():
        tied = np.zeros(len(order), bool)
        tied[1:] = tie
        tied[:-1] |= tie
        at = np.flatnonzero(tied)  # whole runs of equal starts, each already in place among the rest
        runs = order[at]  # within a run, in input order (the sort is stable)
        order[at] = runs[np.lexsort((-ends[runs], starts[runs]))]
    return order


class Nesting:
    """Nested intervals [start, end] of one thread, ready for enclosing-interval queries."""

    def __init__(self, starts: np.ndarray, ends: np.ndarray):
        small = index_dtype(len(starts))
        # parents first on equal starts: longer interval before shorter
        self.order = nesting_order(starts, ends).astype(small)
        self.starts = starts[self.order]
        self.ends = ends[self.order]
        self.sorted_ends = np.sort(ends)
        position = np.arange(len(self.starts))
        self.depth = (position - search_ascending(self.sorted_ends, self.starts, side="right")).astype(small)
        # depth -> positions (into the sorted arrays) of that depth, ascending, depths in ascending order:
        # one sort, not a pass per depth (20,000 nested ops); the launch context and the icicles read it too
        self.by_depth: dict[int, np.ndarray] = split_by(self.depth, np.arange(len(self.depth), dtype=small))

    def open_count(self, t: np.ndarray) -> np.ndarray:
        """How many intervals contain each t (start <= t <= end)."""
        return search_ascending(self.starts, t, side="right") - search_ascending(self.sorted_ends, t, side="left")

    def innermost(self, t: np.ndarray) -> np.ndarray:
        """Index (into the arrays given) of the tightest interval containing each t, or -1."""
        t = np.asarray(t, dtype=np.int64)
        out = np.full(len(t), -1, np.int64)
        target = self.open_count(t) - 1
        # the queries grouped by depth in one radix sort (np.unique's sort and a compare per depth cost
        # 0.2 s for a million launches)
        for depth, queries in split_by(target, np.arange(len(target))).items():
            if depth < 0 or depth not in self.by_depth:
                continue
            candidates = self.by_depth[depth]
            at = search_ascending(self.starts[candidates], t[queries], side="right") - 1
            found = at >= 0
            sorted_index = candidates[at[found]]
            inside = self.ends[sorted_index] >= t[queries[found]]
            out[queries[found][inside]] = self.order[sorted_index[inside]]
        return out

    def top_level(self) -> np.ndarray:
        """Indices (into the arrays given) of intervals that nothing encloses."""
        return np.sort(self.order[self.depth == 0])


FEW_QUERIES = 64  # under one query per this many intervals, ``innermost`` reads only around each query


def innermost(starts: np.ndarray, ends: np.ndarray, t: np.ndarray) -> np.ndarray:
    """``Nesting(starts, ends).innermost(t)``, the same answer for any intervals.

    For a few t among many intervals (the memory table's ~100 allocations among a thread's 700k ops)
    the depths are computed only where a query needs them: the Nesting's sorts, depths and split by
    depth cost 80 ms a thread of the 1 GB trace, this ~20 ms."""
    t = np.asarray(t, dtype=np.int64)
    if len(t) * FEW_QUERIES >= len(starts):
        return Nesting(starts, ends).innermost(t)
    order = nesting_order(starts, ends)
    ordered = starts[order]
    sorted_ends = np.sort(ends)
    before = np.searchsorted(ordered, t, side="right")  # intervals (by nesting order) starting at or before t
    target = before - np.searchsorted(sorted_ends, t, side="left") - 1  # Nesting.open_count(t) - 1
    out = np.full(len(t), -1, np.int64)
    read = 0
    for q in np.flatnonzero(target >= 0).tolist():
        # Nesting's answer: the last interval before ``before`` whose depth is the target, if it
        # reaches t. Depths are read back from there, in windows that double
        high, width = int(before[q]), 64
        while high > 0:
            low = max(0, high - width)
            read += high - low
            if read > len(starts):  # deep stacks far back (a hostile trace): the whole Nesting is cheaper
                return Nesting(starts, ends).innermost(t)
            depth = np.arange(low, high) - np.searchsorted(sorted_ends, ordered[low:high], side="right")
            hit = np.flatnonzero(depth == target[q])
            if len(hit):
                at = int(order[low + int(hit[-1])])
                if ends[at] >= t[q]:
                    out[q] = at
                break
            high, width = low, width * 2
    return out


def depth_by_group(groups: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """``Nesting(starts, ends).depth`` of every interval within its group (thread), all groups at once.

    The same rule as ``Nesting``: an interval's depth is its position among its group's
    intervals (by start, longer first) less the number of them that end at or before it
    starts. Returned in input order; 0 = top level.
    """
    n = len(starts)
    if n == 0:
        return np.empty(0, np.int64)
    # one int64 key of (group, time) per start and per end: the groups laid end to end on one time axis
    t0 = min(int(starts.min()), int(ends.min()))
    span = max(int(starts.max()), int(ends.max())) - t0 + 1
    g0 = int(groups.min())
    if (int(groups.max()) - g0 + 1) * span < 2**62:
        base = (groups.astype(np.int64) - g0) * span - t0
        start_keys, end_keys, group_first = base + starts, base + ends, base + t0
    else:  # times or groups too far apart (a hostile trace): times ranked first, as dense codes (3x slower)
        values, inverse = np.unique(np.concatenate([starts, ends]), return_inverse=True)
        inverse = inverse.reshape(-1)
        width = np.int64(len(values) + 1)
        _, group_code = np.unique(groups, return_inverse=True)
        base = group_code.reshape(-1).astype(np.int64) * width
        start_keys, end_keys, group_first = base + inverse[:n], base + inverse[n:], base
    order = nesting_order(start_keys, ends)
    g = groups[order]
    first = np.ones(n, bool)
    first[1:] = g[1:] != g[:-1]
    position = np.arange(n) - np.maximum.accumulate(np.where(first, np.arange(n), 0))
    end_keys = np.sort(end_keys)
    # the ends before each start, searched in start order (ascending: one merge pass, search_ascending),
    # less those of the groups before, once a group
    firsts = np.flatnonzero(first)
    ended = search_ascending(end_keys, start_keys[order], side="right")
    ended -= np.repeat(search_ascending(end_keys, group_first[order[firsts]], side="left"), np.diff(np.append(firsts, n)))
    depth = np.empty(n, np.int64)
    depth[order] = position - ended
    return depth


def containing_span(span_starts: np.ndarray, span_ends: np.ndarray, t: np.ndarray) -> np.ndarray:
    """For disjoint spans (steps, calls): index of the span containing each t, or -1."""
    order = np.argsort(span_starts, kind="stable")
    starts, ends = span_starts[order], span_ends[order]
    at = np.searchsorted(starts, t, side="right") - 1
    valid = at >= 0
    inside = np.zeros(len(t), bool)
    inside[valid] = ends[at[valid]] >= t[valid]
    return np.where(inside, order[np.clip(at, 0, None)], -1)


def union_runs(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The disjoint runs, in time order, that intervals cover together.

    Intervals already in time order (a trace's ops mostly are) are read where they are: no sort and
    no sorted copies (the overview's million CPU ops at 1 GB: 39 MB of scratch, now 18)."""
    if len(starts) == 0:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    if bool((starts[1:] >= starts[:-1]).all()):
        s, e = starts, ends  # what a stable sort would give
    else:
        order = np.argsort(starts, kind="stable")
        s, e = starts[order], ends[order]
        del order
    reach = np.maximum.accumulate(e)
    new_run = np.empty(len(s), bool)
    new_run[0] = True
    np.greater(s[1:], reach[:-1], out=new_run[1:])
    del reach
    return s[new_run], np.maximum.reduceat(e, np.flatnonzero(new_run))


def union_length(starts: np.ndarray, ends: np.ndarray) -> int:
    """Total length covered by intervals (busy time): overlaps counted once."""
    if len(starts) == 0:
        return 0
    run_start, run_end = union_runs(starts, ends)
    if int(run_end.max()) - int(run_start.min()) < 2**63:  # disjoint runs: their sum fits too
        return int((run_end - run_start).sum())
    return sum(int(b) - int(a) for a, b in zip(run_start, run_end))  # past int64: exact in Python ints


def summable(durations) -> np.ndarray:
    """Durations (ns) ready to sum: int64 where no sum of them can overflow, else float64.

    int64 sums wrap silently; only a trace with absurd durations (~10^18 ns) takes the float path.
    """
    values = np.asarray(durations)
    if values.dtype.kind in "iu" and len(values):
        largest = max(abs(int(values.max())), abs(int(values.min())))
        if largest * len(values) >= 2**63:
            return values.astype(np.float64)
    return values
