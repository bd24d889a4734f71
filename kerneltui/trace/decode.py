"""Decode a slice of the traceEvents array straight into numpy columns.

The C scanner (scanner.py) reads a chunk in one pass when it can, and ``adopt`` takes its
columns; any chunk it hands back is decoded here in Python, to the same columns.

In Python, msgspec decodes each event into a small typed struct (events.py), skipping every
field we do not name (most of a trace's bytes); the structs are turned into columns a
field at a time, each field read by one C-level pass (``map`` over an
``attrgetter``, interned through a dict's ``__missing__``), and dropped, so no
per-event Python object outlives its part of the chunk. A big chunk is decoded
~1 MB at a time (``SUB_CHUNK``), while its structs are still in the CPU cache.

A ``[memory]`` event's Total Allocated, Total Reserved, Device Type, Device Id and Addr go to
a side table of the Kind.MEMORY rows alone (schema.MEMORY_COLUMNS), not to columns of every
row: a chunk's dict holds it under MEMORY_PREFIX, its rows counted within the chunk, and
``join_chunks`` / ``joined_memory`` move them past the rows of the chunks before.
"""

from __future__ import annotations

from collections import Counter
from itertools import compress
from operator import attrgetter
from typing import TYPE_CHECKING, NamedTuple

import msgspec
import numpy as np

from kerneltui.trace import repair, scanner
from kerneltui.trace.events import (
    _NO_ARGS,
    _ONE_EVENT,
    EVENTS,
    OLD_EXTERNAL_ID,
    Args,
    Event,
    decode_events,
)
from kerneltui.trace.repair import Losses
from kerneltui.trace.scanner import scan_chunk, scanner_in_use
from kerneltui.trace.schema import (
    ASIDE_PHASES,
    EVENT_COLUMNS,
    FLOW_PHASES,
    KEPT_PHASES,
    MEMORY_COLUMNS,
    MEMORY_PREFIX,
    Kind,
    kind_of,
)

if TYPE_CHECKING:
    from kerneltui.trace.worker import Partial

_NO_DIM3 = (-1, -1, -1)
_CONCRETE_KEY = np.array([b"", b',"concrete":'], dtype=object)
_STRIDES_KEY = np.array([b"", b',"strides":'], dtype=object)
_COMBO = attrgetter("ph", "cat", "pid", "tid")
(_NAME, _TS, _DUR, _ARGS) = map(attrgetter, ("name", "ts", "dur", "args"))
(_EXTERNAL_ID, _CORRELATION, _NBYTES, _OCCUPANCY, _GRID, _BLOCK, _ALLOC_BYTES, _CBID) = map(
    attrgetter, ("external_id", "correlation", "nbytes", "occupancy", "grid", "block", "alloc_bytes", "cbid")
)
(_PYTHON_ID, _PYTHON_PARENT, _SEQUENCE, _KERNEL_HASH) = map(
    attrgetter, ("python_id", "python_parent", "sequence", "kernel_hash")
)
(_INPUT_DIMS, _INPUT_TYPE, _CONCRETE, _STRIDES) = map(attrgetter, ("input_dims", "input_type", "concrete", "strides"))
_COLLECTIVE = attrgetter("collective")
# The side table of Kind.MEMORY rows (schema.MEMORY_COLUMNS, row aside): its chunk key, the Args field
_MEMORY_FIELDS = tuple((MEMORY_PREFIX + name, attrgetter(attr)) for name, attr in (
    ("allocated", "total_allocated"), ("reserved", "total_reserved"), ("device_type", "device_type"),
    ("device_id", "device_id"), ("addr", "addr"),
))
_MEMORY_ROW = MEMORY_PREFIX + "row"
_COMM_KEYS = tuple((key.encode(), attr) for key, attr in (
    ("collective", "collective"), ("in_nelems", "in_nelems"), ("out_nelems", "out_nelems"), ("dtype", "comm_dtype"),
    ("group", "group_name"), ("group_desc", "group_desc"), ("group_size", "group_size"), ("seq", "comm_seq"),
))
class _Codes(dict):
    """value -> code; a value not seen before gets the next code (dict order: first seen first)."""

    def __missing__(self, value):
        code = self[value] = len(self)
        return code


