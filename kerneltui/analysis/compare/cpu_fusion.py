"""What fused into what, for two CPU captures (eager vs compiled): the CPU counterpart of matched rows.

On the CPU the compiled side's kernels are cpu_ops (``graph_0_cpp_fused_add_relu_0``) whose
provenance record lists the ATen ops they compute (analysis/cpu_work.py). Each becomes one row:
the eager side's ATen ops of those names (their self time and that of the ops inside them, i.e.
every CPU-work event whose outermost ATen op has one of the names) against the kernel's self
time, per step/call. An op name that more than one kernel computes (``aten::relu`` fused into
two kernels) cannot be split between them: such a row's eager time is unknown (NaN).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass

from kerneltui.analysis.cpu_work import fused_ops, is_cpu_capture, work_events
from kerneltui.analysis.provenance.join import of_trace
from kerneltui.trace.model import Trace


@dataclass(frozen=True)
class CpuFusion:
    eager_ops: tuple[str, ...]  # ("aten::add", "aten::relu")
    kernel: str  # the compiled side's event name: graph_0_cpp_fused_add_relu_0
    source: str  # "add_relu.py:14 in add_relu", "" when not recorded
    eager_count: float  # eager ops of those names per step/call (outermost ones)
    eager_ns: float  # their CPU self time per step/call; NaN when the names are shared with another kernel
    kernel_count: float  # kernel runs per step/call
    kernel_ns: float  # its CPU self time per step/call

    def line(self, unit: str) -> str:
        where = f" ({self.source})" if self.source else ""
        eager = "–" if math.isnan(self.eager_ns) else _ms(self.eager_ns)
        return (f"{' + '.join(self.eager_ops)} → {self.kernel}{where}: {_n(self.eager_count)} → "
                f"{_n(self.kernel_count)} per {unit}, CPU {eager} → {_ms(self.kernel_ns)}")


def cpu_fusions(eager: Trace, compiled: Trace) -> tuple[CpuFusion, ...]:
    """One row per compiled C++ kernel with a provenance record, largest first; () unless both are CPU captures."""
    if not (is_cpu_capture(eager) and is_cpu_capture(compiled)):
        return ()
    a, b = work_events(eager), work_events(compiled)
    kernels = b[(b["origin"] == "compiled") & (b["iteration"] >= 0) & (b["op"] != "")]
    if not len(kernels):
        return ()
    na, nb = max(eager.iterations.count, 1), max(compiled.iterations.count, 1)
    a = a[a["iteration"] >= 0].assign(key=lambda f: f["key"].map(_functional), op=lambda f: f["op"].map(_functional))
    per_kernel = kernels.groupby("key", sort=False).agg(ns=("self_ns", "sum"), n=("self_ns", "size"), op=("op", "first"))
    claims = Counter(name for text in per_kernel["op"] for name in set(fused_ops(text)))
    out = []
    still_run = _extern_ops(compiled)
    for key, r in per_kernel.iterrows():
        ops = tuple(o for o in fused_ops(r["op"]) if o not in still_run)
        mine = a[a["op"].isin(ops)]
        shared = any(claims[o] > 1 for o in ops)
        source = r["op"].split(" at ", 1)[1] if " at " in r["op"] else ""
        out.append(CpuFusion(ops, str(key), source, float((a["key"].isin(ops) & a["op"].eq(a["key"])).sum()) / na,
                             math.nan if shared else float(mine["self_ns"].sum()) / na, float(r["n"]) / nb,
                             float(r["ns"]) / nb))
    return tuple(sorted(out, key=lambda f: -f.kernel_ns))


def _functional(name: str) -> str:
    """``aten::add_`` as ``aten::add``: eager runs the in-place op, the record names the functional one
    (Inductor compiles after functionalization)."""
    return name[:-1] if name.endswith("_") and not name.endswith("__") else name


def _extern_ops(compiled: Trace) -> set[str]:
    """Ops the compiled side still runs as ATen calls (extern kernels: ``aten::convolution_backward``):
    a C++ kernel's record may list one it computes part of, but that op was not fused away."""
    provenance = of_trace(compiled)
    return {op for k in provenance.kernels if k.extern for op in k.op_names} if provenance else set()


def _n(x: float) -> str:
    return f"{x:.0f}" if abs(x - round(x)) < 0.05 else f"{x:.1f}"


def _ms(ns: float) -> str:
    return f"{ns / 1e6:.2f} ms" if ns >= 1e6 else f"{ns / 1e3:.1f} µs"
