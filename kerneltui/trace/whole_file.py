"""A file decoded whole (no event per line to cut on): orjson, else with its damaged events cut out or
re-encoded, else the longest prefix that closes; JSON nested past orjson's limit one level deep with msgspec."""

from __future__ import annotations

import re

import msgspec
import orjson

from kerneltui.errors import NotATrace, TraceError
from kerneltui.trace import repair
from kerneltui.trace.repair import Losses

_WS = b" \t\r\n"


def loads_repairing(data: bytes, path, losses: Losses) -> tuple[object, bool]:
    """orjson.loads; else the file with its damaged events cut out; else the longest prefix that closes."""
    if not data.strip(_WS):
        raise NotATrace(f"{path} holds only whitespace: not a trace")
    stripped = data.lstrip(_WS)
    if stripped[:1] not in (b"{", b"["):
        raise NotATrace(f"{path} is not JSON (it starts with {stripped[:12]!r})")
    cut_out = 0
    escaped = False
    while True:
        try:
            return _loads(data), False
        except orjson.JSONDecodeError as exc:
            error_at = exc.pos
        if not escaped:  # lone surrogates first: orjson refuses the whole text for one
            escaped = True
            fixed = repair.escape_lone_surrogates(data)
            if fixed is not None:
                data = fixed
                continue
        # One damaged event: cut it out (from the boundary before the error to the one after).
        before = _last_boundary(data, error_at)
        after = _EVENT_BOUNDARY.search(data, error_at)
        if before is None or after is None or cut_out >= _MAX_CUT_OUT:
            break
        piece = data[before + 1 : after.start() + 1].strip(_WS).lstrip(b",").strip(_WS)
        try:
            item = repair.load_piece(piece)  # NaN and Infinity are Python's, not JSON
        except ValueError as exc:
            losses.events[str(exc)] += 1
        else:
            try:  # kept, re-encoded in place (NaN becomes null: that field alone is lost later)
                text = msgspec.json.encode(item)
            except (msgspec.EncodeError, UnicodeError, RecursionError, TypeError, ValueError):
                losses.events[repair.CORRUPT] += 1  # a value no JSON text holds (lone surrogates are escaped by now)
            else:
                data = data[: before + 1] + b", " + text + data[after.start() + 1 :]
                cut_out += 1
                continue
        data = data[: before + 1] + data[after.start() + 1 :]
        cut_out += 1
    return _prefix_that_closes(data, stripped[:1], path), True


_EVENT_BOUNDARY = re.compile(rb"\}\s*,\s*\{")
_MAX_CUT_OUT = 64


def _last_boundary(data: bytes, pos: int) -> int | None:
    """Index of the "}" that ends the last event before ``pos``."""
    at = pos
    while True:
        at = data.rfind(b",", 0, at)
        if at < 0:
            return None
        close = data[:at].rstrip(_WS)
        if close.endswith(b"}") and data[at + 1 :].lstrip(_WS)[:1] == b"{":
            return len(close) - 1


def _loads(data: bytes):
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        if "recursion" not in str(exc):
            raise
        try:
            return _shallow(data)  # valid JSON nested deeper than orjson's limit (1024)
        except (msgspec.DecodeError, RecursionError):
            raise exc from None


_TOP = msgspec.json.Decoder(dict[str, msgspec.Raw] | list[msgspec.Raw])


def _shallow(data: bytes):
    """The document one level deep: the events stay raw JSON for the typed decoder, which skips
    (without recursing into) the fields it does not name; other top-level keys are parsed if they can be."""
    top = _TOP.decode(data)
    if isinstance(top, list):
        return msgspec.Raw(data)
    out = {}
    for key, value in top.items():
        if key == "traceEvents":
            out[key] = value
            continue
        try:
            out[key] = orjson.loads(bytes(value))
        except orjson.JSONDecodeError:
            pass  # a top-level key nested past the limit: as good as absent
    return out


def _prefix_that_closes(data: bytes, opener: bytes, path) -> object:
    closer = b"]" if opener == b"[" else b"]}"
    boundaries = [m.start() for m in _EVENT_BOUNDARY.finditer(data, max(0, len(data) - (4 << 20)))]
    for at in reversed(boundaries[-_MAX_CUT_OUT:]):
        try:
            return _loads(data[: at + 1] + closer)
        except orjson.JSONDecodeError:
            continue
    end = data.rfind(b"}")
    if end >= 0:
        try:
            return _loads(data[: end + 1] + closer)
        except orjson.JSONDecodeError:
            pass
    raise TraceError(f"{path} is not valid JSON and no complete event could be recovered from it")
