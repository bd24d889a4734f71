"""`kerneltui summary DIR --format table|json|csv|markdown`: a multi-rank Job as text.

One row per rank (step, busy, compute, communication, exposed communication, idle, clock
offset, lateness), the job's totals, and the findings: stragglers, clock artefacts, warnings.
JSON keeps names and paths exact; the table and Markdown escape them for a terminal.
"""

from __future__ import annotations

import csv
import io
import textwrap

import numpy as np
import orjson

from kerneltui.analysis.ranks.compare import FIGURES, JobDiff
from kerneltui.analysis.ranks.job import Job
from kerneltui.terminal_text import csv_for, json_safe, markdown_text, printable
from kerneltui.units import fmt_ns, plural

RANK_FIELDS = ("rank", "device", "steps", "step_ns", "busy_ns", "compute_ns", "comm_ns", "exposed_comm_ns",
               "idle_ns", "window_ns", "launches", "collectives", "clock_offset_ns", "lateness_ns", "healthy", "health",
               "path", "error")
DAMAGED_MARK = "⚠"  # a rank whose trace health is not ok: its figures are not to be trusted


def rank_rows(job: Job) -> list[dict]:
    rows = []
    for r in job.ranks:
        offset = None if job.offsets_ns is None else job.offsets_ns.get(r.rank)
        rows.append({
            "rank": r.rank, "device": r.device, "steps": r.steps, "step_ns": r.step_ns, "busy_ns": r.busy_ns,
            "compute_ns": r.compute_ns, "comm_ns": r.comm_ns, "exposed_comm_ns": r.exposed_comm_ns,
            "idle_ns": r.idle_ns, "window_ns": r.window_ns, "launches": r.launches, "collectives": len(r.collectives),
            "clock_offset_ns": offset, "lateness_ns": job.lateness_ns.get(r.rank),
            "healthy": r.health.get("ok") if r.health else None, "health": r.health.get("line") if r.health else None,
            "path": r.path, "error": r.error or None,
        })
    return rows


def findings(job: Job) -> list[str]:
    """What a user should look at first, as sentences."""
    out = []
    if job.stragglers:
        worst = job.stragglers[0]
        late = f"reaches the collectives {fmt_ns(job.lateness_ns[worst])} after the median rank"
        if len(job.stragglers) == 1:
            out.append(f"straggler: rank {worst} {late}; the others wait for it")
        else:
            out.append(f"stragglers: ranks {', '.join(str(r) for r in job.stragglers)} (rank {worst}, the worst, {late};"
                       " the others wait for them)")
    elif job.offsets_ns is not None and len(job.good) > 1 and not job.damaged_late:
        out.append(f"no straggler: every rank reaches the {job.matched} matched collectives within noise of the others")
    by_rank = {r.rank: r for r in job.ranks}
    for rank in job.damaged:
        late = job.lateness_ns.get(rank)
        looks = (f"; it reaches the collectives {fmt_ns(late)} after the median rank, but a damaged trace is not "
                 "called a straggler" if rank in job.damaged_late and late is not None else "")
        out.append(f"damaged: rank {rank}'s trace: {by_rank[rank].health.get('line', '').removeprefix('NOT HEALTHY: ')}"
                   f"{looks} (kerneltui summary --health on its file says more)")
    if job.offsets_ns:
        far = max(job.offsets_ns.items(), key=lambda kv: abs(kv[1]))
        if far[1]:
            out.append(f"clocks: rank {far[0]}'s clock is {fmt_ns(abs(far[1]))} {'ahead of' if far[1] > 0 else 'behind'}"
                       f" rank {job.good[0].rank}'s (from {job.matched} collectives that end together); "
                       "the timeline lines them up")
    if job.artefacts:
        raw = int(np.median([a.raw_span_ns for a in job.artefacts]))
        aligned = int(np.median([a.aligned_span_ns for a in job.artefacts]))
        out.append(f"clock artefacts: on raw clocks {len(job.artefacts)} of the {job.matched} collectives would look "
                   f"{fmt_ns(raw)} long across ranks (median); lined up they take {fmt_ns(aligned)}: the rest is "
                   "clock offset, not communication")
    return out


def as_json(job: Job) -> str:
    doc = {
        "job": job.totals(),
        "ranks": rank_rows(job),
        "stragglers": job.stragglers,
        "damaged": job.damaged,
        "damaged_late": job.damaged_late,
        "clock_offsets_ns": None if job.offsets_ns is None else {str(k): v for k, v in job.offsets_ns.items()},
        "matched_collectives": job.matched,
        "artefacts": [a.__dict__ for a in job.artefacts],
        "findings": findings(job),
        "warnings": list(job.warnings),
    }
    return json_safe(orjson.dumps(doc, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY).decode()) + "\n"


