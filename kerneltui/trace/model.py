"""The Trace: columnar events plus the derived tables everything else reads.

Derived tables are computed on first use and then never mutated, so a Trace can
be built in a worker thread and handed to the UI thread as is.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from functools import cached_property

import numpy as np
import orjson
import pandas as pd

from kerneltui.trace import heap
from kerneltui.trace.cache import load as cached_read
from kerneltui.trace.frames import innermost_frames, sources
from kerneltui.trace.intervals import depth_by_group, index_dtype, stable_argsort
from kerneltui.trace.iterations import Iterations, find_iterations
from kerneltui.trace.link import OpStack, gpu_table
from kerneltui.trace.load import RawTrace
from kerneltui.trace.one_of import one_of
from kerneltui.trace.schema import Kind, TraceMeta

STACK_KINDS = (Kind.CPU_OP, Kind.ANNOTATION, Kind.RUNTIME, Kind.DRIVER)
heap.arrow_on_system_malloc()  # the tables' strings too are handed back between stages (trace/heap.py)


class Trace:
    def __init__(self, raw: RawTrace, meta: TraceMeta):
        self.meta = meta
        self.names: list[str] = raw.names
        self.events = pd.DataFrame(raw.columns, copy=False)
        self.shapes_blob = raw.shapes_blob
        # the [memory] events' Total Allocated, Total Reserved, Device Type, Device Id and Addr, by row
        self.memory = raw.memory
        # the kernels' launch shape, registers, shared memory and occupancy, by row: columns of self.gpu
        self.kernel_fields = raw.kernel_fields
        self.lanes = _lanes(raw)
        self._names_array = np.array(raw.names + [""], dtype=object)
        self._stacks: dict[int, OpStack | None] = {}
        self._lock = threading.Lock()
        # shapes(): the columns as arrays (DataFrame.iat costs ~20 µs a call) and the records parsed so
        # far, one dict for every thread (the browser's analyses ask from a second thread)
        self._shapes_index = (self.events["shapes_at"].to_numpy(), self.events["shapes_len"].to_numpy(), {})

    # -- names -------------------------------------------------------------
    def name(self, code: int) -> str:
        return self.names[code] if code >= 0 else ""

    def names_of(self, codes: np.ndarray) -> np.ndarray:
        return self._names_array[codes]

    @cached_property
    def name_codes(self) -> np.ndarray:
        """The name codes the events use, ascending (-1: an event without a name): ``np.unique`` of the
        name column, by a count over the codes rather than a sort of millions of events."""
        return present_codes(self.events["name"].to_numpy(), len(self.names))

    def by_name(self, codes: np.ndarray, f: Callable[[str], object], dtype) -> np.ndarray:
        """``f(name)`` for each of ``codes``' names (-1: ""), as an array like ``codes``; ``f`` runs once a
        distinct name (a big trace has millions of ops and a few thousand names)."""
        present = present_codes(codes, len(self.names))
        table = np.zeros(len(self.names) + 1, dtype)  # the last entry: code -1
        table[present] = [f(str(n)) for n in self.names_of(present)]
        return table[codes]

    # -- derived tables ----------------------------------------------------
    @cached_property
    def gpu(self) -> pd.DataFrame:
        """GPU work (kernels, memcpy, memset) in time order, linked to launch and op."""
        table = gpu_table(self.events, self.names, self.lanes, self.op_stack, self.kernel_fields)
        its = self.iterations
        table["iteration"] = its.assign(table["launch_ts"].to_numpy())
        table["step"] = its.step_numbers(table["launch_ts"].to_numpy())
        return table

    @cached_property
    def gpu_sources(self) -> pd.DataFrame:
        """Per row of ``gpu``: innermost python frame row, user source line, nn.Module path."""
        g = self.gpu
        frame = innermost_frames(self, g["launch_lane"].to_numpy(), g["launch_ts"].to_numpy())
        table = sources(self, frame)
        table.insert(0, "frame_row", frame)
        return table

    @cached_property
    def iterations(self) -> Iterations:
        """Steps, or profiled calls, that the trace repeats (see iterations.py)."""
        return find_iterations(self)

    @cached_property
    def window(self) -> tuple[int, int]:
        """The profiled window in ns: the profiler's own span, else first to last event."""
        ev = self.events
        span = ev.index[ev["kind"] == Kind.SPAN]
        if len(span):
            start = int(ev["ts"].iloc[span].min())
            return start, int((ev["ts"].iloc[span] + ev["dur"].iloc[span]).max())
        timed = ev[ev["kind"] != Kind.INSTANT]
        if not len(timed):
            return 0, 0
        return int(timed["ts"].min()), int((timed["ts"] + timed["dur"]).max())

    @cached_property
    def _stack_rows(self) -> dict[int, np.ndarray]:
        """Rows of STACK_KINDS events per lane, in row order: one pass, however many threads."""
        ev = self.events
        rows = np.flatnonzero(one_of(ev["kind"].to_numpy(), STACK_KINDS))
        lanes = ev["lane"].to_numpy()[rows]
        order = stable_argsort(lanes)
        rows, lanes = rows[order].astype(index_dtype(len(ev))), lanes[order]  # kept by the op stacks: int32
        distinct, first = np.unique(lanes, return_index=True)
        bounds = np.append(first, len(rows))
        return {int(lane): rows[bounds[i] : bounds[i + 1]] for i, lane in enumerate(distinct)}

    def op_stack(self, lane: int) -> OpStack | None:
        """The nested op stack of one CPU thread (None for a lane with no ops)."""
        with self._lock:
            if lane not in self._stacks:
                ev = self.events
                rows = self._stack_rows.get(int(lane), np.empty(0, np.int64))
                ts = ev["ts"].to_numpy()[rows]
                self._stacks[lane] = (
                    OpStack(rows, ts, ts + ev["dur"].to_numpy()[rows], ev["kind"].to_numpy()[rows]) if len(rows) else None
                )
            return self._stacks[lane]

    def cpu_lanes(self) -> list[int]:
        kinds = self.events["kind"].to_numpy()
        lanes = self.events["lane"].to_numpy()[one_of(kinds, (Kind.CPU_OP, Kind.ANNOTATION))]
        return [int(x) for x in np.unique(lanes)]

    def top_level_ops(self) -> np.ndarray:
        """Rows of cpu_ops that no other cpu_op encloses, on every thread, in time order.

        All threads at once (``depth_by_group``): a trace may have tens of thousands of them. Where every
        thread's op stack was built already (the browser builds them all), read from theirs, the same rule:
        at 1 GB 70 ms and ~110 MB of scratch the other way, a few ms and none this one.
        """
        ev = self.events
        built = self._built_op_stacks()
        if built is not None:
            parts = [stack.top_level_ops() for stack in built]
            top = np.sort(np.concatenate(parts)) if parts else np.empty(0, np.int64)
        else:
            ops = np.flatnonzero(ev["kind"].to_numpy() == Kind.CPU_OP)
            ts = ev["ts"].to_numpy()[ops]
            lanes = ev["lane"].to_numpy()[ops]
            top = ops[depth_by_group(lanes, ts, ts + ev["dur"].to_numpy()[ops]) == 0]
        return top[np.argsort(ev["ts"].to_numpy()[top], kind="stable")]

    def _built_op_stacks(self) -> list[OpStack] | None:
        """The op stack of every thread with cpu_ops, if each was built already; else None."""
        with self._lock:
            if "_stack_rows" not in self.__dict__:
                return None
            kinds = self.events["kind"].to_numpy()
            out = []
            for lane, rows in self._stack_rows.items():
                stack = self._stacks.get(lane)
                if stack is not None:
                    out.append(stack)
                elif lane not in self._stacks and (kinds[rows] == Kind.CPU_OP).any():
                    return None  # a thread with ops whose stack was never built
            return out

    # -- per-event details -------------------------------------------------
    def ancestors(self, launch_row: int) -> list[int]:
        """The op stack around a launch (outermost first), launch itself excluded."""
        if launch_row < 0:
            return []
        lane = int(self.events["lane"].iat[launch_row])
        stack = self.op_stack(lane)
        if stack is None:
            return []
        t = int(self.events["ts"].iat[launch_row])
        return [int(r) for r in stack.enclosing(t) if r != launch_row]

    def shapes(self, row: int) -> dict | None:
        """record_shapes of an op: {"dims": [...], "types": [...]}, or None. Each distinct record is parsed
        once (a training trace repeats the same records every step); do not change what it returns."""
        at_of, length_of, parsed = self._shapes_index
        at = int(at_of[row]) if row >= 0 else -1
        if at < 0:
            return None
        text = bytes(self.shapes_blob[at : at + int(length_of[row])])
        if text not in parsed:
            parsed[text] = parse_shapes(text)
        return parsed[text]


