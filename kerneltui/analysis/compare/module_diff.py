"""The module view of a diff: forward and backward time per module (or forward op), A → B, per step.

Rows are the places both attributions (analysis/attribution.py) give, matched by path. Where
one side is placed by Inductor's provenance (attribute paths: ``MLP.norm``) and the other by
``nn.Module`` frames (instance names: ``MLP_0.LayerNorm_0``), a provenance path is matched to
the frame path of the same module class and rank: the k-th ``LayerNorm`` the model ran first
is ``LayerNorm_k`` in the frames' numbering (the profiler names instances in call order), and
the k-th distinct ``… (LayerNorm)`` path by first launch in the compiled run. Such rows say
"by class and order".

A compiled side without provenance is one place, "whole model (compiled region)": its rows
against a layer of the other side stay apart, never split into per-layer figures.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from kerneltui.analysis.attribution import Attribution, attribute
from kerneltui.trace.model import Trace

MODULE_COLUMNS = ["path", "label", "a_forward_ns", "b_forward_ns", "a_backward_ns", "b_backward_ns", "a_total_ns",
                  "b_total_ns", "a_launches", "b_launches", "matched_by"]
INSTANCE = re.compile(r"^(?P<cls>.+?)_(?P<k>\d+)$")


@dataclass(frozen=True)
class ModuleDiff:
    rows: pd.DataFrame  # MODULE_COLUMNS, per step/call, by the larger side's total
    a_by: str  # how each side is placed: "module", "forward op"
    b_by: str
    a_how: str  # "frames", "provenance", "compiled region", "forward op", "" (what placed most of its time)
    b_how: str

    def to_dict(self) -> dict:
        rows = self.rows.astype(object).where(self.rows.notna(), None)
        return {"a_by": self.a_by, "b_by": self.b_by, "a_placed_by": self.a_how, "b_placed_by": self.b_how,
                "rows": rows.to_dict("records")}


def module_diff(a: Trace, b: Trace) -> ModuleDiff:
    fa, fb = attribute(a), attribute(b)
    sa, sb = _per_place(a, fa), _per_place(b, fb)
    mapping = _provenance_to_frames(a, fa, b, fb)
    sb = sb.rename(index=lambda p: mapping.get(p, p))
    sb = sb.groupby(level=0, sort=False).sum()
    paths = list(dict.fromkeys([*sa.index, *sb.index]))
    rows = []
    for path in paths:
        ra = sa.loc[path] if path in sa.index else None
        rb = sb.loc[path] if path in sb.index else None
        label = fa.labels.get(path) or fb.labels.get(path) or path
        rows.append({"path": path, "label": label,
                     **{f"{side}_{k}": (float(r[k]) if r is not None else 0.0)
                        for side, r in (("a", ra), ("b", rb))
                        for k in ("forward_ns", "backward_ns", "total_ns", "launches")},
                     "matched_by": "class and order" if path in mapping.values() else "path"})
    table = pd.DataFrame(rows, columns=[c for c in MODULE_COLUMNS])
    if len(table):
        table = table.assign(_w=-np.maximum(table["a_total_ns"], table["b_total_ns"])).sort_values(
            "_w", kind="stable").drop(columns="_w").reset_index(drop=True)
    return ModuleDiff(table, fa.by, fb.by, _main_how(a, fa), _main_how(b, fb))


def _per_place(trace: Trace, f: Attribution) -> pd.DataFrame:
    """Forward, backward and total ns and launches per place, per step (mean over the trace's steps)."""
    g = trace.gpu
    dur = g["dur"].to_numpy().astype(np.float64)
    steps = max(trace.iterations.count, 1)
    placed = f.unit != ""
    frame = pd.DataFrame({"unit": f.unit[placed], "dur": dur[placed], "phase": f.phase[placed]})
    frame["forward_ns"] = np.where(frame["phase"] == "forward", frame["dur"], 0.0)
    frame["backward_ns"] = np.where(frame["phase"] == "backward", frame["dur"], 0.0)
    out = frame.groupby("unit", sort=False).agg(forward_ns=("forward_ns", "sum"), backward_ns=("backward_ns", "sum"),
                                                total_ns=("dur", "sum"), launches=("dur", "size"))
    return out.astype(np.float64) / steps


def _main_how(trace: Trace, f: Attribution) -> str:
    dur = trace.gpu["dur"].to_numpy().astype(np.float64)
    hows = pd.Series(dur).groupby(np.where(f.how == "sequence", "frames", f.how)).sum()  # backward by frames
    hows = hows[[h for h in hows.index if h not in ("", "optimizer", "loss op")]]
    return str(hows.idxmax()) if len(hows) else ""


def _provenance_to_frames(a: Trace, fa: Attribution, b: Trace, fb: Attribution) -> dict[str, str]:
    """B's provenance paths -> A's frame paths of the same class and rank (or A's -> B's: whichever side
    is placed by provenance is renamed after the other's frames)."""
    prov_b = _first_seen(b, fb, fb.how == "provenance")
    frames_a = _first_seen(a, fa, fa.how == "frames")
    if not prov_b or not frames_a:
        return {}
    by_class_frames: dict[str, list[str]] = {}
    for path in frames_a:
        m = INSTANCE.match(path.rsplit(".", 1)[-1])
        if m:
            by_class_frames.setdefault(m["cls"], []).append(path)
    by_class_prov: dict[str, list[str]] = {}
    for path, cls in prov_b.items():
        by_class_prov.setdefault(cls, []).append(path)
    out = {}
    for cls, provs in by_class_prov.items():
        frames = by_class_frames.get(cls, [])
        if len(frames) == len(provs):  # the same number of instances: rank for rank
            out.update(zip(provs, frames))
    return out


def _first_seen(trace: Trace, f: Attribution, mask: np.ndarray) -> dict[str, str]:
    """Places in the order their first forward launch ran, with the module class each names."""
    g = trace.gpu
    rows = np.flatnonzero(mask & (f.phase == "forward"))
    rows = rows[np.argsort(g["launch_ts"].to_numpy()[rows], kind="stable")]
    out: dict[str, str] = {}
    for unit in f.unit[rows].tolist():
        if unit not in out:
            out[unit] = _module_class(trace, f, unit)
    return out


def _module_class(trace: Trace, f: Attribution, unit: str) -> str:
    """'MLP_0.LayerNorm_0' -> 'LayerNorm' (frames); a provenance path's class is in its record."""
    m = INSTANCE.match(unit.rsplit(".", 1)[-1])
    if m and f.how[np.flatnonzero(f.unit == unit)[0]] == "frames":
        return m["cls"]
    return (f.classes or {}).get(unit, "")
