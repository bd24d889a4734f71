"""What the browser shows, computed from a Trace without Textual.

Three stages, so that a big trace shows its kernel table while the rest is built, and its timeline,
launch list and search before the whole-trace analyses:

* ``Kernels``: the kernel table (``kernel_stats``, the same function as
  ``kerneltui summary``) and the arrays needed to filter it;
* ``Browse``: the timeline (lanes, steps, memory), noise events, sources, the
  launch context and search, built in the same worker right after, on two threads;
* ``Analyses``: the summary line's figures, health, the step split and advice
  (o), bytes and bandwidth, built after, one at a time.

All are frozen and published once; the UI thread only reads them. Filtering
works on the few distinct names and maps the answer to rows with one gather,
so a keystroke costs milliseconds on a million launches.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from functools import partial

import numpy as np
import pandas as pd

from kerneltui.analysis.advice import advice
from kerneltui.analysis.attribution import attribute, place_codes
from kerneltui.analysis.cpu_work import (
    is_cpu_capture,
    records_by_name,
    work_events,
    work_table,
)
from kerneltui.analysis.explore.context import LaunchContext, launch_context
from kerneltui.analysis.explore.groups import available_groupings, group_index
from kerneltui.analysis.explore.ranges import range_index
from kerneltui.analysis.explore.search import LaunchSearch, launch_search
from kerneltui.analysis.health import Health, trace_health
from kerneltui.analysis.memory import MemoryTable, memory_table
from kerneltui.analysis.modules import ModuleTree, module_tree
from kerneltui.analysis.overview import Overview, overview
from kerneltui.trace import heap
from kerneltui.trace.filters import name_pattern
from kerneltui.trace.fits import available_memory
from kerneltui.trace.intervals import index_dtype
from kerneltui.trace.link import names_per_key
from kerneltui.trace.model import Trace
from kerneltui.trace.one_of import one_of
from kerneltui.trace.schema import Kind
from kerneltui.trace.summary import TraceSummary, kernel_stats, summarize
from kerneltui.trace.threads import in_background
from kerneltui.tui.lanes import (
    Lane,
    _threads_by_launches,
    lanes_from_trace,
    op_lanes,
)
from kerneltui.tui.memory_paint import MemoryCurve

# Noise categories the user toggles: (id, label, event kinds, shown by default).
GPU_CATEGORIES = (("memcpy", "memcpy", (Kind.MEMCPY,)), ("memset", "memset", (Kind.MEMSET,)))
CPU_CATEGORIES = (
    ("runtime", "runtime/driver", (Kind.RUNTIME, Kind.DRIVER)),
    ("cpu_op", "CPU ops", (Kind.CPU_OP,)),
    ("annotation", "annotations", (Kind.ANNOTATION, Kind.GPU_ANNOTATION)),
    ("memory", "allocator", (Kind.MEMORY,)),
)
DEFAULT_SHOWN = frozenset({"memcpy", "memset"})


def _frozen(a: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(a)
    a.flags.writeable = False
    return a


@dataclass(frozen=True, eq=False)
class CpuWork:
    """A CPU capture's work (analysis/cpu_work): what its kernel table lists instead of GPU kernels."""

    events: pd.DataFrame  # work_events: one row per call (self time, step, event row)
    table: pd.DataFrame  # work_table(events): one row per compiled C++ kernel or ATen op, by CPU self time
    records: dict = field(repr=False)  # compiled kernel name -> its provenance record (records_by_name)


