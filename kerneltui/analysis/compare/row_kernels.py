"""The kernels inside one matched row, per side: what the diff screen's row view lists.

Per GPU event of a side (``SideEvents``): its kernel key and short name, the op that
launched it, where it came from (the user's source line and ``nn.Module`` with
``with_stack``, else the compiled kernel's provenance record: the ATen ops and lines it
computes), its duration and bytes. ``row_kernels`` groups a row's events by kernel,
per step, longest first.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from kerneltui.analysis.provenance.records import KernelProvenance
from kerneltui.analysis.traffic import Traffic
from kerneltui.trace.model import Trace
from kerneltui.trace.text_columns import text_values, texts


@dataclass(frozen=True)
class SideEvents:
    """Per row of a side's ``trace.gpu``."""

    keys: np.ndarray
    short: np.ndarray
    op: np.ndarray
    where: np.ndarray  # "model.py(42): forward · Block_3", "provenance: aten::add at model.py:12", or ""
    dur: np.ndarray
    bytes: np.ndarray
    flops: np.ndarray

    @classmethod
    def of(cls, trace: Trace, traffic: Traffic, records: list[KernelProvenance | None]) -> SideEvents:
        g = trace.gpu
        where = texts(len(g))
        if trace.meta.with_stack and len(g):
            src = trace.gpu_sources
            for i, (source, module) in enumerate(zip(src["source"].tolist(), src["module"].tolist())):
                where[i] = " · ".join(p for p in (source, module) if p)
        for i, record in enumerate(records):
            if record is not None and not where[i]:
                where[i] = f"provenance: {record.summary()}"
        return cls(text_values(g["key"]), text_values(g["short"]), text_values(g["op"]),
                   where, g["dur"].to_numpy(np.float64), traffic.table["bytes"].to_numpy(np.float64),
                   traffic.table["flops"].to_numpy(np.float64))


@dataclass(frozen=True)
class KernelLine:
    name: str  # short name
    key: str  # full name (and hash)
    op: str  # the launching op, "" for a graph replay
    where: str
    count: float  # launches per step/call
    ns: float  # GPU ns per step/call
    bytes: float  # per step/call, NaN when unknown


def row_kernels(side: SideEvents, rows, pairs: int) -> list[KernelLine]:
    """The row's events grouped by kernel (and op, and origin), per step, longest first."""
    rows = np.asarray(rows, np.int64)
    if not len(rows):
        return []
    frame = pd.DataFrame({"key": side.keys[rows], "short": side.short[rows], "op": side.op[rows],
                          "where": side.where[rows], "dur": side.dur[rows], "bytes": side.bytes[rows]})
    pairs = max(pairs, 1)
    out = []
    for (key, short, op, where), group in frame.groupby(["key", "short", "op", "where"], sort=False):
        known = group["bytes"].notna().all()
        out.append(KernelLine(short, key, op, where, len(group) / pairs, float(group["dur"].sum()) / pairs,
                              float(group["bytes"].sum()) / pairs if known else np.nan))
    return sorted(out, key=lambda k: -k.ns)
