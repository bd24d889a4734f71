"""Is B faster, and what bounds each side: the GPU's work or the CPU's launching?

Per step/call (``trace.iterations``; a GPU event belongs to the step that launched it):

* ``span_ns``  - what a user's timer sees of step k: the end of its last GPU work minus the
  later of (its start on the CPU, the end of step k-1's last GPU work), so steps queued
  back to back on the GPU are not charged for each other's kernels.
* ``dispatch_ns`` - the CPU dispatch span: the step's span on the CPU (ProfilerStep
  annotation, or the call's span). Profiling inflates it. (``wall_ns`` in the JSON, its
  old name.)
* ``gpu_ns``   - summed durations of the GPU events launched in it.
* ``busy_ns``  - union of their intervals: the GPU time the step needs (= gpu_ns on one stream).
* ``busy_in_steps`` - the GPU's busy share of the spans (not of the profiler's window).
* ``cpu_ns``   - top-level cpu_op time in it, all threads (``summary.per_iteration``).

The profiler's own ``overhead`` events (Activity Buffer Request, 1.5-3 ms at
start-up, inside the first op) are taken out of dispatch_ns and cpu_ns. Per side, GPU
figures are means over steps; span, dispatch and CPU figures are medians over the
*settled* steps: those no overhead event touched (lazy start-up costs remain in such a
step after the subtraction) and that held no Dynamo compile (``_compile.compile_inner``).
Where no step is settled, span_ns and busy_in_steps are unknown (None) and dispatch and
CPU figures are medians over all steps. With two steps a plain median is their mean, and
would keep half the start-up.

**Profiler-distorted span.** Where a step's CPU dispatch span exceeds its GPU busy time,
the CPU set its pace, and profiling inflates the CPU: its span measures the profiler as
much as the workload. span_ns is the median over the settled steps the GPU paced; where
the CPU paced every settled step, it is their median, marked ``span_distorted``, and no
span ratio is given.

**Bound.** The CPU enqueues GPU work asynchronously. Where the GPU needs at least
as long per step as the CPU spends in ops issuing it (``busy_ns >= cpu_ns``) the
queue never drains and the GPU sets the pace: "gpu". Otherwise the GPU waits for
launches: "cpu". Op time leaves out Python between ops, so "gpu" can be claimed
for a step the GPU does not pace; rule 4's wall check below catches that case.
"unknown" where no CPU op was recorded (CUDA-only traces). "GPU time" in the texts
is busy_ns.

**Profiler distortion** of CPU time (``distortion``): one side traced with_stack
(or record_shapes) and the other not, or Python events per step at least 2x
apart: the profiler's per-event cost lands in the CPU time of the busier side.

**Verdict** (``verdict``), first rule that applies:

1. comparability.ok is False -> "not comparable: <first reason>", no ratio.
2. a side has no GPU work -> "no GPU work".
3. CPU time unknown on a side -> GPU time decides, and the text says CPU is unknown.
4. both GPU-bound -> GPU time per step decides: "B is 1.69x faster (GPU time per
   step ...)", "slower", or "unchanged" within 3%. If B's profiled step is
   nevertheless >3% longer in wall time (and spans its GPU work, so the wall
   is the step's time), the text says so and why (distortion, or a GPU that
   idles in the step).
5. otherwise the CPU may decide, and the profiler inflates CPU time (by up to
   PROFILER_INFLATION, 3x). Each side's end-to-end time per step lies between
   max(busy, cpu / 3) and dispatch + busy (at worst the GPU work runs after all of
   the step's profiled CPU time, Python between ops included). When the two ranges do not overlap the
   verdict is certain ("faster"/"slower" end to end, "at least N x"); when they
   do, it is "undecided": the GPU result, and that this profile cannot tell.
   Distortion is said here, where the CPU may decide.

A second sentence carries the caveats: distortion (rule 5), inputs not verified
(comparability.ok None), different devices.

ratio is always A's time / B's time (> 1: B is faster); quantity names the time
("gpu" = busy_ns, "end to end" = the bounds of rule 5); both None when undecided.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from kerneltui.analysis.compare.compile_facts import compile_spans
from kerneltui.analysis.compare.workload import Comparability
from kerneltui.trace.intervals import union_length
from kerneltui.trace.schema import Kind
from kerneltui.trace.summary import per_iteration

if TYPE_CHECKING:
    from kerneltui.trace.model import Trace

GPU_SAME = 1.03  # GPU-time ratios within 3% are "unchanged" (step-to-step spread in the corpus: ~2%)
WALL_LONGER = 1.03
PYTHON_APART = 2.0  # Python events per step this many times apart distort CPU time
# How much the profiler may inflate CPU op time: compiled add_relu at 1e7 elements shows 103.7 µs
# of CPU per call profiled and takes 37.6 µs timed with CUDA events (2.8x).
PROFILER_INFLATION = 3.0


@dataclass(frozen=True)
class StepTiming:
    label: str
    wall_ns: int
    gpu_ns: int
    busy_ns: int
    cpu_ns: int
    launches: int
    python_events: int
    startup: bool  # a profiler overhead event touched it (its time is taken out): left out of the medians
    span_ns: int = -1  # end of its last GPU work - max(its CPU start, step k-1's last GPU end); -1 without GPU work
    busy_in_span_ns: int = 0  # GPU busy time within that span
    compiling: bool = False  # a Dynamo compile started in it: left out of the medians

    @property
    def settled(self) -> bool:
        return not (self.startup or self.compiling)

    @property
    def gpu_paced(self) -> bool:
        """The GPU needed at least as long as the CPU took to dispatch the step: the span is the GPU's."""
        return self.span_ns >= 0 and self.wall_ns <= self.busy_ns

    @property
    def dispatch_ns(self) -> int:
        """The CPU dispatch span (the step's span on the CPU), the profiler's overhead taken out."""
        return self.wall_ns


