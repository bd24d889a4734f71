"""Decode a slice of the traceEvents array straight into numpy columns.

msgspec decodes each event into a small typed struct, skipping every field we
do not name (most of a trace's bytes); the structs of one chunk are turned into
columns at once and dropped, so no per-event Python object outlives its chunk.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import msgspec
import numpy as np
import orjson
from msgspec import Raw, Struct, field

from kerneltui.trace.schema import EVENT_COLUMNS, KIND_BY_CATEGORY, Kind

_NO_RAW = Raw(b"")


class Args(Struct, gc=False):
    external_id: int = field(default=-1, name="External id")
    correlation: int = -1
    device: int = -1
    stream: int = -1
    grid: tuple[int, int, int] | None = None
    block: tuple[int, int, int] | None = None
    registers: int = field(default=-1, name="registers per thread")
    shared_memory: int = field(default=-1, name="shared memory")
    occupancy: float = field(default=math.nan, name="est. achieved occupancy %")
    nbytes: int = field(default=-1, name="bytes")
    alloc_bytes: int = field(default=-1, name="Bytes")
    cbid: int = -1
    python_id: int | None = field(default=-1, name="Python id")
    python_parent: int | None = field(default=-1, name="Python parent id")
    sequence: int = field(default=-1, name="Sequence number")
    kernel_hash: str = ""
    input_dims: Raw = field(default=_NO_RAW, name="Input Dims")
    input_type: Raw = field(default=_NO_RAW, name="Input type")
    # metadata events (ph M) carry their value here
    name: str = ""
    labels: str = ""
    sort_index: int = 0


class Event(Struct, gc=False):
    ph: str = ""
    cat: str = ""
    name: str = ""
    pid: int | str = ""
    tid: int | str = ""
    ts: float = 0.0
    dur: float = 0.0
    args: Args | None = None


EVENTS = msgspec.json.Decoder(list[Event], strict=False)
_ONE_EVENT = msgspec.json.Decoder(Event, strict=False)
_NO_ARGS = Args()


_KEPT_PHASES = frozenset(("X", "i", "I"))
OLD_EXTERNAL_ID = b'"external id"'  # torch < 1.13 spelled it so


def decode_events(array_json) -> tuple[list[Event], int]:
    """A JSON array of events -> (events, how many were skipped for unexpected field types).

    Raises msgspec.DecodeError when the text is not JSON at all.
    """
    if OLD_EXTERNAL_ID in (array_json.obj if isinstance(array_json, memoryview) else array_json):
        array_json = bytes(array_json).replace(OLD_EXTERNAL_ID, b'"External id"')
    try:
        return EVENTS.decode(array_json), 0
    except msgspec.ValidationError:
        return events_from_items(orjson.loads(bytes(array_json)))


def events_from_items(items: list) -> tuple[list[Event], int]:
    """Already-parsed events, keeping those that decode (re-encoded: Raw fields need JSON text)."""
    try:
        return EVENTS.decode(orjson.dumps(items)), 0
    except msgspec.ValidationError:
        pass
    events, skipped = [], 0
    for item in items:
        try:
            events.append(_ONE_EVENT.decode(orjson.dumps(item)))
        except msgspec.ValidationError:
            skipped += 1
    return events, skipped


class Interner:
    """Strings to dense int codes, shared across chunks."""

    def __init__(self) -> None:
        self.codes: dict = {}

    def codes_of(self, values) -> np.ndarray:
        table = self.codes
        return np.fromiter((table.setdefault(v, len(table)) for v in values), dtype=np.int32)

    def values(self) -> list:
        return list(self.codes)


def us_to_ns(us: np.ndarray) -> np.ndarray:
    """Exact µs -> ns for Kineto's 3-decimal floats (split so the x1000 does not round)."""
    whole = np.floor(us)
    return whole.astype(np.int64) * 1000 + np.rint((us - whole) * 1000).astype(np.int64)


