"""The slow path for events the typed decoder refuses: a bad field costs that field, never the event.

Producers other than Kineto write fields in other types (ROCm's ``"stream":
"0x0"``, Inductor's ``"grid": "grid(100,)"``), and damaged files hold bare
``NaN`` or stray bytes. The fast path decodes a whole chunk at once; when it
fails, the chunk comes here and is read event by event: each event is coerced
field by field to the types the decoder wants, and only an event that is not
JSON at all (or not an object) is skipped, counted by cause in ``Losses``.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Iterable

import msgspec

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
_INTS = re.compile(r"-?\d+")


class Losses:
    """What reading cost: events skipped and fields dropped, each by cause."""

    def __init__(self) -> None:
        self.events: Counter[str] = Counter()  # cause -> events skipped
        self.fields: Counter[str] = Counter()  # field -> times dropped for an unusable value

    def merge(self, other: Losses) -> None:
        self.events.update(other.events)
        self.fields.update(other.fields)

    @property
    def skipped(self) -> int:
        return sum(self.events.values())

    @property
    def corrupt(self) -> int:
        """Events lost to bytes that are not JSON: the file itself is damaged."""
        return self.events.get(CORRUPT, 0)

    def warnings(self) -> list[str]:
        out = []
        if self.events:
            out.append(f"skipped {self.skipped:,} events: " + by_cause(self.events))
        if self.fields:
            total = sum(self.fields.values())
            out.append(f"ignored {total:,} fields with unusable values: " + by_cause(self.fields))
        return out


CORRUPT = "not valid JSON"
TOO_DEEP = "nested deeper than 1,000 levels"
NOT_OBJECT = "not a JSON object"
BAD_TIME = "no usable ts"


def by_cause(counts: Counter) -> str:
    return ", ".join(f"{n:,} {cause}" for cause, n in counts.most_common(6)) + (
        f" and {len(counts) - 6} more causes" if len(counts) > 6 else ""
    )


def split_events(body: bytes, separator: bytes) -> list[bytes]:
    """The events of a line-per-event array body, one JSON text each."""
    pieces = body.split(separator)
    out = []
    for i, piece in enumerate(pieces):
        piece = piece.rstrip(b" \t\r\n").rstrip(b",")
        if i:
            piece = b"{" + piece
        elif not piece.strip(b" \t\r\n[,"):
            continue
        out.append(piece)
    return out


# Every escape of a JSON text, in order (an escaped backslash before a "u" is then no escape), a
# surrogate pair as one; group 1 is a surrogate escape without its partner.
_ESCAPE = re.compile(
    rb"\\(?:u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}|(u[dD][89a-fA-F][0-9a-fA-F]{2})|.)", re.DOTALL
)


def _escaped_surrogate(match: re.Match) -> bytes:
    lone = match.group(1)
    return match.group() if lone is None else b"\\\\" + lone.lower()


def escape_lone_surrogates(text) -> bytes | None:
    """``text`` with each lone surrogate escape (``\\ud83d`` without its low half, or a lone
    ``\\udc00``) turned into the six characters themselves, as terminal_text.printable shows such a
    code point; None if it has none. msgspec and orjson refuse the whole text for one, and no
    str that leaves Python (Arrow, JSON, the terminal) can hold one: this keeps the string."""
    if isinstance(text, memoryview):
        text = bytes(text)
    if b"\\u" not in text:
        return None
    escaped = _ESCAPE.sub(_escaped_surrogate, text)
    return escaped if escaped != text else None


def load_piece(piece: bytes) -> object:
    """One event's JSON text -> Python value; ``NaN``/``Infinity`` read as floats. Raises ValueError."""
    try:
        return json.loads(escape_lone_surrogates(piece) or piece)
    except RecursionError:
        raise ValueError(TOO_DEEP) from None
    except (ValueError, UnicodeError):
        raise ValueError(CORRUPT) from None


