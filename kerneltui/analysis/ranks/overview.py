"""`summary DIR --overview`: each rank's mean step and its split (analysis/overview.py), and the slowest rank.

A rank's row is the mean of its ``ProfilerStep#N`` steps: span and the parts kernel, memcpy,
memset, comm, dataloader, cpu_only, other (which sum to the span), GPU utilization and the
step count. The slowest rank (largest mean step, among the ranks with steps) is compared with
the median rank (the ranks with steps sorted by mean step, the middle one; of an even count
the lower middle): the excess of its mean step, and per part how much more (or less) time it
spends there, which sum to that excess. It is called a straggler when the excess is
STRAGGLER_SHARE of the median rank's mean step or more; a damaged rank (health.md) never is.
"""

from __future__ import annotations

from dataclasses import dataclass

from kerneltui.analysis.overview import PARTS
from kerneltui.analysis.ranks.rank import RankSummary, damaged
from kerneltui.analysis.ranks.views import JobView, view_job

STRAGGLER_SHARE = 0.05  # a slowest rank this much over the median rank's mean step is a straggler


@dataclass(frozen=True)
class RankOverview:
    summary: RankSummary
    overview: dict | None  # Overview.to_dict(); None for a failed rank

    @property
    def steps(self) -> int:
        return len(self.overview["steps"]) if self.overview else 0

    @property
    def mean(self) -> dict:
        """{span_ns, kernel_ns, ...}: the mean step (empty without steps)."""
        return self.overview["mean"] if self.overview else {}


@dataclass(frozen=True)
class Slowest:
    rank: int
    step_ns: float  # its mean step
    median_rank: int
    median_step_ns: float
    excess_ns: float  # step_ns - median_step_ns
    excess_share: float  # of median_step_ns
    parts_ns: dict  # "<part>_ns": this rank's mean minus the median rank's (they sum to excess_ns)
    mostly: str  # the part that grew most ("" when none did)
    straggler: bool  # excess_share >= STRAGGLER_SHARE and the trace is not damaged
    damaged: bool

    def to_dict(self) -> dict:
        return {"rank": self.rank, "step_ns": self.step_ns, "median_rank": self.median_rank,
                "median_step_ns": self.median_step_ns, "excess_ns": self.excess_ns, "excess_share": self.excess_share,
                "parts_ns": self.parts_ns, "mostly": self.mostly or None, "straggler": self.straggler,
                "damaged": self.damaged}


@dataclass(frozen=True)
class JobOverview:
    view: JobView
    ranks: list[RankOverview]  # rank order, as the job's
    slowest: Slowest | None  # None with fewer than two ranks with steps

    @property
    def job(self):
        return self.view.job

    @property
    def no_steps(self) -> list[int]:
        return [r.summary.rank for r in self.ranks if r.overview is not None and not r.steps]


def job_overview(paths: list[str], cache: bool | None = None, scheduler: str | None = None) -> JobOverview:
    return overview_of(view_job(paths, "overview", cache, scheduler))


def overview_of(view: JobView) -> JobOverview:
    ranks = [RankOverview(r, view.document(r)) for r in view.job.ranks]
    return JobOverview(view, ranks, slowest_rank(ranks))


def slowest_rank(ranks: list[RankOverview]) -> Slowest | None:
    timed = [r for r in ranks if r.steps]
    if len(timed) < 2:
        return None
    by_step = sorted(timed, key=lambda r: (r.mean["span_ns"], -r.summary.rank))
    slow, median = by_step[-1], by_step[(len(by_step) - 1) // 2]
    excess = slow.mean["span_ns"] - median.mean["span_ns"]
    parts = {f"{p}_ns": slow.mean[f"{p}_ns"] - median.mean[f"{p}_ns"] for p in PARTS}
    grew = max(PARTS, key=lambda p: parts[f"{p}_ns"])
    share = excess / median.mean["span_ns"] if median.mean["span_ns"] else 0.0
    hurt = damaged(slow.summary)
    return Slowest(rank=slow.summary.rank, step_ns=slow.mean["span_ns"], median_rank=median.summary.rank,
                   median_step_ns=median.mean["span_ns"], excess_ns=excess, excess_share=share, parts_ns=parts,
                   mostly=grew if excess > 0 and parts[f"{grew}_ns"] > 0 else "", straggler=share >= STRAGGLER_SHARE and not hurt,
                   damaged=hurt)
