"""The end report: per mode the GPU launches and time per call, the files, the diff to run."""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kerneltui.capture.params import describe, label
from kerneltui.capture.profiling import ModeRun
from kerneltui.units import fmt_ns


@dataclass(frozen=True)
class Written:
    """One trace file a capture wrote."""

    params: dict[str, Any]
    mode: str
    path: Path
    run: ModeRun


@dataclass(frozen=True)
class PerCall:
    launches: float  # kernels, copies and memsets
    gpu_ns: float
    cpu_ns: float  # median top-level CPU op time


def per_call(path: Path) -> PerCall:
    """Read back from the written file by the trace engine: the numbers `summary` and `diff` will show."""
    from kerneltui.trace import load_trace
    from kerneltui.trace.summary import summarize

    summary = summarize(load_trace(path))
    return PerCall(summary.launches_per_iteration, summary.gpu_ns_per_iteration, summary.cpu_ns_per_iteration)


def diff_command(baseline: Path, other: Path) -> str:
    return f"kerneltui diff {shlex.quote(str(baseline))} {shlex.quote(str(other))}"


def pairs(written: list[Written]) -> list[tuple[Written, ...]]:
    """The traces of one parameter point, in the order of --modes."""
    groups: dict[str, list[Written]] = {}
    for item in written:
        groups.setdefault(label(item.params), []).append(item)
    return [tuple(group) for group in groups.values()]


def render(workload: str, written: list[Written], world_size: int = 1) -> str:
    if world_size > 1:
        return _render_job(written, world_size)
    lines = [f"{'':<20}{'launches/call':>14}{'GPU/call':>10}{'CPU/call':>10}{'compile':>9}"]
    for group in pairs(written):
        lines.append(f"{workload} {describe(group[0].params)}".rstrip())
        for item in group:
            numbers = per_call(item.path)
            compile_s = "-" if item.run.compile_seconds is None else f"{item.run.compile_seconds:.1f}s"
            lines.append(
                f"  {item.mode:<18}{numbers.launches:>14g}{fmt_ns(numbers.gpu_ns):>10}"
                f"{fmt_ns(numbers.cpu_ns):>10}{compile_s:>9}"
            )
    lines.append("launches: kernels, copies and memsets; CPU: top-level ops, median call")
    lines.append("")
    lines.append("Written:")
    lines.extend(f"  {item.path}" for item in written)
    diffs = [diff_command(group[0].path, group[1].path) for group in pairs(written) if len(group) == 2]
    if diffs:
        lines.append("Compare eager and compiled:" if len(diffs) == 1 else "Compare each pair:")
        lines.extend(f"  {command}" for command in diffs)
    return "\n".join(lines)


def _render_job(written: list[Written], world_size: int) -> str:
    """Under torchrun (rank 0 speaks for the job): each mode's directory holds a trace per rank."""
    lines = [f"Written, a trace per rank ({world_size} ranks) in each directory:"]
    lines.extend(f"  {item.path.parent}/" for item in written)
    lines.append("Read one as a job:")
    lines.append(f"  kerneltui summary {shlex.quote(str(written[0].path.parent))}/")
    diffs = [(group[0].path.parent, group[1].path.parent) for group in pairs(written) if len(group) == 2]
    if diffs:
        lines.append("Compare eager and compiled, rank by rank:")
        lines.extend(f"  kerneltui diff {shlex.quote(str(a))}/ {shlex.quote(str(b))}/" for a, b in diffs)
    return "\n".join(lines)


def render_provenance(written: list[Written]) -> str:
    """`--provenance-only`: per file, what it maps, and how to use it."""
    lines = ["Written:"]
    for item in written:
        block = item.run.provenance or {}
        kernels = block.get("kernels") or []
        graphs = len({(k.get("graph"), k.get("compile_id")) for k in kernels})
        what = block.get("reason") or (
            f"{len(kernels)} kernel{'s' * (len(kernels) != 1)} in {graphs} graph{'s' * (graphs != 1)}, "
            f"from {block.get('source')}"
        )
        lines.append(f"  {item.path}  ({what})")
    lines.append("Use with a trace of the same workload profiled another way:")
    lines.append(f"  kerneltui diff EAGER_TRACE COMPILED_TRACE --provenance {shlex.quote(str(written[-1].path))}")
    return "\n".join(lines)
