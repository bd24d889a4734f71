"""`kerneltui summary DIR --overview`: a row per rank, its mean step split (analysis/ranks/overview.py).

Table, CSV, JSON and Markdown; the JSON holds each rank's whole per-trace overview document, as
`summary TRACE --format json` has it under ``overview``. Paths and errors come from files: the
table and Markdown escape them for a terminal, JSON keeps them exact.
"""

from __future__ import annotations

import csv
import io
import textwrap

import orjson

from kerneltui.analysis.overview import PARTS
from kerneltui.analysis.ranks.job import Job
from kerneltui.analysis.ranks.overview import (
    STRAGGLER_SHARE,
    JobOverview,
    RankOverview,
    Slowest,
)
from kerneltui.ranks_report import DAMAGED_MARK, headline
from kerneltui.terminal_text import csv_for, json_safe, markdown_text, printable
from kerneltui.units import fmt_ns, fmt_share

HEADS = {"kernel": "kernel", "memcpy": "memcpy", "memset": "memset", "comm": "comm", "dataloader": "loader",
         "cpu_only": "CPU-only", "other": "other"}
# what a part is, in a sentence
WORDS = {"kernel": "kernel time", "memcpy": "memcpy time", "memset": "memset time",
         "comm": "communication (collectives running or waited on)", "dataloader": "DataLoader time",
         "cpu_only": "CPU-only time (the GPU idle while the CPU runs ops)", "other": "other (idle) time"}
CSV_FIELDS = ("rank", "steps", "span_ns", *(f"{p}_ns" for p in PARTS), "gpu_utilization", "healthy", "path", "error")
SPLIT_LINE = "mean step: kernel > memcpy > memset > comm > DataLoader > CPU-only > other"
NO_STEPS = "no ProfilerStep#N steps"
SLOW_MARK = "◀"


def _signed(ns: float) -> str:
    return f"+{fmt_ns(ns)}" if ns >= 0 else f"−{fmt_ns(-ns)}"


def _parts_clause(s: Slowest) -> str:
    """Which parts the slowest rank spends more time in than the median rank, most first, and which less."""
    diff = {p: s.parts_ns[f"{p}_ns"] for p in PARTS}
    grew = sorted((p for p in PARTS if diff[p] > 0), key=lambda p: -diff[p])
    fell = sorted((p for p in PARTS if diff[p] < 0), key=lambda p: diff[p])
    if not grew:
        return ""
    text = f"most from {WORDS[grew[0]]} ({_signed(diff[grew[0]])})"
    if len(grew) > 1:
        text += ", then " + ", ".join(f"{HEADS[p]} {_signed(diff[p])}" for p in grew[1:3])
    if fell:
        text += "; offset by " + ", ".join(f"{HEADS[p]} {_signed(diff[p])}" for p in fell[:2])
    return text


def slowest_line(s: Slowest) -> str:
    median = f"the median rank's (rank {s.median_rank}, {fmt_ns(s.median_step_ns)})"
    if s.excess_ns <= 0:
        return f"no straggler by step time: every rank's mean step is at most {median}"
    over = f"{fmt_ns(s.excess_ns)} ({s.excess_share:.1%}) longer than {median}"
    clause = _parts_clause(s)
    why = f"; the difference by part: {clause}" if clause else ""
    if s.straggler:
        return f"straggler: rank {s.rank}'s mean step {fmt_ns(s.step_ns)} is {over}{why}"
    if s.damaged:
        return (f"slowest: rank {s.rank}'s mean step {fmt_ns(s.step_ns)} is {over}{why}; its trace is damaged, and a"
                " damaged trace is not called a straggler")
    return (f"no straggler by step time (under {STRAGGLER_SHARE:.0%} over the median): the slowest, rank {s.rank}, "
            f"{fmt_ns(s.step_ns)}, is {over}{why}")


def findings(o: JobOverview) -> list[str]:
    out = []
    if o.slowest is not None:
        out.append(slowest_line(o.slowest))
    elif len([r for r in o.ranks if r.steps]) == 1:
        out.append("one rank with steps: no other to compare its step with")
    if o.no_steps:
        out.append(f"{_ranks(o.no_steps)}: no ProfilerStep#N annotations, no step to split (profile with a schedule"
                   " and prof.step())")
    job = o.job
    if job.stragglers:
        worst = job.stragglers[0]
        out.append(f"collectives: rank {worst} reaches them {fmt_ns(job.lateness_ns[worst])} after the median rank"
                   " (clocks lined up; kerneltui summary DIR says more)")
    return out


def _ranks(ranks: list[int]) -> str:
    return ("rank " if len(ranks) == 1 else "ranks ") + ", ".join(map(str, ranks))


def _rank_label(r: RankOverview, o: JobOverview) -> str:
    s = o.slowest
    if s is not None and s.straggler and r.summary.rank == s.rank:
        return f"{r.summary.rank} {SLOW_MARK}"
    if r.summary.health and not r.summary.health.get("ok", True):
        return f"{r.summary.rank} {DAMAGED_MARK}"
    return str(r.summary.rank)


def _cells(r: RankOverview) -> list[str] | str:
    """The row's figures, or one text instead of them (a failed rank, one without steps)."""
    if r.summary.error:
        return "failed: " + r.summary.error
    if not r.steps:
        return NO_STEPS
    m = r.mean
    util = r.overview.get("gpu_utilization")
    return [str(r.steps), *(_time(m[f"{k}_ns"]) for k in ("span", *PARTS)), "–" if util is None else fmt_share(util)]