@dataclass(frozen=True)
class Timing:
    unit: str  # "step" or "call"
    source: str
    steps: tuple[StepTiming, ...]
    wall_ns: float  # the CPU dispatch span: median over settled steps (all steps where none is)
    gpu_ns: float  # mean over steps
    busy_ns: float  # mean over steps
    cpu_ns: float  # median over undisturbed steps
    launches: float  # mean over steps
    python_per_step: float
    bound: str  # "gpu", "cpu", "unknown" (no CPU ops recorded, or every step held the profiler's start-up)
    cpu_recorded: bool
    cpu_settled: bool  # some step was free of the profiler's start-up and of compiles: its CPU time means something
    with_stack: bool
    record_shapes: bool
    device: str
    span_ns: float | None = None  # median over settled, GPU-paced steps (see span_distorted); None: no settled step
    busy_in_steps: float | None = None  # busy / span over the steps span_ns is the median of
    compiles_in_steps: int = 0  # Dynamo compiles that started inside a step
    span_distorted: bool = False  # the CPU paced every settled step: the span is the profiled CPU's
    span_steps: tuple[int, int] = (0, 0)  # (steps span_ns is the median of, settled steps with GPU work)

    @property
    def dispatch_ns(self) -> float:
        return self.wall_ns

    @property
    def span_note(self) -> str:
        """Why the span is not a measure of this side, or "" when it is."""
        if self.span_ns is None:
            if not any(s.span_ns >= 0 for s in self.steps):
                return f"unknown: no {self.unit} has GPU work"
            held = "a Dynamo compile or the profiler's start-up" if self.compiles_in_steps else "the profiler's start-up"
            return f"unknown: every profiled {self.unit} held {held}"
        return "profiler-distorted" if self.span_distorted else ""


@dataclass(frozen=True)
class Verdict:
    kind: str  # faster, slower, unchanged, cpu-bound, not comparable, no GPU work
    text: str
    ratio: float | None  # A's time / B's time
    quantity: str | None  # "gpu" or "cpu" (see module docstring)
    short: str = ""  # the verdict in one line of about 80 characters, for short screens

    def __post_init__(self) -> None:
        if not self.short:  # the head sentence is short enough
            object.__setattr__(self, "short", self.text.split(". ")[0].rstrip("."))


