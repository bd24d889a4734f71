"""`kerneltui summary --health`: only the health report of a trace (analysis/health), for CI.

The table names each cause, how many GPU events, launches or steps it holds, their GPU time
and what it affects; causes that change no figure are listed after the others.
"""

from __future__ import annotations

import csv
import io
import textwrap

import orjson

from kerneltui.analysis.health import RULES, Cause, Health
from kerneltui.terminal_text import json_safe, printable_lines
from kerneltui.units import fmt_ns, plural

NAME_WIDTH = max(len(c) for c in RULES)  # shared_correlation
SINGULAR = {"GPU events": "GPU event", "launches": "launch", "steps": "step", "file events": "unreadable event"}
CSV_FIELDS = ("path", "ok", "cause", "events", "unit", "share", "gpu_ns", "changes_figures", "steps", "affects")


def as_text(path: str, health: Health, width: int = 80) -> str:
    lines = [path]
    damage = health.damage()
    listed = [c for c in health.causes if not c.changes_figures]
    if not damage:
        lines.append("healthy")
    else:
        lines.append(f"NOT HEALTHY: {len(damage)} {'cause changes' if len(damage) == 1 else 'causes change'} figures"
                     " (marked in summary, open and diff)")
        lines += _causes(damage, width)
    if listed:
        lines.append("listed, figures unchanged:" if damage else "listed:")
        lines += _causes(listed, width)
    return printable_lines(lines)


def _causes(causes: list[Cause], width: int) -> list[str]:
    out = []
    for c in causes:
        head = f"  {c.cause:<{NAME_WIDTH}} {plural(c.events, SINGULAR[c.unit])} ({_share(c.share)})"
        if c.unit == "file events" and not c.events:
            head = f"  {c.cause:<{NAME_WIDTH}} the file is cut off"
        if c.gpu_ns is not None and c.unit != "launches":
            head += f", {fmt_ns(c.gpu_ns)} GPU"
        out.append(head)
        indent = " " * (NAME_WIDTH + 3)
        out += textwrap.wrap(c.affects, width, initial_indent=indent, subsequent_indent=indent)
        if c.steps and c.unit != "steps":
            shown = ", ".join(c.steps[:6]) + (f" and {len(c.steps) - 6} more" if len(c.steps) > 6 else "")
            out += textwrap.wrap(f"in {shown}", width, initial_indent=indent, subsequent_indent=indent)
    return out


def _share(share: float) -> str:
    return f"{100 * share:.1f}%" if share >= 0.001 or share == 0 else f"{100 * share:.2f}%"


def as_json(path: str, health: Health) -> str:
    doc = {"path": path, **health.to_dict()}
    return json_safe(orjson.dumps(doc, option=orjson.OPT_INDENT_2).decode()) + "\n"


def as_csv(path: str, health: Health) -> str:
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(CSV_FIELDS)
    for c in health.causes:
        writer.writerow([path, health.ok, c.cause, c.events, c.unit, c.share, "" if c.gpu_ns is None else c.gpu_ns,
                         c.changes_figures, " ".join(c.steps), c.affects])
    return out.getvalue()
