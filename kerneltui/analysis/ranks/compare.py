"""Two runs of a multi-rank job (A, B): the job's figures side by side, and each rank's.

Ranks are paired by rank number; a rank in one run only is listed, not compared. The
per-rank trace diff (what fused, what moved) is `kerneltui diff A B --rank N`.
"""

from __future__ import annotations

from dataclasses import dataclass

from kerneltui.analysis.ranks.job import Job

FIGURES = ("step_ns", "busy_ns", "compute_ns", "comm_ns", "exposed_comm_ns", "idle_ns")


@dataclass(frozen=True)
class JobDiff:
    a: Job
    b: Job
    pairs: list[tuple[int, dict, dict]]  # rank, A's figures, B's figures
    only_a: list[int]
    only_b: list[int]

    def totals(self) -> tuple[dict, dict]:
        return self.a.totals(), self.b.totals()

    def change(self, key: str) -> float | None:
        """B over A, minus one, for a job total (step: the slowest rank's)."""
        ta, tb = self.totals()
        key = "step_ns_max" if key == "step_ns" else key
        return tb[key] / ta[key] - 1 if ta.get(key) else None


def compare_jobs(a: Job, b: Job) -> JobDiff:
    ranks_a = {r.rank: r for r in a.good}
    ranks_b = {r.rank: r for r in b.good}
    pairs = [(rank, _figures(ranks_a[rank]), _figures(ranks_b[rank])) for rank in sorted(ranks_a.keys() & ranks_b)]
    return JobDiff(a, b, pairs, sorted(ranks_a.keys() - ranks_b.keys()), sorted(ranks_b.keys() - ranks_a.keys()))


def _figures(r) -> dict:
    return {k: getattr(r, k) for k in FIGURES}


def rank_file(job: Job, rank: int) -> str:
    for r in job.ranks:
        if r.rank == rank:
            return r.path
    raise KeyError(rank)
