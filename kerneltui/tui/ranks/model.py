"""What the ranks screen says, computed without Textual: cells, header, notes, and each lane's clock.

The figures are ``ranks_report.rank_rows``'s (those of `kerneltui summary DIR`), formatted as
its table formats them. Times on the timeline are a rank's own clock minus a shift: its clock
offset from the first rank (aligned clocks), or nothing (raw clocks), then minus one origin
for every lane so that 0 is the earliest GPU work shown.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rich.text import Text

from kerneltui import ranks_report
from kerneltui.analysis.ranks.job import Job
from kerneltui.ranks_report import time_cell
from kerneltui.terminal_text import printable
from kerneltui.units import fmt_ns

STRAGGLER_MARK = "◀"  # a glyph, not a colour: NO_COLOR keeps it
DAMAGED_MARK = ranks_report.DAMAGED_MARK
TIME_KEYS = ("step_ns", "busy_ns", "compute_ns", "comm_ns", "exposed_comm_ns", "idle_ns", "clock_offset_ns",
             "lateness_ns")


@dataclass(frozen=True)
class RankRow:
    rank: int
    cells: tuple[str, ...]  # per TIME_KEYS
    straggler: bool
    damaged: bool  # its trace health is not ok (analysis/health)
    error: str  # the load failed: the one line saying why (its file by name: the row says which rank)
    path: str
    device: str


def rank_rows(job: Job) -> list[RankRow]:
    late = set(job.stragglers)
    return [RankRow(row["rank"], tuple(time_cell(k, row[k]) for k in TIME_KEYS), row["rank"] in late,
                    row["healthy"] is False,
                    short_error(row["error"] or "", row["path"]), printable(row["path"]),
                    printable(row["device"] or "")) for row in ranks_report.rank_rows(job)]


def short_error(error: str, path: str) -> str:
    """A rank's load error with its file named, not its whole path (80 columns hold the reason then)."""
    return printable(error.replace(path, Path(path).name) if path else error)


def clock_label(job: Job, aligned: bool, short: bool = False) -> str:
    if job.offsets_ns is None:
        return "raw clocks (offsets unknown)" if short else "raw clocks: offsets unknown (no collective on every rank)"
    if aligned:
        return "aligned clocks" if short else f"clocks aligned on {job.matched} collectives"
    return "raw clocks"


def header_text(job: Job, aligned: bool, width: int = 200) -> Text:
    """as_table's headline (ranks, world_size, device, slowest step, comm shares) and the clock,
    in the longest wording that fits ``width`` whichever the clock (so that `c` moves nothing else;
    at 80 columns the device goes first)."""
    room = width - 2  # the header's padding
    choices = [_wordings(job, clock) for clock in (True, False)]
    for i, facts in enumerate(choices[0 if aligned else 1]):
        if all(len(" · ".join(c[i])) <= room for c in choices):
            break
    return Text(" · ".join(facts), no_wrap=True, overflow="ellipsis", style="bold")


def _wordings(job: Job, aligned: bool) -> list[list[str]]:
    t = job.totals()
    device = printable(job.good[0].device or "unknown device")
    world = t["world_size"]
    failed = f" ({t['failed']} failed)" if t["failed"] else ""
    step, comm, exposed = fmt_ns(t["step_ns_max"]), f"{t['comm_share']:.1%}", f"{t['exposed_comm_share']:.1%}"
    short_clock = clock_label(job, aligned, True).replace(" clocks", "")
    total = t["ranks"] + t["failed"]  # "3 ranks (1 failed)": three files, two summarised
    few = f"{total}" + (f"/{world}" if world else "") + " ranks" + failed.replace(" (", ", ").rstrip(")")
    return [
        [f"{total} ranks" + (f" of world_size {world}" if world else "") + failed, device,
         f"step {step} (slowest rank)", f"communication {comm} of GPU busy, exposed {exposed}",
         clock_label(job, aligned)],
        [f"{total} ranks" + (f" of {world}" if world else "") + failed, device.removeprefix("NVIDIA "),
         f"step {step} (slowest)", f"comm {comm} of busy, exposed {exposed}", clock_label(job, aligned, True)],
        [few, device.removeprefix("NVIDIA "), f"step {step}", f"comm {comm} exposed {exposed}", short_clock],
        [few, f"step {step}", f"comm {comm} exposed {exposed}", short_clock],
        [few, f"step {step}", f"comm {comm} exp {exposed}", short_clock],
        # the last resort: the clock in a word (the timeline's bar says why offsets are unknown)
        [few, f"step {step}", f"comm {comm} exp {exposed}", "aligned" if aligned and job.offsets_ns else "raw"],
    ]


def notes(job: Job) -> list[str]:
    """The findings (stragglers, clocks, artefacts), then the warnings, each one line of text."""
    return [printable(f) for f in ranks_report.findings(job)] + [printable(f"⚠ {w}") for w in job.warnings]


@dataclass(frozen=True)
class Clock:
    """Where each rank's lane sits: screen time = own time - shift[rank]."""

    aligned: bool
    shift: dict[int, int]  # rank -> ns
    bounds: tuple[int, int]  # screen time of the earliest start and the latest end


def clock_of(job: Job, aligned: bool) -> Clock:
    aligned = aligned and job.offsets_ns is not None
    offsets = job.offsets_ns if aligned else {}
    good = [r for r in job.good if r.window_ns > 0] or job.good
    origin = min(r.window_start_ns - offsets.get(r.rank, 0) for r in good)
    shift = {r.rank: offsets.get(r.rank, 0) + origin for r in job.ranks}
    end = max(r.window_start_ns + r.window_ns - shift[r.rank] for r in good)
    return Clock(aligned, shift, (0, max(end, 1)))


def rank_line(job: Job, index: int, width: int = 200) -> Text:
    """The selected rank in one line: straggler or not, file, launches, collectives, steps (the
    last facts dropped where they do not fit ``width``)."""
    r = job.ranks[index]
    text = Text(no_wrap=True, overflow="ellipsis")
    text.append(f"rank {r.rank}", style="bold")
    if r.error:
        text.append(f" · failed: {short_error(r.error, r.path)}")
        return text
    late = job.lateness_ns.get(r.rank)
    facts = [printable(Path(r.path).name), f"{r.launches:,} launches", f"{len(r.collectives):,} collectives",
             f"{r.steps} steps" if r.steps else "no steps"]
    if r.rank in job.stragglers and late is not None:
        facts.insert(0, f"{STRAGGLER_MARK} straggler, {fmt_ns(late)} late")
    if r.rank in job.damaged:
        facts.insert(0, f"{DAMAGED_MARK} damaged trace: {r.health.get('line', '').removeprefix('NOT HEALTHY: ')}")
    room = width - 2 - len(f"rank {r.rank}")  # the padding
    while len(facts) > 2 and len(" · " + " · ".join(facts)) > room:
        facts.pop()
    text.append(" · " + " · ".join(facts))
    return text
