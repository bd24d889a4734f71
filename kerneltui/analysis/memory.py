"""Where the memory goes: the CUDA caching allocator's ``[memory]`` events, per device.

A trace captured with ``profile_memory=True`` holds one ``[memory]`` instant event per
allocation (``Bytes`` > 0) and free (``Bytes`` < 0), each with the allocator's totals after
it (``Total Allocated``, ``Total Reserved``), the device (``Device Type`` 1 = CUDA,
``Device Id``) and the block's ``Addr``. The loader keeps ``Bytes`` in the event table
(``bytes``) and the other fields in a side table of the allocator's events alone,
``trace.memory`` (schema.MEMORY_COLUMNS: each event's row, -1 where a field is absent), read
by both decoders and kept in the cache; ``memory_events`` joins the two by row, and the event
table gives each event its thread and time.

``memory_table`` is the table every view reads (docs/memory.md): per CUDA device, in
``Device Id`` order, allocated and reserved over time, the peaks, the peak per
``ProfilerStep`` (events with ts inside the step's CPU annotation, ends included), the ops
that hold the most bytes live at the peak, allocations never freed within the trace, and
counts. None when the trace has no ``[memory]`` events.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from kerneltui.trace.frames import innermost_frames, sources
from kerneltui.trace.intervals import innermost, split_by
from kerneltui.trace.one_of import one_of
from kerneltui.trace.schema import Kind
from kerneltui.trace.text_columns import texts

MEMORY_NAME = "[memory]"
CUDA = 1  # Device Type of a CUDA device's events (0 is the CPU)
# one line within 80 columns; a script of one's own: torch.profiler.profile(profile_memory=True)
CAPTURE_HINT = "no [memory] events: capture them with `kerneltui capture --profile-memory`"
NO_OP = "(outside any op)"
TOP_OPS = 10


@dataclass(frozen=True)
class MemoryEvents:
    """Every ``[memory]`` event of a trace in time order (ns), one array per field."""

    row: np.ndarray  # the event's row in trace.events
    lane: np.ndarray
    ts: np.ndarray
    bytes: np.ndarray
    allocated: np.ndarray  # Total Allocated after the event
    reserved: np.ndarray
    device_type: np.ndarray
    device_id: np.ndarray
    addr: np.ndarray


@dataclass(frozen=True)
class OpMemory:
    op: str
    bytes: int  # bytes this op allocated that are live at the peak
    allocations: int
    module: str  # the nn.Module path of the largest of them, "" where unknown
    source: str  # the user source line of the largest of them, "" where unknown


@dataclass(frozen=True)
class DeviceMemory:
    device: int
    ts: np.ndarray  # ns, every event of the device, time order: the curve
    allocated: np.ndarray
    reserved: np.ndarray
    peak_allocated_bytes: int
    peak_allocated_ts: int
    peak_reserved_bytes: int
    per_step: tuple[tuple[int, int], ...]  # (ProfilerStep N, peak allocated), steps with events only
    top_ops: tuple[OpMemory, ...]  # by bytes live at the peak, most first
    live_at_peak_bytes: int  # allocated within the trace and live at the peak (the rest predates the trace)
    allocations: int
    frees: int
    never_freed: int  # allocated within the trace, not freed before it ends
    never_freed_bytes: int
    never_freed_ops: tuple[OpMemory, ...]
    allocations_per_step: float = float("nan")  # allocations within ProfilerSteps / steps; NaN without steps


@dataclass(frozen=True)
class MemoryTable:
    events: int  # [memory] events of every device type
    devices: tuple[DeviceMemory, ...]
    note: str = ""  # why there are no figures although there are events ("" when there are)


class MemoryUnreadable(ValueError):
    """The trace's side table of [memory] fields does not fit its event table (never so for a trace the
    loader or the cache made)."""


def memory_events(trace) -> MemoryEvents | None:
    """The trace's ``[memory]`` events with all their fields, or None when it has none."""
    ev = trace.events
    names = ev["name"].to_numpy()
    side = trace.memory  # one entry per Kind.MEMORY row, in row order
    rows = side["row"]
    allocator = np.flatnonzero(ev["kind"].to_numpy() == Kind.MEMORY)
    if not np.array_equal(rows, allocator):
        loaded = int((trace.names_of(names[allocator]) == MEMORY_NAME).sum())
        fits = rows[(rows >= 0) & (rows < len(names))]
        read = int((trace.names_of(names[fits]) == MEMORY_NAME).sum())
        raise MemoryUnreadable(f"{loaded:,} [memory] events loaded, {read:,} read with their totals, "
                               "and they do not line up")
    which = np.flatnonzero(one_of(names[rows], _codes_named(trace, MEMORY_NAME)))  # codes: no string a row
    if not len(which):
        return None
    which = which[np.argsort(ev["ts"].to_numpy()[rows[which]], kind="stable")]  # time order; file order among ties
    rows = rows[which]
    return MemoryEvents(row=rows, lane=ev["lane"].to_numpy()[rows], ts=ev["ts"].to_numpy()[rows],
                        bytes=ev["bytes"].to_numpy()[rows], allocated=side["allocated"][which],
                        reserved=side["reserved"][which], device_type=side["device_type"][which],
                        device_id=side["device_id"][which], addr=side["addr"][which])