def _time(ns: float) -> str:
    return "0" if not ns else fmt_ns(ns)


HEADER = ["rank", "steps", "step", *(HEADS[p] for p in PARTS), "GPU util"]


def grid(header: list[str], rows: list[tuple[str, list[str] | str]]) -> list[str]:
    """Right-aligned columns; a row whose figures are one text (a failed rank) has it after its label.
    80 columns when the figures fit, else one space between them."""
    whole = [[label, *cells] for label, cells in rows if not isinstance(cells, str)]
    widths = [max([len(header[i]), *(len(r[i]) for r in whole)]) for i in range(len(header))]
    gap = "  " if sum(widths) + 2 * (len(widths) - 1) <= 80 else " "
    lines = [gap.join(h.rjust(w) for h, w in zip(header, widths))]
    for label, cells in rows:
        if isinstance(cells, str):
            lines.append(label.rjust(widths[0]) + gap + printable(cells))
        else:
            lines.append(gap.join(c.rjust(w) for c, w in zip([label, *cells], widths)))
    return lines


def legend(o: JobOverview) -> str:
    marks = ([f"{SLOW_MARK} straggler (mean step {STRAGGLER_SHARE:.0%} or more over the median rank's)"]
             if o.slowest is not None and o.slowest.straggler else [])
    marks += [f"{DAMAGED_MARK} damaged trace"] if o.job.damaged else []
    return " · ".join(marks)


def _zero_parts(o: JobOverview) -> list[str]:
    """Parts that are 0 on every rank with steps: the table leaves their columns out, to fit 80 columns."""
    timed = [r for r in o.ranks if r.steps]
    return [p for p in PARTS if timed and all(not r.mean[f"{p}_ns"] for r in timed)]


def as_table(o: JobOverview) -> str:
    lines = [headline(o.job)[0], SPLIT_LINE, ""]
    zero = _zero_parts(o)
    keep = [i for i, h in enumerate(HEADER) if h not in {HEADS[p] for p in zero}]
    rows = [(_rank_label(r, o), c if isinstance(c := _cells(r), str) else [c[i - 1] for i in keep[1:]])
            for r in o.ranks]
    lines += grid([HEADER[i] for i in keep], rows)
    if zero:
        lines.append(f"({', '.join(HEADS[p] for p in zero)}: 0 on every rank, not shown)")
    lines.append("")
    if legend(o):
        lines.append(legend(o))
    for f in findings(o):
        lines.extend(textwrap.wrap(printable(f), 80, subsequent_indent="  ", break_on_hyphens=False))
    return "\n".join(lines) + "\n"


def as_markdown(o: JobOverview) -> str:
    lines = [f"**{headline(o.job)[0]}**", "", SPLIT_LINE, "",
             "| " + " | ".join(HEADER) + " |", "|---|" + "---:|" * (len(HEADER) - 1)]
    for r in o.ranks:
        cells = _cells(r)
        cells = [cells, *[""] * (len(HEADER) - 2)] if isinstance(cells, str) else cells
        lines.append("| " + " | ".join(markdown_text(c) for c in [_rank_label(r, o), *cells]) + " |")
    notes = [*findings(o), *([legend(o)] if legend(o) else []), *(f"warning: {w}" for w in o.job.warnings)]
    text = "\n".join(lines) + "\n"
    if notes:
        text += "\n" + "\n".join(f"- {markdown_text(n)}" for n in notes) + "\n"
    return text


def job_dict(job: Job) -> dict:
    t = job.totals()
    return {"ranks": t["ranks"], "failed": t["failed"], "world_size": t["world_size"],
            "device": job.good[0].device if job.good else None}


def rank_dict(r: RankOverview) -> dict:
    return {"rank": r.summary.rank, "path": r.summary.path, "healthy": r.summary.health.get("ok") if r.summary.health
            else None, "error": r.summary.error or None, "overview": r.overview}


def as_json(o: JobOverview) -> str:
    doc = {
        "job": job_dict(o.job),
        "ranks": [rank_dict(r) for r in o.ranks],
        "slowest": None if o.slowest is None else o.slowest.to_dict(),
        "no_steps": o.no_steps,
        "stragglers": o.job.stragglers,  # by the collectives (summary DIR), worst first
        "damaged": o.job.damaged,
        "findings": findings(o),
        "skipped": o.job.skipped,
        "warnings": list(o.job.warnings),
    }
    return json_safe(orjson.dumps(doc, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY).decode()) + "\n"


def as_csv(o: JobOverview, for_terminal: bool = False) -> str:
    """A row per rank, the mean step in whole ns: exact for a file or a pipe; escaped on a terminal."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_FIELDS)
    for r in o.ranks:
        m = r.mean
        util = r.overview.get("gpu_utilization") if r.overview else None
        healthy = r.summary.health.get("ok") if r.summary.health else None
        writer.writerow([r.summary.rank, r.steps, *(round(m[f"{k}_ns"]) if m else "" for k in ("span", *PARTS)),
                         "" if util is None else util, "" if healthy is None else healthy, r.summary.path,
                         r.summary.error])
    return csv_for(out.getvalue(), for_terminal)
