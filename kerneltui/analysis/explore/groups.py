"""The kernel table grouped (by kernel, launching op, module, source line or step) over any mask of launches.

Built once per trace and grouping (``group_index``): each launch gets a code into the
distinct (group, kernel) pairs (for the kernel grouping: (kernel, launching op), for its
``top`` column). A query reduces the masked launches onto the pairs with ``bincount`` and
``minimum.at`` / ``maximum.at`` (a few milliseconds on a million launches), then the few
pairs onto their groups. No pandas groupby per keystroke.

A search keeps whole classes of launches (``LaunchSearch.combo_code``: alike in kernel, op
stack, source line, module and step), so where each class is one pair, its sums are made
once (``class_sums``) and a search's table adds up the classes it keeps (``stats_of_classes``:
tens of thousands of classes, not a million launches).

``by="kernel"`` over every launch is ``kernel_stats(trace)``: same keys, counts, totals,
means, minima, maxima and shares, in the same order; ``top`` is kernel_stats' ``op`` (the
op that launched the kernel most often, the first in category order on a tie).
"""

from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass

import numpy as np
import pandas as pd

from kerneltui.analysis.attribution import attribute, place_codes
from kerneltui.analysis.explore.context import LaunchContext, frozen
from kerneltui.trace.link import names_per_key
from kerneltui.trace.model import Trace

GROUPINGS = ("kernel", "op", "module", "source", "step")
GROUP_LABEL = {"kernel": "Kernel", "op": "Launching op", "module": "Module", "source": "Source line", "step": "Step"}
COLUMNS = ["key", "label", "count", "total_ns", "mean_ns", "min_ns", "max_ns", "share", "kernels", "top"]
EXACT_FLOAT = 2**53  # sums of integers below this are exact in float64 (bincount's weights)
I64_MAX = np.iinfo(np.int64).max
I64_MIN = np.iinfo(np.int64).min


def available_groupings(trace: Trace, context: LaunchContext) -> tuple[str, ...]:
    """The groupings that say something for this trace: module (the attribution: nn.Module, else forward op)
    needs steps or module frames; source needs with_stack; step needs steps."""
    its = trace.iterations
    out = ["kernel", "op"]
    if context.has_stacks or its.count:
        out.append("module")
    if context.has_stacks:
        out.append("source")
    if its.count > 1 or its.source == "ProfilerStep":
        out.append("step")
    return tuple(out)


def scope_mask(trace: Trace, iteration: int | None) -> np.ndarray | None:
    """Launches of one iteration (index into trace.iterations), or None for the whole trace."""
    if iteration is None:
        return None
    return trace.gpu["iteration"].to_numpy() == iteration


@dataclass(frozen=True, eq=False)
class Grouping:
    """One grouping's codes: launch -> (group, sub) pair, pair -> group and sub."""

    by: str
    keys: tuple[str, ...]  # per group code
    labels: tuple[str, ...]
    key_rank: np.ndarray  # per group code: position of its key in sorted order (the tie-break)
    group_code: np.ndarray  # per launch
    pair_code: np.ndarray  # per launch
    pair_group: np.ndarray  # per pair
    pair_sub: np.ndarray  # per pair: kernel key code, or (kernel grouping) op code
    sub_names: tuple[str, ...]  # per sub code: short name of the kernel, or the op's name
    sub_rank: np.ndarray  # per sub code: tie-break among subs (kernel: key order; op: category order)


