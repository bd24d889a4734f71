"""Aligned rows -> the matched table every output shows: names, counts, times, bytes and FLOPs per step.

One row per match; each GPU event of an aligned step is in exactly one row, so
the table's times add up to each side's GPU time per step. Bytes of a row are
known only when they are known for every kernel in it: a partial sum would make
a bandwidth look higher than it was.

A row is rated twice over: its GEMMs, convolutions, attention and templates by
FLOP/s (``flops`` over ``flop_ns``, the time of those kernels whose FLOPs are
known), whatever rides in the row with them (a cuBLAS memset, cuDNN's padding
kernels); the rest by GB/s (``mem_bytes`` over ``mem_ns``, known only when every
such kernel's bytes are).
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pandas as pd

from kerneltui.analysis.compare.align import Row, Side, align
from kerneltui.analysis.compare.anchors import event_roles
from kerneltui.analysis.compare.phases import compiled_rows
from kerneltui.analysis.provenance.split import SideProvenance
from kerneltui.analysis.traffic import FLOP_BASES
from kerneltui.trace.text_columns import text_in, text_values, texts

MATCH_COLUMNS = ["kind", "phase", "name", "a_name", "b_name", "a_keys", "b_keys", "a_count", "b_count", "a_ns",
                 "b_ns", "delta_ns", "a_bytes", "b_bytes", "a_flops", "b_flops", "a_dtype", "b_dtype", "a_max_gbs", "b_max_gbs", "confidence", "reason", "region", "a_rows", "b_rows",
                 "a_host_copy", "b_host_copy", "a_flop_ns", "b_flop_ns", "a_mem_bytes", "b_mem_bytes", "a_mem_ns",
                 "b_mem_ns", "a_judged_ns", "b_judged_ns"]
# per-row working columns the outputs do not show (the rows' rates are made from them)
WORKING_COLUMNS = ["a_rows", "b_rows", "a_host_copy", "b_host_copy", "a_flop_ns", "b_flop_ns", "a_mem_bytes",
                   "b_mem_bytes", "a_mem_ns", "b_mem_ns", "a_judged_ns", "b_judged_ns"]
NAMED = 2  # kernels named in a row's title before "+ N more"


class SideColumns:
    """The per-GPU-row arrays of one side that a row's figures are summed from."""

    def __init__(self, trace, traffic):
        g = trace.gpu
        self.keys = text_values(g["key"])
        self.short = text_values(g["short"])
        self.op = text_values(g["op"])
        self.dur = g["dur"].to_numpy(np.float64)
        t = traffic.table
        self.bytes = t["bytes"].to_numpy(np.float64)
        self.flops = t["flops"].to_numpy(np.float64)
        self.dtype = text_values(t["dtype"])
        # host<->device copies are judged against the host link, not HBM
        self.host_copy = text_in(t["basis"], ["copy-h2d", "copy-d2h"])
        self.by_flops = text_in(t["basis"], FLOP_BASES)  # judged by FLOP/s, whether or not known


def match_table(rows: list[Row], a: SideColumns, b: SideColumns, pairs: int) -> pd.DataFrame:
    records = [_record(row, a, b, max(pairs, 1)) for row in rows]
    table = pd.DataFrame(records, columns=MATCH_COLUMNS)
    # where the time went first: the largest change, then the most time
    change = -table["delta_ns"].abs()
    weight = -(table["a_ns"].fillna(0) + table["b_ns"].fillna(0))
    return table.assign(_c=change, _w=weight).sort_values(["_c", "_w"], kind="stable").drop(
        columns=["_c", "_w"]).reset_index(drop=True)


def _record(row: Row, a: SideColumns, b: SideColumns, pairs: int) -> dict:
    ra, rb = np.asarray(row.a_rows, np.int64), np.asarray(row.b_rows, np.int64)
    rec = {"kind": row.kind, "phase": row.phase, "confidence": row.confidence, "reason": row.reason,
           "region": row.phase}
    for label, side, rr in (("a", a, ra), ("b", b, rb)):
        rec[f"{label}_rows"] = tuple(rr.tolist())  # the row's GPU events (trace.gpu rows), for the screen
        rec[f"{label}_keys"] = tuple(dict.fromkeys(side.keys[rr].tolist()))
        rec[f"{label}_name"] = " + ".join(dict.fromkeys(side.short[rr].tolist()))
        rec[f"{label}_count"] = len(rr) / pairs
        rec[f"{label}_ns"] = float(side.dur[rr].sum()) / pairs
        rec[f"{label}_bytes"] = _known_sum(side.bytes[rr]) / pairs
        compute = rr[side.by_flops[rr] & (side.flops[rr] == side.flops[rr])]  # FLOP-judged, FLOPs known
        rec[f"{label}_flops"] = float(side.flops[compute].sum()) / pairs if len(compute) else np.nan
        rec[f"{label}_flop_ns"] = float(side.dur[compute].sum()) / pairs
        memory = rr[~side.by_flops[rr] & ~side.host_copy[rr]]
        rec[f"{label}_mem_bytes"] = _known_sum(side.bytes[memory]) / pairs
        rec[f"{label}_mem_ns"] = float(side.dur[memory].sum()) / pairs
        # the dtype the row is rated in: its longest FLOP-judged kernel's, else its first kernel's
        judged = rr[side.by_flops[rr]]
        rec[f"{label}_judged_ns"] = float(side.dur[judged].sum()) / pairs  # FLOP-judged, known or not
        rec[f"{label}_dtype"] = (side.dtype[judged[np.argmax(side.dur[judged])]] if len(judged)
                                 else side.dtype[rr[0]] if len(rr) else "")
        rec[f"{label}_max_gbs"] = _fastest(side, rr)
        rec[f"{label}_host_copy"] = bool(len(rr)) and bool(side.host_copy[rr].all())
    rec["delta_ns"] = rec["b_ns"] - rec["a_ns"]
    rec["name"] = _title(row, a, b, ra, rb, pairs)
    return rec


