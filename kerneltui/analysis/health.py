"""Trace health: what a trace cannot be trusted for, counted by cause (docs/health.md).

``trace_health(trace)`` checks every GPU event (kernel, memcpy, memset), every call that
launches GPU work and every step, and gives each damaged one a single cause, the first
that applies in this order:

GPU events (rows of ``trace.gpu``)
  duplicate         identical to an earlier one in name, ts, dur, device, stream and
                    correlation: an extra copy (the first copy is not counted)
  below_resolution  zero, in a trace whose GPU times are all whole microseconds (torch < 1.9)
                    and where no duration was repaired: shorter than the resolution (listed only)
  bad_duration      duration zero, negative, unreadable or missing in the file (the loader
                    reads those as 0), or longer than the profiled window
  no_launch         its correlation matches no runtime or driver call: the launch was
                    dropped, or came before the profiler started
  shared_correlation  its correlation is an earlier GPU event's, and neither is a CUDA-graph
                    replay: one launch makes one event, so one of them is linked to a launch
                    (op, thread, step) that is not its own
  before_launch     starts before the call that launched it: the clocks disagree
  outside_window    starts before, or ends after, the profiler's own span (none without one)
  overlap           starts before an earlier event on its stream has ended, and nothing
                    below explains it; by how much: how long before that event's end it started
  overlap_pdl       the same, launched by a call that can ask for programmatic dependent
                    launch (PDL_LAUNCHES), by at most PDL_NS or PDL_SHARE of the kernel it
                    overlaps, and ending after it (listed only)
  overlap_graph     the same, both replays of one CUDA-graph launch (parallel branches of
                    a graph share its stream and its correlation; listed only)
Launch calls (runtime and driver calls that start GPU work: ``*Launch*``, ``*Memcpy*``,
``*Memset*``) whose GPU event is not in the trace
  captured_launch   made inside ``cudaStreamBeginCapture``/``EndCapture`` on its thread:
                    recorded into a CUDA graph, not run (listed only)
  range_profiled    a kernel launch in a trace the CUPTI range profiler recorded: the
                    kernel became a counter range, not a timed event (listed only)
  empty_launch      a memcpy or memset call, where no kernel launch lost its kernel: a
                    zero-byte copy or fill makes no GPU work (listed only)
  no_kernel         any other: GPU events lost (a CUPTI buffer overflow), or the profiler
                    stopped before the work ran
The file
  lost_in_file      events the loader could not read (not JSON, no usable time), or a file
                    cut off: what they held is in no figure
Steps (listed only: timing.py leaves them out of its medians)
  startup_in_step   a step the profiler's own start-up events touch
  compile_in_step   a step in which a torch.compile (Dynamo) compile started

``ok`` is False only when a cause that changes a figure was found (the ones not marked
"listed only"). Sync events (``cuda_sync``) and GPU annotation spans are not GPU work
here, so they never count as overlaps.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from kerneltui.analysis.compare.compile_facts import compile_spans
from kerneltui.analysis.compare.timing import cpu_spans, overhead_overlap
from kerneltui.trace.model import Trace
from kerneltui.trace.per_trace import PerTrace
from kerneltui.trace.schema import GPU_WORK, Kind
from kerneltui.trace.text_columns import text_values
from kerneltui.units import fmt_ns, plural

PDL_NS = 2_000  # a dependent kernel may start this long before the kernel it waits on ends
PDL_SHARE = 0.05  # ... or this share of that kernel (a 100 µs GEMM triggers its dependants early)
UNSPANNED_FACTOR = 10  # without the profiler's span, a duration is impossible past this many times the rest
DAMAGE_LIMIT = 0.01  # above this share of a side's GPU events, a diff abstains (compare/diff.py)
# The causes a diff abstains on: what they change is the count or the time of GPU work itself.
ABSTAIN_ON = ("no_launch", "no_kernel", "duplicate", "bad_duration")

PDL_LAUNCHES = frozenset(("cudaLaunchKernelExC", "cudaLaunchKernelEx", "cuLaunchKernelEx", "hipLaunchKernelExC"))
_WORK_CALL = re.compile(r"^(cuda|cu|hip|hipExt)\w*(Launch|Memcpy|Memset)")
_NOT_WORK = re.compile(r"LaunchHostFunc|Occupancy|LaunchAttribute")
_CAPTURE_BEGIN = frozenset(("cudaStreamBeginCapture", "cudaStreamBeginCapture_v2", "cudaStreamBeginCaptureToGraph",
                            "hipStreamBeginCapture", "cuStreamBeginCapture", "cuStreamBeginCapture_v2"))
_CAPTURE_END = frozenset(("cudaStreamEndCapture", "hipStreamEndCapture", "cuStreamEndCapture"))


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
        return sources[order], targets[order]

    def damage(self) -> list[Cause]:
        """Causes that change figures, worst first."""
        return [c for c in self.causes if c.changes_figures]

    def abstain_reason(self, side: str) -> str:
        """Why a diff cannot compare this side ("" when it can): the worst of ABSTAIN_ON above DAMAGE_LIMIT."""
        worst = max((c for c in self.causes if c.cause in ABSTAIN_ON), key=lambda c: c.share, default=None)
        if worst is None or worst.share <= DAMAGE_LIMIT:
            return ""
        pct = _pct(worst.share)
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
            return "healthy" + (f" ({'; '.join(_brief(c) for c in listed)})" if listed else "")
        return "NOT HEALTHY: " + "; ".join(c.affects for c in damage)

    def short_line(self) -> str:
        """The line in a few words per cause, for a narrow screen: "NOT HEALTHY: 7.3% of GPU events without
        launch; 3 duplicated"."""
        damage = self.damage()
        return "NOT HEALTHY: " + "; ".join(_brief(c) for c in damage) if damage else "healthy"

    def to_dict(self) -> dict:
        return {"ok": self.ok, "line": self.line(), "gpu_events": self.gpu_events, "launches": self.launches,
                "causes": [c.to_dict() for c in self.causes]}