def timing(trace: Trace) -> Timing:
    its = trace.iterations
    g = trace.gpu
    ev = trace.events
    table = per_iteration(trace)
    table = table[table["index"] >= 0].set_index("index").reindex(range(its.count), fill_value=0)
    it = g["iteration"].to_numpy()
    inside = it >= 0
    busy = grouped_union(it[inside], g["ts"].to_numpy()[inside], g["end"].to_numpy()[inside], its.count)
    kinds = ev["kind"].to_numpy()
    py_at = its.assign(ev["ts"].to_numpy()[kinds == Kind.PYTHON])
    python = np.bincount(py_at[py_at >= 0], minlength=its.count)[: its.count]
    starts, ends = cpu_spans(trace)
    overhead = overhead_overlap(trace, starts, ends)
    lost = np.clip(overhead, 0, None)  # the profiler's own time, inside the first op it lands in
    span, busy_in_span = step_spans(trace)
    compile_starts, _ = compile_spans(trace)
    compiling = np.bincount(np.clip(its.assign(compile_starts), -1, None) + 1, minlength=its.count + 1)[1:]
    steps = tuple(
        StepTiming(its.labels[i], int(ends[i]) - int(starts[i]) - int(lost[i]), int(table["gpu_ns"].iat[i]),
                   int(busy[i]), max(int(table["cpu_ns"].iat[i] - lost[i]), 0), int(table["launches"].iat[i]),
                   int(python[i]), bool(overhead[i] >= 0), int(span[i]), int(busy_in_span[i]), bool(compiling[i]))
        for i in range(its.count)
    )
    settled = [s for s in steps if s.settled]
    calm = settled or list(steps)
    cpu_recorded = bool((kinds == Kind.CPU_OP).any())
    busy_mean = _mean([s.busy_ns for s in steps])
    cpu = _median([s.cpu_ns for s in calm])
    timed = [s for s in settled if s.span_ns >= 0]
    paced = [s for s in timed if s.gpu_paced or not cpu_recorded]
    distorted = bool(timed) and not paced
    counts = (len(paced or timed), len(timed))
    timed = paced or timed
    span_total = sum(s.span_ns for s in timed)
    return Timing(
        unit=its.unit,
        source=its.source,
        steps=steps,
        wall_ns=_median([s.wall_ns for s in calm]),
        gpu_ns=_mean([s.gpu_ns for s in steps]),
        busy_ns=busy_mean,
        cpu_ns=cpu,
        launches=_mean([s.launches for s in steps]),
        python_per_step=_mean([s.python_events for s in steps]),
        bound="unknown" if not (cpu_recorded and settled) else ("gpu" if busy_mean >= cpu else "cpu"),
        cpu_recorded=cpu_recorded,
        cpu_settled=bool(settled),
        with_stack=trace.meta.with_stack,
        record_shapes=trace.meta.record_shapes,
        device=trace.meta.device_name,
        span_ns=_median([s.span_ns for s in timed]) if timed else None,
        busy_in_steps=sum(s.busy_in_span_ns for s in timed) / span_total if span_total > 0 else None,
        compiles_in_steps=int(compiling.sum()),
        span_distorted=distorted,
        span_steps=counts,
    )


def cpu_spans(trace: Trace) -> tuple[np.ndarray, np.ndarray]:
    """Each step's span on the CPU. A "whole trace" call is the profiler's window, idle before the first op
    and after the last: its CPU span is from its first top-level op's start to the last one's end."""
    its = trace.iterations
    if its.source != "whole trace":
        return its.starts, its.ends
    ops = trace.top_level_ops()
    if not len(ops):
        return its.starts, its.ends
    ts = trace.events["ts"].to_numpy()[ops]
    end = ts + trace.events["dur"].to_numpy()[ops]
    return np.array([ts.min()]), np.array([end.max()])