@dataclass(frozen=True, eq=False)
class Kernels:
    """Stage 1: the kernel table and the per-launch arrays that filtering needs."""

    trace: Trace
    stats: pd.DataFrame  # kernel_stats(trace): one row per key, by total time
    origin: int  # ns: the trace window's start; every time on screen is relative to it
    key_codes: np.ndarray  # per launch: code into key_names
    key_short: tuple[str, ...]  # per key code
    key_full: tuple[str, ...]
    stats_code: np.ndarray  # per stats row: its key code
    stats_row_of_code: np.ndarray  # per key code: its stats row
    launch_kind: np.ndarray  # per launch: schema.Kind
    cpu: CpuWork | None = None  # a CPU capture (no GPU activity): its CPU work, which the kernel table lists

    def key_matches(self, pattern: str) -> np.ndarray:
        """Per key code: does its short or full name match (substring, or /regex)? Raises UserError."""
        if not pattern:
            return np.ones(len(self.key_short), bool)
        regex = name_pattern(pattern)
        return np.fromiter(
            (bool(regex.search(s) or regex.search(f)) for s, f in zip(self.key_short, self.key_full)),
            bool, len(self.key_short),
        )

    def kind_allowed(self, shown: frozenset[str]) -> np.ndarray:
        """Per schema.Kind value: is GPU work of that kind shown?"""
        allowed = np.zeros(max(Kind) + 1, bool)
        allowed[Kind.KERNEL] = True
        for cid, _, kinds in GPU_CATEGORIES:
            if cid in shown:
                allowed[list(kinds)] = True
        return allowed

    def launch_mask(self, key_ok: np.ndarray, shown: frozenset[str]) -> np.ndarray | None:
        """Per launch: kept by the filter and the toggles (None: every launch is kept)."""
        kind_ok = self.kind_allowed(shown)
        if key_ok.all() and kind_ok[[Kind.MEMCPY, Kind.MEMSET]].all():
            return None
        return key_ok[self.key_codes] & kind_ok[self.launch_kind]

    def stats_rows(self, key_ok: np.ndarray, shown: frozenset[str]) -> np.ndarray:
        """Positions of the kernel-table rows kept by the filter and the toggles, in stats order."""
        kind_ok = self.kind_allowed(shown)
        kinds = self.stats["kind"].to_numpy().astype(np.int64)
        return np.flatnonzero(key_ok[self.stats_code] & kind_ok[kinds])


def build_kernels(trace: Trace) -> Kernels:
    g = trace.gpu
    stats = kernel_stats(trace)
    key = g["key"].cat
    categories = [str(c) for c in key.categories]
    codes = key.codes.to_numpy().astype(np.int64)
    # each key's names through the categoricals: astype(str) on a million rows materialised a million
    # strings (0.8 s of a warm open)
    short, full = names_per_key(g, "short", "full_name")
    position = {k: i for i, k in enumerate(categories)}
    stats_code = np.array([position[k] for k in stats["key"]], np.int64)
    stats_row_of_code = np.full(len(categories), -1, np.int64)
    stats_row_of_code[stats_code] = np.arange(len(stats_code))
    return Kernels(
        trace=trace,
        stats=stats,
        origin=int(trace.window[0]),
        key_codes=_frozen(codes),
        key_short=tuple(short),
        key_full=tuple(full),
        stats_code=_frozen(stats_code),
        stats_row_of_code=_frozen(stats_row_of_code),
        launch_kind=_frozen(g["kind"].to_numpy().astype(np.int64)),
        cpu=cpu_work_of(trace),
    )


def cpu_work_of(trace: Trace) -> CpuWork | None:
    """A CPU capture's work for the kernel table (None for a trace with GPU activity)."""
    if not is_cpu_capture(trace):
        return None
    events = work_events(trace)
    return CpuWork(events=events, table=work_table(events), records=records_by_name(trace))


@dataclass(frozen=True, eq=False)
class Analyses:
    """Stage 3: the whole-trace analyses (analysis/), read by the header, the health line, o and H, the
    details' bytes and bandwidth and a range's bytes."""

    summary: TraceSummary
    traffic: pd.DataFrame | None  # traffic.Traffic.table, aligned with trace.gpu; None if unavailable
    device_spec: object | None
    health: Health | None = field(default=None, repr=False)  # what the trace cannot be trusted for (analysis/health)
    overview: Overview | None = field(default=None, repr=False)  # o: the step split (analysis/overview.py)
    findings: tuple = field(default=(), repr=False)  # o: what to try next (analysis/advice.py)


