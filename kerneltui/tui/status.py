"""The one-line texts around the panes: header, filter counts, noise toggles.

Rich Text built with ``append`` (never markup); the trace's file name, device
name and warnings are made printable first.
"""

from __future__ import annotations

from pathlib import Path

from rich.text import Text

from kerneltui.terminal_text import printable
from kerneltui.tui.model import (
    CPU_CATEGORIES,
    GPU_CATEGORIES,
    Analyses,
    Browse,
    Kernels,
)
from kerneltui.units import ellipsize, fmt_bytes, fmt_ns, fmt_share, plural

CATEGORY_LABEL = {cid: label for cid, label, _ in GPU_CATEGORIES + CPU_CATEGORIES}
CATEGORY_KEY = {"memcpy": "C", "memset": "S", "runtime": "R", "cpu_op": "O", "annotation": "A", "memory": "M"}
SHORT_LABEL = {"memcpy": "memcpy", "memset": "memset", "runtime": "api", "cpu_op": "ops",
               "annotation": "annot", "memory": "alloc"}


def header(kernels: Kernels, browse: Browse | None, width: int = 200) -> Text:
    """File, launches, kernels, busy time, steps, device and health, in the longest wording that fits ``width``.

    At 80 columns every fact stays: the wording shortens and the file name is cut before any fact is.
    "healthy" is said where the whole file name still fits; a damaged trace has a line of its own
    (``health_line``).
    """
    trace = kernels.trace
    analyses = browse.analyses if browse is not None else None  # the figures: " · …" until they are in
    text = Text(no_wrap=True, overflow="ellipsis")
    n, k = len(kernels.key_codes), len(kernels.stats)
    name = printable(Path(trace.meta.path).name)
    device = printable(trace.meta.device_name)
    devices = (device, device.removeprefix("NVIDIA "))
    wordings = [[plural(n, "launch"), plural(k, "kernel")]]
    if kernels.cpu is not None:  # a CPU capture: its work is CPU self time; no GPU figure is shown
        devices = (f"{device} · CPU capture, CPU time only", f"{device} · CPU capture", "CPU capture")
        wordings = cpu_wordings(kernels, analyses)
    elif analyses is not None:
        s = analyses.summary
        steps = plural(s.iterations, s.iteration_unit)
        wordings = [
            [plural(n, "launch"), plural(k, "kernel"),
             f"busy {fmt_ns(s.busy_ns)} of {fmt_ns(s.window_ns)} ({fmt_share(s.busy_share)})", steps],
            [plural(n, "launch"), plural(k, "kernel"), f"busy {fmt_share(s.busy_share)} of {fmt_ns(s.window_ns)}", steps],
        ]
    health = analyses.health if analyses is not None else None
    room = width - 2  # the header's padding
    # "healthy" only where the whole file name still fits beside it
    said = [(w, " · healthy") for w in wordings] if health is not None and health.ok else []
    for facts, tail in said + [(w, "") for w in wordings]:
        for dev in devices:
            rest = " · ".join(facts) + (" · …" if analyses is None else "") + (f" · {dev}" if dev else "") + tail
            if len(name) + 3 + len(rest) <= room or (not tail and len(rest) + 3 + 16 <= room):
                break
        else:
            continue
        break
    cut = max(room - 3 - len(rest), 8)
    text.append(ellipsize(name, cut) if len(name) > cut else name, style="bold")
    text.append(f" · {rest}")
    if trace.meta.warnings:
        text.append("  ⚠ " + printable("; ".join(trace.meta.warnings)), style="bold")
    return text


def cpu_wordings(kernels: Kernels, analyses: Analyses | None) -> list[list[str]]:
    """A CPU capture's header facts, longest first: its CPU work rows, their calls and CPU self time."""
    cpu = kernels.cpu
    rows, calls, ns = len(cpu.table), len(cpu.events), int(cpu.table["total_ns"].sum())
    if analyses is None:
        return [[plural(rows, "CPU work row"), plural(calls, "call"), f"{fmt_ns(ns)} CPU"]]
    s = analyses.summary
    steps = plural(s.iterations, s.iteration_unit)
    return [
        [plural(rows, "CPU work row"), plural(calls, "call"), f"{fmt_ns(ns)} CPU self time of {fmt_ns(s.window_ns)}",
         steps],
        [plural(rows, "row"), plural(calls, "call"), f"{fmt_ns(ns)} CPU of {fmt_ns(s.window_ns)}", steps],
        [plural(rows, "row"), plural(calls, "call"), f"{fmt_ns(ns)} CPU", steps],
    ]


def health_line(health, width: int = 200) -> Text:
    """A damaged trace's line under the header: what is damaged, worst first, and the key to the report."""
    text = Text(no_wrap=True, overflow="ellipsis")
    key = "  (H: the report)"
    room = max(width - 2 - len(key), 10)
    line = "⚠ " + health.line()
    if len(line) > room:
        line = "⚠ " + health.short_line()
    text.append(ellipsize(line, room), style="bold")
    text.append(key, style="dim")
    return text