def coerce_event(item: dict, event_fields: dict, args_fields: dict, losses: Losses) -> dict | None:
    """The item with each known field in the decoder's type, or dropped (and counted).

    None when the event cannot be placed in time (its ts is unusable)."""
    out = {}
    for key, coerce in event_fields.items():
        if key in item:
            value = coerce(item[key])
            if value is _DROP and key == "ts":
                losses.events[BAD_TIME] += 1
                return None
            if value is _DROP:
                losses.fields[key] += 1
            else:
                out[key] = value
    args = item.get("args")
    if isinstance(args, dict):
        kept = {}
        for key, coerce in args_fields.items():
            if key in args:
                value = coerce(args[key])
                if value is _DROP:
                    losses.fields[f"args.{key}"] += 1
                else:
                    kept[key] = value
        out["args"] = kept
    elif args is not None:
        losses.fields["args"] += 1
    return out


_DROP = object()


def as_int(value):
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value if INT64_MIN <= value <= INT64_MAX else _DROP
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return as_int(int(value))
    if isinstance(value, str):
        text = value.strip()
        try:
            return as_int(int(text, 16) if text.lower().startswith(("0x", "-0x")) else int(text))
        except ValueError:
            return _DROP
    return _DROP


def as_float(value):
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)):
        try:
            value = float(value)
        except OverflowError:  # an int of hundreds of digits
            return _DROP
        return value if math.isfinite(value) else _DROP
    if isinstance(value, str):
        try:
            return as_float(float(value))
        except (ValueError, OverflowError):
            return _DROP
    return _DROP


def as_str(value):
    if isinstance(value, str):
        return value
    if value is None or isinstance(value, (dict, list)):
        return _DROP
    return str(value)  # a number as a name: keep its text


def as_key(value):
    """pid/tid: opaque keys, an int or a string."""
    if isinstance(value, (int, str)) and not isinstance(value, bool):
        return value if not isinstance(value, int) or INT64_MIN <= value <= INT64_MAX else str(value)
    if value is None or isinstance(value, (dict, list)):
        return _DROP
    return str(value)


def as_dim3(value):
    """grid/block: [x, y, z], or fewer axes, or Inductor's text "grid(100,)"."""
    if isinstance(value, str):
        numbers = [int(n) for n in _INTS.findall(value)]
    elif isinstance(value, (list, tuple)):
        numbers = [as_int(v) for v in value]
    else:
        return _DROP
    if not 1 <= len(numbers) <= 3 or any(n is _DROP or not 0 <= n <= 2**31 - 1 for n in numbers):
        return _DROP
    return numbers + [1] * (3 - len(numbers))


def _bounded_int(lo: int, hi: int):
    def coerce(value):
        number = as_int(value)
        return number if number is not _DROP and lo <= number <= hi else _DROP

    return coerce


def as_optional_int(value):
    return None if value is None else as_int(value)


def as_any(value):
    return value


def coercers_of(struct_type) -> dict:
    """Encoded field name -> coercer, from the msgspec Struct's own annotations."""
    out = {}
    for f in msgspec.structs.fields(struct_type):
        out[f.encode_name] = _coercer(f.type)
    return out


def _coercer(annotation):
    info = msgspec.inspect.type_info(annotation)
    if isinstance(info, msgspec.inspect.UnionType):
        kinds = {type(t) for t in info.types}
        if msgspec.inspect.NoneType in kinds and msgspec.inspect.IntType in kinds:
            return as_optional_int
        if msgspec.inspect.StrType in kinds and msgspec.inspect.IntType in kinds:
            return as_key
        if msgspec.inspect.TupleType in kinds:
            return lambda v: None if v is None else as_dim3(v)
        return as_any
    if isinstance(info, msgspec.inspect.IntType):
        return _bounded_int(info.ge if info.ge is not None else INT64_MIN, info.le if info.le is not None else INT64_MAX)
    return {
        msgspec.inspect.FloatType: as_float,
        msgspec.inspect.StrType: as_str,
        msgspec.inspect.RawType: as_any,
    }.get(type(info), as_any)


def encode(items: Iterable) -> bytes:
    """Parsed values back to JSON text (msgspec: big ints and deep nesting survive)."""
    return msgspec.json.encode(list(items))