class GroupIndex:
    """Every grouping's codes for one trace, built on first use (or all at once by ``group_index``)."""

    def __init__(self, trace: Trace, context: LaunchContext):
        self.trace = trace
        self.context = context
        g = trace.gpu
        dur = g["dur"].to_numpy()
        self.dur = dur
        self.max_abs_dur = int(np.abs(dur).max()) if len(dur) else 0
        key = g["key"].cat
        self.key_codes = key.codes.to_numpy().astype(np.int64)
        self.key_names = tuple(str(c) for c in key.categories)
        self.key_short = tuple(names_per_key(g, "short")[0])
        self.key_rank = _ranks(self.key_names)
        self._built: dict[str, Grouping] = {}
        self._class_sums: dict[str, tuple[np.ndarray, ClassSums | None]] = {}  # by -> (its classes, their sums)
        self._lock = threading.Lock()

    def grouping(self, by: str) -> Grouping:
        if by not in GROUPINGS:
            raise ValueError(f"unknown grouping {by!r}: one of {', '.join(GROUPINGS)}")
        with self._lock:
            if by not in self._built:
                self._built[by] = self._build(by)
            return self._built[by]

    def _build(self, by: str) -> Grouping:
        g = self.trace.gpu
        ctx = self.context
        if by == "kernel":
            op = g["op"].cat
            sub = op.codes.to_numpy().astype(np.int64)
            sub_names = tuple(str(c) for c in op.categories)
            # ties in total go by the key's category order (first seen first), as kernel_stats sorts them
            return _grouping(by, self.key_codes, self.key_names, self.key_short, sub, sub_names,
                             np.arange(len(sub_names), dtype=np.int64), np.arange(len(self.key_names), dtype=np.int64))
        if by == "op":
            op = g["op"].cat
            names = tuple(str(c) for c in op.categories)
            codes = op.codes.to_numpy().astype(np.int64)
            labels = tuple(n or "(no op)" for n in names)
        elif by == "module":  # where each launch's time belongs: forward and backward on the forward op's module
            a = attribute(self.trace)
            codes, names = place_codes(self.trace)
            labels = tuple(a.labels.get(n, n) for n in names)
        elif by == "source":
            codes, names = ctx.source_code.astype(np.int64), ctx.sources
            labels = tuple(n or "(no source line)" for n in names)
        else:
            its = self.trace.iterations
            codes = g["iteration"].to_numpy().astype(np.int64) + 1
            labels = (f"(outside any {its.unit})",) + tuple(its.labels)
            names = _unique_keys(("",) + tuple(its.labels))
        return _grouping(by, codes, names, labels, self.key_codes, self.key_short, self.key_rank)

    def stats(self, by: str, rows: np.ndarray | None = None) -> pd.DataFrame:
        gr = self.grouping(by)
        if rows is None:
            pc, d = gr.pair_code, self.dur
        else:
            # positions then take(): a boolean index over a million rows costs ~6x more (8 ms against 1.2)
            at = np.flatnonzero(np.asarray(rows, bool))
            pc, d = gr.pair_code.take(at), self.dur.take(at)
        return _frame(gr, *_reduce(pc, d, len(gr.pair_group), self.max_abs_dur))

    def class_sums(self, by: str, classes: np.ndarray) -> ClassSums | None:
        """The launches' sums per class (codes from 0), made once per classes array; None when a class
        holds launches of more than one of this grouping's pairs (for the module grouping: a forward
        op's launches are placed on modules one by one)."""
        gr = self.grouping(by)
        with self._lock:
            made = self._class_sums.get(by)
            if made is not None and made[0] is classes:
                return made[1]
        codes = np.asarray(classes, np.int64)
        n = int(codes.max()) + 1 if len(codes) else 0
        pair = np.zeros(n, np.int64)
        pair[codes] = gr.pair_code
        sums = None
        if np.array_equal(pair[codes], gr.pair_code):
            sums = ClassSums(frozen(pair), *(frozen(a) for a in _reduce(codes, self.dur, n, self.max_abs_dur)))
        with self._lock:
            self._class_sums[by] = (classes, sums)
        return sums

    def stats_of_classes(self, by: str, classes: np.ndarray, kept: np.ndarray) -> pd.DataFrame | None:
        """``stats(by, kept[classes])`` from the per-class sums (microseconds, not a pass over every
        launch): a search and a step scope keep or drop whole classes of launches. None when
        ``class_sums`` is (then ask ``stats``)."""
        sums = self.class_sums(by, classes)
        if sums is None:
            return None
        gr = self.grouping(by)
        n_pairs = len(gr.pair_group)
        used = np.flatnonzero(np.asarray(kept, bool))
        pair = sums.pair[used]
        count = np.zeros(n_pairs, np.int64)
        np.add.at(count, pair, sums.count[used])
        total = np.zeros(n_pairs, np.int64)
        np.add.at(total, pair, sums.total[used])
        low = np.full(n_pairs, I64_MAX, np.int64)
        np.minimum.at(low, pair, sums.low[used])
        high = np.full(n_pairs, I64_MIN, np.int64)
        np.maximum.at(high, pair, sums.high[used])
        return _frame(gr, count, total, low, high)


