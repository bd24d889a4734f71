"""Memory over time as terminal text (no Textual): a one-row sparkline for the timeline, a chart for `u`.

The allocator's totals (``Total Allocated``, ``Total Reserved``) hold from one ``[memory]``
event to the next, so a cell's value is the highest total in effect at any time in it: the
total carried in from before the cell, or any event inside it. A peak therefore never
vanishes when zoomed out, and a cell before the first event is blank (nothing known).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kerneltui.units import fmt_bytes

EIGHTHS = " ▁▂▃▄▅▆▇█"  # 0/8 .. 8/8 of a cell
SPARK = EIGHTHS[1:]  # the sparkline's levels: at least 1/8; a blank cell is "no event yet"
RESERVED = "░"  # the chart's reserved-but-free cells


@dataclass(frozen=True)
class MemoryCurve:
    """One device's totals over time, in the timeline's clock (ns)."""

    device: int
    ts: np.ndarray  # time order
    allocated: np.ndarray
    reserved: np.ndarray
    peak_allocated: int
    peak_reserved: int

    @property
    def label(self) -> str:
        return f"mem{self.device} {short_bytes(self.peak_allocated)}"


def short_bytes(n: int) -> str:
    """``1.5G``: the peak in the timeline's 12-cell margin."""
    text = fmt_bytes(n)  # "1.5 GB"
    number, _, unit = text.partition(" ")
    return number + (unit[:1] if unit != "B" else "B")


def column_peaks(ts: np.ndarray, values: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Per cell [edges[i], edges[i+1]): the highest total in effect in it; -1 before the first event."""
    cells = len(edges) - 1
    out = np.full(cells, -1, np.int64)
    if not len(ts) or cells <= 0:
        return out
    ts = np.asarray(ts, np.int64)
    values = np.asarray(values, np.int64)
    lo = np.searchsorted(ts, edges[:-1], side="left")  # first event at or after the cell's start
    hi = np.searchsorted(ts, edges[1:], side="left")
    carried = np.where(lo > 0, values[np.maximum(lo - 1, 0)], -1)  # in effect when the cell starts
    has = hi > lo
    if has.any():
        # cells are contiguous, so one cell's events end where the next cell with events begins
        inside = np.maximum.reduceat(values[: int(hi[has][-1])], lo[has])
        carried[has] = np.maximum(carried[has], inside)
    return carried


def sparkline(peaks: np.ndarray, scale: int) -> str:
    """One character per cell: its value in eighths of ``scale`` (at least ▁), blank where unknown."""
    scale = max(int(scale), 1)
    level = np.clip(np.ceil(peaks / scale * len(SPARK)).astype(np.int64), 1, len(SPARK)) - 1
    return "".join(SPARK[i] if p >= 0 else " " for i, p in zip(level.tolist(), peaks.tolist()))


def chart_rows(allocated: np.ndarray, reserved: np.ndarray, scale: int, height: int) -> list[list[tuple[str, str]]]:
    """A ``height``-row chart, top row first; each cell (char, "allocated" | "reserved" | "").

    Allocated is drawn in eighths of a row (█ and the partial blocks); above it, up to the reserved
    total, the pool's free part (reserved, not allocated) is ░ where it fills half a cell or more:
    a glyph, not a colour, tells the two apart."""
    scale = max(int(scale), 1)
    a8 = np.where(allocated >= 0, np.round(allocated / scale * height * 8), -1).astype(np.int64)
    r8 = np.where(reserved >= 0, np.round(reserved / scale * height * 8), -1).astype(np.int64)
    rows = []
    for r in range(height - 1, -1, -1):
        base = r * 8
        row = []
        for a, res in zip(a8.tolist(), r8.tolist()):
            if a > base:
                row.append((EIGHTHS[min(a - base, 8)], "allocated"))
            elif res - base >= 4:
                row.append((RESERVED, "reserved"))
            else:
                row.append((" ", ""))
        rows.append(row)
    return rows