def step_spans(trace: Trace) -> tuple[np.ndarray, np.ndarray]:
    """Per step: its span as a user's timer sees it (-1 without GPU work), and the GPU's busy time within it.

    Span of step k: the end of its last GPU work minus the later of its CPU start and the end of the
    last GPU work of the steps before it (kernels still queued from step k-1 are not step k's)."""
    its = trace.iterations
    g = trace.gpu
    it = g["iteration"].to_numpy()
    inside = it >= 0
    starts, ends, it = g["ts"].to_numpy()[inside], g["end"].to_numpy()[inside], it[inside]
    last = np.full(its.count, np.iinfo(np.int64).min, np.int64)
    np.maximum.at(last, it, ends)
    has_gpu = last > np.iinfo(np.int64).min
    before = np.maximum.accumulate(np.where(has_gpu, last, np.iinfo(np.int64).min))
    previous = np.concatenate([[np.iinfo(np.int64).min], before[:-1]]) if its.count else before
    begin = np.maximum(its.starts.astype(np.int64), previous)
    span = np.where(has_gpu, np.maximum(last - begin, 0), -1)
    # the step's GPU intervals clipped to its span
    clipped_start = np.maximum(starts, begin[it])
    busy = grouped_union(it, clipped_start, np.maximum(ends, clipped_start), its.count)
    return span, np.where(has_gpu, busy, 0)


def distortion(a: Timing, b: Timing) -> tuple[str, ...]:
    """Ways the profiler inflates one side's CPU time more than the other's."""
    out = []
    for flag in ("with_stack", "record_shapes"):
        fa, fb = getattr(a, flag), getattr(b, flag)
        if fa != fb:
            on, off = ("A", "B") if fa else ("B", "A")
            how = "with_stack" if flag == "with_stack" else "with record_shapes"
            out.append(f"{on} was traced {how} and {off} was not: the profiler inflates {on}'s CPU time")
    pa, pb = a.python_per_step, b.python_per_step
    if max(pa, pb) > 0 and max(pa, pb) >= PYTHON_APART * min(pa, pb) and (a.with_stack and b.with_stack):
        side = "B" if pb > pa else "A"
        out.append(f"Python events per {_unit(a, b)} {pa:,.0f} → {pb:,.0f}: the profiler inflates {side}'s CPU time")
    return tuple(out)