def _codes_named(trace, name: str) -> np.ndarray:
    return np.array([code for code, each in enumerate(trace.names) if each == name], np.int64)


def enclosing_ops(trace, lane: np.ndarray, ts: np.ndarray) -> np.ndarray:
    """Row of the innermost cpu_op around each (lane, ts) on that thread, or -1."""
    ev = trace.events
    out = np.full(len(ts), -1, np.int64)
    ops = np.flatnonzero(ev["kind"].to_numpy() == Kind.CPU_OP)
    ops_of = split_by(ev["lane"].to_numpy()[ops], ops)  # one sort each, not a compare over all per thread
    for one, which in split_by(np.asarray(lane), np.arange(len(ts))).items():
        mine = ops_of.get(one)
        if mine is None:
            continue
        start = ev["ts"].to_numpy()[mine]
        found = innermost(start, start + ev["dur"].to_numpy()[mine], ts[which])
        out[which] = np.where(found >= 0, mine[np.clip(found, 0, None)], -1)
    return out


def _frees(addr: np.ndarray, delta: np.ndarray) -> np.ndarray:
    """For each event (time order): the index of the free that ends it if it is an allocation, else -1.

    Per address in time order, an allocation's free is the address's next event when that is a free."""
    # grouped by address, time order within one: the groups in any order, so by each address's code in
    # order of first use where those fit 16 bits (numpy's radix sort; the caching allocator reuses a few
    # thousand blocks at most: at 1 GB 163 for 372k events, 25 -> 10 ms), else by the address itself
    codes = pd.factorize(addr)[0]
    order = np.argsort(codes.astype(np.uint16) if codes.max(initial=0) < 2**16 else addr, kind="stable")
    a, d = addr[order], delta[order]
    paired = np.zeros(len(addr), bool)
    if len(addr) > 1:
        paired[:-1] = (a[:-1] == a[1:]) & (d[:-1] > 0) & (d[1:] < 0)
    out = np.full(len(addr), -1, np.int64)
    nxt = np.append(order[1:], -1)
    out[order[paired]] = nxt[paired]
    return out


def _by_op(names: np.ndarray, nbytes: np.ndarray, module: np.ndarray, source: np.ndarray, top: int) -> tuple:
    """Bytes per op name, most first; module and source of each op's largest allocation."""
    if not len(names):
        return ()
    frame = pd.DataFrame({"op": names, "bytes": nbytes, "module": module, "source": source})
    largest = frame.sort_values("bytes", ascending=False, kind="stable").drop_duplicates("op")
    per = frame.groupby("op", sort=False).agg(bytes=("bytes", "sum"), allocations=("bytes", "size"))
    per = per.join(largest.set_index("op")[["module", "source"]])
    per = per.reset_index().sort_values(["bytes", "op"], ascending=[False, True], kind="stable").head(top)
    return tuple(OpMemory(str(r.op), int(r.bytes), int(r.allocations), str(r.module), str(r.source))
                 for r in per.itertuples())


def _per_step(trace, ts: np.ndarray, allocated: np.ndarray) -> tuple[tuple[int, int], ...]:
    """Peak allocated within each ProfilerStep's CPU annotation, ends included (steps without events left out)."""
    its = trace.iterations
    if its.source != "ProfilerStep" or not len(ts):
        return ()
    lo = np.searchsorted(ts, its.starts, side="left")
    hi = np.searchsorted(ts, its.ends, side="right")
    has = hi > lo
    # each step's own [lo, hi): reduceat over the interleaved bounds, every other slice
    bounds = np.column_stack((lo[has], hi[has])).reshape(-1)
    peaks = np.maximum.reduceat(np.append(allocated, 0), bounds)[::2] if has.any() else np.empty(0, np.int64)
    return tuple((int(n), int(p)) for n, p in zip(its.step_numbers_[has], peaks))


def _allocations_per_step(trace, ts: np.ndarray, allocs: np.ndarray) -> float:
    """Allocations with ts inside a ProfilerStep (ends included), per step; NaN without steps."""
    its = trace.iterations
    if its.source != "ProfilerStep" or not its.count:
        return float("nan")
    t = ts[allocs]
    inside = np.searchsorted(t, its.ends, side="right") - np.searchsorted(t, its.starts, side="left")
    return float(inside.sum() / its.count)


