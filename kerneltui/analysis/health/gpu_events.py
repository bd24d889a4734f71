"""Health checks of the GPU events (rows of ``trace.gpu``): copies, impossible durations, shared correlations
and overlaps on a stream, with what explains an overlap (programmatic dependent launch, a CUDA-graph replay)."""

from __future__ import annotations

import numpy as np

from kerneltui.trace.model import Trace
from kerneltui.trace.one_of import one_of
from kerneltui.trace.schema import GPU_WORK, Kind
from kerneltui.trace.text_columns import text_values

PDL_NS = 2_000  # a dependent kernel may start this long before the kernel it waits on ends
PDL_SHARE = 0.05  # ... or this share of that kernel (a 100 µs GEMM triggers its dependants early)
UNSPANNED_FACTOR = 10  # without the profiler's span, a duration is impossible past this many times the rest
PDL_LAUNCHES = frozenset(("cudaLaunchKernelExC", "cudaLaunchKernelEx", "cuLaunchKernelEx", "hipLaunchKernelExC"))


def duplicates(g) -> np.ndarray:
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


def shared_correlation(g, candidates: np.ndarray) -> np.ndarray:
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


def whole_microseconds(ts: np.ndarray, dur: np.ndarray) -> bool:
    """The trace's GPU times are whole µs (torch < 1.9 wrote integer µs): a 0 there is < 1 µs."""
    return bool(len(ts)) and not (ts % 1000).any() and not (dur % 1000).any()


def profiler_span(trace: Trace) -> tuple[int, int] | None:
    ev = trace.events
    rows = np.flatnonzero(ev["kind"].to_numpy() == Kind.SPAN)
    if not len(rows):
        return None
    ts = ev["ts"].to_numpy()[rows]
    return int(ts.min()), int((ts + ev["dur"].to_numpy()[rows]).max())


def plausible_limit(trace: Trace) -> int:
    """The longest a GPU event can last: the profiler's span. A trace without one (cut down by another tool)
    is measured without the GPU events' ends, which a bad duration would stretch: from the first event to the
    last CPU-side end or GPU start; the GPU may run on after the CPU has stopped recording, so ten times that."""
    span = profiler_span(trace)
    if span is not None:
        return span[1] - span[0]
    ev = trace.events
    kinds, ts = ev["kind"].to_numpy(), ev["ts"].to_numpy()
    if not len(ts):
        return 0
    cpu = ~one_of(kinds, GPU_WORK)
    last = max(int((ts[cpu] + ev["dur"].to_numpy()[cpu]).max()) if cpu.any() else 0, int(ts.max()))
    return UNSPANNED_FACTOR * (last - int(ts.min()))


def overlaps(g, unsound: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
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


def pdl_explained(g, overlapped: np.ndarray, amount: np.ndarray) -> np.ndarray:
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


def same_graph_replay(g, overlapped: np.ndarray) -> np.ndarray:
    out = np.zeros(len(g), bool)
    rows = np.flatnonzero(overlapped >= 0)
    if len(rows):
        graph, corr = g["graph"].to_numpy(), g["correlation"].to_numpy()
        other = overlapped[rows]
        out[rows] = graph[rows] & graph[other] & (corr[rows] == corr[other])
    return out