def _known_sum(values: np.ndarray) -> float:
    return float(values.sum()) if len(values) and not np.isnan(values).any() else np.nan


def _fastest(side: SideColumns, rows: np.ndarray) -> float:
    """The highest bandwidth of one kernel in the row (bytes per ns = GB/s): a sum can hide one above peak."""
    if not len(rows):
        return np.nan
    ns = side.dur[rows]
    with np.errstate(invalid="ignore", divide="ignore"):
        gbs = side.bytes[rows] / np.where(ns > 0, ns, np.nan)
    # GEMMs, convolutions, attention are judged by FLOP/s; host copies against the link
    gbs = gbs[np.isfinite(gbs) & (side.flops[rows] != side.flops[rows]) & ~side.host_copy[rows]]
    return float(gbs.max()) if len(gbs) else np.nan


def _title(row: Row, a: SideColumns, b: SideColumns, ra: np.ndarray, rb: np.ndarray, pairs: int) -> str:
    if row.kind in ("same", "replaced") and len(ra) and len(rb) and row.reason.startswith(("same gemm", "same conv",
                                                                                          "same attention", "same collective", "same copy")):
        op = a.op[ra[0]].rsplit("::", 1)[-1]
        return f"{op}: {_kernels(a, ra, pairs)}" + ("" if row.kind == "same" else f" → {_kernels(b, rb, pairs)}")
    if row.kind == "same":
        return _kernels(a, ra, pairs)
    if row.kind == "only A":
        return _ops(a, ra, pairs)
    if row.kind == "only B":
        return _kernels(b, rb, pairs)
    return f"{_ops(a, ra, pairs)} → {_kernels(b, rb, pairs)}"


def _kernels(side: SideColumns, rows: np.ndarray, pairs: int) -> str:
    """The longest-running kernels by short name, with launches per step where more than one."""
    return _named(side.short, side.dur, rows, pairs)


def _ops(side: SideColumns, rows: np.ndarray, pairs: int) -> str:
    """The ops that launched the kernels (an eager side reads best by its ops), else the kernels."""
    ops = np.array([o.rsplit("::", 1)[-1] if o else s for o, s in zip(side.op[rows], side.short[rows])], dtype=object)
    return _named(ops, side.dur, rows, pairs, by_position=True)


def _named(labels: np.ndarray, dur: np.ndarray, rows: np.ndarray, pairs: int, by_position: bool = False) -> str:
    if not len(rows):
        return ""
    counts = Counter(labels[: len(rows)] if by_position else labels[rows])
    time: Counter = Counter()
    for label, d in zip(labels if by_position else labels[rows], dur[rows]):
        time[label] += d
    # ops in the order they ran (the eager side reads as the program); kernels by time
    names = list(counts) if by_position else sorted(counts, key=lambda k: -time[k])
    shown = [f"{k} ×{_per_step(counts[k], pairs)}" if counts[k] > pairs else k for k in names[:NAMED]]
    more = len(names) - NAMED
    return " + ".join(shown) + (f" + {more} more" if more > 0 else "")


def _per_step(count: int, pairs: int) -> str:
    x = count / pairs
    return f"{x:.0f}" if abs(x - round(x)) < 0.05 else f"{x:.1f}"


def ran_compiled_code(trace, keys: np.ndarray) -> bool:
    """Compiled regions, CUDA-graph replays or Inductor's Triton kernels: something was compiled."""
    return bool(len(compiled_rows(trace))) or bool(trace.gpu["graph"].to_numpy().any()) or any(
        str(k).startswith("triton_") for k in pd.unique(keys))


def matched_kernels(a, b, traffic_a, traffic_b, phase_a: np.ndarray | None = None,
                    phase_b: np.ndarray | None = None, records_a=None, records_b=None) -> tuple[pd.DataFrame, int]:
    """The matched table of two traces, and over how many step pairs it was counted.

    ``records_a``/``records_b``: per row of trace.gpu, the kernel's provenance record (or None),
    from analysis/provenance; a fused segment is then split by what each compiled kernel computes."""
    pairs = min(a.iterations.count, b.iterations.count)
    sides = []
    with_records = any(r is not None for r in (records_a or [])) or any(r is not None for r in (records_b or []))
    for trace, phase, records in ((a, phase_a, records_a), (b, phase_b, records_b)):
        g = trace.gpu
        order = np.lexsort((g["ts"].to_numpy(), g["launch_ts"].to_numpy()))
        phase = texts(len(g), "step") if phase is None else np.asarray(phase, dtype=object)
        provenance = SideProvenance.of(trace, records) if with_records else None
        keys = text_values(g["key"])
        sides.append(Side(event_roles(trace), keys, g["iteration"].to_numpy(), phase, order, provenance,
                          ran_compiled_code(trace, keys)))
    rows = align(sides[0], sides[1], pairs)
    return match_table(rows, SideColumns(a, traffic_a), SideColumns(b, traffic_b), pairs), pairs