def as_csv(job: Job, for_terminal: bool = False) -> str:
    """A row per rank: exact for a file or a pipe; escaped on a terminal (device names and paths come from files)."""
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=RANK_FIELDS, lineterminator="\n")
    writer.writeheader()
    for row in rank_rows(job):
        writer.writerow({k: "" if v is None else v for k, v in row.items()})
    return csv_for(out.getvalue(), for_terminal)


_COLUMNS = (("rank", "rank"), ("step", "step_ns"), ("busy", "busy_ns"), ("compute", "compute_ns"),
            ("comm", "comm_ns"), ("exposed", "exposed_comm_ns"), ("idle", "idle_ns"), ("offset", "clock_offset_ns"),
            ("late", "lateness_ns"))


def time_cell(key: str, ns: int | None) -> str:
    """A figure as the table shows it (and the ranks screen): – unknown, 0, + on a clock ahead."""
    if ns is None:
        return "–"
    if ns == 0:
        return "0"
    return ("+" if key == "clock_offset_ns" and ns > 0 else "") + fmt_ns(ns)


def _cells(row: dict, straggler: bool = False) -> list[str]:
    rank = f"{row['rank']} ◀" if straggler else f"{row['rank']} {DAMAGED_MARK}" if row["healthy"] is False else str(row["rank"])
    if row["error"]:
        return [rank, "failed: " + printable(row["error"])]
    return [rank, *(time_cell(key, row[key]) for _, key in _COLUMNS[1:])]


def headline(job: Job) -> list[str]:
    """Two lines that fit 80 columns: what the job is, and its totals."""
    t = job.totals()
    return [
        printable(plural(t["ranks"] + t["failed"], "rank") + (f" of world_size {t['world_size']}" if t["world_size"] else "")
                  + (f" ({t['failed']} failed)" if t["failed"] else "")
                  + f" · {job.good[0].device}"),
        (f"step {fmt_ns(t['step_ns_max'])} (slowest rank) · communication {t['comm_share']:.1%} of GPU busy,"
         f" exposed {t['exposed_comm_share']:.1%}"),
    ]


def as_table(job: Job) -> str:
    lines = [*headline(job), ""]
    header = [h for h, _ in _COLUMNS]
    rows = [_cells(r, r["rank"] in job.stragglers) for r in rank_rows(job)]
    whole = [r for r in rows if len(r) == len(header)]
    widths = [max(len(header[i]), *(len(r[i]) for r in whole)) for i in range(len(header))]
    gap = "  " if sum(widths) + 2 * (len(widths) - 1) <= 80 else " "  # 80 columns when it can
    lines.append(gap.join(h.rjust(w) for h, w in zip(header, widths)))
    for cells in rows:
        if len(cells) != len(header):  # a failed rank: its error instead of figures
            lines.append(cells[0].rjust(widths[0]) + gap + cells[1])
        else:
            lines.append(gap.join(c.rjust(w) for c, w in zip(cells, widths)))
    lines.append("")
    legend = (["◀ straggler"] if job.stragglers else []) + ([f"{DAMAGED_MARK} damaged trace"] if job.damaged else [])
    if legend:
        lines.append(" · ".join(legend))
    for f in findings(job):
        lines.extend(textwrap.wrap(printable(f), 80, subsequent_indent="  "))
    return "\n".join(lines) + "\n"