class ChunkDecoder:
    """Turns chunks of event JSON into column dicts; remembers metadata events aside."""

    def __init__(self) -> None:
        self.names = Interner()
        self.lanes = Interner()
        self.categories = Interner()
        self.metadata: list[tuple[str, object, object, str, str, int]] = []
        self.flow_events = 0
        self.shape_parts: list[bytes] = []
        self.shape_offset = 0
        self.skipped = 0

    def decode(self, array_json) -> dict[str, np.ndarray]:
        events, skipped = decode_events(array_json)
        self.skipped += skipped
        return self.columns(events)

    def merge(self, part: Partial) -> dict[str, np.ndarray]:
        """Columns decoded by another process, their codes mapped onto this decoder's tables."""
        cols = part.columns
        names = self.names.codes_of(part.names)
        lanes = self.lanes.codes_of(part.lanes)
        cols["name"] = names[cols["name"]] if len(names) else cols["name"]
        hashed = cols["kernel_hash"] >= 0
        cols["kernel_hash"][hashed] = names[cols["kernel_hash"][hashed]]
        cols["lane"] = lanes[cols["lane"]] if len(lanes) else cols["lane"]
        cols["shapes_at"][cols["shapes_at"] >= 0] += self.shape_offset
        self.shape_parts.append(part.shapes)
        self.shape_offset += len(part.shapes)
        self.metadata.extend(part.metadata)
        self.flow_events += part.flow_events
        self.skipped += part.skipped
        return cols


    def columns(self, events: list[Event]) -> dict[str, np.ndarray]:
        keep = [e for e in events if e.ph in _KEPT_PHASES]
        if len(keep) < len(events):  # metadata and flow events: few, kept aside
            for e in events:
                if e.ph == "M":
                    a = e.args or _NO_ARGS
                    self.metadata.append((e.name, e.pid, e.tid, a.name, a.labels, a.sort_index))
                elif e.ph in ("s", "f", "t"):
                    self.flow_events += 1
        n = len(keep)
        cols: dict[str, np.ndarray] = {}
        cols["kind"] = self._kinds(keep)
        cols["name"] = self.names.codes_of(e.name for e in keep)
        cols["lane"] = self.lanes.codes_of((e.pid, e.tid) for e in keep)
        cols["ts"] = us_to_ns(np.fromiter((e.ts for e in keep), np.float64, n))
        cols["dur"] = us_to_ns(np.fromiter((e.dur for e in keep), np.float64, n))
        args = [e.args or _NO_ARGS for e in keep]
        cols["external_id"] = np.fromiter((a.external_id for a in args), np.int64, n)
        cols["correlation"] = np.fromiter((a.correlation for a in args), np.int64, n)
        kind = cols["kind"]
        # The remaining fields exist on a few kinds only: read them for those rows alone.
        gpu = np.flatnonzero(kind <= Kind.MEMSET)
        gpu_args = [args[i] for i in gpu]
        _fill(cols, n, gpu, gpu_args, GPU_FIELDS)
        cols["occupancy"] = np.full(n, np.nan, np.float32)
        cols["occupancy"][gpu] = np.fromiter((a.occupancy for a in gpu_args), np.float32, len(gpu))
        for axis, i in (("x", 0), ("y", 1), ("z", 2)):
            _fill_values(cols, n, f"grid_{axis}", gpu, (a.grid[i] if a.grid else -1 for a in gpu_args))
            _fill_values(cols, n, f"block_{axis}", gpu, (a.block[i] if a.block else -1 for a in gpu_args))
        memory = np.flatnonzero(kind == Kind.MEMORY)
        _fill_values(cols, n, "bytes", memory, (args[i].alloc_bytes for i in memory))
        launch = np.flatnonzero((kind == Kind.RUNTIME) | (kind == Kind.DRIVER))
        _fill_values(cols, n, "cbid", launch, (args[i].cbid for i in launch))
        python = np.flatnonzero(kind == Kind.PYTHON)
        _fill_values(cols, n, "python_id", python, (_id(args[i].python_id) for i in python))
        _fill_values(cols, n, "python_parent", python, (_id(args[i].python_parent) for i in python))
        ops = np.flatnonzero(kind == Kind.CPU_OP)
        op_args = [args[i] for i in ops]
        _fill_values(cols, n, "sequence", ops, (a.sequence for a in op_args))
        hashed = [(i, a.kernel_hash) for i, a in zip(ops, op_args) if a.kernel_hash]
        _fill_values(cols, n, "kernel_hash", [i for i, _ in hashed], self.names.codes_of(h for _, h in hashed))
        self._shapes(ops, op_args, cols, n)
        return cols

    def _kinds(self, events: list[Event]) -> np.ndarray:
        n = len(events)
        category = self.categories.codes_of(e.cat for e in events)
        complete = np.fromiter((e.ph == "X" for e in events), bool, n)
        table = self.categories.values()
        as_complete = np.array([kind_of(True, c) for c in table], np.int8)
        as_instant = np.array([kind_of(False, c) for c in table], np.int8)
        return np.where(complete, as_complete[category], as_instant[category]).astype(np.int8)

    def _shapes(self, rows, args: list[Args], cols: dict, n: int) -> None:
        """record_shapes JSON of each op, kept as spans into one blob, parsed only on demand."""
        at = np.full(n, -1, np.int64)
        length = np.zeros(n, np.int32)
        for i, a in zip(rows, args):
            if a.input_dims is not _NO_RAW:
                part = b'{"dims":%s,"types":%s}' % (bytes(a.input_dims), bytes(a.input_type) or b"[]")
                at[i] = self.shape_offset
                length[i] = len(part)
                self.shape_parts.append(part)
                self.shape_offset += len(part)
        cols["shapes_at"] = at
        cols["shapes_len"] = length


GPU_FIELDS = ("device", "stream", "registers", "shared_memory")


def _fill(cols: dict, n: int, rows, args: list[Args], fields: tuple[str, ...]) -> None:
    for name in fields:
        _fill_values(cols, n, name, rows, (getattr(a, name) for a in args))
    cols["bytes"] = np.full(n, -1, np.int64)
    cols["bytes"][rows] = np.fromiter((a.nbytes for a in args), np.int64, len(args))


def _fill_values(cols: dict, n: int, name: str, rows, values) -> None:
    """A column that is -1 except at ``rows``; an existing column is filled in place."""
    column = cols.get(name)
    if column is None:
        column = cols[name] = np.full(n, -1, EVENT_COLUMNS[name])
    column[rows] = np.fromiter(values, EVENT_COLUMNS[name], len(rows))


def _id(value: int | None) -> int:
    return -1 if value is None else value


def kind_of(ph_is_complete: bool, category: str) -> int:
    if not ph_is_complete:
        return Kind.MEMORY if category == "cpu_instant_event" else Kind.INSTANT
    return int(KIND_BY_CATEGORY.get(category.lower(), Kind.OTHER))


class Partial(NamedTuple):
    """What a worker process sends back for one chunk."""

    columns: dict
    names: list
    lanes: list
    metadata: list
    flow_events: int
    shapes: bytes
    skipped: int


def decode_alone(array_json: bytes) -> Partial:
    """Decode one chunk with tables of its own (runs in a worker process)."""
    decoder = ChunkDecoder()
    cols = decoder.decode(array_json)
    return Partial(
        cols,
        decoder.names.values(),
        decoder.lanes.values(),
        decoder.metadata,
        decoder.flow_events,
        b"".join(decoder.shape_parts),
        decoder.skipped,
    )