def counts(rows: int, total_rows: int, launches: int, total_launches: int) -> Text:
    text = Text(no_wrap=True, overflow="ellipsis", justify="right")
    text.append(f"{rows:,}/{plural(total_rows, 'kernel')} · {launches:,}/{plural(total_launches, 'launch')}")
    return text


def query_counts(found, total_launches: int, scope: str, width: int = 200) -> Text:
    """The filter bar's right side: the scope and module when the tables are narrowed to them (first, in bold:
    at 80 columns they must not be the part that is cut), then rows, matching launches and their GPU time.
    ``width``: the cells the bar may take; the counts shorten before anything is cut."""
    text = Text(no_wrap=True, overflow="ellipsis", justify="right")
    lead = []
    if scope != "whole trace":
        lead.append(printable(scope if len(scope) <= width // 2 else scope.split(" (", 1)[0]))
    if found.query.module:
        lead.append(printable(found.query.module.rsplit(".", 1)[-1]))
    if lead:
        text.append(" in " + " · ".join(lead) + " ", style="bold reverse")
        text.append("· ")
    rows = len(found.table)
    group = found.query.grouping
    noun = {"kernel": "kernel", "op": "op", "module": "module", "source": "line", "step": "step"}[group]
    share = f" ({fmt_share(found.match_ns / found.scope_ns)})" if found.query.pattern and found.scope_ns else ""
    long = f"{plural(rows, noun)} · {found.matches:,}/{plural(total_launches, 'launch')} · {fmt_ns(found.match_ns)} GPU"
    short = f"{plural(rows, noun)} · {found.matches:,}/{total_launches:,} · {fmt_ns(found.match_ns)}"
    room = width - len(text.plain)
    text.append(long + share if len(long + share) <= room else long if len(long) <= room else short)
    return text


def cpu_counts(found, scope: str, width: int = 200) -> Text:
    """The filter bar's right side on a CPU capture: the scope (bold, first), then the rows and calls the search
    keeps and their CPU self time (its share of the scope's with a search). Never a GPU figure."""
    text = Text(no_wrap=True, overflow="ellipsis", justify="right")
    if scope != "whole trace":
        text.append(" in " + printable(scope if len(scope) <= width // 2 else scope.split(" (", 1)[0]) + " ",
                    style="bold reverse")
        text.append("· ")
    rows, total_rows = len(found.rows), len(found.table)
    share = f" ({fmt_share(found.self_ns / found.scope_ns)})" if found.query.pattern and found.scope_ns else ""
    calls = len(found.events)
    long = f"{rows:,}/{plural(total_rows, 'row')} · {found.calls:,}/{plural(calls, 'call')} · {fmt_ns(found.self_ns)} CPU"
    short = f"{rows:,}/{total_rows:,} · {found.calls:,}/{calls:,} · {fmt_ns(found.self_ns)} CPU"
    room = width - len(text.plain)
    text.append(long + share if len(long + share) <= room else long if len(long) <= room else short)
    return text


def cpu_range_line(found, start: int, end: int) -> Text:
    """A CPU capture's range line: the span, the calls that start in it and their CPU self time, the top rows."""
    text = Text(no_wrap=True, overflow="ellipsis")
    text.append(f"range {fmt_ns(start)}–{fmt_ns(end)} ({fmt_ns(end - start)})", style="bold")
    text.append(f" · {plural(len(found.events), 'call')} start in it · {fmt_ns(found.scope_ns)} CPU self time\n")
    top = found.table.head(3)
    if len(top):
        text.append("top ", style="bold")
        text.append(" · ".join(f"{printable(str(r.key))} {fmt_ns(r.total_ns)} ×{r.count:,}" for r in top.itertuples()))
    else:
        text.append("no CPU work starts in the range", style="dim")
    return text


def range_line(totals, origin: int, bytes_pending: bool = False) -> Text:
    """The selected range's totals on two lines: span, busy GPU, launches, bytes ("…" while ``bytes_pending``:
    the kernels' come with the analyses); then the top kernels (times clipped)."""
    t = totals
    span = t.end - t.start
    text = Text(no_wrap=True, overflow="ellipsis")
    text.append(f"range {fmt_ns(t.start - origin)}–{fmt_ns(t.end - origin)} ({fmt_ns(span)})", style="bold")
    busy = fmt_share(t.busy_ns / span) if span else "–"
    text.append(f" · GPU busy {fmt_ns(t.busy_ns)} ({busy}) · {plural(t.launches, 'launch')}"
                f" ({t.kernels:,} kernel{'s' if t.kernels != 1 else ''})")
    if bytes_pending:
        text.append(" · bytes …")
    elif t.bytes_unknown and not t.bytes:
        text.append(" · bytes unknown")
    else:
        text.append(f" · {fmt_bytes(t.bytes)}" + (f" (+{t.bytes_unknown:,} unknown)" if t.bytes_unknown else ""))
    text.append("\n")
    if t.top:
        text.append("top ", style="bold")
        text.append(" · ".join(f"{printable(name)} {fmt_ns(ns)} ×{n:,}" for name, n, ns in t.top))
    else:
        text.append("no GPU work in the range", style="dim")
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
