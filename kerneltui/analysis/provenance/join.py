"""A trace's kernels joined to their provenance records.

GPU kernels carry the generated kernel's name (``triton_poi_fused_add_relu_0``), or, where
Inductor named them generically, the ``kernel_hash`` of the op that launched them; on a CPU
capture each C++ kernel is a cpu_op named ``graph_<N>_cpp_fused_...``. A kernel the records do
not name (an extern GEMM, cuBLAS) keeps its launching op: provenance never overrides the trace.

Names repeat across graphs (each graph numbers its kernels from 0: two graphs each have a
``triton_poi_fused_add_0``), so a kernel is joined by its hash first, then by its name, and
either only where it means one kernel: of one graph, or of the graph whose
``## Call CompiledFxGraph <key> ##`` region launched it. A kernel neither makes unique keeps no record.
"""

from __future__ import annotations

import weakref

import numpy as np

from kerneltui.analysis.provenance.records import KernelProvenance, Provenance, parse
from kerneltui.trace.model import Trace
from kerneltui.trace.schema import Kind

_OWN: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def of_trace(trace: Trace, attached: Provenance | None = None) -> Provenance | None:
    """The trace's own provenance block, or the one attached (`--provenance FILE`), if any.

    The own block is parsed once per trace: the phases, the join, the compile facts and the CPU
    work each ask for it."""
    if attached is not None:
        return attached
    if trace not in _OWN:
        _OWN[trace] = parse(trace.meta.provenance)
    return _OWN[trace]


def gpu_records(trace: Trace, provenance: Provenance | None) -> list[KernelProvenance | None]:
    """Per row of trace.gpu: the record of the generated kernel it is, else None."""
    g = trace.gpu
    if provenance is None or not len(g):
        return [None] * len(g)
    by_name, by_hash = provenance.all_by_trace_name(), provenance.all_by_hash()
    names = trace.names_of(g["name"].to_numpy())
    hashes = [h if isinstance(h, str) else "" for h in g["kernel_hash"].tolist()]
    keys: list[str | None] | None = None  # the graph region of each launch, found only if a name repeats
    out: list[KernelProvenance | None] = []
    for row, (name, digest) in enumerate(zip(names.tolist(), hashes)):
        candidates = by_hash.get(digest) or by_name.get(name) or []
        if _kernels(candidates) > 1 and keys is None:
            keys = _launch_regions(trace)
        out.append(_pick(candidates, keys[row] if keys is not None else None))
    return out


_REGION = "## Call CompiledFxGraph "


def _kernels(records: list[KernelProvenance]) -> int:
    """How many distinct kernels the records are (a kernel called twice in its graph is two records)."""
    return len({(k.graph, k.cache_key, k.name) for k in records})


def _pick(candidates: list[KernelProvenance], key: str | None) -> KernelProvenance | None:
    """The record of the one kernel the candidates are, or of the one in the graph region `key`; else None."""
    if _kernels(candidates) == 1:
        return candidates[0]
    mine = [k for k in candidates if key is not None and k.cache_key == key]
    return mine[0] if _kernels(mine) == 1 else None


def _region_key(names) -> str | None:
    """The FX cache key of the innermost `## Call CompiledFxGraph <key> ##` annotation among `names`."""
    for name in reversed(list(names)):
        if isinstance(name, str) and name.startswith(_REGION):
            return region_key(name)
    return None


def region_key(name: str) -> str | None:
    """`## Call CompiledFxGraph <key> ##` -> key; None for any other name."""
    parts = name.split() if name.startswith(_REGION) else ()
    return parts[3] if len(parts) > 3 else None


def _launch_regions(trace: Trace) -> list[str | None]:
    from kerneltui.analysis.explore.context import launch_context

    context = launch_context(trace)
    by_stack = [_region_key(stack) for stack in context.stacks]
    return [by_stack[c] for c in context.stack_code.tolist()]


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
    by_name = {n: [k for k in ks if not k.extern] for n, ks in provenance.all_by_trace_name().items()}
    ev = trace.events
    ops = np.flatnonzero(ev["kind"].to_numpy() == Kind.CPU_OP)
    names = trace.names_of(ev["name"].to_numpy()[ops])
    out = {}
    for row, name in zip(ops.tolist(), names.tolist()):
        candidates = by_name.get(name)
        if not candidates:
            continue
        key = None
        if _kernels(candidates) > 1:  # the same event name in two graphs: the graph region around it
            key = _region_key(trace.name(int(ev["name"].iat[a])) for a in trace.ancestors(row))
        record = _pick(candidates, key)
        if record is not None:
            out[int(row)] = record
    return out


def matching_side(a: Trace, b: Trace, provenance: Provenance) -> str | None:
    """Which trace (``"a"`` or ``"b"``) a provenance file describes: the one more of whose kernels it
    names; None when it names none of either's (another workload, or another device's compile)."""
    hits = [sum(r is not None for r in gpu_records(t, provenance)) + len(cpu_kernel_rows(t, provenance))
            for t in (a, b)]
    if not any(hits):
        return None
    return "a" if hits[0] > hits[1] else "b"