@dataclass(frozen=True, eq=False)
class Browse:
    """Stage 2: timeline lanes, noise events, sources, launch context and search; then stage 3's analyses."""

    kernels: Kernels
    lanes: tuple[Lane, ...]
    noise_rows: dict[str, np.ndarray]  # CPU category -> event rows in time order
    counts: dict[str, int]  # every category (GPU and CPU) -> events in the trace
    sources: pd.DataFrame | None  # trace.gpu_sources (source, module) or None without stacks
    step_spans: tuple[np.ndarray, np.ndarray, tuple[str, ...]]  # per step/call: CPU span widened to its GPU work
    call_to_launch: np.ndarray = field(repr=False)  # event row of a launch call -> the first GPU work it launched
    icicles: dict = field(repr=False)  # launching thread (lane) -> its CPU ops, a lane per depth (the main one first)
    context: LaunchContext = field(repr=False)  # per launch: op stack, source line, module (analysis.explore)
    search: LaunchSearch = field(repr=False)  # `/` over kernels, ops, annotations, modules, sources
    modules: ModuleTree | None = field(default=None, repr=False)  # T: the module tree (analysis/modules.py)
    memory: MemoryTable | None = field(default=None, repr=False)  # u and the timeline: analysis/memory.py
    analyses: Analyses | None = field(default=None, repr=False)  # stage 3, once it is in (build_analyses)

    def row_to_launch_of_call(self, row: int) -> int:
        return int(self.call_to_launch[row])


def early_memory_table(trace: Trace) -> Future | None:
    """The memory table (stage 2's) started on a thread of its own while stage 1 links the launches and
    the table is drawn, when there is memory for both (None: build_browse makes it). Those leave the
    second core idle (0.3 s at 1 GB), and the memory table was 0.2 s of stage 2's longer half. The steps,
    which both read, are found first."""
    if not _room_for_both(len(trace.events)):
        return None
    trace.iterations  # noqa: B018 - computed and cached now
    (table,) = in_background((_memory_table_handed_back,), trace, name="kerneltui-memory")
    return table


def _memory_table_handed_back(trace: Trace) -> MemoryTable | None:
    """The memory table, then its scratch handed back to the system (it was made in this thread's own malloc
    arena, which the stage's own hand-back may have passed before it was free)."""
    table = memory_table(trace)
    heap.give_back(len(trace.events))
    return table


def build_browse(kernels: Kernels, memory: Future | None = None) -> Browse:
    """Stage 2, on two threads: numpy and pandas let go of the GIL in much of both halves. What both
    reach is made before the thread starts or built once, by one of them, while the other waits:
    trace.gpu and trace.iterations (stage 1), trace.window and trace.name_codes here (from Python 3.12
    cached_property no longer locks); the op stacks (Trace.op_stack) and the python frames (PerTrace)
    lock. The other thread makes the launches' sources (trace.gpu_sources, 0.18 s at 1 GB), which this
    one's launch context waits for, then the attribution (0.42 s), which the groupings wait for, then
    the timeline's parts; this one the noise rows, the op stacks, the launch context, the memory
    table (unless ``memory``, early_memory_table's, brings it), the groupings and the search. The
    analyses come after (build_analyses): at 1 GB, in one process, this stage took 1.21 s with them,
    0.80-0.98 s without."""
    trace = kernels.trace
    g = trace.gpu
    trace.window, trace.name_codes  # noqa: B018 - computed and cached now
    sources_made, attributed = threading.Event(), threading.Event()
    with_sources = bool(trace.meta.with_stack and len(g))
    other = partial(_other_half, with_sources=with_sources, sources_made=sources_made, attributed=attributed,
                    origin=kernels.origin)
    if _room_for_both(len(trace.events)):
        (timeline,) = in_background((other,), trace, name="kerneltui-browse")
    else:  # memory is short: one half at a time
        timeline = _done(other(trace))
    kinds = trace.events["kind"].to_numpy()
    ts = trace.events["ts"].to_numpy()
    noise_rows, counts = {}, {}
    for cid, _, ks in GPU_CATEGORIES:
        counts[cid] = int(one_of(kernels.launch_kind, ks).sum())
    for cid, _, ks in CPU_CATEGORIES:
        rows = np.flatnonzero(one_of(kinds, ks))
        noise_rows[cid] = _frozen(rows[np.argsort(ts[rows], kind="stable")].astype(index_dtype(len(kinds))))
        counts[cid] = len(rows)
    for lane in trace.cpu_lanes():
        trace.op_stack(lane)  # built here so the details pane never waits on it
    # one entry per event: int32 (positions in trace.gpu), half the memory of a 5 GB trace's int64s
    call_to_launch = np.full(len(trace.events), -1, index_dtype(len(g)))
    called = g["launch_row"].to_numpy()
    has_call = np.flatnonzero(called >= 0)[::-1]  # reversed: the first launch of a graph replay wins
    call_to_launch[called[has_call]] = has_call
    sources_made.wait()
    sources = trace.gpu_sources if with_sources else None
    context = launch_context(trace)
    memory = memory.result() if memory is not None else memory_table(trace)  # while the other thread attributes
    attributed.wait()
    groups = group_index(trace, context)  # every grouping's codes, here rather than on the first keystroke
    range_index(trace)
    modules = module_tree(trace)  # the attribution, here rather than on the first T
    place_codes(trace)
    search = launch_search(trace, context)
    for by in available_groupings(trace, context):  # each grouping's sums per class the search keeps or drops
        groups.class_sums(by, search.combo_code)
    spans, lanes, icicle_lanes = timeline.result()
    return Browse(
        memory=memory,
        kernels=kernels,
        step_spans=spans,
        lanes=lanes,
        icicles=icicle_lanes,
        noise_rows=noise_rows,
        counts=counts,
        sources=sources,
        call_to_launch=_frozen(call_to_launch),
        context=context,
        search=search,
        modules=modules,
    )