def verdict(a: Timing, b: Timing, comparability: Comparability | None = None) -> Verdict:
    if comparability is not None and comparability.ok is False:
        return Verdict("not comparable", f"not comparable: {comparability.reasons[0]}.", None, None)
    unit = _unit(a, b)
    if a.gpu_ns == 0 or b.gpu_ns == 0:
        where = "either trace" if a.gpu_ns == b.gpu_ns else ("A" if a.gpu_ns == 0 else "B")
        return Verdict("no GPU work", f"no GPU work in {where}: nothing to compare on the GPU", None, None)
    distorted = list(distortion(a, b))
    notes = []
    if comparability is not None and comparability.ok is None:
        notes.append("whether the inputs match is unknown (no shapes recorded)")
    if comparability is not None:
        notes += [r.split(":")[0] for r in comparability.reasons if r.startswith("different devices")]
    gpu_ratio = a.busy_ns / b.busy_ns
    gpu_pair = f"GPU time per {unit} {_pair(a.busy_ns, b.busy_ns)}"
    if "unknown" in (a.bound, b.bound):
        kind, head = _gpu_kind(gpu_ratio, gpu_pair)
        if not (a.cpu_recorded and b.cpu_recorded):
            notes.insert(0, "CPU time was not recorded, so whether the CPU decides is unknown")
        else:
            who = " and ".join(label for label, t in (("A", a), ("B", b)) if not t.cpu_settled)
            held = ("a Dynamo compile or the profiler's start-up"
                    if any(t.compiles_in_steps for t in (a, b)) else "the profiler's start-up")
            notes.insert(0, f"every profiled {unit} of {who} held {held}, so whether the CPU decides is unknown")
        return Verdict(kind, _sentences(head, notes + _compiling(a, b)), gpu_ratio, "gpu")
    notes += _compiling(a, b)
    if a.bound == "gpu" and b.bound == "gpu":  # the CPU does not decide: its distortion does not matter
        kind, head = _gpu_kind(gpu_ratio, gpu_pair)
        spans = a.span_ns is not None and b.span_ns is not None and not (a.span_distorted or b.span_distorted)
        if kind == "faster" and spans and b.span_ns > a.span_ns * WALL_LONGER:
            on_b = [d for d in distorted if "inflates B's" in d]
            why = on_b[0] if on_b else (f"B's GPU is busy only {100 * (b.busy_in_steps or 0):.0f}% of its span: "
                                        "something else sets the pace")
            head = (f"B's GPU time is {gpu_ratio:.2f}x lower, but its {unit} spans longer "
                    f"({_pair(b.span_ns, a.span_ns, ' vs ')}): {why}")
        return Verdict(kind, _sentences(head, notes), gpu_ratio, "gpu")
    # The profiler only inflates CPU time, by up to PROFILER_INFLATION: each side's end-to-end
    # time lies between max(busy, cpu / PROFILER_INFLATION) and max(busy, cpu).
    low_a, high_a = _bounds(a)
    low_b, high_b = _bounds(b)
    cpu_pair = f"{_pair(a.cpu_ns, b.cpu_ns)} of CPU ops per {unit}"
    moved = (f"{'fell' if b.busy_ns < a.busy_ns else 'rose'} {_pair(a.busy_ns, b.busy_ns)}"
             if b.busy_ns != a.busy_ns else f"is unchanged at {_pair(a.busy_ns, a.busy_ns).split(' → ')[1]}")
    if _close(low_a, low_b) and _close(high_a, high_b):
        head = f"unchanged end to end: GPU time {moved} per {unit}, CPU ops {cpu_pair}"
        return Verdict("unchanged", _sentences(head, distorted + notes), low_a / low_b if low_b else None, "end to end",
                       f"unchanged end to end (GPU time {moved} per {unit})")
    if high_b < low_a:
        factor = low_a / high_b
        head = (f"B is faster end to end, at least {factor:.2f}x: its GPU time {moved} per {unit}, and even its "
                f"profiled dispatch with all of its GPU work after it ({_pair(high_b, low_a, ' vs ')} for A's "
                f"GPU) is shorter than A needs")
        return Verdict("faster", _sentences(head, distorted + notes), factor, "end to end",
                       f"B is faster end to end, at least {factor:.2f}x (all of its profiled step < A's GPU time)")
    if high_a < low_b:
        factor = low_b / high_a
        head = (f"CPU-bound: B's GPU time {moved} per {unit}, but launching takes {cpu_pair}: "
                f"B is slower end to end, at least {factor:.2f}x, even allowing for the profiler's overhead")
        return Verdict("slower", _sentences(head, distorted + notes), 1 / factor, "end to end",
                       f"CPU-bound: B slower end to end, at least {factor:.2f}x (CPU ops {_pair(a.cpu_ns, b.cpu_ns)})")
    bound = " and ".join(label for label, t in (("A", a), ("B", b)) if t.bound == "cpu") or "both"
    head = (f"B's GPU time {moved} per {unit} ({gpu_ratio:.2f}x), but the CPU takes longer than the GPU on "
            f"{bound} ({cpu_pair}), and the profiler inflates CPU time: this profile cannot tell which is faster "
            f"end to end (time both without the profiler)")
    return Verdict("undecided", _sentences(head, distorted + notes), None, None,
                   f"GPU {gpu_ratio:.2f}x {'faster' if gpu_ratio >= 1 else 'slower'}; end to end: cannot tell "
                   f"(the profiled CPU outlasts the GPU)")


def _compiling(a: Timing, b: Timing) -> list[str]:
    """The caveat for steps that held a Dynamo compile: their time is mostly compiling."""
    out = []
    for label, t in (("A", a), ("B", b)):
        if t.compiles_in_steps:
            held = sum(s.compiling for s in t.steps)
            out.append(f"{label}'s profiled {t.unit}s held {t.compiles_in_steps} Dynamo "
                       f"compile{'s' if t.compiles_in_steps != 1 else ''} (in {held} of {len(t.steps)} "
                       f"{t.unit}s, left out of its span and CPU figures)")
    return out