def memory_table(trace, top: int = TOP_OPS) -> MemoryTable | None:
    """The memory table of ``trace`` (docs/memory.md), or None without ``[memory]`` events."""
    try:
        m = memory_events(trace)
    except MemoryUnreadable as exc:
        events = int((trace.names_of(trace.events["name"].to_numpy()[trace.events["kind"].to_numpy() == Kind.MEMORY])
                      == MEMORY_NAME).sum())
        return MemoryTable(events, (), f"the [memory] events could not be read in full: {exc}")
    if m is None:
        return None
    cuda = np.flatnonzero(m.device_type == CUDA)
    per_device = []  # (device, its events' positions in m, peak position, live at the peak, never freed)
    needed = np.zeros(len(m.ts), bool)
    for device in np.unique(m.device_id[cuda]):
        idx = cuda[m.device_id[cuda] == device]
        delta = m.bytes[idx]
        peak = int(np.argmax(m.allocated[idx]))
        free = _frees(m.addr[idx], delta)
        allocs = delta > 0
        live = allocs & (np.arange(len(idx)) <= peak) & ((free < 0) | (free > peak))
        never = allocs & (free < 0)
        needed[idx[live | never]] = True
        per_device.append((int(device), idx, peak, live, never))
    # the op, module and source line only of the allocations the tables name (a fraction of the events),
    # kept per such allocation: ``slot`` is each event's place among them
    wanted = np.flatnonzero(needed)
    slot = np.full(len(m.ts), -1, np.int64)
    slot[wanted] = np.arange(len(wanted))
    names = texts(len(wanted), NO_OP)
    module = texts(len(wanted))
    source = texts(len(wanted))
    if len(wanted):
        op_rows = enclosing_ops(trace, m.lane[wanted], m.ts[wanted])
        names[:] = np.where(op_rows >= 0, trace.names_of(trace.events["name"].to_numpy()[np.clip(op_rows, 0, None)]),
                            NO_OP)
        where = sources(trace, innermost_frames(trace, m.lane[wanted], m.ts[wanted]))
        module[:] = where["module"].to_numpy()
        source[:] = where["source"].to_numpy()

    def ops(events: np.ndarray, delta: np.ndarray) -> tuple:
        at = slot[events]
        return _by_op(names[at], delta, module[at], source[at], top)

    devices = []
    for device, idx, peak, live, never in per_device:
        ts, alloc, reserved, delta = m.ts[idx], m.allocated[idx], m.reserved[idx], m.bytes[idx]
        allocs = delta > 0
        devices.append(DeviceMemory(
            device=device, ts=ts, allocated=alloc, reserved=reserved,
            peak_allocated_bytes=int(alloc[peak]), peak_allocated_ts=int(ts[peak]),
            peak_reserved_bytes=int(reserved.max()), per_step=_per_step(trace, ts, alloc),
            top_ops=ops(idx[live], delta[live]),
            live_at_peak_bytes=int(delta[live].sum()), allocations=int(allocs.sum()), frees=int((delta < 0).sum()),
            never_freed=int(never.sum()), never_freed_bytes=int(delta[never].sum()),
            never_freed_ops=ops(idx[never], delta[never]),
            allocations_per_step=_allocations_per_step(trace, ts, allocs),
        ))
    return MemoryTable(events=len(m.ts), devices=tuple(devices))


def memory_dict(table: MemoryTable | None) -> dict:
    """The JSON form (``memory`` in ``summary --format json``): devices empty without [memory] events."""
    if table is None:
        return {"devices": [], "note": CAPTURE_HINT}
    return {"events": table.events, **({"note": table.note} if table.note else {}), "devices": [{
        "device": d.device,
        "peak_allocated_bytes": d.peak_allocated_bytes,
        "peak_allocated_ts_ns": d.peak_allocated_ts,
        "peak_reserved_bytes": d.peak_reserved_bytes,
        "per_step": [{"step": s, "peak_allocated_bytes": p} for s, p in d.per_step],
        "top_ops": [_op_dict(o) for o in d.top_ops],
        "live_at_peak_bytes": d.live_at_peak_bytes,
        "allocations": d.allocations,
        "frees": d.frees,
        "never_freed": d.never_freed,
        "never_freed_bytes": d.never_freed_bytes,
        "never_freed_ops": [_op_dict(o) for o in d.never_freed_ops],
        "allocations_per_step": None if d.allocations_per_step != d.allocations_per_step else d.allocations_per_step,
    } for d in table.devices]}


def _op_dict(o: OpMemory) -> dict:
    return {"op": o.op, "bytes": o.bytes, "allocations": o.allocations, "module": o.module, "source": o.source}
