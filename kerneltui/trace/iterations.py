"""What counts as one "call" of the workload, so counts can be given per call.

In order of preference:
1. ``ProfilerStep#N`` annotations (``prof.step()``, and `kerneltui capture`).
2. A top-level ``record_function`` that repeats (``mlp_forward`` x3).
3. The top-level op sequence of the launching thread, when it is one pattern
   repeated: ``[aten::add, aten::relu] x 3`` is 3 calls of 2 ops.
4. Otherwise the whole trace is one call.

Kernels belong to the call in which they were *launched* (launch time, not GPU
time): the GPU side of a step misses kernels launched from other threads.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from kerneltui.trace.intervals import containing_span
from kerneltui.trace.one_of import one_of
from kerneltui.trace.schema import Kind

if TYPE_CHECKING:
    from kerneltui.trace.model import Trace

STEP_NAME = re.compile(r"^ProfilerStep#(\d+)$")


@dataclass(frozen=True)
class Iterations:
    source: str  # "ProfilerStep", "record_function 'mlp_forward'", "repeated op sequence", "whole trace"
    unit: str  # "step" or "call"
    starts: np.ndarray  # ns
    ends: np.ndarray
    labels: tuple[str, ...]
    step_numbers_: np.ndarray  # ProfilerStep N per span, -1 otherwise

    @property
    def count(self) -> int:
        return len(self.starts)

    def assign(self, t: np.ndarray) -> np.ndarray:
        """Index of the iteration containing each time, or -1."""
        return containing_span(self.starts, self.ends, t)

    def step_numbers(self, t: np.ndarray) -> np.ndarray:
        at = self.assign(t)
        return np.where(at >= 0, self.step_numbers_[np.clip(at, 0, None)], -1)


def find_iterations(trace: Trace) -> Iterations:
    for finder in (_profiler_steps, _repeated_annotation, _repeated_ops):
        found = finder(trace)
        if found is not None:
            return found
    start, end = trace.window
    return Iterations("whole trace", "call", np.array([start]), np.array([end]), ("whole trace",), np.array([-1]))


def _step_number(name: str) -> int:
    """N of a ``ProfilerStep#N`` annotation, else -1 (also for an N past int64: no step is numbered so)."""
    m = STEP_NAME.match(name)
    if not m or len(m.group(1)) > 18:
        return -1
    return int(m.group(1))


def _spans(trace: Trace, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    ts = trace.events["ts"].to_numpy()[rows]
    return ts, ts + trace.events["dur"].to_numpy()[rows]


def _profiler_steps(trace: Trace) -> Iterations | None:
    ev = trace.events
    # torch 1.8-era Kineto wrote ProfilerStep#N as an op ("Operator"), later ones as an annotation
    rows = np.flatnonzero(one_of(ev["kind"].to_numpy(), (Kind.ANNOTATION, Kind.CPU_OP)))
    numbers = trace.by_name(ev["name"].to_numpy()[rows], _step_number, np.int64)  # a regex per distinct name
    keep = numbers >= 0
    if not keep.any():
        return None
    rows, numbers = rows[keep], numbers[keep]
    order = np.argsort(ev["ts"].to_numpy()[rows], kind="stable")
    rows, numbers = rows[order], numbers[order]
    starts, ends = _spans(trace, rows)
    return Iterations("ProfilerStep", "step", starts, ends, tuple(f"ProfilerStep#{n}" for n in numbers), numbers)


def _launch_times(trace: Trace) -> np.ndarray:
    ev = trace.events
    kinds = ev["kind"].to_numpy()
    return ev["ts"].to_numpy()[(kinds == Kind.RUNTIME) | (kinds == Kind.DRIVER)]


def _repeated_annotation(trace: Trace) -> Iterations | None:
    """A top-level user_annotation name that repeats and holds most launches."""
    ev = trace.events
    launches = _launch_times(trace)
    best = None
    kinds = ev["kind"].to_numpy()
    annotated = np.unique(ev["lane"].to_numpy()[kinds == Kind.ANNOTATION])  # only these can hold one
    for lane in annotated.tolist():
        stack = trace.op_stack(lane)
        if stack is None:
            continue
        top = stack.rows[stack.nesting.order[stack.nesting.depth == 0]]
        top = top[ev["kind"].to_numpy()[top] == Kind.ANNOTATION]
        names = trace.names_of(ev["name"].to_numpy()[top])
        for name in dict.fromkeys(names):  # first-seen order: ties go the same way on every run
            rows = top[names == name]
            if len(rows) < 2:
                continue
            starts, ends = _spans(trace, rows)
            held = int((containing_span(starts, ends, launches) >= 0).sum())
            if held * 2 > len(launches) and (best is None or held > best[0]):
                order = np.argsort(starts)
                best = (held, name, starts[order], ends[order])
    if best is None:
        return None
    _, name, starts, ends = best
    labels = tuple(f"{name} #{i + 1}" for i in range(len(starts)))
    return Iterations(f"record_function {name!r}", "call", starts, ends, labels, np.full(len(starts), -1))


def _repeated_ops(trace: Trace) -> Iterations | None:
    """The top-level ops of the busiest launching thread, if one pattern repeated k >= 2 times."""
    ev = trace.events
    lanes = np.asarray(trace.cpu_lanes(), np.int64)  # each has an op stack: its ops are on it
    if not len(lanes):
        return None
    launch_lanes = ev["lane"].to_numpy()[one_of(ev["kind"].to_numpy(), (Kind.RUNTIME, Kind.DRIVER))]
    launches = np.bincount(launch_lanes, minlength=int(lanes.max()) + 1)
    lane = int(lanes[np.argmax(launches[lanes])])  # the first of the busiest, as max() would
    top = trace.op_stack(lane).top_level_ops()
    top = top[np.argsort(ev["ts"].to_numpy()[top], kind="stable")]
    names = list(trace.names_of(ev["name"].to_numpy()[top]))
    n = len(names)
    for period in range(1, n // 2 + 1):
        if n % period == 0 and names == names[:period] * (n // period):
            starts, ends = _spans(trace, top)
            first = np.arange(0, n, period)
            span_starts = starts[first]
            span_ends = np.maximum.reduceat(ends, first)
            labels = tuple(f"call {i + 1}" for i in range(len(first)))
            return Iterations("repeated op sequence", "call", span_starts, span_ends, labels, np.full(len(first), -1))
    return None
