"""What the browser's panes show for one query: search text, noise toggles, grouping, scope.

No Textual here. A query is answered from the data layer's explore tables
(``analysis.explore``: per-launch context, search, groups, ranges) into masks
over ``trace.gpu`` and the kernel table's frame; the screen only draws them.

Masks, all over the rows of ``trace.gpu``:

* ``keep``: the kinds shown (memcpy/memset toggles) and the search. The
  timeline draws these, so a search hides what does not match there too.
* ``in_scope``: ``keep`` within the scope (a step, a time range or the whole
  trace): the kernel table and the launch list count these.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from kerneltui.analysis.attribution import under
from kerneltui.analysis.cpu_work import matching_work, work_table
from kerneltui.analysis.explore.groups import (
    GROUP_LABEL,
    group_codes,
    group_index,
    group_stats,
    scope_mask,
)
from kerneltui.analysis.explore.search import match_totals
from kerneltui.trace.schema import Kind
from kerneltui.tui.model import DEFAULT_SHOWN, Browse, Kernels
from kerneltui.units import fmt_ns


@dataclass(frozen=True)
class Scope:
    """The part of the trace the tables count: the whole trace, one step, or a time range (absolute ns)."""

    iteration: int | None = None
    start: int | None = None
    end: int | None = None

    @property
    def whole(self) -> bool:
        return self.iteration is None and self.start is None

    @property
    def is_range(self) -> bool:
        return self.start is not None

    def label(self, trace, origin: int) -> str:
        if self.is_range:
            return f"range {fmt_ns(self.start - origin)}–{fmt_ns(self.end - origin)}"
        if self.iteration is not None:
            its = trace.iterations
            return f"{its.labels[self.iteration]} ({its.unit} {self.iteration + 1} of {its.count})"
        return "whole trace"

    def mask(self, trace) -> np.ndarray | None:
        g = trace.gpu
        if self.is_range:  # what overlaps the range, counted whole (the range line clips times)
            return (g["end"].to_numpy() > self.start) & (g["ts"].to_numpy() < self.end)
        return scope_mask(trace, self.iteration)


WHOLE = Scope()


@dataclass(frozen=True)
class Query:
    pattern: str = ""
    shown: frozenset[str] = DEFAULT_SHOWN
    grouping: str = "kernel"
    scope: Scope = WHOLE
    module: str = ""  # a node of the module tree (T): its launches and its children's, on the tables and timeline


@dataclass(frozen=True, eq=False)
class Answer:
    query: Query
    keep: np.ndarray | None  # per launch: kind shown and matching the search (None: all)
    in_scope: np.ndarray | None  # keep, within the scope (None: all)
    table: pd.DataFrame  # the kernel table's frame: one row per group
    codes: np.ndarray = field(repr=False)  # per launch: its group code (into keys)
    keys: tuple[str, ...] = field(repr=False)  # per group code: the table's key
    matches: int = 0  # launches in scope (kept), and their GPU time
    match_ns: int = 0
    scope_ns: int = 0  # GPU time of every launch in scope (the search's share is of this)

    def first_launch(self, key: str) -> int | None:
        """The first kept launch in scope of a table row."""
        try:
            code = self.keys.index(key)
        except ValueError:
            return None
        hits = self.codes == code
        if self.in_scope is not None:
            hits &= self.in_scope
        first = int(np.argmax(hits))  # stops at the first hit (flatnonzero would list them all)
        return first if hits[first] else None

    def key_of(self, launch: int) -> str:
        code = int(self.codes[launch])
        return self.keys[code] if 0 <= code < len(self.keys) else ""


def _and(a: np.ndarray | None, b: np.ndarray | None) -> np.ndarray | None:
    if a is None:
        return b
    if b is None:
        return a
    return a & b


@dataclass
class Caches:
    """What a query reuses from the last ones: the keep mask per (search, toggles), so that changing only
    the grouping or the scope keeps the very same mask (and the timeline its filtered lanes), and each
    scope's GPU time, which typing does not change."""

    keep: dict = field(default_factory=dict)
    scope_ns: dict = field(default_factory=dict)
    # the last few answers whole: backspace to a search typed a moment ago is its answer, no regrouping
    # (a broad search regroups half a million launches); answers are never changed once made
    answers: dict = field(default_factory=dict)


ANSWERS_KEPT = 8


def answer(kernels: Kernels, browse: Browse, query: Query, caches: Caches | None = None) -> Answer:
    """Every pane's data for a query. Raises UserError for a bad regex."""
    caches = caches if caches is not None else Caches()
    if query in caches.answers:
        caches.answers[query] = caches.answers.pop(query)  # the most recently used last
        return caches.answers[query]
    found = _answer(kernels, browse, query, caches)
    caches.answers[query] = found
    while len(caches.answers) > ANSWERS_KEPT:
        caches.answers.pop(next(iter(caches.answers)))
    return found


