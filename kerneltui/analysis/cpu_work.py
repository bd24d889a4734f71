"""CPU work: what a trace without GPU activity ran, as rows the kernel table can show.

A CPU capture (`kerneltui capture` on a machine without CUDA) holds no kernel, memcpy or
memset; the work is in its cpu_ops:

* **compiled C++ kernels**: cpu_ops a provenance record names (``graph_0_cpp_fused_add_relu_0``),
  or, without records, named ``cpp_fused_*`` / ``graph_<N>_cpp_fused_*``; ``op`` holds what the
  record says they compute and where (``aten::add + aten::relu at add_relu.py:14 in add_relu``);
* **ATen ops**: every ``aten::`` cpu_op, eager work or an extern kernel a compiled graph calls;
  ``op`` is the outermost ATen op around it (``aten::relu`` for ``aten::clamp_min``), or itself.
  Not only the innermost ones (no op inside): ``aten::mkldnn_convolution`` calls ``aten::empty``
  and ``aten::resize_``, yet the convolution's compute is its own; an op that only dispatches
  (``aten::relu``) keeps a few µs of self time and sorts to the bottom.

Each row is timed by its events' *self* time: their duration less that of the cpu_ops directly
inside them, on every thread, so no time counts twice. That is CPU time: GPU time stays 0, and
nothing here is added to it. ``cpu_work`` has the kernel table's columns (trace/summary.KERNEL_COLUMNS, ``kind``
CPU_OP, ``share`` of all the CPU work's time) plus ``origin`` ("compiled" or "aten").
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from kerneltui.analysis.provenance.join import cpu_kernel_rows, of_trace
from kerneltui.analysis.provenance.records import KernelProvenance, eager_op_name
from kerneltui.trace.filters import SEARCHED, name_pattern
from kerneltui.trace.model import Trace
from kerneltui.trace.one_of import one_of
from kerneltui.trace.schema import Kind
from kerneltui.trace.summary import KERNEL_COLUMNS

CPP_KERNEL = re.compile(r"^(?:graph_\d+_)?cpp_fused_\w+$")
ATEN = "aten::"
CPU_WORK_COLUMNS = [*KERNEL_COLUMNS, "origin"]


def is_cpu_capture(trace: Trace) -> bool:
    """CPU ops, and neither GPU work nor a CUDA/HIP runtime or driver call: a profile of CPU activity only.
    (A GPU profile that lost its kernels still holds their launch calls: it is no CPU capture.)"""
    kinds = trace.events["kind"].to_numpy()
    return (not len(trace.gpu) and bool((kinds == Kind.CPU_OP).any())
            and not one_of(kinds, (Kind.RUNTIME, Kind.DRIVER)).any())


def cpu_work(trace: Trace) -> pd.DataFrame:
    """One row per compiled C++ kernel and per ATen op (by name), by total self time."""
    return work_table(work_events(trace))


def work_table(events: pd.DataFrame) -> pd.DataFrame:
    """``work_events`` (or some of them: one step's) as table rows; ``share`` is of these events' self time."""
    if not len(events):
        return pd.DataFrame(columns=CPU_WORK_COLUMNS)
    grouped = events.groupby("key", sort=False)
    stats = grouped["self_ns"].agg(["count", "sum", "mean", "min", "max"])
    stats.columns = ["count", "total_ns", "mean_ns", "min_ns", "max_ns"]
    table = grouped[["origin", "op"]].agg(lambda s: s.value_counts().index[0]).join(stats)
    total = float(events["self_ns"].sum())
    table["share"] = table["total_ns"] / total if total else 0.0
    table = table.reset_index()
    table["short"] = table["key"]
    table["full_name"] = table["key"]
    table["kind"] = int(Kind.CPU_OP)
    table["no_launch"] = 0
    table = table.sort_values(["total_ns", "key"], ascending=[False, True], kind="stable")
    return table[CPU_WORK_COLUMNS].reset_index(drop=True)


EVENT_COLUMNS = ["row", "key", "origin", "op", "self_ns", "ts", "end", "iteration"]


def matching_work(table: pd.DataFrame, pattern: str, columns=("key",)) -> np.ndarray:
    """Per row of a ``cpu_work`` table: does one of ``columns`` match (substring, or /regex as
    ``summary --filter``)? Raises UserError for a bad regex."""
    if not pattern:
        return np.ones(len(table), bool)
    regex = name_pattern(pattern)
    mask = np.zeros(len(table), bool)
    for column in columns:
        mask |= np.fromiter((bool(regex.search(str(v)[:SEARCHED])) for v in table[column]), bool, len(table))
    return mask


def work_events(trace: Trace) -> pd.DataFrame:
    """Every CPU-work event: row, key (its name), origin, op, self_ns, ts, end, iteration."""
    ev = trace.events
    ops = np.flatnonzero(ev["kind"].to_numpy() == Kind.CPU_OP)
    if not len(ops):
        return pd.DataFrame(columns=EVENT_COLUMNS)
    names = trace.names_of(ev["name"].to_numpy()[ops]).tolist()
    ts = ev["ts"].to_numpy()[ops].astype(np.int64)
    ends = ts + ev["dur"].to_numpy()[ops].astype(np.int64)
    lanes = ev["lane"].to_numpy()[ops]
    child_ns = np.zeros(len(ops), np.int64)
    children = np.zeros(len(ops), np.int64)
    outer_aten = np.full(len(ops), -1, np.int64)  # index of the outermost aten:: op around (or itself)
    for lane in np.unique(lanes).tolist():
        mine = np.flatnonzero(lanes == lane)
        stack: list[int] = []
        for i in mine[np.lexsort((-ends[mine], ts[mine]))].tolist():
            while stack and ts[i] >= ends[stack[-1]]:
                stack.pop()
            if stack:
                parent = stack[-1]
                children[parent] += 1
                child_ns[parent] += ends[i] - ts[i]
                outer_aten[i] = outer_aten[parent]
            if outer_aten[i] < 0 and names[i].startswith(ATEN):
                outer_aten[i] = i
            stack.append(i)
    records = cpu_kernel_rows(trace, of_trace(trace))  # per event: a name two graphs share is told by its region
    shared = _names_in_several_graphs(records.values())
    out = []
    for i, name in enumerate(names):
        record = records.get(int(ops[i]))
        if record is not None or CPP_KERNEL.match(name):
            op = _provenance_text(record) if record is not None else ""
            out.append((int(ops[i]), _key(name, record, shared), "compiled", op, int(ends[i] - ts[i] - child_ns[i]),
                        int(ts[i]), int(ends[i])))
        elif name.startswith(ATEN):
            out.append((int(ops[i]), name, "aten", names[outer_aten[i]], int(ends[i] - ts[i] - child_ns[i]),
                        int(ts[i]), int(ends[i])))
    frame = pd.DataFrame(out, columns=EVENT_COLUMNS[:-1])
    frame = frame[~_while_compiling(trace, frame["ts"].to_numpy(np.int64))].reset_index(drop=True)
    frame["self_ns"] = frame["self_ns"].clip(lower=0)
    frame["iteration"] = trace.iterations.assign(frame["ts"].to_numpy(np.int64))
    return frame


def _while_compiling(trace: Trace, ts: np.ndarray) -> np.ndarray:
    """Per event start: inside a Dynamo compile (``_compile.compile_inner``)? Ops Dynamo and Inductor run
    while compiling (fake tensors, benchmarking) are compiling, not the run's work."""
    # (imported here: analysis.compare builds on this module)
    from kerneltui.analysis.compare.compile_facts import compile_spans

    starts, ends = compile_spans(trace)
    if not len(starts) or not len(ts):
        return np.zeros(len(ts), bool)
    order = np.argsort(starts, kind="stable")
    starts, reach = starts[order], np.maximum.accumulate(ends[order])
    at = np.searchsorted(starts, ts, side="right") - 1
    return (at >= 0) & (ts < reach[np.maximum(at, 0)])


def records_by_name(trace: Trace) -> dict[str, KernelProvenance]:
    """The provenance records of the compiled kernels the trace ran, by their row key in the table
    (the name in the trace; with its graph where two graphs compiled kernels of one name)."""
    records = cpu_kernel_rows(trace, of_trace(trace))
    shared = _names_in_several_graphs(records.values())
    return {_key(k.trace_name, k, shared): k for k in records.values()}


def _names_in_several_graphs(records) -> set[str]:
    graphs: dict[str, set[str]] = {}
    for k in records:
        graphs.setdefault(k.trace_name, set()).add(k.graph)
    return {name for name, seen in graphs.items() if len(seen) > 1}


def _key(name: str, record: KernelProvenance | None, shared: set[str]) -> str:
    """A row's name: a kernel name two graphs share keeps their calls apart (``cpp_fused_add_0 [graph 1]``)."""
    return f"{name} [{record.graph}]" if record is not None and name in shared else name


def _provenance_text(record: KernelProvenance) -> str:
    """'aten::add + aten::relu at add_relu.py:14 in add_relu' (the ops by name: records keep no order)."""
    ops = " + ".join(sorted({eager_op_name(o) for o in record.aten_ops})) or "ops not recorded"
    lines = ", ".join(s.label() for s in record.source_lines[:3])
    return f"{ops} at {lines}" if lines else ops


def fused_ops(record_text: str) -> list[str]:
    """The eager op names a compiled row's ``op`` text lists."""
    return record_text.split(" at ", 1)[0].split(" + ") if record_text else []


def per_iteration_ns(trace: Trace) -> float:
    """CPU work's self time per step/call (mean over the steps), 0 without steps."""
    events = work_events(trace)
    n = trace.iterations.count
    if not n or not len(events):
        return 0.0
    return float(events.loc[events["iteration"] >= 0, "self_ns"].sum()) / n
