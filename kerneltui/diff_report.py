"""`kerneltui diff A B --format table|json|markdown`: a TraceDiff as text.

The same numbers the diff screen shows, from the same ``TraceDiff``; the table
fits 80 columns so it reads in a CI log. Names, paths and step labels come
from the traces: table and Markdown escape their control and bidi characters
(``terminal_text.printable``); JSON keeps them exact.
"""

from __future__ import annotations

import math
import os
import textwrap

import orjson

from kerneltui.analysis.compare.diff import KNOWN_ENOUGH, SideFacts, TraceDiff
from kerneltui.terminal_text import json_safe, markdown_text, printable, printable_lines
from kerneltui.units import distinct_cuts, ellipsize, fmt_bytes, fmt_ns

WIDTH = 80
DAMAGED_MARK = "⚠"  # a row holding GPU events whose figures the trace's damage changes (analysis/health)
ABOVE_PEAK = "!"  # marks a bandwidth above the device's peak: the data sat in cache


# -- cells shared with the screen -------------------------------------------------
def num(x: float, digits: int = 2) -> str:
    """A count or ratio: whole numbers without decimals, "–" for unknown."""
    if x is None or x != x:
        return "–"
    if abs(x - round(x)) < 0.005:
        return f"{round(x):,}"
    return f"{x:,.{digits}f}".rstrip("0").rstrip(".")


def ratio(x: float) -> str:
    return "–" if x is None or x != x else f"{x:.2f}x"


def us(ns: float) -> str:
    return "–" if ns is None or ns != ns else f"{ns / 1e3:,.2f}"


def delta_us(ns: float) -> str:
    return "–" if ns is None or ns != ns else f"{ns / 1e3:+,.2f}"


def nbytes(x: float) -> str:
    return "–" if x is None or x != x else fmt_bytes(x)


def rate(gbs: float, share: float, above: bool, tflops: float = math.nan, flops_share: float = math.nan) -> str:
    """"4,747 GB/s 99%", "5,282 GB/s 110%!" (above peak), "713 TFLOP/s 72%" for GEMMs, "–"."""
    if tflops == tflops:
        return f"{tflops:,.0f} TFLOP/s" + (f" {100 * flops_share:.0f}%" if flops_share == flops_share else "")
    if gbs != gbs:
        return "–"
    text = f"{gbs:,.0f} GB/s"
    if share == share:
        text += f" {100 * share:.0f}%" + (ABOVE_PEAK if above else "")
    return text


def side_rate(m, side: str) -> str:
    """One side of a matched row: FLOP/s of its GEMMs, convolutions and attention, GB/s of the rest
    where that is at least a tenth of its time ("713 TFLOP/s 72% + 2,100 GB/s 44%")."""
    g = lambda name: getattr(m, f"{side}_{name}")  # noqa: E731
    judged, tflops = g("judged_ns"), g("tflops")
    memory = rate(g("gbs"), g("peak_share"), bool(g("above_peak")))  # null on a FLOP row's minor part
    if not judged:
        return memory
    compute = rate(math.nan, math.nan, False, tflops, g("flops_share")) if tflops == tflops else "FLOP/s unknown"
    return f"{compute} + {memory}" if memory != "–" else compute


def headline_rows(d: TraceDiff) -> list[tuple[str, str, str, str]]:
    """(fact, A, B, B/A) rows of the text formats, trace text made printable.

    Every figure is named for what it measures; a figure the profiler distorts gets no ratio."""
    a, b, r = d.a, d.b, d.ratios
    unit = b.unit
    cpu_recorded = a.cpu_ns == a.cpu_ns and b.cpu_ns == b.cpu_ns
    return [
        ("device", printable(a.device), printable(b.device), ""),
        (f"{unit}s", *(printable(f"{s.iterations} ({source_label(s)})") for s in (a, b)), ""),
        ("trace health", health_cell(a), health_cell(b), ""),
        (f"launches/{unit}", num(a.launches), num(b.launches), ratio(r["launches"])),
        (f"span/{unit}", span_text(a), span_text(b), ratio(r.get("span_ns"))),
        (f"GPU time/{unit}", fmt_ns(a.gpu_ns), fmt_ns(b.gpu_ns), ratio(r["gpu_ns"])),
        (f"GPU busy in {unit}s", busy_text(a), busy_text(b), ""),
        (f"CPU dispatch/{unit}", fmt_ns(a.dispatch_ns), fmt_ns(b.dispatch_ns), PROFILED),
        (f"CPU ops/{unit}", fmt_ns(a.cpu_ns), fmt_ns(b.cpu_ns), PROFILED if cpu_recorded else "not recorded"),
        ("bound by", _bound(a), _bound(b), ""),
        (f"bytes moved/{unit}", bytes_text(a), bytes_text(b), ratio(r["bytes"])),
        ("array-sized transfers", num(a.transfers, 1), num(b.transfers, 1), ratio(r["transfers"])),
        ("achieved bandwidth", _side_bw(a), _side_bw(b), ""),
    ]