def trace_health(trace: Trace) -> Health:
    """The health of a trace (computed once per Trace; a second thread asking meanwhile waits for it:
    `summary --format json` builds it on its background thread while its own thread writes the rest)."""
    return _HEALTH(trace)


def _health(trace: Trace) -> Health:
    g = trace.gpu
    n = len(g)
    code = np.zeros(n, np.int8)
    ts, dur, end = (g[c].to_numpy() for c in ("ts", "dur", "end"))

    def mark(mask: np.ndarray, cause: str) -> None:
        code[mask & (code == 0)] = CODE[cause]

    mark(_duplicates(g), "duplicate")
    limit = _plausible_limit(trace)
    zero = dur <= 0
    coarse = _whole_microseconds(ts, dur) and trace.meta.repaired_durations == 0
    mark(zero & coarse, "below_resolution")
    mark(zero | (dur > limit if limit > 0 else False), "bad_duration")
    has_launch = g["launch_row"].to_numpy() >= 0
    mark(~has_launch, "no_launch")
    mark(_shared_correlation(g, code == 0), "shared_correlation")
    mark(has_launch & (ts < g["launch_ts"].to_numpy()), "before_launch")
    span = _profiler_span(trace)
    if span is not None:
        mark((ts < span[0]) | (end > span[1]), "outside_window")
    overlapped, amount = _overlaps(g, np.isin(code, (CODE["duplicate"], CODE["bad_duration"])))
    pdl = _pdl(g, overlapped, amount)
    graph = _same_graph_replay(g, overlapped)
    over = (overlapped >= 0) & (code == 0)
    mark(over & graph, "overlap_graph")
    mark(over & pdl, "overlap_pdl")
    mark(over, "overlap")

    launch_rows, launch_cause = _launch_causes(trace)
    causes = _gpu_causes(trace, code, amount, coarse, span)
    causes += _launch_cause_list(trace, launch_rows, launch_cause)
    causes += _step_causes(trace)
    causes += _file_causes(trace)
    lost = launch_rows[launch_cause == "no_kernel"]
    overlapping = np.isin(code, (CODE["overlap"], CODE["overlap_pdl"], CODE["overlap_graph"]))
    return Health(tuple(causes), n, len(launch_rows), code, np.where(overlapping, overlapped, -1),
                  np.where(overlapping, amount, 0), lost, _affected_steps(trace, code, lost))


_HEALTH: PerTrace[Health] = PerTrace(_health)


# -- GPU events -------------------------------------------------------------------------------

def _duplicates(g) -> np.ndarray:
    """Extra copies: rows equal to an earlier row in name, ts, dur, device, stream and correlation.

    Copies share a ts, so only rows whose ts repeats are compared (few, in a sound trace)."""
    ts = g["ts"].to_numpy()
    out = np.zeros(len(g), bool)
    if len(ts) < 2:
        return out
    repeat = np.zeros(len(ts), bool)
    same = ts[1:] == ts[:-1]  # g is sorted by ts
    repeat[1:] |= same
    repeat[:-1] |= same
    rows = np.flatnonzero(repeat)
    if len(rows):
        cols = g.iloc[rows][["name", "ts", "dur", "device", "stream", "correlation"]]
        out[rows[cols.duplicated().to_numpy()]] = True
    return out


