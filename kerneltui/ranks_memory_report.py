"""`kerneltui summary DIR --memory`: a row per rank and CUDA device (analysis/ranks/memory.py).

Table, CSV, JSON and Markdown; the JSON holds each rank's whole per-trace memory document, as
`summary TRACE --format json` has it under ``memory`` (``memory_dict``).
"""

from __future__ import annotations

import csv
import io
import textwrap

import orjson

from kerneltui.analysis.memory import CAPTURE_HINT
from kerneltui.analysis.ranks.memory import JobMemory, RankMemory
from kerneltui.ranks_overview_report import grid, job_dict
from kerneltui.ranks_report import DAMAGED_MARK, headline
from kerneltui.terminal_text import csv_for, json_safe, markdown_text, printable
from kerneltui.units import fmt_bytes

HEADER = ["rank", "device", "peak allocated", "peak reserved", "allocations", "frees", "never freed"]
CSV_FIELDS = ("rank", "device", "peak_allocated_bytes", "peak_reserved_bytes", "allocations", "frees", "never_freed",
              "never_freed_bytes", "note", "path", "error")
TITLE = "GPU memory per rank and device (the caching allocator's [memory] events)"
NO_EVENTS = "no [memory] events"
NO_CUDA = "no CUDA [memory] events (Device Type 1): only host allocations were recorded"
PEAK_MARK = "▲"


def _label(r: RankMemory, m: JobMemory, device: int | None = None) -> str:
    if _marked(m) and (r.summary.rank, device) == (m.peak.rank, m.peak.device):
        return f"{r.summary.rank} {PEAK_MARK}"
    if r.summary.health and not r.summary.health.get("ok", True):
        return f"{r.summary.rank} {DAMAGED_MARK}"
    return str(r.summary.rank)


def _marked(m: JobMemory) -> bool:
    """One (rank, device) peaks higher than another: it is marked."""
    return m.peak is not None and m.peak.spread_bytes > 0


def _why_none(r: RankMemory) -> str:
    """What a rank's row says instead of figures."""
    if r.summary.error:
        return "failed: " + r.summary.error
    if not r.has_events:
        return NO_EVENTS
    return r.memory.get("note") or NO_CUDA


def _rows(m: JobMemory) -> list[tuple[str, list[str] | str]]:
    rows: list[tuple[str, list[str] | str]] = []
    for r in m.ranks:
        if not r.devices:
            rows.append((_label(r, m), _why_none(r)))
        for d in r.devices:
            rows.append((_label(r, m, d["device"]), [
                f"cuda:{d['device']}", fmt_bytes(d["peak_allocated_bytes"]), fmt_bytes(d["peak_reserved_bytes"]),
                f"{d['allocations']:,}", f"{d['frees']:,}",
                f"{fmt_bytes(d['never_freed_bytes'])} in {d['never_freed']:,}" if d["never_freed"] else "0"]))
    return rows


def findings(m: JobMemory) -> list[str]:
    out = []
    p = m.peak
    if p is not None:
        where = f"rank {p.rank} (cuda:{p.device}) {fmt_bytes(p.peak_allocated_bytes)}"
        if (p.rank, p.device) == (p.lowest_rank, p.lowest_device):
            out.append(f"peak allocated: {where}; no other rank's device has [memory] figures to compare")
        elif not p.spread_bytes:
            out.append(f"peak allocated: {fmt_bytes(p.peak_allocated_bytes)} ({p.peak_allocated_bytes:,} B) on every"
                       " rank's device alike")
        else:
            share = "" if p.spread_share is None else f" ({p.spread_share:.1%})"
            out.append(f"highest peak allocated: {where}, {fmt_bytes(p.spread_bytes)}{share} above the lowest (rank "
                       f"{p.lowest_rank}, cuda:{p.lowest_device}, {fmt_bytes(p.lowest_peak_allocated_bytes)})")
    if m.without_events:
        read = len([r for r in m.ranks if r.memory is not None])
        n = len(m.without_events)
        who = ("no rank has" if n == read else ("rank " if n == 1 else "ranks ") + ", ".join(map(str, m.without_events))
               + (" has no" if n == 1 else " have no"))
        out.append(f"{who} [memory] events:{CAPTURE_HINT.split(':', 1)[1]}")
    return out


def legend(m: JobMemory) -> str:
    marks = [f"{PEAK_MARK} highest peak allocated"] if _marked(m) else []
    marks += [f"{DAMAGED_MARK} damaged trace"] if m.job.damaged else []
    return " · ".join(marks)


def as_table(m: JobMemory) -> str:
    lines = [headline(m.job)[0], TITLE, "", *grid(HEADER, _rows(m)), ""]
    if legend(m):
        lines.append(legend(m))
    for f in findings(m):
        lines.extend(textwrap.wrap(printable(f), 80, subsequent_indent="  ", break_long_words=False,
                                   break_on_hyphens=False))
    return "\n".join(lines) + "\n"


def as_markdown(m: JobMemory) -> str:
    lines = [f"**{headline(m.job)[0]}**", "", TITLE, "",
             "| " + " | ".join(HEADER) + " |", "|---|---|" + "---:|" * (len(HEADER) - 2)]
    for label, cells in _rows(m):
        cells = [cells, *[""] * (len(HEADER) - 2)] if isinstance(cells, str) else cells
        lines.append("| " + " | ".join(markdown_text(c) for c in [label, *cells]) + " |")
    notes = [*findings(m), *([legend(m)] if legend(m) else []), *(f"warning: {w}" for w in m.job.warnings)]
    text = "\n".join(lines) + "\n"
    if notes:
        text += "\n" + "\n".join(f"- {markdown_text(n)}" for n in notes) + "\n"
    return text


def as_json(m: JobMemory) -> str:
    doc = {
        "job": job_dict(m.job),
        "ranks": [{"rank": r.summary.rank, "path": r.summary.path,
                   "healthy": r.summary.health.get("ok") if r.summary.health else None,
                   "error": r.summary.error or None, "memory": r.memory} for r in m.ranks],
        "peak": None if m.peak is None else m.peak.to_dict(),
        "without_memory_events": m.without_events,
        "damaged": m.job.damaged,
        "findings": findings(m),
        "skipped": m.job.skipped,
        "warnings": list(m.job.warnings),
    }
    return json_safe(orjson.dumps(doc, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY).decode()) + "\n"


def as_csv(m: JobMemory, for_terminal: bool = False) -> str:
    """A row per rank and device; a rank without figures gets one row saying why (``note``)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_FIELDS)
    for r in m.ranks:
        if not r.devices:
            note = "" if r.summary.error else _why_none(r)
            writer.writerow([r.summary.rank, "", "", "", "", "", "", "", note, r.summary.path, r.summary.error])
        for d in r.devices:
            writer.writerow([r.summary.rank, d["device"], d["peak_allocated_bytes"], d["peak_reserved_bytes"],
                             d["allocations"], d["frees"], d["never_freed"], d["never_freed_bytes"], "",
                             r.summary.path, ""])
    return csv_for(out.getvalue(), for_terminal)
