"""The health causes: which change figures, what each counts, and the Health a trace gets (see __init__)."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from kerneltui.units import plural

DAMAGE_LIMIT = 0.01  # above this share of a side's GPU events, a diff abstains (compare/diff.py)
# The causes a diff abstains on: what they change is the count or the time of GPU work itself.
ABSTAIN_ON = ("no_launch", "no_kernel", "duplicate", "bad_duration")


@dataclass(frozen=True)
class Rule:
    changes_figures: bool
    unit: str  # what ``events`` counts: "GPU events", "launches" or "steps"


RULES = {
    "duplicate": Rule(True, "GPU events"),
    "below_resolution": Rule(False, "GPU events"),
    "bad_duration": Rule(True, "GPU events"),
    "no_launch": Rule(True, "GPU events"),
    "shared_correlation": Rule(True, "GPU events"),
    "before_launch": Rule(True, "GPU events"),
    "outside_window": Rule(True, "GPU events"),
    "overlap": Rule(True, "GPU events"),
    "overlap_pdl": Rule(False, "GPU events"),
    "overlap_graph": Rule(False, "GPU events"),
    "no_kernel": Rule(True, "launches"),
    "captured_launch": Rule(False, "launches"),
    "range_profiled": Rule(False, "launches"),
    "empty_launch": Rule(False, "launches"),
    "startup_in_step": Rule(False, "steps"),
    "compile_in_step": Rule(False, "steps"),
    "lost_in_file": Rule(True, "file events"),
}
GPU_CAUSES = tuple(c for c, r in RULES.items() if r.unit == "GPU events")
LAUNCH_CAUSES = tuple(c for c, r in RULES.items() if r.unit == "launches")
CODE = {c: i + 1 for i, c in enumerate(GPU_CAUSES)}  # per GPU event: 0 = sound


@dataclass(frozen=True)
class Cause:
    cause: str
    events: int  # GPU events, launches or steps (``unit``)
    gpu_ns: int | float | None  # GPU time of those events (of the steps' GPU work); None: unknown (lost launches)
    affects: str  # what it affects, in a sentence
    unit: str
    share: float  # of all the GPU events, work launches or steps
    changes_figures: bool
    steps: tuple[str, ...] = ()  # labels of the steps whose figures it touches
    overlap_ns: int = 0  # overlaps: the longest one

    def to_dict(self) -> dict:
        out = {"cause": self.cause, "events": self.events, "gpu_ns": self.gpu_ns, "affects": self.affects,
               "unit": self.unit, "share": self.share, "changes_figures": self.changes_figures,
               "steps": list(self.steps)}
        if self.cause.startswith("overlap"):
            out["max_overlap_ns"] = self.overlap_ns
        return out


@dataclass(frozen=True, eq=False)
class Health:
    causes: tuple[Cause, ...]
    gpu_events: int
    launches: int  # calls that start GPU work
    gpu_cause: np.ndarray = field(repr=False)  # int8 per row of trace.gpu: CODE of its cause, 0 = sound
    overlapped: np.ndarray = field(repr=False)  # per row of trace.gpu: the row it overlaps, -1
    overlap_ns: np.ndarray = field(repr=False)  # per row of trace.gpu: by how much (0)
    lost_launches: np.ndarray = field(repr=False)  # rows of trace.events: launches with no_kernel
    step_causes: dict[int, tuple[str, ...]] = field(default_factory=dict)  # iteration -> figure-changing causes

    @property
    def ok(self) -> bool:
        return not any(c.changes_figures for c in self.causes)

    def cause(self, name: str) -> Cause | None:
        return next((c for c in self.causes if c.cause == name), None)

    def share(self, name: str) -> float:
        c = self.cause(name)
        return c.share if c else 0.0

    def row_cause(self, row: int) -> str:
        """The cause of one row of trace.gpu, "" when it is sound."""
        code = int(self.gpu_cause[row]) if 0 <= row < len(self.gpu_cause) else 0
        return GPU_CAUSES[code - 1] if code else ""

    def figure_causes(self, rows: np.ndarray) -> list[str]:
        """The figure-changing causes among some rows of trace.gpu, in RULES order."""
        codes = set(np.unique(self.gpu_cause[rows]).tolist()) if len(rows) else set()
        return [c for c in GPU_CAUSES if CODE[c] in codes and RULES[c].changes_figures]

    def overlapped_by(self, row: int) -> np.ndarray:
        """Rows of trace.gpu that overlap this one (start before it ends, on its stream), ascending."""
        sources, targets = self._overlaps_by_target
        lo, hi = np.searchsorted(targets, [row, row + 1])
        return sources[lo:hi]

    @cached_property
    def _overlaps_by_target(self) -> tuple[np.ndarray, np.ndarray]:
        """(overlapping rows, the row each overlaps), sorted by the latter: made once, not on every
        move of the browser's selection (a scan of every GPU event, 1 ms at a million)."""
        sources = np.flatnonzero(self.overlapped >= 0)
        targets = self.overlapped[sources]
        order = np.argsort(targets, kind="stable")
        sources, targets = sources[order], targets[order]
        sources.flags.writeable = targets.flags.writeable = False  # overlapped_by hands out slices of it
        return sources, targets

    def damage(self) -> list[Cause]:
        """Causes that change figures, worst first."""
        return [c for c in self.causes if c.changes_figures]

    def abstain_reason(self, side: str) -> str:
        """Why a diff cannot compare this side ("" when it can): the worst of ABSTAIN_ON above DAMAGE_LIMIT."""
        worst = max((c for c in self.causes if c.cause in ABSTAIN_ON), key=lambda c: c.share, default=None)
        if worst is None or worst.share <= DAMAGE_LIMIT:
            return ""
        pct = percent(worst.share)
        return {
            "no_launch": f"{side} lost {pct} of its kernel launches (GPU events with no launch call)",
            "no_kernel": f"{side} lost {pct} of its GPU events (launches with no GPU event)",
            "duplicate": f"{side} holds {pct} of its GPU events twice",
            "bad_duration": f"{side} has {pct} of its GPU events with an impossible duration",
        }[worst.cause]

    def line(self) -> str:
        """One line: "healthy", or what is damaged and what it affects (worst first)."""
        damage = self.damage()
        if not damage:
            listed = [c for c in self.causes]
            return "healthy" + (f" ({'; '.join(brief(c) for c in listed)})" if listed else "")
        return "NOT HEALTHY: " + "; ".join(c.affects for c in damage)

    def short_line(self) -> str:
        """The line in a few words per cause, for a narrow screen: "NOT HEALTHY: 7.3% of GPU events without
        launch; 3 duplicated"."""
        damage = self.damage()
        return "NOT HEALTHY: " + "; ".join(brief(c) for c in damage) if damage else "healthy"

    def to_dict(self) -> dict:
        return {"ok": self.ok, "line": self.line(), "gpu_events": self.gpu_events, "launches": self.launches,
                "causes": [c.to_dict() for c in self.causes]}


def percent(share: float) -> str:
    return f"{100 * share:.1f}%" if share >= 0.001 else f"{100 * share:.2f}%"


def brief(c: Cause) -> str:
    """A cause in a few words, for a short line."""
    n = f"{c.events:,}"
    return {
        "no_launch": f"{percent(c.share)} of GPU events without launch",
        "no_kernel": f"{percent(c.share)} of launches without GPU event",
        "duplicate": f"{n} duplicated",
        "bad_duration": f"{n} bad durations",
        "below_resolution": f"{n} under 1 µs read as 0",
        "shared_correlation": f"{n} sharing a correlation",
        "before_launch": f"{n} before their launch",
        "outside_window": f"{n} outside the window",
        "overlap": f"{n} overlapping",
        "overlap_pdl": f"{n} PDL overlaps",
        "overlap_graph": f"{n} graph-replay overlaps",
        "captured_launch": f"{n} captured launches",
        "range_profiled": f"{n} range-profiled launches",
        "empty_launch": f"{n} empty copy/fill calls",
        "startup_in_step": f"start-up in {plural(c.events, 'step')}",
        "compile_in_step": f"compile in {plural(c.events, 'step')}",
        "lost_in_file": "the file lost events" if c.events else "the file is cut off",
    }[c.cause]