class Interner:
    """Strings to dense int codes, shared across chunks (in order of first appearance)."""

    def __init__(self) -> None:
        self.codes: dict = _Codes()

    def codes_of(self, values, count: int | None = None) -> np.ndarray:
        """Codes of ``values`` (a list, or an iterable of ``count`` values); one dict lookup each, in C."""
        if count is None:
            if not isinstance(values, list):
                values = list(values)
            count = len(values)
        return np.fromiter(map(self.codes.__getitem__, values), np.int32, count)

    def truncate(self, size: int) -> None:
        """Forget the values added since the table held ``size`` (the last ones added)."""
        while len(self.codes) > size:
            self.codes.popitem()

    def values(self) -> list:
        return list(self.codes)


def us_to_ns(us: np.ndarray) -> np.ndarray:
    """Exact µs -> ns for Kineto's 3-decimal floats (split so the x1000 does not round)."""
    whole = np.floor(us)
    return whole.astype(np.int64) * 1000 + np.rint((us - whole) * 1000).astype(np.int64)


class _ComboInfo(NamedTuple):
    kept: np.ndarray
    kind: np.ndarray
    flow: np.ndarray
    aside: np.ndarray


class ChunkDecoder:
    """Turns chunks of event JSON into column dicts; remembers metadata events aside."""

    def __init__(self) -> None:
        self.names = Interner()
        self.lanes = Interner()
        self.combos = Interner()  # (ph, cat, pid, tid) of every event
        self._info: _ComboInfo | None = None
        self.metadata: list[tuple[str, object, object, str, str, int]] = []
        self.flow_events = 0
        # each record_shapes (or collective) text once, at its offset in the shapes blob: ops repeat
        # theirs every step (a 1 GB trace's 919k ops hold a few hundred texts, 138 MB written out)
        self.shape_texts: dict[bytes, int] = {}
        self.shape_offset = 0
        self.losses = Losses()
        self.begin_end: list[Event] = []  # B/E halves, paired once all are read

    def decode(self, array_json, separator: bytes | None = None, scanned=None) -> dict[str, np.ndarray]:
        """The chunk's columns (with the side table of its Kind.MEMORY rows under MEMORY_PREFIX,
        ``memory_row`` counted within the chunk). ``scanned``: what ``scan_chunk`` made of it
        already (on another thread), or False where the scanner has been tried and handed the
        chunk back."""
        if scanned is None and scanner_in_use():
            scanned = scan_chunk(array_json)
        if scanned:
            cols = self.adopt(scanned, array_json)
            if cols is not None:
                return cols
        if separator is not None and len(array_json) > 2 * SUB_CHUNK:
            cols = self._decode_in_parts(array_json, separator)
            if cols is not None:
                return cols
        return self.columns(decode_events(array_json, self.losses, separator))

    def columns(self, events: list[Event]) -> dict[str, np.ndarray]:
        hashes: list[str] = []
        comm: list[bytes] = []
        cols = self._columns(events, hashes, comm)
        self._append_comm(cols, comm)
        return self._intern_hashes(cols, hashes)

    def adopt(self, scanned: tuple, array_json) -> dict[str, np.ndarray] | None:
        """The columns the C scanner made of a chunk, its tables mapped onto this decoder's in their
        order of first appearance (None, and nothing kept, if its metadata events do not decode)."""
        columns, names, hashes, lanes, aside, blob, flows, bad_ts, bad_dur, memory, rows = scanned
        view = memoryview(array_json)
        try:  # before anything is kept: a refusal here leaves the decoder as it was
            # each from a copy: msgspec's Raw fields (shapes, collectives) are views of the text they were
            # decoded from, and B/E halves wait for the end of the load while the loader reuses its buffers
            others = [_ONE_EVENT.decode(bytes(view[start:end])) for start, end in aside]
        except (msgspec.ValidationError, msgspec.DecodeError, RecursionError):
            return None
        cols = {name: np.frombuffer(column, dtype, rows) for (name, dtype), column in zip(scanner.COLUMNS, columns)}
        # the side table: per Kind.MEMORY row, its int64s in scanner.MEMORY_LAYOUT's order
        table = np.frombuffer(memory, np.int64).reshape(-1, len(scanner.MEMORY_LAYOUT))
        for i, (name, _) in enumerate(scanner.MEMORY_LAYOUT):
            cols[MEMORY_PREFIX + name] = table[:, i].copy()
        name_codes = self.names.codes_of(names)
        # hashes are interned after the chunk's names, as the Python path does
        self._recode(cols, name_codes, self.names.codes_of(hashes), self.lanes.codes_of(lanes))
        if blob:
            self._append_shapes(cols, cols["shapes_at"] >= 0, blob)
        self.flow_events += flows
        if bad_dur:
            self.losses.fields["dur"] += bad_dur
        if bad_ts:
            self.losses.events[repair.BAD_TIME] += bad_ts
        self._keep_aside(others)
        return cols

    def _decode_in_parts(self, array_json, separator: bytes) -> dict[str, np.ndarray] | None:
        """A chunk decoded ~SUB_CHUNK bytes at a time, each part's columns built while its
        events are still in the CPU's cache (about 1.5x faster than the whole chunk at once).

        Each part is ``[`` + the text between two event starts + ``]``; joined back with the
        commas between them they are the chunk, so when every part decodes (typed, non-empty)
        the events are exactly the chunk's. Otherwise (damage, foreign types) nothing is kept
        and None is returned: the caller decodes the whole chunk as before.
        """
        text = array_json if isinstance(array_json, bytes) else bytes(array_json)
        if OLD_EXTERNAL_ID in text:
            return None
        bounds = _part_bounds(text, separator)
        if bounds is None:
            return None
        saved = self._state()
        hashes: list[str] = []
        comm: list[bytes] = []
        parts = []
        view = memoryview(text)
        try:
            for start, end in bounds:
                events = EVENTS.decode(b"".join((b"[", view[start:end], b"]")))
                if not events:
                    raise ValueError("an empty part")
                parts.append(self._columns(events, hashes, comm))
                del events
        except (msgspec.ValidationError, msgspec.DecodeError, RecursionError, ValueError):
            self._restore(saved)
            return None
        cols = join_chunks(parts)
        self._append_comm(cols, comm)
        return self._intern_hashes(cols, hashes)

    def _state(self) -> tuple:
        return (
            len(self.names.codes), len(self.lanes.codes), len(self.metadata),
            self.flow_events, self.shape_offset, len(self.begin_end),
            Counter(self.losses.events), Counter(self.losses.fields),
        )

    def _restore(self, state: tuple) -> None:
        names, lanes, metadata, flows, shape_offset, begin_end, events, fields = state
        self.names.truncate(names)
        self.lanes.truncate(lanes)
        del self.metadata[metadata:]
        self.flow_events = flows
        texts = self.shape_texts  # in the order they were added, so at increasing offsets
        while texts and next(reversed(texts.values())) >= shape_offset:
            texts.popitem()
        self.shape_offset = shape_offset
        del self.begin_end[begin_end:]
        self.losses.events = events
        self.losses.fields = fields

    def _intern_hashes(self, cols: dict[str, np.ndarray], hashes: list[str]) -> dict[str, np.ndarray]:
        """Inductor's kernel hashes, interned after the names of the chunk's events (as always)."""
        if hashes:
            column = cols["kernel_hash"]
            hashed = column >= 0
            column[hashed] = self.names.codes_of(hashes)[column[hashed]]
        return cols

    def merge(self, part: Partial) -> dict[str, np.ndarray]:
        """Columns decoded by another process, their codes mapped onto this decoder's tables."""
        cols = part.columns
        names = self.names.codes_of(part.names)  # the worker interned its hashes among its names
        self._recode(cols, names, names, self.lanes.codes_of(part.lanes))
        self._append_shapes(cols, cols["shapes_at"] >= 0, part.shapes)
        self.metadata.extend(part.metadata)
        self.flow_events += part.flow_events
        self.losses.merge(part.losses)
        self.begin_end.extend(part.begin_end)
        return cols

    @staticmethod
    def _recode(cols: dict, names: np.ndarray, hashes: np.ndarray, lanes: np.ndarray) -> None:
        """Columns decoded with tables of their own (a worker's, the scanner's) onto this decoder's:
        ``names``, ``hashes`` and ``lanes`` map each local code to this decoder's."""
        cols["name"] = names[cols["name"]]
        hashed = cols["kernel_hash"] >= 0
        if hashed.any():
            cols["kernel_hash"][hashed] = hashes[cols["kernel_hash"][hashed]]
        cols["lane"] = lanes[cols["lane"]]

    def _append_shapes(self, cols: dict, rows: np.ndarray, blob: bytes) -> None:
        """``blob``'s texts join the shapes blob, each text once, in the order first met; the spans of
        ``rows``, offsets into ``blob``, move to where their text is. Whichever decoder read a chunk (and
        whether it kept a chunk's texts once already), the blob is the same for the same chunks."""
        column = cols["shapes_at"]
        at = column[rows]
        if not len(at):
            return
        length = cols["shapes_len"][rows]
        if len(blob) <= 16 * len(at):  # a blob of distinct texts (the scanner's): marks over its bytes
            marked = np.zeros(len(blob), bool)
            marked[at] = True
            starts = np.flatnonzero(marked)
            of_start = np.zeros(len(blob), np.int64)
            of_start[at] = length
            sizes = of_start[starts]
        else:  # one text an op (the Python decoder's): no array as long as the blob
            starts, first = np.unique(at, return_index=True)
            sizes = length[first]
        texts, view, offsets = self.shape_texts, memoryview(blob), []
        for start, n in zip(starts.tolist(), sizes.tolist()):
            text = bytes(view[start : start + n])
            offset = texts.get(text)
            if offset is None:
                offset = texts[text] = self.shape_offset
                self.shape_offset += n
            offsets.append(offset)
        column[rows] = np.asarray(offsets, np.int64)[np.searchsorted(starts, at)]

    def shapes_blob(self) -> bytes:
        return b"".join(self.shape_texts)

    def _columns(self, events: list[Event], hashes: list[str], comm: list[bytes]) -> dict[str, np.ndarray]:
        """Columns of ``events``; kernel_hash holds indices into ``hashes`` (appended to) for
        ``_intern_hashes`` to turn into name codes once the chunk's names are all interned, and
        collective records' spans point into ``comm`` (appended to) until ``_append_comm``."""
        # Per field, one C-level pass (map over an attrgetter) instead of a Python loop per event;
        # ph, cat, pid and tid in one pass, coded together (a trace has few distinct such tuples).
        combo = self.combos.codes_of(map(_COMBO, events), len(events))
        info = self._combo_info()
        kept = info.kept[combo]
        if kept.all():
            keep = events
        else:  # metadata and flow events: few, kept aside
            keep = list(compress(events, kept.tolist()))
            self._aside(list(compress(events, (~kept).tolist())), combo[~kept], info)
            combo = combo[kept]
        keep, ts, dur, good = self._timed(keep)
        if good is not None:
            combo = combo[good]
        n = len(keep)
        cols: dict[str, np.ndarray] = {}
        cols["kind"] = kind = info.kind[combo]
        cols["lane"] = self._lanes_of(combo)
        cols["name"] = self.names.codes_of(list(map(_NAME, keep)))
        cols["ts"] = us_to_ns(ts)
        cols["dur"] = us_to_ns(dur)
        args = list(map(_ARGS, keep))
        if None in args:
            args = [_NO_ARGS if a is None else a for a in args]
        cols["external_id"] = np.fromiter(map(_EXTERNAL_ID, args), np.int64, n)
        cols["correlation"] = np.fromiter(map(_CORRELATION, args), np.int64, n)
        # The remaining fields exist on a few kinds only: read them for those rows alone.
        gpu = np.flatnonzero(kind <= Kind.MEMSET)
        gpu_args = _rows_of(args, gpu)
        for name in GPU_FIELDS:
            _fill_values(cols, n, name, gpu, map(attrgetter(name), gpu_args))
        _fill_values(cols, n, "bytes", gpu, map(_NBYTES, gpu_args))
        cols["occupancy"] = np.full(n, np.nan, np.float32)
        occupancy = np.fromiter(map(_OCCUPANCY, gpu_args), np.float64, len(gpu))
        # a percentage: anything outside [0, 100] (1e308 included, which float32 cannot hold) is unknown
        cols["occupancy"][gpu] = np.where((occupancy >= 0) & (occupancy <= 100), occupancy, np.nan)
        for field_name, getter in (("grid", _GRID), ("block", _BLOCK)):
            dims = _dim3(list(map(getter, gpu_args)))
            for i, axis in enumerate("xyz"):
                _fill_values(cols, n, f"{field_name}_{axis}", gpu, dims[:, i])
        memory = np.flatnonzero(kind == Kind.MEMORY)
        memory_args = _rows_of(args, memory)
        _fill_values(cols, n, "bytes", memory, map(_ALLOC_BYTES, memory_args))
        cols[_MEMORY_ROW] = memory.astype(np.int64)
        for key, getter in _MEMORY_FIELDS:
            cols[key] = np.fromiter(map(getter, memory_args), np.int64, len(memory))
        launch = np.flatnonzero((kind == Kind.RUNTIME) | (kind == Kind.DRIVER))
        _fill_values(cols, n, "cbid", launch, map(_CBID, _rows_of(args, launch)))
        python = np.flatnonzero(kind == Kind.PYTHON)
        python_args = _rows_of(args, python)
        _fill_values(cols, n, "python_id", python, _ids(list(map(_PYTHON_ID, python_args))))
        _fill_values(cols, n, "python_parent", python, _ids(list(map(_PYTHON_PARENT, python_args))))
        ops = np.flatnonzero(kind == Kind.CPU_OP)
        op_args = _rows_of(args, ops)
        _fill_values(cols, n, "sequence", ops, map(_SEQUENCE, op_args))
        op_hashes = list(map(_KERNEL_HASH, op_args))
        hashed = np.flatnonzero(np.fromiter(map(bool, op_hashes), bool, len(op_hashes)))
        _fill_values(cols, n, "kernel_hash", ops[hashed], np.arange(len(hashes), len(hashes) + len(hashed)))
        hashes.extend(_rows_of(op_hashes, hashed))
        self._shapes(ops, op_args, cols, n)
        self._collectives(gpu, gpu_args, cols, comm)
        return cols

    def _append_comm(self, cols: dict, comm: list[bytes]) -> None:
        """A chunk's collective records go into the shapes blob after all its shapes (as the C
        scanner lays them out), their spans moved from ``comm`` to where they land."""
        if comm:  # GPU rows have no shapes of their own: their spans are the collective records'
            gpu = (cols["kind"] <= Kind.MEMSET) & (cols["shapes_at"] >= 0)
            self._append_shapes(cols, gpu, b"".join(comm))

    def _collectives(self, rows: np.ndarray, args: list[Args], cols: dict, comm: list[bytes]) -> None:
        """A GPU row's collective record, ``{"comm":{...}}``, in the row's shapes span (GPU rows
        have no record_shapes of their own), at an offset into ``comm`` for now. Few rows have
        one: the loop runs for those alone."""
        named = np.flatnonzero(np.fromiter(map(len, map(_COLLECTIVE, args)), np.int64, len(args)))
        if not len(named):
            return
        texts = []
        for i in named.tolist():
            a = args[i]
            fields = [b'"%s":%s' % (key, bytes(getattr(a, attr)))
                      for key, attr in _COMM_KEYS if len(getattr(a, attr))]
            texts.append(b'{"comm":{' + b",".join(fields) + b"}}")
        sizes = np.fromiter(map(len, texts), np.int64, len(texts))
        ends = np.cumsum(sizes)
        cols["shapes_at"][rows[named]] = sum(map(len, comm)) + ends - sizes
        cols["shapes_len"][rows[named]] = sizes
        comm.append(b"".join(texts))

    def _aside(self, others: list[Event], combo: np.ndarray, info: _ComboInfo) -> None:
        """Metadata, flow and B/E events, in file order."""
        self.flow_events += int(info.flow[combo].sum())
        self._keep_aside(compress(others, info.aside[combo].tolist()))

    def _keep_aside(self, events) -> None:
        """Metadata events as (name, pid, tid, value...) rows; B/E halves kept to pair later."""
        for e in events:
            if e.ph == "M":
                a = e.args or _NO_ARGS
                self.metadata.append((e.name, e.pid, e.tid, a.name, a.labels, a.sort_index))
            else:
                self.begin_end.append(e)

    def _combo_info(self) -> _ComboInfo:
        """Per (ph, cat, pid, tid) code: kept? its kind, flow? aside? (rebuilt as codes are added)."""
        table = self.combos.codes
        if self._info is None or len(self._info.kind) != len(table):
            keys = list(table)
            self._info = _ComboInfo(
                kept=np.array([k[0] in KEPT_PHASES for k in keys], bool),
                kind=np.array([kind_of(k[0] == "X", k[1]) if k[0] in KEPT_PHASES else 0 for k in keys], np.int8),
                flow=np.array([k[0] in FLOW_PHASES for k in keys], bool),
                aside=np.array([k[0] in ASIDE_PHASES for k in keys], bool),
            )
        return self._info

    def _lanes_of(self, combo: np.ndarray) -> np.ndarray:
        """Lane codes of the events' (pid, tid), interned in order of first appearance."""
        distinct, first, local = np.unique(combo, return_index=True, return_inverse=True)
        order = np.argsort(first, kind="stable")
        keys = list(self.combos.codes)
        codes = np.empty(len(distinct), np.int32)
        codes[order] = self.lanes.codes_of([keys[c][2:] for c in distinct[order].tolist()])
        return codes[local.reshape(-1)]

    def _timed(self, events: list[Event]) -> tuple[list[Event], np.ndarray, np.ndarray, np.ndarray | None]:
        """Events whose ts and dur fit int64 ns, with their ts and dur (µs) and which of the
        events they are (None: all); a bad dur is a field lost (read as 0), a bad ts the event."""
        n = len(events)
        ts = np.fromiter(map(_TS, events), np.float64, n)
        dur = np.fromiter(map(_DUR, events), np.float64, n)
        bad_ts = ~(np.abs(ts) <= MAX_US)  # NaN included
        bad_dur = ~((dur >= 0) & (dur <= MAX_US))
        if bad_dur.any():
            self.losses.fields["dur"] += int(bad_dur.sum())
            for i in np.flatnonzero(bad_dur):
                events[i].dur = 0.0
            dur[bad_dur] = 0.0
        if bad_ts.any():
            self.losses.events[repair.BAD_TIME] += int(bad_ts.sum())
            good = ~bad_ts
            events = list(compress(events, good.tolist()))
            return events, ts[good], dur[good], good
        return events, ts, dur, None

    def _shapes(self, rows: np.ndarray, args: list[Args], cols: dict, n: int) -> None:
        """record_shapes JSON of each op, kept as spans into one blob, parsed only on demand.

        Each op's text is ``{"dims":D,"types":T[,"concrete":C][,"strides":S]}``, T ``[]`` when
        absent; the texts of a chunk are joined at once and their spans computed with numpy."""
        at = np.full(n, -1, np.int64)
        length = np.zeros(n, np.int32)
        cols["shapes_at"] = at
        cols["shapes_len"] = length
        dims_len = np.fromiter(map(len, map(_INPUT_DIMS, args)), np.int64, len(args))
        have = np.flatnonzero(dims_len)  # a Raw read from JSON is never empty: empty is absent
        k = len(have)
        if not k:
            return
        shaped = _rows_of(args, have)
        types = list(map(_INPUT_TYPE, shaped))
        concrete = list(map(_CONCRETE, shaped))
        strides = list(map(_STRIDES, shaped))
        types_len = np.fromiter(map(len, types), np.int64, k)
        concrete_len = np.fromiter(map(len, concrete), np.int64, k)
        strides_len = np.fromiter(map(len, strides), np.int64, k)
        if not types_len.all():
            for i in np.flatnonzero(types_len == 0).tolist():
                types[i] = b"[]"
            types_len[types_len == 0] = 2
        parts: list = [b'{"dims":'] * (9 * k)
        parts[1::9] = map(_INPUT_DIMS, shaped)
        parts[2::9] = [b',"types":'] * k
        parts[3::9] = types
        parts[4::9] = _CONCRETE_KEY[(concrete_len > 0).view(np.int8)].tolist()
        parts[5::9] = concrete
        parts[6::9] = _STRIDES_KEY[(strides_len > 0).view(np.int8)].tolist()
        parts[7::9] = strides
        parts[8::9] = [b"}"] * k
        sizes = (
            dims_len[have] + types_len + (8 + 9 + 1)
            + np.where(concrete_len > 0, concrete_len + 12, 0)
            + np.where(strides_len > 0, strides_len + 11, 0)
        )
        ends = np.cumsum(sizes)
        at[rows[have]] = ends - sizes
        length[rows[have]] = sizes
        self._append_shapes(cols, rows[have], b"".join(parts))


