"""File -> columnar events, fast and within bounded memory.

Kineto (and most pretty-printed Chrome traces) start every event of the
traceEvents array on a line of its own at one indentation. JSON strings cannot
hold a raw newline, so ``"\\n" + indent + "{"`` marks event starts safely: the
array is cut there into ~16 MB chunks, each decoded as its own JSON array.
Layouts without that shape (one-line files) are decoded whole. A file cut off
mid-write keeps every complete event before the cut.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable

import msgspec
import numpy as np
import orjson

from kerneltui.errors import TraceError
from kerneltui.trace.blocks import BlockStream
from kerneltui.trace.decode import ChunkDecoder, events_from_items
from kerneltui.trace.pool import ChunkPool
from kerneltui.trace.schema import EVENT_COLUMNS, Device, TraceMeta

_ARRAY_END = re.compile(rb"\}\s*\]")
_WS = b" \t\r\n"
_HEADER_LIMIT = 64 << 20  # look this far for "traceEvents" before decoding the file whole


class RawTrace:
    """What the loader produces: columns, interned strings, metadata events, top-level keys."""

    def __init__(self, columns, decoder: ChunkDecoder, top: dict, truncated: bool, skipped: int):
        self.columns: dict[str, np.ndarray] = columns
        self.names: list[str] = decoder.names.values()
        self.lanes: list[tuple] = decoder.lanes.values()
        self.metadata = decoder.metadata
        self.flow_events = decoder.flow_events
        self.shapes_blob = b"".join(decoder.shape_parts)
        self.top = top
        self.truncated = truncated
        self.skipped = skipped


def read_trace(path: str | os.PathLike, progress: Callable[[float], None] | None = None) -> tuple[RawTrace, TraceMeta]:
    stream = BlockStream(path, progress)
    reader = _EventReader(stream)
    raw = reader.read()
    if raw.truncated and not len(raw.columns["ts"]):
        raise TraceError(f"{stream.path} is cut off before its first complete event: nothing to load")
    meta = _meta(stream, raw)
    return raw, meta


class _EventReader:
    def __init__(self, stream: BlockStream):
        self.stream = stream
        self.decoder = ChunkDecoder()
        self.chunks: list[dict[str, np.ndarray]] = []
        self.pool = ChunkPool.for_stream(stream)

    def read(self) -> RawTrace:
        blocks = iter(self.stream)
        head = b""
        for block in blocks:
            head += block
            located = self._locate_array(head)
            if located is not None or len(head) > _HEADER_LIMIT:
                break
        else:
            located = self._locate_array(head)
        if located is None or located[1] is None:
            self._drain()
            # No line-per-event layout to cut on: decode the file whole.
            return self._whole(head + b"".join(blocks))
        start, separator = located
        header = head[:start]
        top_truncated, tail = self._events(head[start + 1 :], blocks, separator)
        truncated = top_truncated or self.stream.cut_short
        top = _parse_top(header, tail, truncated)
        return self._finish(top, truncated)

    def _locate_array(self, head: bytes) -> tuple[int, bytes | None] | None:
        """Index of the events array's "[" and the separator that starts each event."""
        stripped = head.lstrip(_WS)
        if not stripped:
            return None
        if stripped[:1] == b"[":
            start = len(head) - len(stripped)
        elif stripped[:1] == b"{":
            key = head.find(b'"traceEvents"')
            if key < 0:
                return None
            start = head.find(b"[", key)
            if start < 0:
                return None
        else:
            raise TraceError(f"{self.stream.path} is not JSON (it starts with {stripped[:12]!r})")
        first = start + 1 + (len(head) - start - 1 - len(head[start + 1 :].lstrip(_WS)))
        if first >= len(head):
            return None  # need more bytes to see the first event
        newline = head.rfind(b"\n", start, first)
        indent = head[newline + 1 : first]
        if newline < 0 or head[first : first + 1] != b"{" or indent.strip(b" \t"):
            return start, None
        return start, b"\n" + indent + b"{"

    def _events(self, rest: bytes, blocks: Iterable[bytes], separator: bytes) -> tuple[bool, bytes]:
        """Decode chunk by chunk; returns (cut off?, bytes after the array)."""
        pending = rest
        for block in blocks:
            # One copy per block: the chunk is decoded in place, its last comma turned into "]".
            buffer = bytearray(b"[")
            buffer += pending
            buffer += block
            cut = buffer.rfind(separator)
            if cut <= 1:
                pending = bytes(buffer[1:])
                continue
            comma = cut - 1
            while comma > 0 and buffer[comma] in _WS:
                comma -= 1
            if buffer[comma] == ord(","):
                buffer[comma] = ord("]")
                self._decode_array(memoryview(buffer)[: comma + 1])
            else:
                self._decode(bytes(buffer[1:cut]))
            pending = bytes(buffer[cut:])
        self._drain()
        return self._last(pending, separator)

    def _last(self, pending: bytes, separator: bytes) -> tuple[bool, bytes]:
        if pending.lstrip(_WS)[:1] == b"]":
            return False, pending.lstrip(_WS)[1:]
        for end in _ARRAY_END.finditer(pending):
            try:
                self._decode(pending[: end.start() + 1], strict=True)
            except msgspec.DecodeError:
                continue
            return False, pending[end.end() :]
        # Cut off mid-write: keep the complete events before the last event start.
        cut = len(pending)
        while (cut := pending.rfind(separator, 0, cut)) >= 0:
            try:
                self._decode(pending[:cut], strict=True)
                return True, b""
            except msgspec.DecodeError:
                continue
        return True, b""

    def _decode(self, chunk: bytes, strict: bool = False) -> None:
        body = chunk.rstrip(_WS).rstrip(b",")
        if body.strip(_WS):
            self._decode_array(b"[" + body + b"]", strict)

    def _decode_array(self, array_json, strict: bool = False) -> None:
        if self.pool is not None and not strict:
            self.pool.submit(bytes(array_json))
            return
        try:
            self.chunks.append(self.decoder.decode(array_json))
        except msgspec.DecodeError:
            if strict:
                raise
            raise TraceError(f"{self.stream.path}: corrupt JSON inside traceEvents") from None

    def _drain(self) -> None:
        """Collect chunks decoded by worker processes, in file order."""
        if self.pool is None:
            return
        try:
            for part in self.pool.results():
                self.chunks.append(self.decoder.merge(part))
        except msgspec.DecodeError:
            raise TraceError(f"{self.stream.path}: corrupt JSON inside traceEvents") from None
        finally:
            self.pool.close()
            self.pool = None

    def _whole(self, data: bytes) -> RawTrace:
        doc, truncated = _loads_repairing(data, self.stream.path)
        if truncated is False and self.stream.cut_short:
            truncated = True
        if isinstance(doc, list):
            items, top = doc, {}
        elif isinstance(doc, dict) and isinstance(doc.get("traceEvents"), list):
            items, top = doc.pop("traceEvents"), doc
        else:
            raise TraceError(f"{self.stream.path} is JSON but not a Chrome trace (no traceEvents array)")
        if items:
            events, skipped = events_from_items(items)
            self.decoder.skipped += skipped
            self.chunks.append(self.decoder.columns(events))
        return self._finish(top, truncated)

    def _finish(self, top: dict, truncated: bool) -> RawTrace:
        columns = {
            name: (
                np.concatenate([c[name] for c in self.chunks])
                if self.chunks
                else np.empty(0, dtype=dtype)
            )
            for name, dtype in EVENT_COLUMNS.items()
        }
        self.chunks.clear()
        return RawTrace(columns, self.decoder, top, truncated, self.decoder.skipped)