MAX_SHAPES_DEPTH = 64  # record_shapes nests 3 deep (a TensorList of shapes); far deeper is not a record


def nesting_depth(text: bytes) -> int:
    """Deepest bracket nesting of a JSON text (brackets inside strings count too: an upper bound)."""
    b = np.frombuffer(text, np.uint8)
    if not len(b):
        return 0
    step = (b == ord("[")).astype(np.int32) + (b == ord("{")) - (b == ord("]")) - (b == ord("}"))
    return int(np.cumsum(step).max())


def parse_shapes(text: bytes) -> dict | None:
    """One op's record_shapes JSON, or None where it cannot be one.

    Never hands orjson deep nesting: orjson 3.8 overflows the C stack (a segfault) from about
    100,000 levels, and a record nested past MAX_SHAPES_DEPTH is as good as not recorded.
    """
    if not text or (len(text) > 2 * MAX_SHAPES_DEPTH and nesting_depth(text) > MAX_SHAPES_DEPTH):
        return None
    try:
        shapes = orjson.loads(text)
    except (orjson.JSONDecodeError, RecursionError):
        return None
    return shapes if isinstance(shapes, dict) else None


def _lanes(raw: RawTrace) -> pd.DataFrame:
    """One row per (pid, tid): its process label and thread name from the metadata events."""
    process_label: dict = {}
    process_name: dict = {}
    thread_name: dict = {}
    for name, pid, tid, value, labels, _ in raw.metadata:
        if name == "process_labels":
            process_label[pid] = labels
        elif name == "process_name":
            process_name[pid] = value
        elif name == "thread_name":
            thread_name[(pid, tid)] = value.strip()
    rows = []
    for lane, (pid, tid) in enumerate(raw.lanes):
        rows.append(
            {
                "lane": lane,
                "pid": pid,
                "tid": tid,
                "process": process_label.get(pid) or process_name.get(pid, ""),
                "thread": thread_name.get((pid, tid), ""),
            }
        )
    return pd.DataFrame(rows, columns=["lane", "pid", "tid", "process", "thread"])


def load_trace(
    path: str | os.PathLike,
    progress: Callable[[float], None] | None = None,
    cache: bool | None = None,
    write_later: bool = False,
) -> Trace:
    """Read a trace file (.json or .json.gz, by content) into a Trace. Raises TraceError.

    ``cache``: keep and reuse the decoded columns (trace/cache.py); None means on unless KERNELTUI_CACHE=0.
    ``write_later``: write a new cache entry in the background (the apps: the first screen need not wait).
    """
    raw, meta = cached_read(path, progress, cache, write_later)
    return Trace(raw, meta)


def present_codes(codes: np.ndarray, n_names: int) -> np.ndarray:
    """The distinct values of name codes (0..n_names-1, or -1), ascending."""
    if not len(codes):
        return np.empty(0, np.int64)
    counts = np.bincount(codes.astype(np.int64) + 1, minlength=n_names + 1)
    return np.flatnonzero(counts) - 1
