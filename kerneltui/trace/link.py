"""Kernel -> launch -> op: the GPU work table, each row linked to what launched it.

Rules (docs/kineto-trace-format.md section 4): a GPU event's ``correlation``
names its runtime/driver launch; its ``External id`` names the innermost cpu_op
around that launch. CUDA-graph replays share one ``cudaGraphLaunch`` and are
attributed to it. Triton kernel names are not unique, so the key of a kernel is
its name plus the ``kernel_hash`` of the Inductor op that launched it.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from kerneltui.trace.intervals import Nesting
from kerneltui.trace.names import short_names
from kerneltui.trace.one_of import one_of
from kerneltui.trace.schema import (
    EVENT_COLUMNS,
    GPU_WORK,
    KERNEL_FIELDS,
    KernelColumns,
    Kind,
)

GRAPH_LAUNCHES = ("cudaGraphLaunch", "cuGraphLaunch", "hipGraphLaunch")
GRAPH_OP = "cudaGraphLaunch"


def lookup(keys: np.ndarray, rows: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """Row whose key equals each wanted value (first by row order), or -1."""
    return KeyIndex(keys, rows).find(wanted)


class KeyIndex:
    """``lookup``'s keys sorted once, for lookups made a few at a time (a frame's parents, level by level)."""

    def __init__(self, keys: np.ndarray, rows: np.ndarray):
        self.order = np.lexsort((rows, keys))
        self.sorted_keys = keys[self.order]
        self.rows = rows

    def find(self, wanted: np.ndarray) -> np.ndarray:
        if len(self.sorted_keys) == 0:
            return np.full(len(wanted), -1, np.int64)
        at = np.clip(np.searchsorted(self.sorted_keys, wanted, side="left"), 0, len(self.sorted_keys) - 1)
        found = (self.sorted_keys[at] == wanted) & (wanted >= 0)
        return np.where(found, self.rows[self.order[at]], -1)


def gpu_table(events: pd.DataFrame, names: list[str], lanes: pd.DataFrame, nesting,
              kernel_fields: KernelColumns) -> pd.DataFrame:
    """One row per kernel/memcpy/memset, time-ordered, with launch and op columns; ``kernel_fields`` (the
    loader's side table, schema.KERNEL_FIELDS) become columns where the event table had them."""
    kind = events["kind"].to_numpy()
    rows = np.flatnonzero(one_of(kind, GPU_WORK))
    rows = rows[np.argsort(events["ts"].to_numpy()[rows], kind="stable")]
    g = events.iloc[rows].reset_index(drop=True)
    g.insert(0, "row", rows)
    _put_kernel_fields(g, rows, kernel_fields)
    g["end"] = g["ts"] + g["dur"]
    # GPU lanes are (device, stream) pairs: the fallback when args give neither, per lane, not per event
    lane = g["lane"].to_numpy()
    stream_from_tid = lane_ints(lanes["tid"].to_numpy(), np.int64)[lane]
    g["stream"] = np.where(g["stream"] >= 0, g["stream"], stream_from_tid)
    device_from_pid = lane_ints(lanes["pid"].to_numpy(), np.int16)[lane]
    g["device"] = np.where(g["device"] >= 0, g["device"], device_from_pid).astype(np.int16)

    _link_launches(g, events, names)
    _link_ops(g, events, names, nesting)
    _keys(g, events, names)
    return g


def _put_kernel_fields(g: pd.DataFrame, rows: np.ndarray, kernel_fields: KernelColumns) -> None:
    """The kernels' fields of ``rows`` as columns of ``g``, each after the column before it in
    schema.EVENT_COLUMNS (where a decoded chunk has it)."""
    fields = kernel_fields.at_rows(rows)
    order = list(EVENT_COLUMNS)
    for name in KERNEL_FIELDS:
        g.insert(g.columns.get_loc(order[order.index(name) - 1]) + 1, name, fields[name])


def lane_ints(values, dtype) -> np.ndarray:
    """pid or tid values (ints, or numbers in strings) as ``dtype``; -1 for a name, NaN, inf or out of range."""
    info = np.iinfo(dtype)
    out = np.full(len(values), -1, dtype)
    for i, v in enumerate(values):
        if isinstance(v, bool):
            continue
        if isinstance(v, (int, np.integer)):
            x = int(v)
        else:
            try:
                f = float(v)
            except (TypeError, ValueError, OverflowError):
                continue
            if not math.isfinite(f):
                continue
            x = int(f)  # "7" -> 7, "7.9" -> 7 (as pandas' to_numeric then astype did)
        if info.min <= x <= info.max:
            out[i] = x
    return out


def _link_launches(g: pd.DataFrame, events: pd.DataFrame, names: list[str]) -> None:
    kind = events["kind"].to_numpy()
    launches = np.flatnonzero(((kind == Kind.RUNTIME) | (kind == Kind.DRIVER)) & (events["correlation"].to_numpy() >= 0))
    launch = lookup(events["correlation"].to_numpy()[launches], launches, g["correlation"].to_numpy())
    has = launch >= 0
    safe = np.where(has, launch, 0)
    g["launch_row"] = launch
    g["launch_ts"] = np.where(has, events["ts"].to_numpy()[safe], g["ts"].to_numpy())
    g["launch_dur"] = np.where(has, events["dur"].to_numpy()[safe], 0)
    g["launch_lane"] = np.where(has, events["lane"].to_numpy()[safe], -1)
    launch = names_categorical(names, np.where(has, events["name"].to_numpy()[safe], -1))
    g["launch"] = launch
    g["graph"] = np.asarray(launch.isin(GRAPH_LAUNCHES))


def _link_ops(g: pd.DataFrame, events: pd.DataFrame, names: list[str], nesting) -> None:
    kind = events["kind"].to_numpy()
    ops = np.flatnonzero(kind == Kind.CPU_OP)
    op = lookup(events["external_id"].to_numpy()[ops], ops, g["external_id"].to_numpy())
    # No External id (older or foreign traces): the innermost op around the launch.
    missing = (op < 0) & (g["launch_row"].to_numpy() >= 0)
    if missing.any() and len(ops):
        launch_lane = g["launch_lane"].to_numpy()
        launch_ts = g["launch_ts"].to_numpy()
        which = np.flatnonzero(missing)
        which = which[np.argsort(launch_lane[which], kind="stable")]  # grouped by thread, in one sort
        lanes, first = np.unique(launch_lane[which], return_index=True)
        for lane, part in zip(lanes.tolist(), np.split(which, first[1:])):
            stack = nesting(lane)
            if stack is not None:
                op[part] = stack.innermost_op(launch_ts[part])
    g["op_row"] = op
    op_names = names_categorical(names, np.where(op >= 0, events["name"].to_numpy()[np.where(op >= 0, op, 0)], -1))
    if g["graph"].any():
        op_names = op_names.add_categories([GRAPH_OP]) if GRAPH_OP not in op_names.categories else op_names
        op_names[g["graph"].to_numpy()] = GRAPH_OP
    g["op"] = used_only(op_names)


def names_categorical(names: list[str], codes: np.ndarray) -> pd.Categorical:
    """Interned name codes (-1: none) as a Categorical, without touching a string per row."""
    codes = np.asarray(codes)
    empty = len(names)
    categories = names + [""]
    if "" in names:  # the trace itself has an empty name: reuse it
        empty = names.index("")
        categories = names
    return pd.Categorical.from_codes(np.where(codes >= 0, codes, empty), categories=categories)


def used_only(c: pd.Categorical) -> pd.Categorical:
    """``c.remove_unused_categories()``, by a count of the codes rather than pandas' sort of them (three
    per GPU table: 0.17 s of its 0.7 s at a million launches)."""
    n = len(c.categories)
    if not n:
        return c.remove_unused_categories()
    codes = np.asarray(c.codes)
    missing = codes < 0
    used = np.flatnonzero(np.bincount(codes[~missing] if missing.any() else codes, minlength=n))
    position = np.full(n, -1, np.int64)
    position[used] = np.arange(len(used))
    kept = position[np.where(missing, 0, codes)]
    return pd.Categorical.from_codes(np.where(missing, -1, kept), categories=c.categories[used], ordered=c.ordered,
                                     validate=False)


def first_of_codes(codes: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(codes, return_index=True)`` for codes below ``n``, -1 (none) left out: each code
    present, ascending, and the index of its first row; by a minimum per code, not a sort of every
    row (a million launches' keys: 4 ms against 80-100 ms)."""
    codes = np.asarray(codes)
    rows = np.flatnonzero(codes >= 0)
    first = np.full(n, len(codes), np.int64)
    np.minimum.at(first, codes[rows], rows)
    distinct = np.flatnonzero(first < len(codes))
    return distinct, first[distinct]


def names_per_key(g: pd.DataFrame, *columns: str) -> list[list[str]]:
    """For each of ``columns`` (categoricals of ``g``), per code of ``g["key"]``: the name of the key's
    first launch, "" for a key no launch has; through the categories, not a string per row. The first
    launches are found once for all the columns."""
    key = g["key"].cat
    n_keys = len(key.categories)
    distinct, first = first_of_codes(key.codes.to_numpy(), n_keys)
    out = []
    for column in columns:
        col = g[column].cat
        names = np.array([str(c) for c in col.categories] + [""], dtype=object)  # code -1 reads the trailing ""
        per_key = [""] * n_keys
        for code, name in zip(distinct.tolist(), names[col.codes.to_numpy()[first]].tolist()):
            per_key[code] = name
        out.append(per_key)
    return out


def _keys(g: pd.DataFrame, events: pd.DataFrame, names: list[str]) -> None:
    """key = full name (+ @hash when one Triton name has several hashes); short = display name."""
    op = g["op_row"].to_numpy()
    safe_op = np.where(op >= 0, op, 0)
    hash_code = np.where(op >= 0, events["kernel_hash"].to_numpy()[safe_op], -1)
    # the hash belongs to the kernel only if its op is the Triton launch of that same name
    hash_code = np.where(events["name"].to_numpy()[safe_op] == g["name"].to_numpy(), hash_code, -1)
    full = used_only(names_categorical(names, g["name"].to_numpy()))
    hashes = used_only(names_categorical(names, hash_code))
    g["full_name"] = full
    g["kernel_hash"] = hashes
    shorts = short_names(full.categories)
    # build key/short per distinct (name, hash) pair, then map rows onto them; a name is ambiguous when it
    # has several pairs (found from the distinct pairs, not a frame of a million rows deduplicated)
    pair_codes = full.codes.astype(np.int64) * (len(hashes.categories) + 1) + hashes.codes
    first_seen, pairs = pd.factorize(pair_codes)  # hashed (np.unique's sort of a million codes: ~80 ms)
    order = np.argsort(pairs)
    distinct, rank = pairs[order], np.empty(len(order), np.int64)
    rank[order] = np.arange(len(order))
    row_pair = rank[first_seen]  # each row's pair, numbered in ascending order as np.unique numbers them
    name_of_pair = distinct // (len(hashes.categories) + 1)
    pairs_per_name = np.bincount(name_of_pair, minlength=len(full.categories))
    ambiguous_names = set(full.categories[np.flatnonzero(pairs_per_name > 1)])
    key_of, short_of = [], []
    for code in distinct:
        name = full.categories[code // (len(hashes.categories) + 1)]
        kernel_hash = hashes.categories[code % (len(hashes.categories) + 1)]
        if name in ambiguous_names:
            key_of.append(f"{name}@{kernel_hash}")
            short_of.append(f"{shorts[name]}@{kernel_hash[:6]}")
        else:
            key_of.append(name)
            short_of.append(shorts[name])
    g["key"] = _expand(key_of, row_pair)
    g["short"] = _expand(short_of, row_pair)


def _expand(values: list[str], row_codes: np.ndarray) -> pd.Categorical:
    """Per-distinct values to a per-row Categorical (values may repeat)."""
    codes, categories = pd.factorize(pd.Series(values, dtype=object))
    return pd.Categorical.from_codes(codes[row_codes] if len(row_codes) else row_codes, categories=categories)


class OpStack:
    """The nested op stack of one CPU thread: cpu_op + user_annotation + runtime + driver."""

    def __init__(self, rows: np.ndarray, starts: np.ndarray, ends: np.ndarray, kinds: np.ndarray):
        self.rows = rows
        self.kinds = kinds
        self.nesting = Nesting(starts, ends)
        # the longest interval's length; -1 where unknown: none, or times so far out that a difference
        # could wrap (a hostile trace), where enclosing() reads the whole thread
        sane = len(starts) and max(abs(int(a)) for a in (starts.min(), starts.max(), ends.min(), ends.max())) < 2**61
        self.longest = int((ends - starts).max()) if sane else -1
        op_mask = kinds == Kind.CPU_OP
        self.op_rows = rows[op_mask]
        self.op_nesting = Nesting(starts[op_mask], ends[op_mask])

    def innermost_op(self, t: np.ndarray) -> np.ndarray:
        """Row of the innermost cpu_op containing each time, or -1 (a thread may have launches but no ops)."""
        if not len(self.op_rows):
            return np.full(len(t), -1, np.int64)
        at = self.op_nesting.innermost(t)
        return np.where(at >= 0, self.op_rows[np.clip(at, 0, None)], -1).astype(np.int64)  # rows are kept int32

    def enclosing(self, t: int) -> np.ndarray:
        """Rows of every interval containing t, outermost first."""
        n = self.nesting
        # only what starts within the longest interval's length before t can reach t: a slice of the
        # starts (sorted), not the whole thread (the traffic rule asks this of a thousand ops)
        lo = int(np.searchsorted(n.starts, t - self.longest, side="left")) if self.longest >= 0 else 0
        hi = int(np.searchsorted(n.starts, t, side="right"))
        inside = lo + np.flatnonzero(n.ends[lo:hi] >= t)
        return self.rows[n.order[inside]].astype(np.int64)

    def top_level_ops(self) -> np.ndarray:
        return self.op_rows[self.op_nesting.top_level()].astype(np.int64)
