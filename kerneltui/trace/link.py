"""Kernel -> launch -> op: the GPU work table, each row linked to what launched it.

Rules (docs/kineto-trace-format.md section 4): a GPU event's ``correlation``
names its runtime/driver launch; its ``External id`` names the innermost cpu_op
around that launch. CUDA-graph replays share one ``cudaGraphLaunch`` and are
attributed to it. Triton kernel names are not unique, so the key of a kernel is
its name plus the ``kernel_hash`` of the Inductor op that launched it.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from kerneltui.trace.intervals import Nesting
from kerneltui.trace.names import short_names
from kerneltui.trace.schema import GPU_WORK, Kind

GRAPH_LAUNCHES = ("cudaGraphLaunch", "cuGraphLaunch", "hipGraphLaunch")
GRAPH_OP = "cudaGraphLaunch"


def lookup(keys: np.ndarray, rows: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """Row whose key equals each wanted value (first by row order), or -1."""
    if len(keys) == 0:
        return np.full(len(wanted), -1, np.int64)
    order = np.lexsort((rows, keys))
    sorted_keys = keys[order]
    at = np.clip(np.searchsorted(sorted_keys, wanted, side="left"), 0, len(keys) - 1)
    found = (sorted_keys[at] == wanted) & (wanted >= 0)
    return np.where(found, rows[order[at]], -1)


def gpu_table(events: pd.DataFrame, names: list[str], lanes: pd.DataFrame, nesting) -> pd.DataFrame:
    """One row per kernel/memcpy/memset, time-ordered, with launch and op columns."""
    kind = events["kind"].to_numpy()
    rows = np.flatnonzero(np.isin(kind, GPU_WORK))
    rows = rows[np.argsort(events["ts"].to_numpy()[rows], kind="stable")]
    g = events.iloc[rows].reset_index(drop=True)
    g.insert(0, "row", rows)
    g["end"] = g["ts"] + g["dur"]
    lane_pid = lanes["pid"].to_numpy()
    lane_tid = lanes["tid"].to_numpy()
    stream_from_tid = pd.to_numeric(pd.Series(lane_tid[g["lane"]]), errors="coerce").fillna(-1).astype(np.int64)
    g["stream"] = np.where(g["stream"] >= 0, g["stream"], stream_from_tid)
    device_from_pid = pd.to_numeric(pd.Series(lane_pid[g["lane"]]), errors="coerce").fillna(-1).astype(np.int16)
    g["device"] = np.where(g["device"] >= 0, g["device"], device_from_pid)

    _link_launches(g, events, names)
    _link_ops(g, events, names, nesting)
    _keys(g, events, names)
    return g


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
    code = np.where(has, events["name"].to_numpy()[safe], -1)
    launch_names = np.array(names + [""], dtype=object)[code]
    g["launch"] = pd.Categorical(launch_names)
    g["graph"] = np.isin(launch_names, GRAPH_LAUNCHES)


def _link_ops(g: pd.DataFrame, events: pd.DataFrame, names: list[str], nesting) -> None:
    kind = events["kind"].to_numpy()
    ops = np.flatnonzero(kind == Kind.CPU_OP)
    op = lookup(events["external_id"].to_numpy()[ops], ops, g["external_id"].to_numpy())
    # No External id (older or foreign traces): the innermost op around the launch.
    missing = (op < 0) & (g["launch_row"].to_numpy() >= 0)
    if missing.any() and len(ops):
        launch_lane = g["launch_lane"].to_numpy()
        for lane in np.unique(launch_lane[missing]):
            stack = nesting(lane)
            if stack is None:
                continue
            which = missing & (launch_lane == lane)
            op[which] = stack.innermost_op(g["launch_ts"].to_numpy()[which])
    graph = g["graph"].to_numpy()
    g["op_row"] = op
    code = np.where(op >= 0, events["name"].to_numpy()[np.where(op >= 0, op, 0)], -1)
    op_names = np.array(names + [""], dtype=object)[code]
    op_names[graph] = GRAPH_OP
    g["op"] = pd.Categorical(op_names)


def _keys(g: pd.DataFrame, events: pd.DataFrame, names: list[str]) -> None:
    """key = full name (+ @hash when one Triton name has several hashes); short = display name."""
    op = g["op_row"].to_numpy()
    op_hash = np.where(op >= 0, events["kernel_hash"].to_numpy()[np.where(op >= 0, op, 0)], -1)
    own_hash = op_hash >= 0
    own_hash &= events["name"].to_numpy()[np.where(op >= 0, op, 0)] == g["name"].to_numpy()
    table = np.array(names + [""], dtype=object)
    full = table[g["name"].to_numpy()]
    hashes = np.where(own_hash, table[np.where(own_hash, op_hash, -1)], "")
    frame = pd.DataFrame({"full": full, "hash": hashes})
    hashes_per_name = frame.groupby("full")["hash"].nunique()
    ambiguous = frame["full"].map(hashes_per_name).to_numpy() > 1
    key = np.where(ambiguous, frame["full"] + "@" + frame["hash"], frame["full"])
    shorts = short_names(pd.unique(full))
    short = np.array([shorts[f] for f in full], dtype=object) if len(full) else np.array([], dtype=object)
    short = np.where(ambiguous, short + "@" + frame["hash"].str[:6].to_numpy(), short)
    g["full_name"] = pd.Categorical(full)
    g["kernel_hash"] = pd.Categorical(hashes)
    g["key"] = pd.Categorical(key)
    g["short"] = pd.Categorical(short)


class OpStack:
    """The nested op stack of one CPU thread: cpu_op + user_annotation + runtime + driver."""

    def __init__(self, rows: np.ndarray, starts: np.ndarray, ends: np.ndarray, kinds: np.ndarray):
        self.rows = rows
        self.kinds = kinds
        self.nesting = Nesting(starts, ends)
        op_mask = kinds == Kind.CPU_OP
        self.op_rows = rows[op_mask]
        self.op_nesting = Nesting(starts[op_mask], ends[op_mask])

    def innermost_op(self, t: np.ndarray) -> np.ndarray:
        at = self.op_nesting.innermost(t)
        return np.where(at >= 0, self.op_rows[np.clip(at, 0, None)], -1)

    def enclosing(self, t: int) -> np.ndarray:
        """Rows of every interval containing t, outermost first."""
        n = self.nesting
        inside = (n.starts <= t) & (n.ends >= t)
        return self.rows[n.order[inside]]

    def top_level_ops(self) -> np.ndarray:
        return self.op_rows[self.op_nesting.top_level()]
