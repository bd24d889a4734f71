"""`summary DIR --memory`: each rank's memory table (analysis/memory.py), a row per rank and CUDA device.

Per (rank, device): peak allocated, peak reserved, allocations and frees, and the allocations
never freed within the trace, as ``memory_dict`` gives them. Over the job: the (rank, device)
with the highest peak allocated and its spread over the lowest; ranks whose trace has no
``[memory]`` events (or none for a CUDA device) are named.
"""

from __future__ import annotations

from dataclasses import dataclass

from kerneltui.analysis.ranks.rank import RankSummary
from kerneltui.analysis.ranks.views import JobView, view_job


@dataclass(frozen=True)
class RankMemory:
    summary: RankSummary
    memory: dict | None  # memory_dict(...); None for a failed rank

    @property
    def devices(self) -> list[dict]:
        return self.memory["devices"] if self.memory else []

    @property
    def has_events(self) -> bool:
        """The trace holds [memory] events (of any device type)."""
        return bool(self.memory) and "events" in self.memory


@dataclass(frozen=True)
class Peak:
    """The highest and the lowest peak allocated over every (rank, device)."""

    rank: int
    device: int
    peak_allocated_bytes: int
    lowest_rank: int
    lowest_device: int
    lowest_peak_allocated_bytes: int

    @property
    def spread_bytes(self) -> int:
        return self.peak_allocated_bytes - self.lowest_peak_allocated_bytes

    @property
    def spread_share(self) -> float | None:
        return self.spread_bytes / self.lowest_peak_allocated_bytes if self.lowest_peak_allocated_bytes else None

    def to_dict(self) -> dict:
        return {"rank": self.rank, "device": self.device, "peak_allocated_bytes": self.peak_allocated_bytes,
                "lowest_rank": self.lowest_rank, "lowest_device": self.lowest_device,
                "lowest_peak_allocated_bytes": self.lowest_peak_allocated_bytes, "spread_bytes": self.spread_bytes,
                "spread_share": self.spread_share}


@dataclass(frozen=True)
class JobMemory:
    view: JobView
    ranks: list[RankMemory]  # rank order, as the job's
    peak: Peak | None  # None when no rank has a CUDA device's figures

    @property
    def job(self):
        return self.view.job

    @property
    def without_events(self) -> list[int]:
        """Read ranks whose trace has no [memory] events at all."""
        return [r.summary.rank for r in self.ranks if r.memory is not None and not r.has_events]


def job_memory(paths: list[str], cache: bool | None = None, scheduler: str | None = None) -> JobMemory:
    return memory_of(view_job(paths, "memory", cache, scheduler))


def memory_of(view: JobView) -> JobMemory:
    ranks = [RankMemory(r, view.document(r)) for r in view.job.ranks]
    return JobMemory(view, ranks, peak_of(ranks))


def peak_of(ranks: list[RankMemory]) -> Peak | None:
    rows = [(d["peak_allocated_bytes"], r.summary.rank, d["device"]) for r in ranks for d in r.devices]
    if not rows:
        return None
    high = max(rows, key=lambda x: (x[0], -x[1], -x[2]))  # ties: the lowest rank
    others = [x for x in rows if x is not high]
    low = min(others or [high], key=lambda x: (x[0], x[1], x[2]))  # another (rank, device) where there is one
    return Peak(rank=high[1], device=high[2], peak_allocated_bytes=high[0], lowest_rank=low[1], lowest_device=low[2],
                lowest_peak_allocated_bytes=low[0])
