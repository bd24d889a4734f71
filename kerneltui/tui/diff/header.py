"""The facts at the top of the diff screen: the headline, the verdict, and A beside B.

Everything is Rich Text (a plain str in a Rich Table would be parsed as markup),
and trace text (file names, devices, step names, kernel names in the facts) is
made printable.
"""

from __future__ import annotations

import textwrap

from rich.table import Table
from rich.text import Text

from kerneltui.analysis.compare.diff import SideFacts, TraceDiff
from kerneltui.diff_report import DAMAGED_MARK, PROFILED, bytes_text, num, ratio, source_label, span_text
from kerneltui.terminal_text import printable
from kerneltui.units import fmt_ns


def headline_text(d: TraceDiff) -> Text:
    """'2 kernels → 1 per call · 5 array-sized transfers → 3': what the user came for."""
    text = Text()
    for i, fact in enumerate(d.facts[:2]):
        if i:
            text.append(" · ", style="dim")
        text.append(printable(fact), style="bold")
    return text


def capture_text(d: TraceDiff) -> Text:
    """What the captures say of the figures, in one line under the headline: --allow-recompile with a
    recompile profiled, a compiled "eager" run, a CPU capture (analysis/compare/capture_notes.py)."""
    return Text(printable("; ".join(d.capture_notes)), style="bold", no_wrap=True, overflow="ellipsis")


def verdict_text(d: TraceDiff, width: int | None = None, lines: int = 2) -> Text:
    """The verdict; where ``lines`` lines of ``width`` cannot hold it, its one-line form and where the rest is."""
    room = None if width is None else width * lines
    # the verdicts a plain speed-up would hide stand out: slower, undecided, different inputs
    if d.comparable.ok is False:
        text = Text("NOT COMPARABLE: ", style="bold reverse")
        reasons = printable("; ".join(d.comparable.reasons))
        if room is not None and len(reasons) + 16 > room:
            reasons = printable(d.comparable.reasons[0]) + f" (+{len(d.comparable.reasons) - 1}, i)" \
                if len(d.comparable.reasons) > 1 else reasons
        text.append(reasons, style="bold")
        return text
    style = {"undecided": "bold", "slower": "bold", "not comparable": "bold", "recompiled": "bold"}.get(d.verdict.kind, "")
    whole = printable(d.verdict.text)
    if width is None or len(textwrap.wrap(whole, width)) <= lines:
        return Text(whole, style=style)
    text = Text(printable(d.verdict.short), style=style)
    text.append("  i: the whole verdict", style="dim")
    return text


def notes_text(d: TraceDiff) -> Text:
    """What could not be compared: one line on small screens (i lists them all)."""
    if not d.notes:
        return Text("")
    text = Text("not compared: ", style="bold")
    text.append(printable("; ".join(d.notes)))
    if len(d.notes) > 1:
        text.append(f" ({len(d.notes)} notes, i lists them)", style="dim")
    return text


def sides_table(d: TraceDiff, full: bool, compact: bool = False) -> Table:
    """One column per side, one row per fact, and the B/A ratio; ``full`` adds device and calls.

    ``compact`` (short screens): GPU time and span alone, so the matched table keeps the room."""
    a, b, r = d.a, d.b, d.ratios
    unit = b.unit
    table = Table.grid(padding=(0, 1), expand=True)
    table.add_column(no_wrap=True, style="dim", min_width=9)  # the longest label, "bandwidth"
    table.add_column(ratio=1, no_wrap=True, overflow="ellipsis")
    table.add_column(ratio=1, no_wrap=True, overflow="ellipsis")
    table.add_column(justify="right", no_wrap=True)
    table.add_row("", _side_head("A", a), _side_head("B", b), Text("B/A", style="dim"))
    if compact:
        table.add_row("GPU·span", *(_bold(f"{fmt_ns(s.gpu_ns)} · {span_text(s)}") for s in (a, b)),
                      ratio(r["gpu_ns"]))
        return table
    if full:
        table.add_row("health", _health(a), _health(b), "")
        table.add_row("device", Text(printable(a.device)), Text(printable(b.device)), "")
        table.add_row(f"{unit}s", *(Text(printable(f"{s.iterations} ({source_label(s)})")) for s in (a, b)), "")
    table.add_row("launches", _bold(f"{num(a.launches)} per {unit}"), _bold(f"{num(b.launches)} per {unit}"),
                  ratio(r["launches"]))
    table.add_row("span", *(_span(s, unit) for s in (a, b)), ratio(r.get("span_ns")))
    table.add_row("GPU", *(_gpu(s, unit) for s in (a, b)), ratio(r["gpu_ns"]))
    table.add_row("CPU", _cpu(a, unit), _cpu(b, unit), Text(PROFILED, style="dim"))
    table.add_row("moved", *(_moved(s) for s in (a, b)), ratio(r["bytes"]))
    table.add_row("bandwidth", *(_bandwidth(s) for s in (a, b)), "")
    return table


def _side_head(label: str, s: SideFacts) -> Text:
    """'A eager.json.gz', and ⚠ where the trace is damaged (its figures are not to be trusted: H says why)."""
    text = Text(f"{label} ", style="bold")
    if s.health and not s.health.get("ok", True):
        text.append(f"{DAMAGED_MARK} ", style="bold reverse")
    text.append(_name(s), style="bold")
    return text


def _health(s: SideFacts) -> Text:
    """'healthy', or the damage in a few words (H: the whole report)."""
    if not s.health:
        return Text("unknown", style="dim")
    if s.health.get("ok"):
        return Text("healthy")
    return Text(printable(s.health["line"].removeprefix("NOT HEALTHY: ")), style="bold")


def _name(s: SideFacts) -> str:
    return printable(s.path.rsplit("/", 1)[-1])


def _bold(text: str) -> Text:
    return Text(text, style="bold")


def _span(s: SideFacts, unit: str) -> Text:
    """'467.7µs/step', '122.7µs/call distorted' (the profiled CPU paced it), 'unknown'."""
    if s.span_ns is None:
        return Text("unknown (start-up in every " + unit + ")", style="dim")
    text = Text(f"{fmt_ns(s.span_ns)}/{unit}", style="bold")
    if s.span_note:
        text.append(f" {s.span_note}", style="dim")
    return text


def _gpu(s: SideFacts, unit: str) -> Text:
    text = Text(f"{fmt_ns(s.gpu_ns)}/{unit}", style="bold")
    if s.busy_in_steps is not None:
        text.append(f", busy {100 * s.busy_in_steps:.1f}% of span")
    return text


def _cpu(s: SideFacts, unit: str) -> Text:
    """The CPU dispatch span (the step on the CPU, profiled) and what bounds the side."""
    text = Text(f"dispatch {fmt_ns(s.dispatch_ns)}/{unit}")
    if s.bound in ("gpu", "cpu"):
        text.append(f", {s.bound.upper()}-bound", style="bold")
    return text


def _moved(s: SideFacts) -> Text:
    if s.bytes != s.bytes:
        return Text("unknown (no shapes)", style="dim")
    text = Text(f"{num(s.transfers, 1)} transfers", style="bold")
    text.append(f" = {bytes_text(s)}")
    return text


def _bandwidth(s: SideFacts) -> Text:
    if s.gbs != s.gbs:
        return Text("–", style="dim")
    if s.peak_gbs != s.peak_gbs:
        return Text(f"{s.gbs:,.0f} GB/s (peak unknown)")
    share = s.gbs / s.peak_gbs
    return Text(f"{s.gbs:,.0f} GB/s, {100 * share:.0f}% of peak" + ("!" if share > 1 else ""))