def _other_half(trace: Trace, with_sources: bool, sources_made: threading.Event, attributed: threading.Event,
                origin: int) -> tuple:
    """``trace.gpu_sources`` (``sources_made`` set once it is, or failed: the other half then asks for it
    itself), the attribution (``attributed``, likewise), then the timeline's parts. Each event is set
    whatever fails (the other half never waits for good), and the error is raised by build_browse."""
    try:
        try:
            if with_sources:
                trace.gpu_sources  # noqa: B018 - built and cached now
        finally:
            sources_made.set()
        attribute(trace)
    finally:
        attributed.set()
    return _timeline_parts(trace, origin)


def build_analyses(trace: Trace) -> Analyses:
    """Stage 3, one analysis after another on this thread: their scratch on top of all that stage 2 keeps
    sets the browser's peak memory. At 1 GB: 0.45 s, and a peak of 0.81-0.82x the JSON (0.81x before the
    stages split); on two threads it took 0.33 s, at 0.85-0.86x."""
    steps = overview(trace)
    summary = summarize(trace)
    traffic, spec, whole = _traffic(trace)
    findings = tuple(advice(trace, steps, whole))
    return Analyses(summary=summary, traffic=traffic, device_spec=spec, health=trace_health(trace), overview=steps,
                    findings=findings)


# A second thread adds its scratch to the first's: the largest (the memory table's) was 55 bytes an event at
# 1 GB (2.5M events), and the peak rose 0.05-0.08x of the JSON. Twice that must be free to run both.
BOTH_HALVES_PER_EVENT = 128


def _room_for_both(events: int) -> bool:
    """Whether the memory available (where known) leaves room for both halves' scratch at once."""
    available = available_memory()
    return available is None or available >= BOTH_HALVES_PER_EVENT * events


def _done(value) -> Future:
    """``value`` as a future already resolved (the analyses computed on this thread)."""
    future = Future()
    future.set_result(value)
    return future


def _timeline_parts(trace: Trace, origin: int) -> tuple:
    """The timeline's step spans, lanes (GPU streams, launching threads) and each thread's icicle."""
    return step_spans(trace, origin), tuple(lanes_from_trace(trace, origin, op_depths=0)), icicles(trace, origin)


def icicles(trace: Trace, origin: int, depths: int = 8) -> dict[int, tuple[Lane, ...]]:
    """Each launching thread's ops by depth, labelled by thread: the timeline shows the selected launch's."""
    launch_lane = trace.gpu["launch_lane"].to_numpy()
    out = {}
    for lane in _threads_by_launches(trace.lanes, launch_lane):
        thread = str(trace.lanes["thread"].iat[lane])
        name = "ops" if not out else ("autograd" if "autograd" in thread else f"t{trace.lanes['tid'].iat[lane]}")
        out[lane] = tuple(replace(x, label=f"{name} d{x.key.rsplit(':', 1)[1]}") for x in op_lanes(trace, lane, origin, depths))
    return out


