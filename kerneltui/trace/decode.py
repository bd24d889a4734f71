"""Decode a slice of the traceEvents array straight into numpy columns.

msgspec decodes each event into a small typed struct, skipping every field we
do not name (most of a trace's bytes); the structs of one chunk are turned into
columns at once and dropped, so no per-event Python object outlives its chunk.
"""

from __future__ import annotations

import math
from typing import Annotated, NamedTuple

import msgspec
import numpy as np
import orjson
from msgspec import Meta, Raw, Struct, field

from kerneltui.trace import repair
from kerneltui.trace.repair import Losses
from kerneltui.trace.schema import EVENT_COLUMNS, KIND_BY_CATEGORY, Kind

_NO_RAW = Raw(b"")


# Bounded ints: a value the column's dtype cannot hold fails validation (and is dropped by
# the repair path) instead of overflowing numpy later.
I64 = Annotated[int, Meta(ge=-(2**63), le=2**63 - 1)]
I32 = Annotated[int, Meta(ge=-(2**31), le=2**31 - 1)]
I16 = Annotated[int, Meta(ge=-(2**15), le=2**15 - 1)]
Dim = Annotated[int, Meta(ge=0, le=2**31 - 1)]


class Args(Struct, gc=False):
    external_id: I64 = field(default=-1, name="External id")
    correlation: I64 = -1
    device: I16 = -1
    stream: I64 = -1
    grid: tuple[Dim, Dim, Dim] | None = None
    block: tuple[Dim, Dim, Dim] | None = None
    registers: I32 = field(default=-1, name="registers per thread")
    shared_memory: I64 = field(default=-1, name="shared memory")
    occupancy: float = field(default=math.nan, name="est. achieved occupancy %")
    nbytes: I64 = field(default=-1, name="bytes")
    alloc_bytes: I64 = field(default=-1, name="Bytes")
    cbid: I32 = -1
    python_id: I64 | None = field(default=-1, name="Python id")
    python_parent: I64 | None = field(default=-1, name="Python parent id")
    sequence: I64 = field(default=-1, name="Sequence number")
    kernel_hash: str = ""
    input_dims: Raw = field(default=_NO_RAW, name="Input Dims")
    input_type: Raw = field(default=_NO_RAW, name="Input type")
    # stride/padding of a convolution, an attention's is_causal, a reduction's dims: the traffic rules read them
    concrete: Raw = field(default=_NO_RAW, name="Concrete Inputs")
    strides: Raw = field(default=_NO_RAW, name="Input Strides")
    # metadata events (ph M) carry their value here
    name: str = ""
    labels: str = ""
    sort_index: I64 = 0


class Event(Struct, gc=False):
    ph: str = ""
    cat: str = ""
    name: str = ""
    pid: I64 | str = ""
    tid: I64 | str = ""
    ts: float = math.nan  # an event without a usable ts is dropped, counted
    dur: float = 0.0
    args: Args | None = None


EVENTS = msgspec.json.Decoder(list[Event], strict=False)
_ONE_EVENT = msgspec.json.Decoder(Event, strict=False)
_NO_ARGS = Args()


_KEPT_PHASES = frozenset(("X", "i", "I"))
OLD_EXTERNAL_ID = b'"external id"'  # torch < 1.13 spelled it so


_EVENT_FIELDS = repair.coercers_of(Event)
_ARGS_FIELDS = repair.coercers_of(Args)


def decode_events(array_json, losses: Losses, separator: bytes | None = None) -> list[Event]:
    """A JSON array of events -> events, whatever it costs (counted in ``losses``).

    With the line-per-event ``separator``, a chunk that is not JSON throughout is read
    event by event, and only the events that are not JSON are lost. Without it,
    raises msgspec.DecodeError when the text is not JSON.
    """
    if OLD_EXTERNAL_ID in (array_json.obj if isinstance(array_json, memoryview) else array_json):
        array_json = bytes(array_json).replace(OLD_EXTERNAL_ID, b'"External id"')
    try:
        return EVENTS.decode(array_json)
    except (msgspec.ValidationError, msgspec.DecodeError, RecursionError) as exc:
        if separator is not None:
            return events_from_pieces(repair.split_events(bytes(array_json)[1:-1], separator), losses)
        if isinstance(exc, RecursionError):
            raise msgspec.DecodeError("nested too deep to read") from None
        if isinstance(exc, msgspec.DecodeError):
            raise
    try:
        items = orjson.loads(bytes(array_json))
    except (orjson.JSONDecodeError, RecursionError):
        try:
            items = msgspec.json.decode(array_json)  # nesting past orjson's limit: msgspec goes deeper
        except RecursionError:
            raise msgspec.DecodeError("nested too deep to read") from None
    return events_from_items(items, losses)


def events_from_pieces(pieces: list[bytes], losses: Losses) -> list[Event]:
    """One JSON text per event: the typed decoder for each, the repair path for what it refuses."""
    events = []
    for piece in pieces:
        try:
            events.append(_ONE_EVENT.decode(piece))
            continue
        except RecursionError:
            losses.events[repair.TOO_DEEP] += 1  # valid, maybe, but no parser here goes that deep
            continue
        except msgspec.ValidationError:
            try:
                item = orjson_or_json(piece)
            except ValueError as exc:
                losses.events[str(exc)] += 1
                continue
        except msgspec.DecodeError:
            try:
                item = repair.load_piece(piece)  # NaN, Infinity: Python's json.dump writes them
            except ValueError as exc:
                losses.events[str(exc)] += 1
                continue
        events.extend(events_from_items([item], losses))
    return events