def _parse_top(header: bytes, tail: bytes, truncated: bool) -> dict:
    """The top-level keys besides traceEvents (deviceProperties, baseTimeNanoseconds...)."""
    if not header.strip(_WS) or header.strip(_WS) == b"[":
        return {}
    for closing in ([b"[]" + tail] if not truncated else []) + [b"[]}"]:
        try:
            top = orjson.loads(header + closing)
        except orjson.JSONDecodeError:
            continue
        if isinstance(top, dict):
            top.pop("traceEvents", None)
            return top
    return {}


def _loads_repairing(data: bytes, path) -> tuple[object, bool]:
    """orjson.loads, or, for a file cut off mid-write, the longest prefix that closes."""
    if not data.strip(_WS):
        raise TraceError(f"{path} holds only whitespace: not a trace")
    try:
        return orjson.loads(data), False
    except orjson.JSONDecodeError:
        pass
    stripped = data.lstrip(_WS)
    if stripped[:1] not in (b"{", b"["):
        raise TraceError(f"{path} is not JSON (it starts with {stripped[:12]!r})")
    closer = b"]" if stripped[:1] == b"[" else b"]}"
    cut = len(data)
    for _ in range(200):
        cut = data.rfind(b"}", 0, cut)
        if cut < 0:
            break
        try:
            return orjson.loads(data[: cut + 1] + closer), True
        except orjson.JSONDecodeError:
            continue
    raise TraceError(f"{path} is not valid JSON and no complete event could be recovered from it")


def _meta(stream: BlockStream, raw: RawTrace) -> TraceMeta:
    top = raw.top
    devices = tuple(
        Device(
            index=int(d.get("id", i)),
            name=str(d.get("name", "unknown device")),
            memory_bytes=int(d.get("totalGlobalMem", 0) or 0),
            sm_count=int(d.get("numSms", 0) or 0),
            compute_capability=f"{d.get('computeMajor', '?')}.{d.get('computeMinor', '?')}",
        )
        for i, d in enumerate(top.get("deviceProperties") or [])
        if isinstance(d, dict)
    )
    warnings = []
    n = len(raw.columns["ts"])
    if raw.truncated:
        warnings.append(f"trace is cut off (a profiler stopped mid-write?): loaded the {n:,} complete events before the cut")
    if raw.skipped:
        warnings.append(f"skipped {raw.skipped:,} events with fields of unexpected types")
    kerneltui = top.get("kerneltui") if isinstance(top.get("kerneltui"), dict) else {}
    versions = {k: str(top[k]) for k in ("cuda_driver_version", "cuda_runtime_version", "cupti_version") if k in top}
    return TraceMeta(
        path=str(stream.path),
        file_bytes=stream.file_bytes,
        compressed=stream.compressed,
        base_time_ns=int(top.get("baseTimeNanoseconds", 0) or 0),
        devices=devices,
        producer="kineto" if "schemaVersion" in top or "deviceProperties" in top else "chrome-trace",
        trace_name=str(top.get("traceName", "")),
        schema_version=top.get("schemaVersion"),
        record_shapes=bool(top.get("record_shapes")),
        with_stack=bool(top.get("with_stack")),
        profile_memory=bool(top.get("profile_memory")),
        versions=versions,
        capture=kerneltui.get("capture"),
        truncated=raw.truncated,
        skipped_events=raw.skipped,
        flow_events=raw.flow_events,
        metadata_events=len(raw.metadata),
        warnings=tuple(warnings),
    )
