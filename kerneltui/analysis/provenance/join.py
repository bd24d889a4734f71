"""A trace's kernels joined to their provenance records.

GPU kernels carry the generated kernel's name (``triton_poi_fused_add_relu_0``), or, where
Inductor named them generically, the ``kernel_hash`` of the op that launched them; on a CPU
capture each C++ kernel is a cpu_op named ``graph_<N>_cpp_fused_...``. A kernel the records do
not name (an extern GEMM, cuBLAS) keeps its launching op: provenance never overrides the trace.
"""

from __future__ import annotations

import weakref

import numpy as np

from kerneltui.analysis.provenance.records import KernelProvenance, Provenance, parse
from kerneltui.trace.model import Trace
from kerneltui.trace.schema import Kind


def of_trace(trace: Trace, attached: Provenance | None = None) -> Provenance | None:
    """The trace's own provenance block, or the one attached (`--provenance FILE`), if any."""
    return attached if attached is not None else parse(trace.meta.provenance)


def gpu_records(trace: Trace, provenance: Provenance | None) -> list[KernelProvenance | None]:
    """Per row of trace.gpu: the record of the generated kernel it is, else None."""
    g = trace.gpu
    if provenance is None or not len(g):
        return [None] * len(g)
    by_name, by_hash = provenance.by_trace_name(), provenance.by_hash()
    names = trace.names_of(g["name"].to_numpy())
    hashes = [h if isinstance(h, str) else "" for h in g["kernel_hash"].tolist()]
    out: list[KernelProvenance | None] = []
    for name, digest in zip(names.tolist(), hashes):
        out.append(by_name.get(name) or (by_hash.get(digest) if digest else None))
    return out


_RECORDS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def records_of(trace: Trace) -> list[KernelProvenance | None]:
    """gpu_records of the trace's own block, computed once per trace (the browser asks per keystroke)."""
    if trace not in _RECORDS:
        _RECORDS[trace] = gpu_records(trace, of_trace(trace))
    return _RECORDS[trace]


def cpu_kernel_rows(trace: Trace, provenance: Provenance | None) -> dict[int, KernelProvenance]:
    """Rows of trace.events that are compiled C++ kernels (cpu_op events named as a record says)."""
    if provenance is None:
        return {}
    by_name = provenance.by_trace_name()
    ev = trace.events
    ops = np.flatnonzero(ev["kind"].to_numpy() == Kind.CPU_OP)
    names = trace.names_of(ev["name"].to_numpy()[ops])
    return {int(r): by_name[n] for r, n in zip(ops.tolist(), names.tolist()) if n in by_name and
            not by_name[n].extern}


def matching_side(a: Trace, b: Trace, provenance: Provenance) -> str | None:
    """Which trace (``"a"`` or ``"b"``) a provenance file describes: the one more of whose kernels it
    names; None when it names none of either's (another workload, or another device's compile)."""
    hits = [sum(r is not None for r in gpu_records(t, provenance)) + len(cpu_kernel_rows(t, provenance))
            for t in (a, b)]
    if not any(hits):
        return None
    return "a" if hits[0] > hits[1] else "b"