def as_markdown(job: Job) -> str:
    header = [h for h, _ in _COLUMNS]
    lines = [*(f"**{line}**" if i == 0 else line for i, line in enumerate(headline(job))), "",
             "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in rank_rows(job):
        cells = _cells(row, row["rank"] in job.stragglers)
        cells += [""] * (len(header) - len(cells))
        lines.append("| " + " | ".join(markdown_text(c) for c in cells) + " |")
    text = "\n".join(lines) + "\n"
    notes = findings(job) + [f"warning: {w}" for w in job.warnings]
    if notes:
        text += "\n" + "\n".join(f"- {markdown_text(n)}" for n in notes) + "\n"
    return text


# -- two runs of a job ---------------------------------------------------------------
def _change(a: int, b: int) -> str:
    return "–" if not a else f"{(b / a - 1):+.1%}"


def job_diff_rows(d: JobDiff) -> list[dict]:
    rows = [{"rank": "job", **{f"{k}_a": v for k, v in _job_figures(d.a).items()},
             **{f"{k}_b": v for k, v in _job_figures(d.b).items()}}]
    for rank, fa, fb in d.pairs:
        rows.append({"rank": rank, **{f"{k}_a": v for k, v in fa.items()}, **{f"{k}_b": v for k, v in fb.items()}})
    return rows


def _job_figures(job: Job) -> dict:
    t = job.totals()
    return {"step_ns": t["step_ns_max"], **{k: t[k] for k in FIGURES[1:]}}


def job_diff_findings(d: JobDiff) -> list[str]:
    out = []
    step = d.change("step_ns")
    if step is not None:
        out.append(f"step (slowest rank) {fmt_ns(d.a.totals()['step_ns_max'])} → {fmt_ns(d.b.totals()['step_ns_max'])}"
                   f" ({step:+.1%})")
    exposed = d.change("exposed_comm_ns")
    if exposed is not None:
        out.append(f"exposed communication, all ranks: {exposed:+.1%}")
    sa, sb = d.a.stragglers, d.b.stragglers
    if sa != sb:
        out.append(f"stragglers: A {', '.join(map(str, sa)) or 'none'} → B {', '.join(map(str, sb)) or 'none'}")
    if d.only_a or d.only_b:
        out.append(f"ranks in one run only: A {d.only_a or '–'}, B {d.only_b or '–'} (not compared)")
    return out


def job_diff_table(d: JobDiff) -> str:
    header = ["rank", "step A", "step B", "change", "comm A", "comm B", "exposed A", "exposed B", "change"]
    rows = []
    for row in job_diff_rows(d):
        rows.append([str(row["rank"]), fmt_ns(row["step_ns_a"]), fmt_ns(row["step_ns_b"]),
                     _change(row["step_ns_a"], row["step_ns_b"]), fmt_ns(row["comm_ns_a"]), fmt_ns(row["comm_ns_b"]),
                     fmt_ns(row["exposed_comm_ns_a"]), fmt_ns(row["exposed_comm_ns_b"]),
                     _change(row["exposed_comm_ns_a"], row["exposed_comm_ns_b"])])
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
    gap = "  " if sum(widths) + 2 * (len(widths) - 1) <= 80 else " "  # 80 columns when it can
    lines = [printable(f"A: {plural(len(d.a.good), 'rank')} ({d.a.ranks[0].path.rsplit('/', 1)[0]})"),
             printable(f"B: {plural(len(d.b.good), 'rank')} ({d.b.ranks[0].path.rsplit('/', 1)[0]})"), ""]
    lines.append(gap.join(h.rjust(w) for h, w in zip(header, widths)))
    lines.extend(gap.join(c.rjust(w) for c, w in zip(r, widths)) for r in rows)
    lines.append("")
    for f in job_diff_findings(d):
        lines.extend(textwrap.wrap(printable(f), 80, subsequent_indent="  "))
    lines.append("per rank, what changed in its kernels: kerneltui diff A B --rank N")
    return "\n".join(lines) + "\n"


def job_diff_json(d: JobDiff) -> str:
    doc = {"a": {"job": d.a.totals(), "stragglers": d.a.stragglers, "warnings": list(d.a.warnings)},
           "b": {"job": d.b.totals(), "stragglers": d.b.stragglers, "warnings": list(d.b.warnings)},
           "ranks": job_diff_rows(d)[1:], "only_a": d.only_a, "only_b": d.only_b, "findings": job_diff_findings(d)}
    return json_safe(orjson.dumps(doc, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY).decode()) + "\n"


def job_diff_markdown(d: JobDiff) -> str:
    rows = job_diff_rows(d)
    lines = ["| rank | step A | step B | change | comm A | comm B | exposed A | exposed B | change |",
             "|---|---|---|---|---|---|---|---|---|"]
    for row in rows:
        lines.append(f"| {row['rank']} | {fmt_ns(row['step_ns_a'])} | {fmt_ns(row['step_ns_b'])} | "
                     f"{_change(row['step_ns_a'], row['step_ns_b'])} | {fmt_ns(row['comm_ns_a'])} | "
                     f"{fmt_ns(row['comm_ns_b'])} | {fmt_ns(row['exposed_comm_ns_a'])} | "
                     f"{fmt_ns(row['exposed_comm_ns_b'])} | "
                     f"{_change(row['exposed_comm_ns_a'], row['exposed_comm_ns_b'])} |")
    return "\n".join(lines) + "\n\n" + "\n".join(f"- {markdown_text(f)}" for f in job_diff_findings(d)) + "\n"