PROFILED = "profiled"  # the ratio column of CPU figures: the profiler inflates them, so no ratio


def memory_rows(d: TraceDiff) -> list[tuple[str, str, str, str]]:
    """(fact, A, B, B/A) rows of peak memory and allocation counts per CUDA device; none unless both sides
    have [memory] events (analysis/compare/memory_diff.py)."""
    rows = []
    for m in d.memory.devices if d.memory is not None else ():
        def r(b, a):
            return ratio(b / a if a else math.nan)

        rows += [
            (f"cuda:{m.device} peak alloc.", nbytes(m.a_peak_allocated_bytes), nbytes(m.b_peak_allocated_bytes),
             r(m.b_peak_allocated_bytes, m.a_peak_allocated_bytes)),
            (f"cuda:{m.device} peak reserved", nbytes(m.a_peak_reserved_bytes), nbytes(m.b_peak_reserved_bytes),
             r(m.b_peak_reserved_bytes, m.a_peak_reserved_bytes)),
            (f"cuda:{m.device} allocations", num(m.a_allocations), num(m.b_allocations),
             r(m.b_allocations, m.a_allocations)),
        ]
        if m.a_allocations_per_step is not None and m.b_allocations_per_step is not None:
            rows.append((f"cuda:{m.device} allocs/step", num(m.a_allocations_per_step, 1),
                         num(m.b_allocations_per_step, 1), r(m.b_allocations_per_step, m.a_allocations_per_step)))
    return rows


def health_cell(s: SideFacts) -> str:
    """'healthy', or 'DAMAGED' (what is damaged: a line of its own under the figures, health_lines)."""
    if not s.health:
        return "unknown"
    return "healthy" if s.health.get("ok") else "DAMAGED"


def health_lines(d: TraceDiff) -> list[str]:
    """A damaged side's health line, for under the figures."""
    return [f"{s.label} health: {s.health['line']}" for s in (d.a, d.b) if s.health and not s.health.get("ok")]


def row_health(m) -> str:
    """A row's mark: '⚠ A: no_launch' where damaged GPU events are in it (analysis/health), else ''."""
    text = getattr(m, "health", "")
    return f"{DAMAGED_MARK} {text}" if text else ""


def span_text(s: SideFacts) -> str:
    """'467.7µs', '122.7µs distorted' (CPU-paced under the profiler), 'unknown' (every step held start-up)."""
    if s.span_ns is None:
        return "unknown (start-up)" if "start-up" in s.span_note else "unknown"
    used, settled = s.span_steps
    text = fmt_ns(s.span_ns) + (" distorted" if s.span_note == "profiler-distorted" else "")
    return text + (f" ({used} of {settled})" if used < settled else "")


def busy_text(s: SideFacts) -> str:
    return "unknown" if s.busy_in_steps is None else f"{100 * s.busy_in_steps:.1f}%"


def bytes_text(s: SideFacts) -> str:
    """'2.2 GB', '2.2 GB, 96% known' where some kernels have no byte rule."""
    if s.bytes != s.bytes:
        return "–"
    if s.bytes_known_share < KNOWN_ENOUGH:
        return f"{nbytes(s.bytes)}, {100 * s.bytes_known_share:.0f}% known"
    return nbytes(s.bytes)


def explanations(d: TraceDiff) -> list[str]:
    """What the span and transfers measure, one sentence each, under the figures."""
    unit = d.b.unit
    out = [f"span: a {unit} as a timer sees it, from its start (or the end of the GPU work queued before "
           f"it) to the end of its GPU work"]
    notes = {s.span_note for s in (d.a, d.b) if s.span_note}
    partial = [s for s in (d.a, d.b) if s.span_steps[0] < s.span_steps[1]]
    if partial:
        out[0] += (f"; (n of m): the median of the n settled {unit}s the GPU paced, the profiled CPU paced "
                   "the others")
    if "profiler-distorted" in notes:
        out[0] += f"; distorted: the profiled CPU paced every {unit}, so no ratio"
    if any(n.startswith("unknown") for n in notes):
        out[0] += f"; unknown: every profiled {unit} held the profiler's start-up (or a compile)"
    if d.a.reference_tensor:
        out.append(f"transfers: bytes in units of {d.a.reference_tensor} ({nbytes(d.a.largest_tensor)}), the "
                   "largest tensor both traces recorded")
    return out