def _close(x: float, y: float) -> bool:
    return abs(x - y) <= (GPU_SAME - 1) * max(x, y)


def _bounds(t: Timing) -> tuple[float, float]:
    """(least, most) end-to-end time of a step: the GPU's busy time or a third of the profiled CPU ops,
    and at most the profiled dispatch span with all the GPU work after it."""
    return max(t.busy_ns, t.cpu_ns / PROFILER_INFLATION), max(t.busy_ns, t.cpu_ns, t.wall_ns + t.busy_ns)


def grouped_union(groups: np.ndarray, starts: np.ndarray, ends: np.ndarray, count: int) -> np.ndarray:
    """Length of the union of intervals per group 0..count-1, all groups in one pass.

    Each group is moved onto its own stretch of the time axis (group * width), so one
    sweep finds the runs and no run crosses from one group into the next.
    """
    out = np.zeros(count, np.int64)
    if not len(starts):
        return out
    origin = int(starts.min())
    width = int(max(ends.max(), starts.max())) - origin + 1
    if width * count >= 2**62:  # absurd spans: per group, exactly
        for i in range(count):
            out[i] = union_length(starts[groups == i], ends[groups == i])
        return out
    s = starts - origin + groups.astype(np.int64) * width
    e = np.maximum(ends, starts) - origin + groups.astype(np.int64) * width
    order = np.argsort(s, kind="stable")
    s, e, grp = s[order], e[order], groups[order]
    reach = np.maximum.accumulate(e)
    new_run = np.ones(len(s), bool)
    new_run[1:] = s[1:] > reach[:-1]
    first = np.flatnonzero(new_run)
    run_len = np.maximum.reduceat(e, first) - s[first]
    np.add.at(out, grp[first], run_len)
    return out


def overhead_overlap(trace: Trace, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """ns of each span covered by the profiler's own overhead events (pid -1), -1 where none touches it."""
    ev = trace.events
    rows = np.flatnonzero(ev["kind"].to_numpy() == Kind.OVERHEAD)
    if not len(rows) or not len(starts):
        return np.full(len(starts), -1, np.int64)
    os_ = ev["ts"].to_numpy()[rows][None, :]
    oe = os_ + ev["dur"].to_numpy()[rows][None, :]
    touches = ((os_ <= ends[:, None]) & (oe >= starts[:, None])).any(axis=1)
    covered = np.clip(np.minimum(oe, ends[:, None]) - np.maximum(os_, starts[:, None]), 0, None).sum(axis=1)
    return np.where(touches, covered, -1)


def _gpu_kind(ratio: float, pair: str) -> tuple[str, str]:
    if ratio >= GPU_SAME:
        return "faster", f"B is {ratio:.2f}x faster ({pair})"
    if ratio <= 1 / GPU_SAME:
        return "slower", f"B is {1 / ratio:.2f}x slower ({pair})"
    return "unchanged", f"GPU time unchanged ({pair}, within {round((GPU_SAME - 1) * 100)}%)"


def _sentences(head: str, caveats: list[str]) -> str:
    text = head + "."
    if caveats:
        rest = "; ".join(caveats)
        text += " " + rest[0].upper() + rest[1:] + "."
    return text


def _unit(a: Timing, b: Timing) -> str:
    return a.unit if a.unit == b.unit else "step"


def _scale(ns: float) -> tuple[float, str]:
    if ns < 1e6:
        return 1e3, "µs"
    if ns < 1e9:
        return 1e6, "ms"
    return 1e9, "s"


def _pair(x: float, y: float, arrow: str = " → ") -> str:
    """Two times in one unit, chosen by the larger: '1.89 → 0.72 µs', '42.4 → 190.0 µs'."""
    div, unit = _scale(max(x, y))
    digits = 2 if max(x, y) / div < 10 else 1
    return f"{x / div:.{digits}f}{arrow}{y / div:.{digits}f} {unit}"


def _mean(values: list) -> float:
    return float(np.mean(values)) if values else 0.0


def _median(values: list) -> float:
    return float(np.median(values)) if values else 0.0