def _shared_correlation(g, candidates: np.ndarray) -> np.ndarray:
    """Events (not graph replays) whose correlation an earlier such event already has: all but the first."""
    out = np.zeros(len(g), bool)
    rows = np.flatnonzero(candidates & ~g["graph"].to_numpy() & (g["correlation"].to_numpy() >= 0))
    if len(rows) < 2:
        return out
    corr = g["correlation"].to_numpy()[rows]
    _, first = np.unique(corr, return_index=True)  # rows are in time order: the first of each is kept
    repeat = np.ones(len(rows), bool)
    repeat[first] = False
    out[rows[repeat]] = True
    return out


def _whole_microseconds(ts: np.ndarray, dur: np.ndarray) -> bool:
    """The trace's GPU times are whole µs (torch < 1.9 wrote integer µs): a 0 there is < 1 µs."""
    return bool(len(ts)) and not (ts % 1000).any() and not (dur % 1000).any()


def _profiler_span(trace: Trace) -> tuple[int, int] | None:
    ev = trace.events
    rows = np.flatnonzero(ev["kind"].to_numpy() == Kind.SPAN)
    if not len(rows):
        return None
    ts = ev["ts"].to_numpy()[rows]
    return int(ts.min()), int((ts + ev["dur"].to_numpy()[rows]).max())


def _plausible_limit(trace: Trace) -> int:
    """The longest a GPU event can last: the profiler's span. A trace without one (cut down by another tool)
    is measured without the GPU events' ends, which a bad duration would stretch: from the first event to the
    last CPU-side end or GPU start; the GPU may run on after the CPU has stopped recording, so ten times that."""
    span = _profiler_span(trace)
    if span is not None:
        return span[1] - span[0]
    ev = trace.events
    kinds, ts = ev["kind"].to_numpy(), ev["ts"].to_numpy()
    if not len(ts):
        return 0
    cpu = ~np.isin(kinds, GPU_WORK)
    last = max(int((ts[cpu] + ev["dur"].to_numpy()[cpu]).max()) if cpu.any() else 0, int(ts.max()))
    return UNSPANNED_FACTOR * (last - int(ts.min()))


