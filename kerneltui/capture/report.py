"""The end report: per mode the kernels and GPU time per call, the files, the diff to run."""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kerneltui.capture.params import describe, label
from kerneltui.capture.profiling import ModeRun


@dataclass(frozen=True)
class Written:
    """One trace file a capture wrote."""

    params: dict[str, Any]
    mode: str
    path: Path
    run: ModeRun


@dataclass(frozen=True)
class PerCall:
    kernels: float
    gpu_us: float


def per_call(written: Written, calls: int) -> PerCall:
    """GPU work per profiled call: kernels, copies and memsets (never annotation spans)."""
    return PerCall(written.run.kernels / calls, written.run.gpu_us / calls)


def _number(value: float) -> str:
    return f"{value:g}" if value == int(value) else f"{value:.2f}"


def diff_command(baseline: Path, other: Path) -> str:
    return f"kerneltui diff {shlex.quote(str(baseline))} {shlex.quote(str(other))}"


def pairs(written: list[Written]) -> list[tuple[Written, ...]]:
    """The traces of one parameter point, in the order of --modes."""
    groups: dict[str, list[Written]] = {}
    for item in written:
        groups.setdefault(label(item.params), []).append(item)
    return [tuple(group) for group in groups.values()]


def render(workload: str, written: list[Written], calls: int) -> str:
    lines = [f"{'':<20}{'kernels/call':>14}{'GPU µs/call':>14}{'compile s':>11}"]
    for group in pairs(written):
        lines.append(f"{workload} {describe(group[0].params)}".rstrip())
        for item in group:
            numbers = per_call(item, calls)
            compile_s = "-" if item.run.compile_seconds is None else f"{item.run.compile_seconds:.1f}"
            lines.append(f"  {item.mode:<18}{_number(numbers.kernels):>14}{numbers.gpu_us:>14.2f}{compile_s:>11}")
    lines.append("")
    lines.append("Written:")
    lines.extend(f"  {item.path}" for item in written)
    diffs = [diff_command(group[0].path, group[1].path) for group in pairs(written) if len(group) == 2]
    if diffs:
        lines.append("Compare eager and compiled:" if len(diffs) == 1 else "Compare each pair:")
        lines.extend(f"  {command}" for command in diffs)
    return "\n".join(lines)
