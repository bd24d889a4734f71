"""`kerneltui summary --overview`: each step's time split (analysis/overview.py) as a table, CSV or Markdown.

The table ends with a bar chart of the step spans, outlier steps marked (docs/overview.md).
"""

from __future__ import annotations

import csv
import io
import textwrap

from kerneltui.analysis.advice import Finding
from kerneltui.analysis.overview import PARTS, Overview
from kerneltui.terminal_text import printable_lines
from kerneltui.units import fmt_ns, fmt_share

HEADS = {"kernel": "kernel", "memcpy": "memcpy", "memset": "memset", "comm": "comm", "dataloader": "loader",
         "cpu_only": "CPU-only", "other": "other"}
STEP_FIELDS = ("step", "span_ns", *(f"{p}_ns" for p in PARTS), "outlier")
FINDING_FIELDS = ("rule", "finding", "evidence", "action", "confidence")
# one CSV: a step row per step, then a try_next row per finding; each leaves the other's columns empty
CSV_FIELDS = ("record", *STEP_FIELDS, *FINDING_FIELDS)
NO_ADVICE = "no rule found evidence in this trace (rules and thresholds: docs/overview.md)"
NO_STEPS = "no ProfilerStep#N annotations in this trace: no step to split (profile with a schedule and prof.step())"


def figure_lines(o: Overview) -> list[str]:
    """GPU utilization, SM efficiency, occupancy and Tensor Core use, each with what it covers."""
    def share(x):
        return "–" if x is None else fmt_share(x)

    occ = "–" if o.achieved_occupancy is None else f"{o.achieved_occupancy:.1f}%"
    return [
        f"GPU utilization       {share(o.gpu_utilization)} of the steps' time (GPU busy)",
        (f"est. SM efficiency    {share(o.sm_efficiency)} (min(blocks/SMs, 1), kernel-time weighted;"
         f" covers {fmt_share(o.sm_efficiency_coverage)} of kernel time)"),
        (f"est. achieved occ.    {occ} (kernel args, kernel-time weighted; occupancy 0 = unknown,"
         f" covers {fmt_share(o.occupancy_coverage)} of kernel time)"),
        f"Tensor Core use       {share(o.tensor_core_share)} of kernel time (by kernel name and dtype)",
    ]


def try_next_lines(findings: list[Finding], width: int = 80) -> list[str]:
    """The "try next" section: per finding, what, evidence, action and how sure (analysis/advice.py)."""
    lines = ["try next"]
    if not findings:
        return [*lines, NO_ADVICE]
    for i, f in enumerate(findings, 1):
        for text, indent in ((f"{i}. {f.finding} ({f.confidence} confidence, rule {f.rule})", ""),
                             (f"evidence: {f.evidence}", "   "), (f"try: {f.action}", "   ")):
            lines += textwrap.wrap(text, width, initial_indent=indent, subsequent_indent="     ", break_on_hyphens=False)
    return lines


def as_table(path: str, o: Overview, width: int = 80, findings: list[Finding] | None = None) -> str:
    lines = [path, "each step's span: kernel > memcpy > memset > comm > DataLoader > CPU-only > other"]
    after = [] if findings is None else ["", *try_next_lines(findings, width)]
    if not len(o.steps):
        return printable_lines([*lines, NO_STEPS, *after])
    lines.append(f"{'step':>6} {'span':>8} " + " ".join(f"{HEADS[p]:>8}" for p in PARTS))
    for r in o.steps.itertuples(index=False):
        lines.append(f"{r.step:>6} {fmt_ns(r.span_ns):>8} "
                     + " ".join(f"{fmt_ns(getattr(r, p + '_ns')):>8}" for p in PARTS))
    mean = o.mean()
    lines.append(f"{'mean':>6} {fmt_ns(mean['span_ns']):>8} " + " ".join(f"{fmt_ns(mean[p + '_ns']):>8}" for p in PARTS))
    span = mean["span_ns"]
    lines.append(f"{'share':>6} {'':>8} " + " ".join(f"{fmt_share(mean[p + '_ns'] / span if span else 0):>8}"
                                                     for p in PARTS))
    wrapped = [part for line in figure_lines(o) for part in textwrap.wrap(line, width, subsequent_indent=" " * 22)]
    lines += ["", *wrapped, "", *step_chart(o, width), *after]
    return printable_lines(lines)


def step_chart(o: Overview, width: int = 80) -> list[str]:
    """One bar per step, as long as its span; ``!`` marks an outlier (3 MADs and 10 % from the median)."""
    steps = o.steps
    longest = int(steps["span_ns"].max()) if len(steps) else 0
    bar_width = max(10, width - 24)
    lines = ["step spans (! = outlier)"]
    for r in steps.itertuples(index=False):
        n = round(bar_width * r.span_ns / longest) if longest else 0
        mark = "!" if r.outlier else " "
        lines.append(f"{r.step:>6}{mark} {fmt_ns(r.span_ns):>8} {'█' * n}")
    flagged = int(steps["outlier"].sum())
    lines.append(f"{flagged} outlier step{'s' if flagged != 1 else ''}" if flagged else "no outlier step")
    return lines


def as_csv(o: Overview, findings: list[Finding] | None = None) -> str:
    """``record`` = ``step`` rows (the split, ns), then ``try_next`` rows (the findings, analysis/advice.py)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_FIELDS)
    no_finding, no_step = [""] * len(FINDING_FIELDS), [""] * len(STEP_FIELDS)
    for r in o.to_dict()["steps"]:
        writer.writerow(["step", r["step"], r["span_ns"], *(r[f"{p}_ns"] for p in PARTS), r["outlier"], *no_finding])
    for f in findings or []:
        writer.writerow(["try_next", *no_step, *(getattr(f, k) for k in FINDING_FIELDS)])
    return out.getvalue()


def markdown_try_next(findings: list[Finding]) -> list[str]:
    lines = ["", "## Try next", ""]
    if not findings:
        return [*lines, NO_ADVICE]
    return [*lines, "| rule | finding | evidence | action | confidence |", "|---|---|---|---|---|",
            *(f"| {f.rule} | {f.finding} | {f.evidence} | {f.action} | {f.confidence} |".replace("\n", " ")
              for f in findings)]


def as_markdown(path: str, o: Overview, findings: list[Finding] | None = None) -> str:
    lines = [f"# Overview: `{path}`", ""]
    after = [] if findings is None else markdown_try_next(findings)
    if not len(o.steps):
        return printable_lines([*lines, NO_STEPS, *after])
    lines.append("| step | span | " + " | ".join(HEADS[p] for p in PARTS) + " | outlier |")
    lines.append("|---:|---:|" + "---:|" * len(PARTS) + "---|")
    for r in o.steps.itertuples(index=False):
        lines.append(f"| {r.step} | {fmt_ns(r.span_ns)} | "
                     + " | ".join(fmt_ns(getattr(r, p + "_ns")) for p in PARTS) + f" | {'yes' if r.outlier else ''} |")
    lines += ["", *(f"- {line}" for line in figure_lines(o)), *after]
    return printable_lines(lines)
