"""Trace events as typed structs, and reading them whatever the text is like.

msgspec decodes each event into a small typed ``Event`` (its ``Args`` the fields kerneltui
reads), skipping every field not named. ``decode_events`` is the whole-array path with its
fallbacks: a chunk that is not JSON throughout is read event by event, and an event whose
fields have foreign types goes through ``repair`` field by field, each loss counted. A lone
surrogate escape, which msgspec refuses, is kept as its escape text (repair.escape_lone_surrogates).
"""

from __future__ import annotations

import math
from typing import Annotated

import msgspec
import orjson
from msgspec import Meta, Raw, Struct, field

from kerneltui.trace import repair
from kerneltui.trace.repair import Losses

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
    # the rest of a [memory] event's args (kept for Kind.MEMORY rows alone, schema.MEMORY_COLUMNS)
    total_allocated: I64 = field(default=-1, name="Total Allocated")
    total_reserved: I64 = field(default=-1, name="Total Reserved")
    device_type: I64 = field(default=-1, name="Device Type")
    device_id: I64 = field(default=-1, name="Device Id")
    addr: I64 = field(default=-1, name="Addr")
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
    # a collective kernel's own record (newer Kineto): kept raw, read by analysis/ranks
    collective: Raw = field(default=_NO_RAW, name="Collective name")
    in_nelems: Raw = field(default=_NO_RAW, name="In msg nelems")
    out_nelems: Raw = field(default=_NO_RAW, name="Out msg nelems")
    comm_dtype: Raw = field(default=_NO_RAW, name="dtype")
    group_name: Raw = field(default=_NO_RAW, name="Process Group Name")
    group_desc: Raw = field(default=_NO_RAW, name="Process Group Description")
    group_size: Raw = field(default=_NO_RAW, name="Group size")
    comm_seq: Raw = field(default=_NO_RAW, name="Seq")
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
        malformed = isinstance(exc, msgspec.DecodeError) and not isinstance(exc, msgspec.ValidationError)
        escaped = repair.escape_lone_surrogates(array_json) if malformed else None
        if escaped is not None:  # once: the escaped text has no lone surrogate left
            return decode_events(escaped, losses, separator)
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
        piece = repair.escape_lone_surrogates(piece) or piece
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
