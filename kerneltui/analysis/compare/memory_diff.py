"""Memory A → B in the diff: peak allocated and reserved, and allocation counts, per CUDA device.

Only when both traces have ``[memory]`` events (analysis/memory.py); devices pair by ``Device Id``.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from kerneltui.analysis.memory import MemoryTable


@dataclass(frozen=True)
class DeviceMemoryDiff:
    device: int
    a_peak_allocated_bytes: int
    b_peak_allocated_bytes: int
    a_peak_reserved_bytes: int
    b_peak_reserved_bytes: int
    a_allocations: int  # within the whole trace
    b_allocations: int
    a_allocations_per_step: float | None  # None without ProfilerSteps
    b_allocations_per_step: float | None


@dataclass(frozen=True)
class MemoryDiff:
    devices: tuple[DeviceMemoryDiff, ...]

    def to_dict(self) -> dict:
        return {"devices": [asdict(d) for d in self.devices]}


def _per_step(x: float) -> float | None:
    return None if math.isnan(x) else x


def memory_diff(a: MemoryTable | None, b: MemoryTable | None) -> tuple[MemoryDiff | None, str]:
    """The memory figures A → B, or None and the note that says why there are none ("" when neither side has any)."""
    if a is None and b is None:
        return None, ""
    if a is None or b is None:
        has, lacks = ("B", "A") if a is None else ("A", "B")
        return None, (f"memory: only {has} has [memory] events; capture {lacks} with `kerneltui capture "
                      "--profile-memory` to compare peak memory")
    by_device = {d.device: d for d in b.devices}
    rows = []
    for da in a.devices:
        db = by_device.get(da.device)
        if db is None:
            continue
        rows.append(DeviceMemoryDiff(
            da.device, da.peak_allocated_bytes, db.peak_allocated_bytes, da.peak_reserved_bytes,
            db.peak_reserved_bytes, da.allocations, db.allocations, _per_step(da.allocations_per_step),
            _per_step(db.allocations_per_step)))
    if not rows:
        return None, "memory: A and B have [memory] events on no common CUDA device"
    return MemoryDiff(tuple(rows)), ""
