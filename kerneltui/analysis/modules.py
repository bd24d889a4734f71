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

from kerneltui.analysis.attribution import Attribution, attribute, place_codes
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
    nodes = _nodes(trace, a, dur, mask)
    lost = []
    for what in dict.fromkeys(a.unplaced[mask & (a.unplaced != "")].tolist()):
        mine = mask & (a.unplaced == what)
        lost.append((what, int(dur[mine].sum()), int(mine.sum())))
    total = int(dur[mask].sum())
    placed = int(dur[mask & a.placed].sum())
    return ModuleTree(a.by, nodes, tuple(sorted(lost, key=lambda x: -x[1])), total,
                      placed / total if total else 0.0, trace.meta.with_stack)


def _nodes(trace: Trace, a: Attribution, dur: np.ndarray, mask: np.ndarray) -> pd.DataFrame:
    """The tree's rows, from integer codes (a million strings in a pandas frame cost most of a second)."""
    codes, names = place_codes(trace)
    placed = mask & (a.unit != "")
    if not placed.any():
        return pd.DataFrame(columns=TREE_COLUMNS)
    short = trace.gpu["short"].cat
    frame = pd.DataFrame({"unit": codes[placed], "short": short.codes.to_numpy()[placed].astype(np.int64),
                          "dur": dur[placed], "launches": 1})
    phase = a.phase[placed]
    frame["forward"] = np.where(phase == "forward", frame["dur"], 0)
    frame["backward"] = np.where(phase == "backward", frame["dur"], 0)
    # every prefix of a module path is a node: each unit's rows count for it and its ancestors
    expand = pd.DataFrame([(u, p) for u in frame["unit"].unique().tolist() for p in _prefixes(names[u], a.by)],
                          columns=["unit", "path"])
    per_unit = frame.groupby("unit", sort=False)[["forward", "backward", "dur", "launches"]].sum()
    sums = expand.join(per_unit, on="unit").groupby("path", sort=False)[["forward", "backward", "dur",
                                                                          "launches"]].sum()
    kernels = frame.groupby(["unit", "short"], sort=False)["dur"].sum().reset_index()
    kernels = kernels.merge(expand, on="unit").groupby(["path", "short"], sort=False)["dur"].sum().reset_index()
    kernels = kernels.sort_values(["path", "dur"], ascending=[True, False], kind="stable")
    categories = short.categories
    tops = {path: tuple(str(categories[c]) for c in group.head(TOP_KERNELS).tolist())
            for path, group in kernels.groupby("path", sort=False)["short"]}
    total_all = int(dur[mask].sum()) or 1
    paths = sums.index.tolist()
    parents = [p.rsplit(".", 1)[0] if len(_prefixes(p, a.by)) > 1 else None for p in paths]
    table = pd.DataFrame({
        "path": pd.Series(paths, dtype=object),
        "parent": pd.Series(parents, dtype=object),
        "label": pd.Series([a.labels.get(p, p) for p in paths], dtype=object),
        "depth": [len(_prefixes(p, a.by)) - 1 for p in paths],
        "forward_ns": sums["forward"].to_numpy(np.int64),
        "backward_ns": sums["backward"].to_numpy(np.int64),
        "total_ns": sums["dur"].to_numpy(np.int64),
        "launches": sums["launches"].to_numpy(np.int64),
        "share": sums["dur"].to_numpy(np.float64) / total_all,
        "top": pd.Series([tops.get(p, ()) for p in paths], dtype=object),
    }, columns=TREE_COLUMNS)
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