def _overlaps(g, unsound: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row: the row whose end it starts before on its stream (the latest-ending earlier one), and by how
    much; -1 and 0 where none. ``unsound`` rows take no part (a bad end would overlap everything after it)."""
    n = len(g)
    overlapped = np.full(n, -1, np.int64)
    amount = np.zeros(n, np.int64)
    part = np.flatnonzero(~unsound)
    if len(part) < 2:
        return overlapped, amount
    device, stream = g["device"].to_numpy()[part], g["stream"].to_numpy()[part]
    order = np.lexsort((part, stream, device))  # rows are in ts order already: stable within a stream
    rows = part[order]
    lane = np.concatenate(([True], (device[order][1:] != device[order][:-1]) | (stream[order][1:] != stream[order][:-1])))
    bounds = np.append(np.flatnonzero(lane), len(rows))
    ts, end = g["ts"].to_numpy(), g["end"].to_numpy()
    for lo, hi in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
        if hi - lo < 2:
            continue
        r = rows[lo:hi]
        s, e = ts[r], end[r]
        reach = np.maximum.accumulate(e)
        holder = np.maximum.accumulate(np.where(e == reach, np.arange(len(r)), 0))
        later = np.flatnonzero(s[1:] < reach[:-1]) + 1
        if len(later):
            overlapped[r[later]] = r[holder[later - 1]]
            amount[r[later]] = reach[later - 1] - s[later]  # how long before the other ended it started
    return overlapped, amount


def _pdl(g, overlapped: np.ndarray, amount: np.ndarray) -> np.ndarray:
    """Launched by a call that can ask for programmatic dependent launch, started at most PDL_NS (or PDL_SHARE of
    it) before the kernel it overlaps ended, and ended after it: a dependent kernel waits for its primary's end."""
    has = overlapped >= 0
    launch = text_values(g["launch"]) if has.any() else np.empty(len(g), object)
    by_pdl = np.zeros(len(g), bool)
    if has.any():
        rows = np.flatnonzero(has)
        ex = np.isin(launch[rows], list(PDL_LAUNCHES))
        other = g["dur"].to_numpy()[overlapped[rows]]
        small = (amount[rows] <= PDL_NS) | (amount[rows] <= PDL_SHARE * other)
        after = g["end"].to_numpy()[rows] >= g["end"].to_numpy()[overlapped[rows]]
        by_pdl[rows] = ex & small & after
    return by_pdl


def _same_graph_replay(g, overlapped: np.ndarray) -> np.ndarray:
    out = np.zeros(len(g), bool)
    rows = np.flatnonzero(overlapped >= 0)
    if len(rows):
        graph, corr = g["graph"].to_numpy(), g["correlation"].to_numpy()
        other = overlapped[rows]
        out[rows] = graph[rows] & graph[other] & (corr[rows] == corr[other])
    return out


# -- launches ---------------------------------------------------------------------------------

def _work_call_codes(trace: Trace) -> dict[int, str]:
    """Name code -> "kernel" or "copy" for the runtime/driver calls that start GPU work."""
    out = {}
    for code, name in enumerate(trace.names):
        if _WORK_CALL.match(name) and not _NOT_WORK.search(name):
            out[code] = "copy" if ("Memcpy" in name or "Memset" in name) else "kernel"
    return out


def _launch_causes(trace: Trace) -> tuple[np.ndarray, np.ndarray]:
    """Every call that starts GPU work (rows of trace.events), and the cause of each one whose GPU event is
    missing ("" for the rest)."""
    ev = trace.events
    kinds, names, corr = ev["kind"].to_numpy(), ev["name"].to_numpy(), ev["correlation"].to_numpy()
    work = _work_call_codes(trace)
    calls = np.isin(kinds, (Kind.RUNTIME, Kind.DRIVER)) & np.isin(names, list(work))
    rows = np.flatnonzero(calls)
    cause = np.full(len(rows), "", object)
    if not len(rows):
        return rows, cause
    lost = ~np.isin(corr[rows], trace.gpu["correlation"].to_numpy()) | (corr[rows] < 0)
    if not lost.any():
        return rows, cause
    copy_codes = [c for c, w in work.items() if w == "copy"]
    is_copy = np.isin(names[rows], copy_codes)
    captured = _inside_capture(trace, rows)
    ranged = bool((kinds == Kind.PROFILER_RANGE).any())
    cause[lost & captured] = "captured_launch"
    left = lost & (cause == "")
    if ranged:
        cause[left & ~is_copy] = "range_profiled"
    left = lost & (cause == "")
    kernels_lost = (left & ~is_copy).any()
    cause[left & is_copy] = "no_kernel" if kernels_lost else "empty_launch"
    cause[lost & (cause == "")] = "no_kernel"
    return rows, cause


def _inside_capture(trace: Trace, rows: np.ndarray) -> np.ndarray:
    """Which launch rows lie inside a stream capture (BeginCapture's start to EndCapture's end) on their thread."""
    ev = trace.events
    out = np.zeros(len(rows), bool)
    begin = [i for i, n in enumerate(trace.names) if n in _CAPTURE_BEGIN]
    finish = [i for i, n in enumerate(trace.names) if n in _CAPTURE_END]
    if not begin or not finish:
        return out
    names, lanes, ts = ev["name"].to_numpy(), ev["lane"].to_numpy(), ev["ts"].to_numpy()
    ends = ts + ev["dur"].to_numpy()
    b, f = np.flatnonzero(np.isin(names, begin)), np.flatnonzero(np.isin(names, finish))
    for lane in np.unique(lanes[b]).tolist():
        starts = np.sort(ts[b][lanes[b] == lane])
        stops = np.sort(ends[f][lanes[f] == lane])
        mine = lanes[rows] == lane
        t = ts[rows][mine]
        # inside when the latest begin before t has no end between it and t
        at = np.searchsorted(starts, t, "right") - 1
        opened = np.where(at >= 0, starts[np.clip(at, 0, None)], np.iinfo(np.int64).max)
        closed_after = np.searchsorted(stops, opened, "left")
        closes = np.where(closed_after < len(stops), stops[np.clip(closed_after, 0, len(stops) - 1)], np.iinfo(np.int64).max)
        out[mine] = (at >= 0) & (closes >= t)
    return out


# -- the report -------------------------------------------------------------------------------

def _gpu_causes(trace: Trace, code: np.ndarray, amount: np.ndarray, coarse: bool, span) -> list[Cause]:
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


def _launch_cause_list(trace: Trace, rows: np.ndarray, cause: np.ndarray) -> list[Cause]:
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


def _step_causes(trace: Trace) -> list[Cause]:
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


def _file_causes(trace: Trace) -> list[Cause]:
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


def _affected_steps(trace: Trace, code: np.ndarray, lost: np.ndarray) -> dict[int, tuple[str, ...]]:
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


def _pct(share: float) -> str:
    return f"{100 * share:.1f}%" if share >= 0.001 else f"{100 * share:.2f}%"


def _affects(cause: str, k: int, share: float, longest: int, trace: Trace, which) -> str:
    pct = _pct(share)
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


def _brief(c: Cause) -> str:
    """A cause in a few words, for a short line."""
    n = f"{c.events:,}"
    return {
        "no_launch": f"{_pct(c.share)} of GPU events without launch",
        "no_kernel": f"{_pct(c.share)} of launches without GPU event",
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