GPU_FIELDS = ("device", "stream", "registers", "shared_memory")


def _fill_values(cols: dict, n: int, name: str, rows, values) -> None:
    """A column that is -1 except at ``rows``; an existing column is filled in place."""
    column = cols.get(name)
    if column is None:
        column = cols[name] = np.full(n, -1, EVENT_COLUMNS[name])
    if not isinstance(values, np.ndarray):
        values = np.fromiter(values, EVENT_COLUMNS[name], len(rows))
    column[rows] = values


def join_chunks(chunks: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """Decoded chunks (in file order, at least one) as one chunk: every column joined, the side
    table's rows moved past the rows of the chunks before theirs."""
    joined = {name: np.concatenate([c[name] for c in chunks]) for name in chunks[0] if not name.startswith(MEMORY_PREFIX)}
    joined.update({MEMORY_PREFIX + name: column for name, column in joined_memory(chunks).items()})
    return joined


def joined_memory(chunks: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """The side table (schema.MEMORY_COLUMNS) of decoded chunks in file order, its rows counted
    from the first chunk's first row."""
    if not chunks:
        return {name: np.empty(0, dtype) for name, dtype in MEMORY_COLUMNS.items()}
    offsets = np.cumsum([0] + [len(c["ts"]) for c in chunks[:-1]]).tolist()
    joined = {name: np.concatenate([c[MEMORY_PREFIX + name] for c in chunks]).astype(dtype, copy=False)
              for name, dtype in MEMORY_COLUMNS.items() if name != "row"}
    rows = np.concatenate([c[_MEMORY_ROW] + at for c, at in zip(chunks, offsets)]).astype(np.int64, copy=False)
    return {"row": rows, **joined}


def _rows_of(items: list, rows: np.ndarray) -> list:
    return list(map(items.__getitem__, rows.tolist()))


def _dim3(values: list) -> np.ndarray:
    """grid/block tuples (None: absent) -> a (k, 3) array, -1 where absent."""
    if None in values:
        values = [_NO_DIM3 if v is None else v for v in values]
    return np.array(values, np.int64).reshape(len(values), 3)


def _ids(values: list) -> list:
    return [-1 if v is None else v for v in values] if None in values else values


SUB_CHUNK = 1 << 20  # bytes of events decoded at a time: their objects stay in the CPU cache


def _part_bounds(text: bytes, separator: bytes) -> list[tuple[int, int]] | None:
    """Spans of ~SUB_CHUNK bytes of the array ``[...]``, each from an event start to just before
    the comma ending the event before the next; None if the text is not shaped so."""
    n = len(text)
    if text[:1] != b"[" or text[-1:] != b"]":
        return None
    bounds = []
    start = 1
    while start + 2 * SUB_CHUNK < n:
        event = text.find(separator, start + SUB_CHUNK, n - 1)
        if event < 0:
            break
        comma = event - 1
        while comma > start and text[comma] in b" \t\r\n":
            comma -= 1
        if text[comma] != ord(","):
            return None
        bounds.append((start, comma))
        start = event
    bounds.append((start, n - 1))
    return bounds


# |ts| and dur in µs that stay exact in float64 and fit int64 ns with room to add them.
MAX_US = float(2**52)