def orjson_or_json(piece: bytes):
    try:
        return orjson.loads(piece)
    except (orjson.JSONDecodeError, RecursionError):
        try:
            return msgspec.json.decode(piece)  # nested past orjson's limit
        except (msgspec.DecodeError, RecursionError):
            return repair.load_piece(piece)


def events_from_items(items: list, losses: Losses) -> list[Event]:
    """Already-parsed events: decoded together, else one by one with each bad field dropped."""
    if not isinstance(items, list):
        raise msgspec.DecodeError("not a JSON array")
    try:
        return EVENTS.decode(repair.encode(items))
    except (msgspec.ValidationError, msgspec.EncodeError, TypeError, ValueError, RecursionError, UnicodeError):
        pass
    events = []
    for item in items:
        if not isinstance(item, dict):
            losses.events[repair.NOT_OBJECT] += 1
            continue
        try:
            events.append(_ONE_EVENT.decode(msgspec.json.encode(item)))
            continue
        except RecursionError:
            losses.events[repair.TOO_DEEP] += 1
            continue
        except (msgspec.ValidationError, msgspec.EncodeError, TypeError, ValueError, UnicodeError):
            pass
        fixed = repair.coerce_event(item, _EVENT_FIELDS, _ARGS_FIELDS, losses)
        if fixed is None:
            continue
        try:
            events.append(_ONE_EVENT.decode(msgspec.json.encode(fixed)))
        except (msgspec.ValidationError, msgspec.EncodeError, TypeError, ValueError, RecursionError, UnicodeError):
            losses.events["unreadable fields"] += 1
    return events


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
        self.losses = Losses()
        self.begin_end: list[Event] = []  # B/E halves, paired once all are read

    def decode(self, array_json, separator: bytes | None = None) -> dict[str, np.ndarray]:
        return self.columns(decode_events(array_json, self.losses, separator))

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
        self.losses.merge(part.losses)
        self.begin_end.extend(part.begin_end)
        return cols


    def columns(self, events: list[Event]) -> dict[str, np.ndarray]:
        keep = [e for e in events if e.ph in _KEPT_PHASES]
        keep = self._timed(keep)
        if len(keep) < len(events):  # metadata and flow events: few, kept aside
            for e in events:
                if e.ph == "M":
                    a = e.args or _NO_ARGS
                    self.metadata.append((e.name, e.pid, e.tid, a.name, a.labels, a.sort_index))
                elif e.ph in ("s", "f", "t"):
                    self.flow_events += 1
                elif e.ph in ("B", "E"):
                    self.begin_end.append(e)
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
        occupancy = np.fromiter((a.occupancy for a in gpu_args), np.float64, len(gpu))
        # a percentage: anything outside [0, 100] (1e308 included, which float32 cannot hold) is unknown
        cols["occupancy"][gpu] = np.where((occupancy >= 0) & (occupancy <= 100), occupancy, np.nan)
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

    def _timed(self, events: list[Event]) -> list[Event]:
        """Events whose ts and dur fit int64 ns; a bad dur is a field lost, a bad ts the event."""
        n = len(events)
        ts = np.fromiter((e.ts for e in events), np.float64, n)
        dur = np.fromiter((e.dur for e in events), np.float64, n)
        bad_ts = ~(np.abs(ts) <= MAX_US)  # NaN included
        bad_dur = ~((dur >= 0) & (dur <= MAX_US))
        if bad_dur.any():
            self.losses.fields["dur"] += int(bad_dur.sum())
            for i in np.flatnonzero(bad_dur):
                events[i].dur = 0.0
        if bad_ts.any():
            self.losses.events[repair.BAD_TIME] += int(bad_ts.sum())
            events = [e for e, bad in zip(events, bad_ts) if not bad]
        return events

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
                part = b'{"dims":%s,"types":%s' % (bytes(a.input_dims), bytes(a.input_type) or b"[]")
                if a.concrete is not _NO_RAW:
                    part += b',"concrete":' + bytes(a.concrete)
                if a.strides is not _NO_RAW:
                    part += b',"strides":' + bytes(a.strides)
                part += b"}"
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


# |ts| and dur in µs that stay exact in float64 and fit int64 ns with room to add them.
MAX_US = float(2**52)


class Partial(NamedTuple):
    """What a worker process sends back for one chunk."""

    columns: dict
    names: list
    lanes: list
    metadata: list
    flow_events: int
    shapes: bytes
    losses: Losses
    begin_end: list


def decode_alone(array_json: bytes, separator: bytes | None = None) -> Partial:
    """Decode one chunk with tables of its own (runs in a worker process)."""
    decoder = ChunkDecoder()
    cols = decoder.decode(array_json, separator)
    return Partial(
        cols,
        decoder.names.values(),
        decoder.lanes.values(),
        decoder.metadata,
        decoder.flow_events,
        b"".join(decoder.shape_parts),
        decoder.losses,
        decoder.begin_end,
    )
