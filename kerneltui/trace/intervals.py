"""Vectorised queries over properly nested intervals (one thread's op stack).

Kineto's cpu_op, user_annotation and runtime/driver events on one thread never
partially overlap, so "which interval encloses t most tightly" needs no tree:
the number of intervals open at t is its depth, and the innermost enclosing
interval is the latest-starting interval of that depth.
"""

from __future__ import annotations

import numpy as np


class Nesting:
    """Nested intervals [start, end] of one thread, ready for enclosing-interval queries."""

    def __init__(self, starts: np.ndarray, ends: np.ndarray):
        # parents first on equal starts: longer interval before shorter
        self.order = np.lexsort((-ends, starts))
        self.starts = starts[self.order]
        self.ends = ends[self.order]
        self.sorted_ends = np.sort(ends)
        position = np.arange(len(self.starts))
        self.depth = position - np.searchsorted(self.sorted_ends, self.starts, side="right")
        self._by_depth = {d: np.flatnonzero(self.depth == d) for d in np.unique(self.depth)}

    def open_count(self, t: np.ndarray) -> np.ndarray:
        """How many intervals contain each t (start <= t <= end)."""
        return np.searchsorted(self.starts, t, side="right") - np.searchsorted(self.sorted_ends, t, side="left")

    def innermost(self, t: np.ndarray) -> np.ndarray:
        """Index (into the arrays given) of the tightest interval containing each t, or -1."""
        t = np.asarray(t, dtype=np.int64)
        out = np.full(len(t), -1, np.int64)
        target = self.open_count(t) - 1
        for depth in np.unique(target):
            if depth < 0 or depth not in self._by_depth:
                continue
            queries = np.flatnonzero(target == depth)
            candidates = self._by_depth[depth]
            at = np.searchsorted(self.starts[candidates], t[queries], side="right") - 1
            found = at >= 0
            sorted_index = candidates[at[found]]
            inside = self.ends[sorted_index] >= t[queries[found]]
            out[queries[found][inside]] = self.order[sorted_index[inside]]
        return out

    def top_level(self) -> np.ndarray:
        """Indices (into the arrays given) of intervals that nothing encloses."""
        return np.sort(self.order[self.depth == 0])


def containing_span(span_starts: np.ndarray, span_ends: np.ndarray, t: np.ndarray) -> np.ndarray:
    """For disjoint spans (steps, calls): index of the span containing each t, or -1."""
    order = np.argsort(span_starts, kind="stable")
    starts, ends = span_starts[order], span_ends[order]
    at = np.searchsorted(starts, t, side="right") - 1
    valid = at >= 0
    inside = np.zeros(len(t), bool)
    inside[valid] = ends[at[valid]] >= t[valid]
    return np.where(inside, order[np.clip(at, 0, None)], -1)


def union_length(starts: np.ndarray, ends: np.ndarray) -> int:
    """Total length covered by intervals (busy time): overlaps counted once."""
    if len(starts) == 0:
        return 0
    order = np.argsort(starts, kind="stable")
    s, e = starts[order], ends[order]
    reach = np.maximum.accumulate(e)
    # a new run starts where an interval begins after everything before it ended
    new_run = np.empty(len(s), bool)
    new_run[0] = True
    new_run[1:] = s[1:] > reach[:-1]
    run_start = s[new_run]
    run_end = np.maximum.reduceat(e, np.flatnonzero(new_run))
    return int((run_end - run_start).sum())
