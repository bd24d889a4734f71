"""The one-line texts around the panes: header, filter counts, noise toggles.

Rich Text built with ``append`` (never markup); the trace's file name, device
name and warnings are made printable first.
"""

from __future__ import annotations

from pathlib import Path

from rich.text import Text

from kerneltui.terminal_text import printable
from kerneltui.tui.model import CPU_CATEGORIES, GPU_CATEGORIES, Browse, Kernels
from kerneltui.units import fmt_ns, fmt_share

CATEGORY_LABEL = {cid: label for cid, label, _ in GPU_CATEGORIES + CPU_CATEGORIES}
CATEGORY_KEY = {"memcpy": "C", "memset": "S", "runtime": "R", "cpu_op": "O", "annotation": "A", "memory": "M"}
SHORT_LABEL = {"memcpy": "memcpy", "memset": "memset", "runtime": "api", "cpu_op": "ops",
               "annotation": "annot", "memory": "alloc"}


def header(kernels: Kernels, browse: Browse | None) -> Text:
    trace = kernels.trace
    text = Text(no_wrap=True, overflow="ellipsis")
    text.append(printable(Path(trace.meta.path).name), style="bold")
    n = len(kernels.key_codes)
    k = len(kernels.stats)
    text.append(f" · {n:,} launch{'es' if n != 1 else ''} · {k:,} kernel{'s' if k != 1 else ''}")
    if browse is not None:
        s = browse.summary
        text.append(f" · busy {fmt_ns(s.busy_ns)} of {fmt_ns(s.window_ns)} ({fmt_share(s.busy_share)})")
        text.append(f" · {s.iterations} {s.iteration_unit}{'s' if s.iterations != 1 else ''}")
    else:
        text.append(" · …", style="dim")
    text.append(f" · {printable(trace.meta.device_name)}")
    if trace.meta.warnings:
        text.append("  ⚠ " + printable("; ".join(trace.meta.warnings)), style="bold")
    return text


def counts(rows: int, total_rows: int, launches: int, total_launches: int) -> Text:
    text = Text(no_wrap=True, overflow="ellipsis", justify="right")
    text.append(f"{rows:,}/{total_rows:,} kernels · {launches:,}/{total_launches:,} launches")
    return text


def noise(shown: frozenset[str], browse: Browse | None) -> Text:
    """Every toggle with its key and count; what is hidden is listed apart, so nothing vanishes silently."""
    text = Text(no_wrap=True, overflow="ellipsis")
    on = [c for c in CATEGORY_KEY if c in shown]
    off = [c for c in CATEGORY_KEY if c not in shown]
    for cid in on:
        _item(text, cid, browse)
    text.append(" │ off:", style="dim")
    for cid in off:
        _item(text, cid, browse)
    return text


def compact(n: int) -> str:
    """A count in at most 5 characters: 6, 1129, 12.3k, 4.1M (the noise bar must fit 80 columns)."""
    if n < 10_000:
        return str(n)
    if n < 1_000_000:
        return f"{n / 1000:.1f}k" if n < 100_000 else f"{n // 1000}k"
    return f"{n / 1e6:.1f}M"


def _item(text: Text, cid: str, browse: Browse | None) -> None:
    count = compact(browse.counts[cid]) if browse is not None else "…"
    text.append(" ")
    text.append(CATEGORY_KEY[cid], style="bold reverse")
    text.append(f" {SHORT_LABEL[cid]} {count}")