def _bound(s: SideFacts) -> str:
    return {"gpu": "GPU", "cpu": "CPU"}.get(s.bound, "unknown")


def source_label(s: SideFacts) -> str:
    """How the steps/calls were found, in a few words: "mlp_forward", "repeated ops"."""
    text = s.iteration_source
    if text.startswith("record_function "):
        return text[len("record_function ") :].strip("'")
    return {"repeated op sequence": "repeated ops"}.get(text, text)


def _side_bw(s: SideFacts) -> str:
    share = s.gbs / s.peak_gbs if s.peak_gbs == s.peak_gbs else math.nan
    return rate(s.gbs, share, share == share and share > 1)


def match_label(kind: str, confidence: str) -> str:
    return f"{kind}·{confidence}"


def attribution_line(d: TraceDiff) -> str:
    at = d.attribution
    return (f"unmatched: {100 * at['a_unmatched_share']:.1f}% of A's GPU time, "
            f"{100 * at['b_unmatched_share']:.1f}% of B's (rows with nothing on the other side)")


# -- table --------------------------------------------------------------------------
def as_table(d: TraceDiff, top: int | None = None) -> str:
    lines = [f"A  {printable(d.a.path)}", f"B  {printable(d.b.path)}", ""]
    rows = headline_rows(d)
    lines.append(f"{'':<22}{'A':<22}{'B':<22}{'B/A':>8}")
    for fact, a, b, r in rows:
        lines.append(f"{fact:<22}{ellipsize(a, 21):<22}{ellipsize(b, 21):<22}{r:>8}".rstrip())
    for sentence in explanations(d):
        lines += _wrap(sentence)
    for sentence in health_lines(d):
        lines += _wrap(sentence)
    lines.append("")
    if d.comparable.ok is False:
        lines += _wrap("NOT COMPARABLE: " + "; ".join(d.comparable.reasons))
    for note in d.capture_notes:
        lines += _wrap(note)
    lines += _wrap("; ".join(d.facts))
    lines += _wrap(d.verdict.text)
    if d.cpu_fusions:
        lines += ["", f"fused on the CPU, {d.cpu_fusions_direction} (CPU self time per {d.b.unit}):"]
        for f in d.cpu_fusions:
            lines += _wrap(f.line(d.b.unit), indent="  ")
    lines.append("")
    unit = d.b.unit
    if len(d.phases) > 1:
        lines.append(f"{'phase':<22}{'A launches':>11}{'B launches':>11}{'A GPU/' + unit:>17}{'B GPU/' + unit:>17}")
        for p in d.phases:
            lines.append(f"{p.phase:<22}{num(p.a_launches):>11}{num(p.b_launches):>11}"
                         f"{fmt_ns(p.a_ns):>17}{fmt_ns(p.b_ns):>17}")
        for p in d.phases:
            if p.b_outside_launches and p.phase != "optimizer":
                lines += _wrap(f"B {p.phase}: {num(p.b_outside_launches)} launches ({fmt_ns(p.b_outside_ns)})"
                               " ran outside any compiled region")
        lines.append("")
    if memory_rows(d):
        lines.append(f"{'memory, A → B':<22}{'A':<22}{'B':<22}{'B/A':>8}")
        lines += [f"{fact:<22}{a:<22}{b:<22}{r:>8}".rstrip() for fact, a, b, r in memory_rows(d)]
        lines.append("")
    lines.append(f"{'kernels, A → B':<64}{'match':>16}")
    matches = d.matches if top is None else d.matches.head(top)
    names = [printable(n) for n in matches["name"]]
    cuts: dict[int, dict[str, str]] = {}  # per name width (it depends on the label): cut so rows stay told apart
    for m, name in zip(matches.itertuples(), names):
        label = match_label(m.kind, m.confidence)
        room = WIDTH - len(label) - 1
        if room not in cuts:
            cuts[room] = distinct_cuts(names, room, cut=ellipsize)
        lines.append(f"{cuts[room][name]:<{WIDTH - len(label)}}{label}")
        lines.append(
            f"  {num(m.a_count)} → {num(m.b_count)} launches/{unit}, {us(m.a_ns)} → {us(m.b_ns)} GPU µs/{unit}"
            f" ({delta_us(m.delta_ns)})"
        )
        traffic = (
            f"  {nbytes(m.a_bytes)} → {nbytes(m.b_bytes)}, {num(m.a_transfers, 1)} → {num(m.b_transfers, 1)}"
            f" transfers, {side_rate(m, 'a')} → {side_rate(m, 'b')}"
        )
        lines.append(ellipsize(traffic, WIDTH))
        lines += _wrap(m.reason, indent="  ")
        if row_health(m):
            lines += _wrap(row_health(m) + " (these figures are not to be trusted)", indent="  ")
    if top is not None and len(d.matches) > top:
        lines.append(f"… {len(d.matches) - top} more (--top)")
    lines += _wrap(attribution_line(d))
    if (d.matches["a_above_peak"] | d.matches["b_above_peak"]).any():
        lines.append(f"{ABOVE_PEAK} above the device's peak bandwidth (the row, or a kernel in it): data sat in L2")
    if d.notes:
        lines += ["", "not compared:"]
        for note in d.notes:
            lines += _wrap(note, indent="  ")
    return printable_lines(lines)


