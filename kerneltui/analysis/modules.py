"""The module tree: forward, backward and total GPU time per nn.Module (or forward op), from the attribution.

``module_tree(trace)`` is one row per node, parents before children, siblings by total time:

* ``path`` - the trace's own module names joined by ".": ``TinyGPT_0.Block_3.Linear_12``;
  a forward op (``aten::conv2d #17``) where the trace has no module frames; ``optimizer``,
  ``loss`` and ``whole model (compiled region)`` are roots.
* ``parent`` - the parent's path, None at a root.
* ``forward_ns``, ``backward_ns``, ``total_ns``, ``launches`` - over the whole trace, of every
  GPU event (kernels, memcpy, memset) placed on the node or its children. ``total`` also
  holds the optimizer's time (neither forward nor backward).
* ``share`` of the trace's GPU time, ``depth``, ``label`` (``optimizer (AdamW)``), ``top``
  (its three longest kernels by short name).

``unplaced(trace)``: [(what, ns, launches)] for what no rule placed (attribution.UNPLACED), so
the roots' totals plus these equal the trace's GPU time.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from kerneltui.analysis.attribution import Attribution, attribute
from kerneltui.trace.model import Trace

TREE_COLUMNS = ["path", "parent", "label", "depth", "forward_ns", "backward_ns", "total_ns", "launches", "share",
                "top"]
TOP_KERNELS = 3


@dataclass(frozen=True)
class ModuleTree:
    by: str  # "module" or "forward op"
    nodes: pd.DataFrame  # TREE_COLUMNS, parents before children
    unplaced: tuple[tuple[str, int, int], ...]  # (what, ns, launches)
    gpu_ns: int  # the trace's GPU time
    placed_share: float  # of GPU time, on a module, forward op, the optimizer or the loss
    with_stack: bool

    def hint(self) -> str:
        """What a trace without module frames lacks, in one line ("" when it has them)."""
        if self.by == "module":
            return ""
        return ("by forward op: no nn.Module frames in this trace (capture with with_stack=True, or "
                "`kerneltui capture --with-stack`, for the module tree)")


def module_tree(trace: Trace, rows: np.ndarray | None = None) -> ModuleTree:
    """The tree over every GPU event, or over ``rows`` (a boolean mask of trace.gpu) when given."""
    a = attribute(trace)
    g = trace.gpu
    dur = g["dur"].to_numpy().astype(np.int64)
    mask = np.ones(len(g), bool) if rows is None else np.asarray(rows, bool)
    short = g["short"].astype(str).to_numpy()
    nodes = _nodes(a, dur, short, mask)
    lost = []
    for what in dict.fromkeys(a.unplaced[mask & (a.unplaced != "")].tolist()):
        mine = mask & (a.unplaced == what)
        lost.append((what, int(dur[mine].sum()), int(mine.sum())))
    total = int(dur[mask].sum())
    placed = int(dur[mask & a.placed].sum())
    return ModuleTree(a.by, nodes, tuple(sorted(lost, key=lambda x: -x[1])), total,
                      placed / total if total else 0.0, trace.meta.with_stack)


def _nodes(a: Attribution, dur: np.ndarray, short: np.ndarray, mask: np.ndarray) -> pd.DataFrame:
    units = a.unit[mask]
    if not len(units) or not (units != "").any():
        return pd.DataFrame(columns=TREE_COLUMNS)
    frame = pd.DataFrame({"unit": units, "phase": a.phase[mask], "dur": dur[mask], "short": short[mask]})
    frame = frame[frame["unit"] != ""]
    frame["forward"] = np.where(frame["phase"] == "forward", frame["dur"], 0)
    frame["backward"] = np.where(frame["phase"] == "backward", frame["dur"], 0)
    per_unit = frame.groupby("unit", sort=False).agg(forward_ns=("forward", "sum"), backward_ns=("backward", "sum"),
                                                     total_ns=("dur", "sum"), launches=("dur", "size"))
    kernels = frame.groupby(["unit", "short"], sort=False)["dur"].sum()
    total_all = int(dur[mask].sum()) or 1
    # every prefix of a module path is a node: add each unit's figures to its ancestors
    sums: dict[str, np.ndarray] = {}
    tops: dict[str, dict[str, int]] = {}
    for unit, row in per_unit.iterrows():
        for path in _prefixes(unit, a.by):
            sums[path] = sums.get(path, np.zeros(4, np.int64)) + row.to_numpy(np.int64)
    for (unit, name), ns in kernels.items():
        for path in _prefixes(unit, a.by):
            bucket = tops.setdefault(path, {})
            bucket[name] = bucket.get(name, 0) + int(ns)
    records = []
    for path, (fwd, bwd, tot, launches) in sums.items():
        parent = path.rsplit(".", 1)[0] if a.by == "module" and "." in path and path not in a.labels else None
        top = sorted(tops[path].items(), key=lambda kv: -kv[1])[:TOP_KERNELS]
        records.append({"path": path, "parent": parent, "label": a.labels.get(path, path),
                        "depth": path.count(".") if parent is not None else 0, "forward_ns": int(fwd),
                        "backward_ns": int(bwd), "total_ns": int(tot), "launches": int(launches),
                        "share": tot / total_all, "top": tuple(name for name, _ in top)})
    table = pd.DataFrame(records, columns=TREE_COLUMNS)
    table["parent"] = table["parent"].astype(object).where(table["parent"].notna(), None)
    return _tree_order(table)


def _prefixes(unit: str, by: str) -> list[str]:
    """A module path and each of its ancestors; any other place stands alone (forward ops hold '.')."""
    if by != "module" or unit in SPECIAL_ROOTS or " " in unit:
        return [unit]
    parts = unit.split(".")
    return [".".join(parts[: i + 1]) for i in range(len(parts))]


SPECIAL_ROOTS = frozenset({"optimizer", "loss", "whole model (compiled region)"})


def _tree_order(table: pd.DataFrame) -> pd.DataFrame:
    """Depth-first, parents before children, siblings by total time (ties by path)."""
    children: dict[str | None, list[int]] = {}
    paths = set(table["path"])
    for i, parent in enumerate(table["parent"]):
        children.setdefault(parent if parent in paths else None, []).append(i)
    order: list[int] = []

    def visit(parent):
        kids = sorted(children.get(parent, []), key=lambda i: (-table["total_ns"].iat[i], table["path"].iat[i]))
        for i in kids:
            order.append(i)
            visit(table["path"].iat[i])

    visit(None)
    return table.iloc[order].reset_index(drop=True)


def tree_dict(tree: ModuleTree) -> dict:
    """The JSON of `summary --by module`: docs/modules.md."""
    nodes = tree.nodes
    return {
        "by": tree.by,
        "attributed_share": tree.placed_share,
        "gpu_ns": tree.gpu_ns,
        "modules": [{"path": r.path, "parent": r.parent if isinstance(r.parent, str) else None, "label": r.label, "forward_ns": int(r.forward_ns),
                     "backward_ns": int(r.backward_ns), "total_ns": int(r.total_ns), "launches": int(r.launches),
                     "top_kernels": list(r.top)} for r in nodes.itertuples()],
        "unattributed": [{"what": what, "ns": ns, "launches": n} for what, ns, n in tree.unplaced],
        **({"hint": tree.hint()} if tree.hint() else {}),
    }
