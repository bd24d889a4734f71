"""A per-trace view of every rank of a job (`summary DIR --overview`, `summary DIR --memory`).

Each rank is loaded where the multi-rank summary loads it (run.py: worker processes bounded by
memory, or a Dask cluster) and gives back its RankSummary (for the job's numbering, membership
checks and warnings, job.py) together with one small per-trace document: the overview
(``Overview.to_dict()``, analysis/overview.py) or the memory table (``memory_dict``,
analysis/memory.py). Never the trace: the parent's memory does not grow with the job.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import partial

from kerneltui.analysis.ranks.job import Job, job_of
from kerneltui.analysis.ranks.rank import (
    RankSummary,
    _claims_trace,
    failed_rank,
    summarize_rank,
)
from kerneltui.analysis.ranks.run import map_ranks
from kerneltui.errors import NotATrace, TraceError

VIEWS = ("overview", "memory")


@dataclass(frozen=True)
class RankView:
    summary: RankSummary  # as `summary DIR` has it; ``error`` when the rank could not be read
    document: dict | None = None  # the view's per-trace JSON document; None when the rank failed


def view_rank_file(path: str, view: str, cache: bool | None = None) -> RankView:
    """Load one rank and compute its summary and ``view`` (one of VIEWS); a trace that cannot be read
    gives a failed summary, as summarize_rank_file does."""
    from kerneltui.trace.model import load_trace

    if view not in VIEWS:
        raise ValueError(f"unknown view {view!r}")
    try:
        trace = load_trace(path, cache=cache)
    except TraceError as exc:  # as rank.summarize_rank_file: a JSON document that is no trace is not a rank
        foreign = isinstance(exc, NotATrace) and (exc.json or not _claims_trace(path))
        return RankView(replace(failed_rank(path, str(exc)), not_a_trace=foreign))
    except MemoryError:
        return RankView(failed_rank(path, f"{path}: not enough memory to load this rank"))
    if not len(trace.events):
        return RankView(failed_rank(path, f"{path}: no events in this trace: nothing to summarise", trace.meta.rank,
                                    trace.meta.world_size))
    summary = summarize_rank(trace)
    # the timeline's busy profiles are not shown here: not sent back
    summary = replace(summary, compute_profile=summary.compute_profile[:0], comm_profile=summary.comm_profile[:0])
    if view == "overview":
        from kerneltui.analysis.overview import overview

        return RankView(summary, overview(trace).to_dict())
    from kerneltui.analysis.memory import memory_dict, memory_table

    return RankView(summary, memory_dict(memory_table(trace)))


def view_ranks(files: list[str], view: str, cache: bool | None = None, scheduler: str | None = None) -> list[RankView]:
    """Every file's RankView, in file order, loaded where run.summarize_ranks loads ranks."""
    if view not in VIEWS:
        raise ValueError(f"unknown view {view!r}")
    return map_ranks(partial(_view_task, view=view), files, cache, scheduler, missing=_missing)


def _view_task(path: str, cache: bool | None, view: str) -> RankView:
    return view_rank_file(path, view, cache)


def _missing(path: str, why: str) -> RankView:
    return RankView(failed_rank(path, why))


@dataclass(frozen=True)
class JobView:
    """A job (job.py: ranks in rank order, skipped files, warnings) and each rank's view document."""

    job: Job
    documents: dict[str, dict | None]  # by RankSummary.path; None for a failed rank

    def document(self, r: RankSummary) -> dict | None:
        return None if r.error else self.documents.get(r.path)


def view_job(paths: list[str], view: str, cache: bool | None = None, scheduler: str | None = None) -> JobView:
    from kerneltui.analysis.ranks.discover import rank_files

    views = view_ranks(rank_files(paths), view, cache, scheduler)
    job = job_of([v.summary for v in views])
    return JobView(job, {v.summary.path: v.document for v in views})