def _answer(kernels: Kernels, browse: Browse, query: Query, caches: Caches) -> Answer:
    trace = kernels.trace
    kept = (query.pattern, query.shown, query.module)
    if kept not in caches.keep:
        # per class of launches alike in all the search looks at (LaunchSearch.combo_code): its hits
        hits = browse.search.combination_hits(query.pattern) if query.pattern else None
        search = browse.search.launches_of(hits) if hits is not None else None
        kind_ok = kernels.kind_allowed(query.shown)
        kinds = None if kind_ok[[Kind.MEMCPY, Kind.MEMSET]].all() else kind_ok[kernels.launch_kind]
        module = under(trace, query.module) if query.module else None
        if len(caches.keep) > 16:
            caches.keep.clear()
        by_class = kinds is None and module is None  # else the mask is not one of whole classes
        caches.keep[kept] = (_and(_and(kinds, search), module), _and(kinds, module), by_class, hits)
    keep, kinds, by_class, hits = caches.keep[kept]
    scope = query.scope.mask(trace)
    in_scope = _and(keep, scope)
    frame = None
    if by_class and not query.scope.is_range:
        # the table from per-class sums: a search (and a step, which the classes include) keeps whole classes
        search = browse.search
        classes_kept = np.ones(len(search.combo_step), bool) if hits is None else hits
        if query.scope.iteration is not None:
            classes_kept = classes_kept & (search.combo_step == query.scope.iteration + 1)
        frame = group_index(trace, browse.context, build=False).stats_of_classes(
            query.grouping, search.combo_code, classes_kept)
    if frame is None:
        frame = group_stats(trace, browse.context, query.grouping, in_scope)
    codes, keys = group_codes(trace, browse.context, query.grouping)
    # the search's totals are the table's: every kept launch in scope is in exactly one row
    matches, match_ns = int(frame["count"].sum()), int(frame["total_ns"].sum())
    if query.scope not in caches.scope_ns:
        caches.scope_ns[query.scope] = match_totals(trace, scope)[1]
    scope_ns = caches.scope_ns[query.scope]
    if query.pattern or kinds is not None:
        # a share of all the GPU time in scope (as kernel_stats' share is of the whole trace's), so a search
        # keeps each row's weight rather than making the matches add up to 100 %
        frame = frame.assign(share=frame["total_ns"] / scope_ns if scope_ns else 0.0)
    return Answer(query, keep, in_scope, table_frame(kernels, frame, query.grouping), codes, keys,
                  matches, match_ns, scope_ns)


def table_frame(kernels: Kernels, groups: pd.DataFrame, grouping: str) -> pd.DataFrame:
    """group_stats' frame in the kernel table's columns: short/full name, op (the row's top kernel or op)."""
    if grouping == "kernel":
        full = dict(zip(kernels.stats["key"], kernels.stats["full_name"]))
        return groups.assign(short=groups["label"], full_name=[full.get(k, k) for k in groups["key"]],
                             op=groups["top"])
    return groups.assign(short=groups["label"], full_name=groups["label"], op=groups["top"])


def name_header(grouping: str) -> str:
    return GROUP_LABEL[grouping]


def side_header(grouping: str) -> str:
    return "Launched by" if grouping == "kernel" else "Top kernel"


# -- a CPU capture: the kernel table lists its CPU work (analysis/cpu_work), by CPU self time ---------------

CPU_NAME_HEADER, CPU_SIDE_HEADER = "CPU work", "Op / provenance"
CPU_SEARCHED = ("key", "op")  # `/` finds a row by its name, or its op / provenance text (ops, source line)


@dataclass(frozen=True, eq=False)
class CpuAnswer:
    """The kernel table of a CPU capture for one query: the scope's CPU work, the rows the search keeps."""

    query: Query
    table: pd.DataFrame  # work_table of the calls in scope (share: of their CPU self time)
    rows: np.ndarray  # positions in ``table`` kept by the search
    events: pd.DataFrame = field(repr=False)  # the calls in scope (work_events rows)
    calls: int = 0  # calls of the kept rows, and their CPU self time
    self_ns: int = 0
    scope_ns: int = 0  # CPU self time of every call in scope
    total_calls: int = 0  # calls in the whole trace

    def calls_of(self, key: str) -> pd.DataFrame:
        """The row's calls in scope, in time order."""
        return self.events[self.events["key"].to_numpy() == key].sort_values("ts", kind="stable")


def cpu_answer(kernels: Kernels, query: Query) -> CpuAnswer:
    """The CPU work table for a query: the scope (a step, a range: the calls starting in it) and the search
    (name or op / provenance). Grouping and modules are for GPU launches and do not apply. Raises UserError."""
    cpu = kernels.cpu
    events = cpu.events
    scope = query.scope
    if scope.is_range:
        ts = events["ts"].to_numpy(np.int64)
        events = events[(ts >= scope.start) & (ts < scope.end)]
    elif scope.iteration is not None:
        events = events[events["iteration"].to_numpy() == scope.iteration]
    table = cpu.table if events is cpu.events else work_table(events)
    rows = np.flatnonzero(matching_work(table, query.pattern, CPU_SEARCHED))
    kept = table.iloc[rows]
    return CpuAnswer(query, table, rows, events, int(kept["count"].sum()), int(kept["total_ns"].sum()),
                     int(table["total_ns"].sum()), len(cpu.events))
