"""A multi-rank job: every rank summarised, clocks lined up, stragglers and clock artefacts found."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from kerneltui.analysis.ranks.clock import (
    Matched,
    fit_clocks,
    lateness,
    match_collectives,
    stragglers,
)
from kerneltui.analysis.ranks.collectives import SYNCHRONISING
from kerneltui.analysis.ranks.discover import rank_files
from kerneltui.analysis.ranks.rank import RankSummary, damaged
from kerneltui.analysis.ranks.run import summarize_ranks
from kerneltui.errors import UserError
from kerneltui.units import fmt_ns, plural

ARTEFACT_MIN_NS = 100_000  # below this an inflated span is noise next to launch jitter


@dataclass(frozen=True)
class Artefact:
    """A collective that, across ranks on their raw clocks, looks far longer than it is once the clocks
    are lined up: the difference is clock offset (or profilers started apart), not communication."""

    index: int  # among the matched collectives, in time order
    kind: str
    raw_span_ns: int  # first rank's start to last rank's end, raw clocks
    aligned_span_ns: int  # the same with each rank's offset removed


@dataclass(frozen=True)
class Job:
    ranks: list[RankSummary]  # every rank file, rank order; failed ones carry ``error``
    offsets_ns: dict[int, int] | None  # rank -> clock offset from the first good rank; None: unknown
    skipped: list[str] = field(default_factory=list)  # files that are no trace, or traces of another job
    lateness_ns: dict[int, int] = field(default_factory=dict)
    stragglers: list[int] = field(default_factory=list)  # ranks, worst first (never a damaged one)
    damaged: list[int] = field(default_factory=list)  # ranks whose trace health is not ok (analysis/health)
    damaged_late: list[int] = field(default_factory=list)  # damaged ranks that would have been called stragglers
    artefacts: list[Artefact] = field(default_factory=list)
    matched: int = 0  # collectives found on every rank (what the offsets rest on)
    world_size: int | None = None
    warnings: tuple[str, ...] = ()

    @property
    def good(self) -> list[RankSummary]:
        return [r for r in self.ranks if not r.error]

    def totals(self) -> dict:
        good = self.good
        sums = {k: sum(getattr(r, k) for r in good)
                for k in ("busy_ns", "compute_ns", "comm_ns", "exposed_comm_ns", "idle_ns", "window_ns")}
        steps = [r.step_ns for r in good]
        return {
            "ranks": len(good), "failed": len(self.ranks) - len(good), "world_size": self.world_size,
            "step_ns_max": max(steps, default=0), "step_ns_mean": int(np.mean(steps)) if steps else 0,
            **sums,
            "comm_share": sums["comm_ns"] / sums["busy_ns"] if sums["busy_ns"] else 0.0,
            "exposed_comm_share": sums["exposed_comm_ns"] / sums["busy_ns"] if sums["busy_ns"] else 0.0,
        }


def summarize_job(paths: list[str], cache: bool | None = None, scheduler: str | None = None, progress=None) -> Job:
    files = rank_files(paths)
    summaries = summarize_ranks(files, cache, scheduler, progress)
    return job_of(summaries)


def job_of(summaries: list[RankSummary]) -> Job:
    """The job-level analysis of rank summaries (however they were computed)."""
    warnings: list[str] = []
    summaries, skipped = _members(summaries, warnings)
    if not summaries:
        raise UserError("no rank traces here: " + "; ".join(warnings))
    ranks = _numbered(summaries, warnings)
    good = [r for r in ranks if not r.error]
    hurt = [r.rank for r in good if damaged(r)]
    for r in ranks:
        if r.error:
            warnings.append(f"rank {r.rank}: {r.error} (the other ranks are summarised)")
        warnings.extend(f"rank {r.rank}: {w}" for w in r.warnings)
    if not good:
        raise UserError("no rank of this job could be read: " + "; ".join(r.error for r in ranks))
    world = _world_size(good, len(ranks), warnings)
    _check_devices(good, warnings)
    if len(good) == 1:
        warnings.append("one rank: clock offsets, lateness and stragglers need at least two")
        return Job(ranks, None, skipped=skipped, damaged=hurt, world_size=world, warnings=tuple(warnings))  # one clock: nothing to line up
    if not any(len(r.collectives) for r in good):
        warnings.append("no collective kernels on any rank (compute only): nothing to line the clocks up with, "
                        "ranks are shown on their own clocks")
        return Job(ranks, None, skipped=skipped, damaged=hurt, world_size=world, warnings=tuple(warnings))
    _count_mismatch(good, warnings)
    fit = fit_clocks([r.collectives for r in good])
    known = [i for i, o in enumerate(fit.offsets) if o is not None]
    for i, r in enumerate(good):
        if fit.offsets[i] is None and fit.shared[i]:
            warnings.append(f"rank {r.rank}'s collectives do not line up with the others' (their ends differ by "
                            f"{fmt_ns(fit.spread[i])} around any one offset: a cut-off or mismatched trace?): "
                            "its clock offset is unknown")
        elif fit.offsets[i] is None and len(known) >= 2:
            warnings.append(f"rank {r.rank} shares no synchronising collective with the others: its clock offset "
                            "is unknown")
    if len(known) < 2:
        warnings.append("no synchronising collective (all-reduce, all-gather, reduce-scatter, broadcast) lines up "
                        "across ranks: clock offsets unknown, ranks are shown on their own clocks")
        return Job(ranks, None, skipped=skipped, damaged=hurt, world_size=world, warnings=tuple(warnings))
    ranked = [good[i] for i in known]
    offsets = np.array([fit.offsets[i] for i in known], np.int64)
    matched = match_collectives([r.collectives for r in ranked], [fit.keyed[i] for i in known])
    order = [r.rank for r in ranked]
    offsets_ns = {rank: int(o) for rank, o in zip(order, offsets)}
    if not matched.keys:  # offsets from pairs with the reference, but no collective on every rank
        return Job(ranks, offsets_ns, skipped=skipped, damaged=hurt, world_size=world, warnings=tuple(warnings))
    late = lateness(matched, offsets)
    # a damaged rank's collectives may be missing or mistimed: it is marked, never called the straggler
    slow = [order[i] for i in stragglers(matched, offsets)]
    return Job(
        ranks,
        offsets_ns,
        skipped=skipped,
        lateness_ns={rank: int(v) for rank, v in zip(order, late)},
        stragglers=[r for r in slow if r not in hurt],
        damaged=hurt,
        damaged_late=[r for r in slow if r in hurt],
        artefacts=_artefacts(matched, offsets),
        matched=len(matched.keys),
        world_size=world,
        warnings=tuple(warnings),
    )


def _members(summaries: list[RankSummary], warnings: list[str]) -> tuple[list[RankSummary], list[str]]:
    """The files that are ranks of this job, and the paths of those that are not, each named in a warning:
    a file that is no trace (a notes.json beside the ranks); where the ranks carry distributedInfo, a trace
    without it (a single-GPU run dropped in the directory) or of another world size."""
    skipped = []
    traces = []
    for s in summaries:
        if s.not_a_trace:
            skipped.append(s.path)
            warnings.append(f"skipped {Path(s.path).name}: {s.error.replace(s.path, '').strip(': ')}")
        else:
            traces.append(s)
    good = [s for s in traces if not s.error]
    sizes = Counter(s.world_size for s in good if s.world_size is not None)
    if not sizes:  # no rank says: numbered from file names, as they come
        return traces, skipped
    world = sizes.most_common(1)[0][0]
    kept = []
    for s in traces:
        if s.error or s.world_size == world:
            kept.append(s)
            continue
        skipped.append(s.path)
        why = ("has no distributedInfo, unlike the other ranks" if s.world_size is None
               else f"is of world_size {s.world_size}, the other ranks' is {world}")
        warnings.append(f"skipped {Path(s.path).name}: it {why} (a trace of another run?)")
    return kept, skipped


def _numbered(summaries: list[RankSummary], warnings: list[str]) -> list[RankSummary]:
    """Rank numbers from distributedInfo or file names; by file order where missing or repeated."""
    numbers = [s.rank for s in summaries]
    missing = [s for s in summaries if s.rank is None]
    repeated = [n for n, k in Counter(n for n in numbers if n is not None).items() if k > 1]
    if repeated:
        warnings.append(f"rank {repeated[0]} is in more than one file (two jobs mixed?): ranks numbered by file order")
        summaries = [replace(s, rank=i, rank_from="") for i, s in enumerate(summaries)]
    elif missing:
        used = {n for n in numbers if n is not None}
        free = (i for i in range(len(summaries) + len(used)) if i not in used)
        named = {id(s): next(free) for s in missing}
        readable = [s for s in missing if not s.error]  # an unreadable file says nothing either way
        if readable:
            warnings.append(f"{len(readable)} of {len(summaries)} files say no rank (no distributedInfo, no rank in "
                            "the name): numbered by file order")
        summaries = [replace(s, rank=named[id(s)]) if s.rank is None else s for s in summaries]
    return sorted(summaries, key=lambda s: s.rank)


def _world_size(good: list[RankSummary], files: int, warnings: list[str]) -> int | None:
    sizes = Counter(r.world_size for r in good if r.world_size is not None)
    if not sizes:
        return None
    if len(sizes) > 1:
        warnings.append("the ranks disagree on world_size (" + ", ".join(f"{w} in {k}" for w, k in sizes.items())
                        + "): traces of different jobs?")
    world = sizes.most_common(1)[0][0]
    if world != files:
        read = len(good)
        cover = f"the {read} read" if read != files else (f"those {files}" if files != 1 else "that one")
        warnings.append(f"world_size is {world} but {plural(files, 'rank file')} {'were' if files != 1 else 'was'}"
                        f" found: the job figures cover {cover}")
    return world


def _check_devices(good: list[RankSummary], warnings: list[str]) -> None:
    devices = Counter(r.device for r in good if r.device != "unknown device")  # unknown is not different
    if len(devices) > 1:
        warnings.append("the ranks ran on different devices (" + ", ".join(f"{d}: {k}" for d, k in devices.items())
                        + "): compare their times with care")


def _artefacts(matched: Matched, offsets: np.ndarray) -> list[Artefact]:
    """Matched collectives whose cross-rank span on raw clocks is more than twice (and 100 µs more
    than) their span on aligned clocks."""
    raw = matched.end.max(axis=0) - matched.start.min(axis=0)
    aligned = (matched.end - offsets[:, None]).max(axis=0) - (matched.start - offsets[:, None]).min(axis=0)
    inflated = np.flatnonzero((raw > 2 * aligned) & (raw - aligned > ARTEFACT_MIN_NS))
    return [Artefact(int(j), _kind(matched.keys[j]), int(raw[j]), int(aligned[j])) for j in inflated.tolist()]


def _kind(key: tuple) -> str:
    return "collective" if key[1] == "seq" else key[1]


def _count_mismatch(good: list[RankSummary], warnings: list[str]) -> None:
    """Matching by order assumes every rank's trace holds the same collectives: say when not (clock.py
    then searches for the shift that lines each rank's up)."""
    counts = {}
    for r in good:
        c = r.collectives
        for key in set(zip(c.group.tolist(), c.kind.tolist())):
            if key[1] in SYNCHRONISING:
                counts.setdefault(key, {})[r.rank] = int(((c.group == key[0]) & (c.kind == key[1])).sum())
    for (group, kind), per_rank in sorted(counts.items()):
        if len(set(per_rank.values())) > 1 or len(per_rank) < len(good):
            low = min(per_rank.values()) if len(per_rank) == len(good) else 0
            high = max(per_rank.values())
            warnings.append(f"the ranks hold {low} to {high} {kind} collectives{f' in group {group}' if group else ''}"
                            " (a cut-off trace, or profilers started at different steps?): each rank's are lined up"
                            " with the fullest rank's by their end times where enough overlap, else left out")
