"""The causes found, counted and put in words: a Cause per cause that applies, with its share and steps."""

from __future__ import annotations

import numpy as np

from kerneltui.analysis.compare.compile_facts import compile_spans
from kerneltui.analysis.compare.timing import cpu_spans, overhead_overlap
from kerneltui.analysis.health.causes import (
    CODE,
    GPU_CAUSES,
    LAUNCH_CAUSES,
    RULES,
    Cause,
    percent,
)
from kerneltui.trace.model import Trace
from kerneltui.units import fmt_ns, plural


def gpu_causes(trace: Trace, code: np.ndarray, amount: np.ndarray, coarse: bool, span) -> list[Cause]:
    g = trace.gpu
    n = len(g)
    dur = g["dur"].to_numpy()
    its = trace.iterations
    it = g["iteration"].to_numpy()
    out = []
    for cause in GPU_CAUSES:
        mask = code == CODE[cause]
        k = int(mask.sum())
        if not k:
            continue
        share = k / n
        steps = _labels(its, it[mask]) if RULES[cause].changes_figures else ()
        longest = int(amount[mask].max()) if cause.startswith("overlap") else 0
        ns = _total(dur[mask]) if cause != "bad_duration" else None  # unknown
        out.append(Cause(cause, k, ns, _affects(cause, k, share, longest, trace, mask),
                         "GPU events", share, RULES[cause].changes_figures, steps, longest))
    return out


def launch_cause_list(trace: Trace, rows: np.ndarray, cause: np.ndarray) -> list[Cause]:
    out = []
    its = trace.iterations
    ts = trace.events["ts"].to_numpy()
    for name in LAUNCH_CAUSES:
        mask = cause == name
        k = int(mask.sum())
        if not k:
            continue
        share = k / len(rows)
        steps = _labels(its, its.assign(ts[rows[mask]])) if RULES[name].changes_figures else ()
        out.append(Cause(name, k, None, _affects(name, k, share, 0, trace, rows[mask]), "launches", share,
                         RULES[name].changes_figures, steps))
    return out


def step_causes(trace: Trace) -> list[Cause]:
    its = trace.iterations
    if its.unit != "step" or not its.count:
        return []
    starts, ends = cpu_spans(trace)
    startup = overhead_overlap(trace, starts, ends) >= 0
    compile_starts, _ = compile_spans(trace)
    at = its.assign(compile_starts)
    compiling = np.zeros(its.count, bool)
    compiling[at[at >= 0]] = True
    g = trace.gpu
    it = g["iteration"].to_numpy()
    out = []
    for name, mask in (("compile_in_step", compiling), ("startup_in_step", startup & ~compiling)):
        k = int(mask.sum())
        if not k:
            continue
        held = np.isin(it, np.flatnonzero(mask))
        labels = tuple(its.labels[i] for i in np.flatnonzero(mask))
        what = "a torch.compile compile" if name == "compile_in_step" else "the profiler's start-up"
        affects = (f"{plural(k, 'step')} ({', '.join(labels[:3])}{', …' if k > 3 else ''}) hold {what}: "
                   "left out of the per-step medians")
        out.append(Cause(name, k, _total(g["dur"].to_numpy()[held]), affects, "steps", k / its.count, False,
                         labels))
    return out


def _total(dur: np.ndarray) -> int | float:
    """A sum of durations as an int, or a float past int64 (absurd traces): JSON holds either."""
    total = float(dur.astype(np.float64).sum())
    return int(total) if abs(total) < 2**63 else total


def file_causes(trace: Trace) -> list[Cause]:
    """Events the file lost before any rule could see them: a cut-off or damaged file, unreadable events."""
    meta = trace.meta
    if not (meta.skipped_events or meta.truncated or meta.end_damaged):
        return []
    n = len(trace.events)
    if meta.truncated:
        what = f"the file is cut off after its {n:,} events: whatever came after (GPU work too) is lost"
    elif meta.end_damaged:
        what = "the end of the file is cut off or damaged: the keys after the events are lost"
    else:
        what = ""
    if meta.skipped_events:
        skipped = (f"{plural(meta.skipped_events, 'event')} could not be read, and "
                   f"{'is' if meta.skipped_events == 1 else 'are'} counted nowhere")
        what = f"{what}; {skipped}" if what else skipped
    share = meta.skipped_events / (n + meta.skipped_events) if n + meta.skipped_events else 0.0
    return [Cause("lost_in_file", meta.skipped_events, None, what, "file events", share, True)]


