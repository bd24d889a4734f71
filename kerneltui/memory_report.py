"""`kerneltui summary --memory`: the memory table (analysis/memory.py) as a table, JSON, CSV or Markdown."""

from __future__ import annotations

import csv
import io
import textwrap

from kerneltui.analysis.memory import CAPTURE_HINT, DeviceMemory, MemoryTable, OpMemory
from kerneltui.terminal_text import markdown_text, printable_lines
from kerneltui.units import ellipsize, fmt_bytes, fmt_ns, plural

CSV_FIELDS = ("device", "row", "step", "op", "module", "source", "bytes", "allocations")


def _exact(n: int) -> str:
    return f"{fmt_bytes(n)} ({n:,} B)"


def device_lines(d: DeviceMemory, origin_ns: int, width: int = 80) -> list[str]:
    lines = [
        f"cuda:{d.device}  peak allocated {_exact(d.peak_allocated_bytes)} at {fmt_ns(d.peak_allocated_ts - origin_ns)}",
        f"        peak reserved  {_exact(d.peak_reserved_bytes)}",
        f"        {plural(d.allocations, 'allocation')}, {plural(d.frees, 'free')}"
        + (f" ({d.allocations_per_step:,.1f} allocations per step)" if d.allocations_per_step == d.allocations_per_step
           else ""),
        f"        never freed within the trace: {plural(d.never_freed, 'allocation')}, {fmt_bytes(d.never_freed_bytes)}",
    ]
    if d.per_step:
        lines += ["", f"  {'step':>6}  peak allocated"]
        lines += [f"  {s:>6}  {_exact(p)}" for s, p in d.per_step]
    lines += ["", f"  ops holding the most at the peak: {fmt_bytes(d.live_at_peak_bytes)} allocated in the trace",
              f"  (the rest of the {fmt_bytes(d.peak_allocated_bytes)} was allocated before it began)"]
    lines += _op_lines(d.top_ops, width)
    if d.never_freed_ops:
        lines += ["", "  allocations never freed within the trace, by op", *_op_lines(d.never_freed_ops, width)]
    return lines


def _op_lines(ops: tuple[OpMemory, ...], width: int) -> list[str]:
    if not ops:
        return ["  (none)"]
    lines = [f"  {'bytes':>9} {'allocs':>6}  op / module / source"]
    room = max(20, width - 20)
    for o in ops:
        where = " · ".join(x for x in (o.op, o.module, o.source) if x)
        lines.append(f"  {fmt_bytes(o.bytes):>9} {o.allocations:>6}  {ellipsize(where, room)}")
    return lines


def as_table(path: str, table: MemoryTable | None, origin_ns: int = 0, width: int = 80) -> str:
    lines = [path]
    if table is None:
        return printable_lines([*lines, CAPTURE_HINT])
    lines.append(f"memory: {plural(table.events, '[memory] event')}, {plural(len(table.devices), 'CUDA device')}")
    if table.note:
        lines += textwrap.wrap(table.note, width, break_long_words=False, break_on_hyphens=False)
    elif not table.devices:
        lines.append("no CUDA [memory] events (Device Type 1): only host allocations were recorded")
    for d in table.devices:
        lines += ["", *device_lines(d, origin_ns, width)]
    return printable_lines(lines)


def csv_rows(table: MemoryTable | None) -> list[tuple]:
    rows: list[tuple] = []
    for d in table.devices if table is not None else ():
        rows.append((d.device, "peak_allocated", "", "", "", "", d.peak_allocated_bytes, ""))
        rows.append((d.device, "peak_reserved", "", "", "", "", d.peak_reserved_bytes, ""))
        rows.append((d.device, "allocations", "", "", "", "", "", d.allocations))
        rows.append((d.device, "frees", "", "", "", "", "", d.frees))
        rows.append((d.device, "never_freed", "", "", "", "", d.never_freed_bytes, d.never_freed))
        rows += [(d.device, "step_peak_allocated", s, "", "", "", p, "") for s, p in d.per_step]
        rows += [(d.device, "top_op", "", o.op, o.module, o.source, o.bytes, o.allocations) for o in d.top_ops]
        rows += [(d.device, "never_freed_op", "", o.op, o.module, o.source, o.bytes, o.allocations)
                 for o in d.never_freed_ops]
    return rows


def as_csv(table: MemoryTable | None) -> str:
    """One row per figure (``row`` says which); only the header without [memory] events."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_FIELDS)
    writer.writerows(csv_rows(table))
    return out.getvalue()


def as_markdown(path: str, table: MemoryTable | None) -> str:
    lines = [f"# Memory: {markdown_text(path)}", ""]
    if table is None:
        return "\n".join([*lines, CAPTURE_HINT, ""])
    if table.note:
        lines += [markdown_text(table.note), ""]
    for d in table.devices:
        lines += [f"## cuda:{d.device}", "",
                  f"- peak allocated: {_exact(d.peak_allocated_bytes)}",
                  f"- peak reserved: {_exact(d.peak_reserved_bytes)}",
                  (f"- {plural(d.allocations, 'allocation')}, {plural(d.frees, 'free')}; never freed within the trace:"
                   f" {plural(d.never_freed, 'allocation')}, {fmt_bytes(d.never_freed_bytes)}"), ""]
        if d.per_step:
            lines += ["| step | peak allocated (B) |", "|---:|---:|"]
            lines += [f"| {s} | {p:,} |" for s, p in d.per_step]
            lines.append("")
        lines += [f"Ops holding the most at the peak ({d.live_at_peak_bytes:,} B allocated within the trace):", "",
                  "| op | bytes | allocations | module | source |", "|---|---:|---:|---|---|"]
        lines += [f"| {markdown_text(o.op)} | {o.bytes:,} | {o.allocations} | {markdown_text(o.module)} |"
                  f" {markdown_text(o.source)} |" for o in d.top_ops]
        lines.append("")
    return "\n".join(lines)
