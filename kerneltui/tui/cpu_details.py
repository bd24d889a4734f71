"""The facts of one CPU work row of a CPU capture (analysis/cpu_work), as label/value lines, without Textual.

A CPU capture's kernel table lists its compiled C++ kernels and ATen ops by CPU self time; the details
pane shows what the selected row computes and where (its provenance record, or the ATen op around it),
the op stack of its first call, and its calls one by one. CPU time only: nothing here is GPU time.
"""

from __future__ import annotations

from kerneltui.analysis.provenance.records import eager_op_name
from kerneltui.tui.details import Details
from kerneltui.tui.model import Kernels
from kerneltui.tui.query import CpuAnswer
from kerneltui.units import fmt_ns, fmt_share

CALLS_LISTED = 12  # the first calls, one line each; the rest are counted


def cpu_work_details(kernels: Kernels, found: CpuAnswer, key: str) -> Details:
    trace = kernels.trace
    table = found.table
    at = (table["key"].to_numpy() == key).nonzero()[0]
    if not len(at):
        return Details(key, (("calls", "none in this scope"),))
    r = table.iloc[int(at[0])]
    compiled = r["origin"] == "compiled"
    rows: list[tuple[str, str]] = []
    # most telling first: at 80x24 the pane shows four lines without scrolling
    record = kernels.cpu.records.get(key) if compiled else None
    if record is not None:  # Inductor's own record of this generated kernel (kerneltui capture)
        rows.append(("computes", ", ".join(sorted({eager_op_name(o) for o in record.aten_ops})) or "–"))
        rows.append(("from", ", ".join(s.label() for s in record.source_lines) or "–"))
    elif compiled:
        rows.append(("computes", "no provenance record in the trace"))
    else:
        op = str(r["op"])
        rows.append(("op", op if op != key else f"{op} (no ATen op around it)"))
    calls_text = (f"{int(r['count']):,} · {fmt_ns(r['total_ns'])} CPU self time ({fmt_share(r['share'])})"
                  f" · mean {fmt_ns(r['mean_ns'])}, {fmt_ns(r['min_ns'])}–{fmt_ns(r['max_ns'])}")
    rows.append(("calls", calls_text))
    if record is not None and record.module_paths:
        rows.append(("modules", ", ".join(record.module_paths)))
    rows.append(("kind", "compiled C++ kernel (Inductor)" if compiled else "ATen op"))
    calls = found.calls_of(key)
    first = int(calls["row"].iat[0])
    stack = [trace.name(int(trace.events["name"].iat[a])) for a in trace.ancestors(first)]
    rows.append(("op stack", " › ".join([*stack, key])))
    its = trace.iterations
    for i, c in enumerate(calls.head(CALLS_LISTED).itertuples(index=False), 1):
        step = its.labels[c.iteration] if c.iteration >= 0 else f"outside any {its.unit}"
        rows.append((f"call {i}", f"{fmt_ns(c.self_ns)} self · starts {fmt_ns(c.ts - kernels.origin)} · {step}"))
    if len(calls) > CALLS_LISTED:
        rows.append(("", f"… {len(calls) - CALLS_LISTED:,} more calls"))
    return Details(key, tuple(rows))