def memory_curves(table: MemoryTable | None, origin: int) -> list[MemoryCurve]:
    """Each CUDA device's allocated and reserved totals in the timeline's clock (0 at ``origin``)."""
    if table is None:
        return []
    return [MemoryCurve(d.device, d.ts - origin, d.allocated, d.reserved, d.peak_allocated_bytes, d.peak_reserved_bytes)
            for d in table.devices]


def step_spans(trace: Trace, origin: int) -> tuple[np.ndarray, np.ndarray, tuple[str, ...]]:
    """Each step from its CPU start to the end of the last GPU work launched in it.

    The GPU runs behind the CPU, so a step's kernels end after its CPU span; the
    timeline shows a step as everything it caused. A lone "whole trace" call is no step.
    """
    its = trace.iterations
    if its.source == "whole trace":
        return np.empty(0, np.int64), np.empty(0, np.int64), ()
    g = trace.gpu
    starts, ends = its.starts.astype(np.int64).copy(), its.ends.astype(np.int64).copy()
    it = g["iteration"].to_numpy()
    inside = it >= 0
    np.minimum.at(starts, it[inside], g["ts"].to_numpy()[inside])
    np.maximum.at(ends, it[inside], g["end"].to_numpy()[inside])
    # iterations are in time order, so step i of the timeline is iteration i of trace.gpu
    return _frozen(starts - origin), _frozen(ends - origin), tuple(its.labels)


def _traffic(trace: Trace):
    """Bytes and bandwidth per launch from the data layer's traffic module: (its table, device, whole result)."""
    try:
        from kerneltui.analysis.traffic import compute_traffic
    except ImportError:
        return None, None, None
    result = compute_traffic(trace)
    return result.table, result.device, result


@dataclass(frozen=True, eq=False)
class EventList:
    """The launch list's rows: event rows (trace.events) in display order, and their launch positions."""

    rows: np.ndarray
    launch: np.ndarray  # position in trace.gpu, or -1 for a CPU-side event

    def __len__(self) -> int:
        return len(self.rows)

    def position_of_row(self, row: int) -> int:
        found = np.flatnonzero(self.rows == row)
        return int(found[0]) if len(found) else -1


def event_list(browse: Browse | None, kernels: Kernels, keep: np.ndarray | None, shown: frozenset[str],
               name_ok: np.ndarray | None) -> EventList:
    """GPU launches kept by ``keep`` merged in time order with the CPU categories shown.

    ``name_ok`` is a per-name-code mask (over trace.names) for CPU events; None keeps all.
    """
    g_rows = kernels.trace.gpu["row"].to_numpy()
    launches = np.arange(len(g_rows), dtype=np.int64) if keep is None else np.flatnonzero(keep)
    rows = g_rows[launches]
    extra = [browse.noise_rows[c] for c, _, _ in CPU_CATEGORIES if browse is not None and c in shown]
    if not extra:
        return EventList(_frozen(rows), _frozen(launches))
    other = np.concatenate(extra)
    if name_ok is not None:
        other = other[name_ok[kernels.trace.events["name"].to_numpy()[other]]]
    all_rows = np.concatenate([rows, other])
    all_launch = np.concatenate([launches, np.full(len(other), -1, np.int64)])
    ts = kernels.trace.events["ts"].to_numpy()[all_rows]
    order = np.argsort(ts, kind="stable")  # runs already sorted: timsort merges them in O(n)
    return EventList(_frozen(all_rows[order]), _frozen(all_launch[order]))


def names_matching(trace: Trace, pattern: str) -> np.ndarray | None:
    """Per name code of trace.names: does it match? (None for an empty pattern.) Raises UserError."""
    if not pattern:
        return None
    regex = name_pattern(pattern)
    return np.fromiter((bool(regex.search(n)) for n in trace.names), bool, len(trace.names))