def _labels(its, at: np.ndarray) -> tuple[str, ...]:
    idx = np.unique(at[at >= 0])
    return tuple(its.labels[i] for i in idx.tolist())


def affected_steps(trace: Trace, code: np.ndarray, lost: np.ndarray) -> dict[int, tuple[str, ...]]:
    """Iteration -> the figure-changing causes among its GPU events and its lost launches."""
    out: dict[int, set[str]] = {}
    it = trace.gpu["iteration"].to_numpy()
    for cause in GPU_CAUSES:
        if RULES[cause].changes_figures:
            for i in np.unique(it[(code == CODE[cause]) & (it >= 0)]).tolist():
                out.setdefault(i, set()).add(cause)
    if len(lost):
        at = trace.iterations.assign(trace.events["ts"].to_numpy()[lost])
        for i in np.unique(at[at >= 0]).tolist():
            out.setdefault(i, set()).add("no_kernel")
    return {i: tuple(c for c in RULES if c in s) for i, s in sorted(out.items())}


def _affects(cause: str, k: int, share: float, longest: int, trace: Trace, which) -> str:
    pct = percent(share)
    ev = plural(k, "GPU event")
    one = k == 1
    if cause == "no_launch":
        where = ""
        ts, linked = trace.gpu["ts"].to_numpy(), trace.gpu["launch_row"].to_numpy() >= 0
        if linked.any() and ts[which].max() < ts[linked].min():
            where = " (all at the start: launched before the profiler started)"
        no_op = int((trace.gpu["op_row"].to_numpy()[which] < 0).sum())
        its = "its" if one else "their"
        if no_op == k:
            lost = f"{its} op and source line are unknown"
        elif no_op == 0:
            lost = f"{its} source line is unknown ({its} op is known from its External id)"
        else:
            lost = f"their source line is unknown, and the op of {no_op:,} of them"
        return f"{pct} of GPU events ({k:,}) {'has' if one else 'have'} no launch call{where}: {lost}"
    if cause == "no_kernel":
        return (f"{pct} of launches ({k:,}) {'has' if one else 'have'} no GPU event (lost, or the profiler stopped "
                f"first): the GPU time of the {'step' if one else 'steps'} that made {'it' if one else 'them'} is short")
    if cause == "duplicate":
        return f"{ev} {'appears' if one else 'appear'} twice: counts and GPU time count {'it' if one else 'them'} twice"
    if cause == "bad_duration":
        return (f"{ev} {'has' if one else 'have'} a zero, negative, missing or impossible duration: "
                f"{'its' if one else 'their'} GPU time is unknown")
    if cause == "below_resolution":
        return f"{ev} {'lasts' if one else 'last'} under the trace's 1 µs resolution and {'reads' if one else 'read'} as 0"
    if cause == "shared_correlation":
        return (f"{ev} {'shares' if one else 'share'} a correlation with an earlier GPU event (one launch makes one "
                f"event): {'its' if one else 'their'} launch call, op and step may be another's")
    if cause == "before_launch":
        return (f"{ev} {'starts' if one else 'start'} before {'its' if one else 'their'} launch call (the clocks "
                "disagree): launch delays and step placement are wrong")
    if cause == "outside_window":
        return f"{ev} {'lies' if one else 'lie'} outside the profiler's window: the clocks disagree, or the window is cut"
    if cause == "overlap":
        return (f"{ev} {'overlaps' if one else 'overlap'} another on {'its' if one else 'their'} stream (by up to "
                f"{fmt_ns(longest)}): busy time and the timeline are unreliable there")
    if cause == "overlap_pdl":
        return f"{plural(k, 'overlap')} of up to {fmt_ns(longest)} explained by programmatic dependent launch"
    if cause == "overlap_graph":
        return f"{plural(k, 'overlap')} of up to {fmt_ns(longest)} within one CUDA-graph replay (parallel branches)"
    if cause == "captured_launch":
        return f"{plural(k, 'launch')} captured into a CUDA graph, not run"
    if cause == "range_profiled":
        return f"{plural(k, 'kernel launch')} measured by the CUPTI range profiler: no kernel times"
    if cause == "empty_launch":
        return (f"{plural(k, 'copy or fill call')} made no GPU event (a zero-byte copy or fill runs nothing, and "
                "no kernel launch lost its kernel)")
    return f"{k:,} {cause}"