@dataclass(frozen=True, eq=False)
class ClassSums:
    """Per class: its one pair, and its launches' count, total, min and max."""

    pair: np.ndarray
    count: np.ndarray
    total: np.ndarray
    low: np.ndarray
    high: np.ndarray


def _reduce(codes: np.ndarray, dur: np.ndarray, n: int, max_abs: int) -> tuple[np.ndarray, ...]:
    """Per code below n: count, exact total, min and max of the durations."""
    count = np.bincount(codes, minlength=n).astype(np.int64)
    total = _sums(codes, dur, n, max_abs)
    low = np.full(n, I64_MAX, np.int64)
    high = np.full(n, I64_MIN, np.int64)
    np.minimum.at(low, codes, dur)
    np.maximum.at(high, codes, dur)
    return count, total, low, high


def _frame(gr: Grouping, count: np.ndarray, total: np.ndarray, low: np.ndarray, high: np.ndarray) -> pd.DataFrame:
    """The table from the per-pair count, total, min and max: pairs onto their groups, by total then key."""
    by = gr.by
    used = np.flatnonzero(count > 0)
    if not len(used):
        return pd.DataFrame({c: pd.Series(dtype=_DTYPES[c]) for c in COLUMNS})
    p_group = gr.pair_group[used]
    n_groups = len(gr.keys)
    g_count = np.zeros(n_groups, np.int64)
    np.add.at(g_count, p_group, count[used])
    g_total = np.zeros(n_groups, np.int64)
    np.add.at(g_total, p_group, total[used])
    g_min = np.full(n_groups, I64_MAX, np.int64)
    np.minimum.at(g_min, p_group, low[used])
    g_max = np.full(n_groups, I64_MIN, np.int64)
    np.maximum.at(g_max, p_group, high[used])
    kernels = np.bincount(p_group, minlength=n_groups)
    # top: per group, the sub with most time (kernel grouping: most launches), ties to the lowest rank
    weight = count[used] if by == "kernel" else total[used]
    sub = gr.pair_sub[used]
    order = np.lexsort((gr.sub_rank[np.clip(sub, 0, None)], -weight, p_group))
    best = np.concatenate([[True], p_group[order][1:] != p_group[order][:-1]])
    top_sub = np.full(n_groups, -1, np.int64)
    top_sub[p_group[order][best]] = sub[order][best]
    groups = np.flatnonzero(g_count > 0)
    groups = groups[np.lexsort((gr.key_rank[groups], -g_total[groups]))]
    grand = float(g_total[groups].sum())
    totals = g_total[groups]
    return pd.DataFrame({
        "key": [gr.keys[i] for i in groups.tolist()],
        "label": [gr.labels[i] for i in groups.tolist()],
        "count": g_count[groups],
        "total_ns": totals,
        "mean_ns": totals / g_count[groups],
        "min_ns": g_min[groups],
        "max_ns": g_max[groups],
        "share": totals / grand if grand else np.zeros(len(groups)),
        "kernels": (np.ones(len(groups), np.int64) if by == "kernel" else kernels[groups].astype(np.int64)),
        "top": [gr.sub_names[s] if s >= 0 else "" for s in top_sub[groups].tolist()],
    })


_DTYPES = {"key": object, "label": object, "count": np.int64, "total_ns": np.int64, "mean_ns": np.float64,
           "min_ns": np.int64, "max_ns": np.int64, "share": np.float64, "kernels": np.int64, "top": object}