def _wrap(text: str, indent: str = "") -> list[str]:
    return textwrap.wrap(printable(text), WIDTH, initial_indent=indent, subsequent_indent=indent + "  ",
                         break_long_words=False, break_on_hyphens=False)


# -- markdown -----------------------------------------------------------------------
def as_markdown(d: TraceDiff, top: int | None = None) -> str:
    a_name, b_name = printable(os.path.basename(d.a.path)), printable(os.path.basename(d.b.path))
    lines = [f"### kerneltui diff: `{a_name}` → `{b_name}`", ""]
    if d.comparable.ok is False:
        lines += [f"**Not comparable:** {_md('; '.join(d.comparable.reasons))}", ""]
    lines += [f"**{_md(note)}**" for note in d.capture_notes] + ([""] if d.capture_notes else [])
    lines += [f"**{printable('; '.join(d.facts))}**", "", printable(d.verdict.text), ""]
    if d.cpu_fusions:
        lines += [f"Fused on the CPU, {d.cpu_fusions_direction} (CPU self time per {d.b.unit}):", ""]
        lines += [f"- {_md(f.line(d.b.unit))}" for f in d.cpu_fusions] + [""]
    lines += ["| | A | B | B/A |", "|---|---|---|---|"]
    for fact, a, b, r in headline_rows(d):
        lines.append(f"| {fact} | {_md(a)} | {_md(b)} | {r} |")
    lines += [""] + [_md(sentence) for sentence in explanations(d) + health_lines(d)]
    unit = d.b.unit
    if len(d.phases) > 1:
        lines += ["", f"| phase | A launches | B launches | A GPU/{unit} | B GPU/{unit} |", "|---|---:|---:|---:|---:|"]
        lines += [f"| {p.phase} | {num(p.a_launches)} | {num(p.b_launches)} | {fmt_ns(p.a_ns)} | {fmt_ns(p.b_ns)} |"
                  for p in d.phases]
    if memory_rows(d):
        lines += ["", "| memory | A | B | B/A |", "|---|---|---|---|"]
        lines += [f"| {fact} | {a} | {b} | {r} |" for fact, a, b, r in memory_rows(d)]
    lines += [
        "",
        f"| kernel | match | launches/{unit} | GPU µs/{unit} | Δ µs | bytes/{unit} | achieved | reason |",
        "|---|---|---|---|---:|---|---|---|",
    ]
    matches = d.matches if top is None else d.matches.head(top)
    for m in matches.itertuples():
        lines.append(
            f"| `{_md_code(m.name)}` | {match_label(m.kind, m.confidence)} | {num(m.a_count)} → {num(m.b_count)}"
            f" | {us(m.a_ns)} → {us(m.b_ns)} | {delta_us(m.delta_ns)} | {nbytes(m.a_bytes)} → {nbytes(m.b_bytes)}"
            f" | {side_rate(m, 'a')} → {side_rate(m, 'b')} | {_md(' '.join(filter(None, (m.reason, row_health(m)))))} |"
        )
    lines += ["", attribution_line(d)]
    if d.notes:
        lines += ["", "Not compared:", ""] + [f"- {_md(n)}" for n in d.notes]
    return printable_lines(lines)


def _md(text: str) -> str:
    """Trace text in a Markdown cell, outside a code span (terminal_text.markdown_text)."""
    return markdown_text(text)


def _md_code(text: str) -> str:
    """Trace text inside a code span: printable and its pipes escaped; angle brackets stay as they are."""
    return printable(str(text)).replace("|", "\\|")


# -- json ---------------------------------------------------------------------------
def as_json(d: TraceDiff) -> str:
    doc = {"kerneltui_diff": 1, **d.to_dict()}
    return json_safe(orjson.dumps(doc, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY).decode()) + "\n"