def _sums(codes: np.ndarray, values: np.ndarray, n: int, max_abs: int) -> np.ndarray:
    """Exact int64 sums of values per code: bincount's float64 weights, in two halves when they could round."""
    if max_abs * max(len(values), 1) < EXACT_FLOAT:
        return np.rint(np.bincount(codes, weights=values, minlength=n)).astype(np.int64)
    if max_abs * max(len(values), 1) >= 2**62:  # absurd durations: exact in int64 by ufunc.at
        out = np.zeros(n, np.int64)
        np.add.at(out, codes, values)
        return out
    high, low = np.divmod(values, np.int64(2**26))
    hi = np.rint(np.bincount(codes, weights=high, minlength=n)).astype(np.int64)
    lo = np.rint(np.bincount(codes, weights=low, minlength=n)).astype(np.int64)
    return hi * 2**26 + lo


def _ranks(names) -> np.ndarray:
    """Position of each string in sorted order (as pandas sorts str keys)."""
    order = sorted(range(len(names)), key=lambda i: names[i])
    rank = np.empty(len(names), np.int64)
    rank[order] = np.arange(len(names))
    return rank


def _unique_keys(keys: tuple[str, ...]) -> tuple[str, ...]:
    """Keys made unique: a repeated one gets " [2]", " [3]"... (a trace may repeat a step label)."""
    seen: dict[str, int] = {}
    out = []
    for k in keys:
        seen[k] = seen.get(k, 0) + 1
        out.append(k if seen[k] == 1 else f"{k} [{seen[k]}]")
    return tuple(out)


def _grouping(by, codes, keys, labels, sub, sub_names, sub_rank, key_rank=None) -> Grouping:
    n_sub = len(sub_names) + 1
    packed = codes * n_sub + (sub + 1)
    pair_code, distinct = pd.factorize(packed, sort=False)
    return Grouping(
        by=by,
        keys=tuple(keys),
        labels=tuple(labels),
        key_rank=frozen(_ranks(keys) if key_rank is None else key_rank),
        group_code=frozen(codes),
        pair_code=frozen(pair_code.astype(np.int64)),
        pair_group=frozen(np.asarray(distinct, np.int64) // n_sub),
        pair_sub=frozen(np.asarray(distinct, np.int64) % n_sub - 1),
        sub_names=tuple(sub_names),
        sub_rank=frozen(np.asarray(sub_rank, np.int64)),
    )


_INDEXES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_INDEXES_LOCK = threading.Lock()


def group_index(trace: Trace, context: LaunchContext, build: bool = True) -> GroupIndex:
    """The trace's GroupIndex (one per context, kept while the context lives); build=True builds
    every available grouping now (call it in the loading worker)."""
    with _INDEXES_LOCK:
        index = _INDEXES.get(context)
        if index is None or index.trace is not trace:
            index = _INDEXES[context] = GroupIndex(trace, context)
    if build:
        for by in available_groupings(trace, context):
            index.grouping(by)
    return index


def group_stats(trace: Trace, context: LaunchContext, by: str, rows: np.ndarray | None = None) -> pd.DataFrame:
    """One row per group of the launches ``rows`` keeps (None: all), by total time then key.

    Columns: key (str, unique), label (str shown), count, total_ns, min_ns, max_ns (int64),
    mean_ns (float64, as kernel_stats), share (of the masked launches' GPU time), kernels
    (distinct kernels in the group), top (the group's kernel with most time; for by="kernel":
    the op that launched it most).
    """
    return group_index(trace, context, build=False).stats(by, rows)


def group_codes(trace: Trace, context: LaunchContext, by: str) -> tuple[np.ndarray, tuple[str, ...]]:
    """Per launch, its group's code (read-only), and per code the group's key (group_stats' ``key``)."""
    grouping = group_index(trace, context, build=False).grouping(by)
    return grouping.group_code, grouping.keys
