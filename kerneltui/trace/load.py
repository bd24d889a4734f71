"""File -> columnar events, fast and within bounded memory.

Kineto (and most pretty-printed Chrome traces) start every event of the
traceEvents array on a line of its own at one indentation. JSON strings cannot
hold a raw newline, so ``"\\n" + indent + "{"`` marks event starts safely: the
array is cut there into ~16 MB chunks, each decoded as its own JSON array (the C
scanner reads a chunk's elements where they lie, in a reused buffer, without brackets).
Layouts without that shape (one-line files) are decoded whole (whole_file.py). A file cut off
mid-write keeps every complete event before the cut.

The events are the top-level object's traceEvents, found by walking its structure (top_level.py),
never by searching the text: a "traceEvents" nested in another value is not the trace's. A
repeated top-level key reads as JSON readers read it, the last one, with a warning.
"""

from __future__ import annotations

import itertools
import os
import re
from collections.abc import Callable, Iterable

import msgspec
import numpy as np

from kerneltui.errors import NotATrace, TraceError
from kerneltui.trace import ahead, heap, repair, scanner
from kerneltui.trace.ahead import ScanAhead
from kerneltui.trace.begin_end import pair_begin_end
from kerneltui.trace.blocks import BlockStream
from kerneltui.trace.decode import ChunkDecoder
from kerneltui.trace.events import _ONE_EVENT, events_from_items, events_from_pieces
from kerneltui.trace.fits import check_fits
from kerneltui.trace.meta import trace_meta
from kerneltui.trace.pool import ChunkPool
from kerneltui.trace.repair import Losses
from kerneltui.trace.schema import KernelColumns, MemoryColumns, TraceMeta
from kerneltui.trace.sink import ColumnSink
from kerneltui.trace.top_level import (  # noqa: F401 - top_level_members: public here as before
    BLANK,
    EVENTS_KEY,
    TopLevel,
    keys_after_events,
    parse_top,
    repeated_in_whole,
    repeated_keys,
    top_level_members,
)
from kerneltui.trace.whole_file import loads_repairing
from kerneltui.trace.worker import FileChanged

_WS = b" \t\r\n"
_HEADER_LIMIT = 64 << 20  # look this far for "traceEvents" before decoding the file whole
WHOLE_LIMIT = 256 << 20  # a file decoded whole takes ~8x its size in memory: past this, say so instead
EVENT_LIMIT = 64 << 20  # one event (or the space between two) this large is a bomb, not a profiler's record


class RawTrace:
    """What the loader produces: columns, interned strings, metadata events, top-level keys."""

    def __init__(self, columns, decoder: ChunkDecoder, top: dict, truncated: bool, end_damaged: bool = False,
                 memory: MemoryColumns | None = None, kernel_fields: KernelColumns | None = None):
        self.columns: dict[str, np.ndarray] = columns  # schema.ROW_COLUMNS
        self.memory: MemoryColumns = memory if memory is not None else MemoryColumns()  # [memory] events' other args
        # the kernels' launch shape, registers, shared memory and occupancy, for the rows that have them
        self.kernel_fields: KernelColumns = kernel_fields if kernel_fields is not None else KernelColumns()
        self.names: list[str] = decoder.names.values()
        self.lanes: list[tuple] = decoder.lanes.values()
        self.metadata = decoder.metadata
        self.flow_events = decoder.flow_events
        self.shapes_blob = decoder.shapes_blob()
        self.top = top
        self.truncated = truncated
        self.end_damaged = end_damaged  # the events are whole, what follows them is not
        self.losses: Losses = decoder.losses


def read_trace(path: str | os.PathLike, progress: Callable[[float], None] | None = None) -> tuple[RawTrace, TraceMeta]:
    check_fits(path)  # a load that would swap is refused before it starts
    stream = BlockStream(path, progress)
    reader = _EventReader(stream)
    raw = reader.read()
    n = len(raw.columns["ts"])
    if not n and raw.truncated:
        raise TraceError(f"{stream.path} is cut off before its first complete event: nothing to load")
    if not n and raw.losses.skipped:
        causes = raw.losses.events
        if set(causes) == {repair.NOT_OBJECT}:
            raise NotATrace(f"{stream.path} is JSON but not a Chrome trace (its events are not JSON objects)", json=True)
        raise TraceError(f"{stream.path}: no event could be read ({repair.by_cause(causes)})")
    meta = trace_meta(stream, raw, reader.repeated)
    return raw, meta


class _EventReader:
    def __init__(self, stream: BlockStream):
        self.stream = stream
        self.decoder = ChunkDecoder()
        self.chunks = ColumnSink(stream.json_bytes())  # the decoded chunks, joined as they come
        self.pool = ChunkPool.for_stream(stream)
        self.ahead: ScanAhead | None = None  # chunks scanned on threads (no worker processes)
        self.separator: bytes | None = None
        self.identity: tuple = ()  # the file as opened: workers check they read the same one
        self.top = TopLevel()  # the top-level object, walked as the head grows
        self.events_at: int | None = None  # where the top-level events array starts, once found
        self.header_keys: list[str] = []  # the top-level keys before it
        self.repeated: tuple[str, ...] = ()  # top-level keys kerneltui reads that the file repeats

    def read(self) -> RawTrace:
        blocks = iter(self.stream)
        head = b""
        for block in blocks:
            head += block
            located = self._locate_array(head)
            if located is not None or len(head) > _HEADER_LIMIT:
                break
        if len(head) > _HEADER_LIMIT and not head[:_HEADER_LIMIT].strip(_WS):
            raise NotATrace(f"{self.stream.path} starts with over {_HEADER_LIMIT >> 20} MB of blank space: not a trace")
        else:
            located = self._locate_array(head)
        if located is None or located[1] is None:
            self._drain()
            # the keys before the array (an earlier traceEvents that is no array among them), the array's
            self.repeated = repeated_keys([*self.header_keys, *([EVENTS_KEY] if located and located[0] >= 0 else [])])
            # No line-per-event layout to cut on: decode the file whole (about 8x its size in memory).
            return self._whole(self._bounded(head, blocks, WHOLE_LIMIT, "not one event per line"))
        start, self.separator = located
        if self.pool is None and scanner.scanner_in_use() and ahead.wanted():
            self.ahead = ScanAhead(self.decoder, self.separator, self.chunks)
        header = head[:start]
        try:
            # (a view: a copy of the first block costs ~20 ms of page faults)
            truncated, tail = self._events(memoryview(head)[start + 1 :], blocks, self._file_offset(start + 1))
        except FileChanged:
            raise TraceError(f"{self.stream.path} changed while it was being read: load it again") from None
        tail_keys = keys_after_events(tail)
        self.repeated = repeated_keys([*self.header_keys, EVENTS_KEY, *tail_keys])
        if EVENTS_KEY in tail_keys:
            return self._whole_but_first_array(header, tail)
        truncated = truncated or self.stream.cut_short
        top, whole = parse_top(header, tail)
        return self._finish(top, truncated, end_damaged=not whole and not truncated)

    def _locate_array(self, head: bytes) -> tuple[int, bytes | None] | None:
        """Index of the events array's "[" and the separator that starts each event."""
        at = BLANK.match(head).end()  # (a match, not lstrip: no copy of the block)
        if at == len(head):
            return None
        if head[at] == ord("["):
            start = at
        elif head[at] == ord("{"):
            start = self._top_level_array(head)
            if start is None:
                return None
            if start < 0:
                return start, None  # no top-level traceEvents array: decoded whole, which says so
        else:
            raise NotATrace(f"{self.stream.path} is not JSON (it starts with {head[at : at + 12]!r})")
        first = BLANK.match(head, start + 1).end()
        if first >= len(head):
            return None  # need more bytes to see the first event
        newline = head.rfind(b"\n", start, first)
        indent = head[newline + 1 : first]
        if newline < 0 or head[first : first + 1] != b"{" or indent.strip(b" \t"):
            return start, None
        return start, b"\n" + indent + b"{"

    def _top_level_array(self, head: bytes) -> int | None:
        """Index of the "[" of the top-level traceEvents array, -1 if the object has none, None if
        ``head`` ends before that is known. Keeps the keys before it (to tell repeated ones)."""
        if self.events_at is None:
            for key, value in self.top.members(head):
                if key == EVENTS_KEY and head[value] == ord("["):
                    self.events_at = value
                    break
                self.header_keys.append(key)  # a traceEvents that is no array included: a later one may be
            else:
                return -1 if self.top.closed else None
        return self.events_at

    def _whole_but_first_array(self, header: bytes, tail: bytes) -> RawTrace:
        """The top level repeats traceEvents after the array just read, and JSON readers take the
        last: the file decoded whole as they read it, that array as ``[]`` (a rare, hand-made or
        hostile file; a pipe cannot be read again, and the array's text is gone)."""
        if len(header) + len(tail) > WHOLE_LIMIT:
            raise TraceError(f"{self.stream.path} is over {WHOLE_LIMIT >> 20} MB of JSON with its traceEvents key "
                             "repeated: kerneltui reads such files up to that size")
        self.decoder = ChunkDecoder()
        self.chunks = ColumnSink()
        return self._whole(header + b"[]" + tail)

    def _file_offset(self, at: int) -> int | None:
        """``at`` (an index into the bytes read so far) as an offset into the file, when worker
        processes can read the file's chunks themselves: a plain file, and workers in use."""
        if self.pool is None or self.stream.compressed:
            return None
        try:
            st = os.stat(self.stream.path)
        except OSError:
            return None
        self.identity = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
        return at

    def _events(self, rest: bytes, blocks: Iterable[bytes], rest_at: int | None = None) -> tuple[bool, bytes]:
        """Decode chunk by chunk; returns (cut off?, bytes after the array).

        ``rest_at``: the file offset of ``rest``, when the workers read their chunks from the
        file (sending a worker where its chunk lies instead of the chunk saves a copy of every
        byte through a pipe, done by this process while the workers wait)."""
        if self.ahead is not None:
            return self._events_in_place(rest, blocks)
        separator = self.separator
        pending_at = rest_at  # file offset of buffer[1:]
        # The array's "]" starts a line indented no deeper than the events: inside an
        # event, lines are deeper (pretty-printed) or there are none (one event a line).
        array_end = _array_end_finder(len(separator) - 2)
        pending = b""
        for block in itertools.chain((rest,), blocks):
            # One copy per block: the chunk is decoded in place, its last comma turned into "]".
            buffer = bytearray(b"[")
            buffer += pending
            buffer += block
            end = array_end(buffer, max(1, len(pending) - 256))
            if end is not None:
                self._decode(bytes(buffer[1 : end[0]]))
                self._drain()
                return False, bytes(buffer[end[1] :]) + b"".join(blocks)
            cut = buffer.rfind(separator)
            if cut <= 1:
                self._check_event_size(len(buffer))
                pending = bytes(buffer[1:])
                continue
            comma = _before_blank(buffer, cut)  # >= 0: the "[" at 0 is not blank
            if buffer[comma] == ord(",") and pending_at is not None and self.pool is not None:
                # the chunk "[" + buffer[1:comma] + "]", read from the file by the worker
                self.pool.submit_range(str(self.stream.path), self.identity, pending_at, comma - 1, separator)
            elif buffer[comma] == ord(","):
                buffer[comma] = ord("]")
                self._decode_array(memoryview(buffer)[: comma + 1])
            else:
                self._decode(bytes(buffer[1:cut]))
            pending = bytes(buffer[cut:])
            if pending_at is not None:
                pending_at += cut - 1
        self._drain()
        return self._cut_off(pending)

    def _events_in_place(self, rest: bytes, blocks: Iterable[bytes]) -> tuple[bool, bytes]:
        """``_events`` for the scan-ahead threads: each block lands in a reused buffer after the
        bytes carried over from the last, and the scanner reads the chunk's elements where they lie
        (no "[" + chunk + "]" copy, no fresh pages)."""
        separator = self.separator
        array_end = _array_end_finder(len(separator) - 2)
        buffers = self.ahead.buffers
        pending, first, ends = b"", rest, []

        def landed(text: memoryview, start: int) -> bool:
            # from a little before the new bytes: a "\n  ]" may straddle them
            if not ends and (end := array_end(text, max(0, start - 256))) is not None:
                ends.append(end)
            return bool(ends)

        while True:
            buffer, size = self.stream.fill(blocks, buffers.take, pending, first, landed)
            if size == len(pending) and first is None:
                buffers.give(buffer)
                break
            first = None
            text = memoryview(buffer)[:size]
            if ends:
                end = ends[0]
                self._decode(bytes(text[: end[0]]))
                buffers.give(buffer)
                self._drain()
                return False, bytes(text[end[1] :]) + b"".join(blocks)
            cut = buffer.rfind(separator, 0, size)
            if cut <= 0:
                self._check_event_size(size)
                pending = bytes(text)
                buffers.give(buffer)
                continue
            pending = bytes(text[cut:])
            comma = _before_blank(buffer, cut)
            if comma >= 0 and buffer[comma] == ord(","):
                self.ahead.submit(text[:comma], buffer)
            else:
                self._decode(bytes(text[:cut]))
                buffers.give(buffer)
        self._drain()
        return self._cut_off(pending)

    def _check_event_size(self, size: int) -> None:
        """Text this long with no event boundary in it is one absurd event: refused, not held."""
        if size > EVENT_LIMIT:
            raise TraceError(f"{self.stream.path} holds an event of over {EVENT_LIMIT >> 20} MB: "
                             "not a trace kerneltui can read")

    def _cut_off(self, pending: bytes) -> tuple[bool, bytes]:
        """The file ends inside the array, cut off mid-write: keep every complete event of the text
        left over; the last one is whole only by luck."""
        pieces = repair.split_events(pending, self.separator)
        if pieces:
            last = pieces.pop()
            self.chunks.append(self.decoder.columns(events_from_pieces(pieces, self.decoder.losses)))
            try:
                self.chunks.append(self.decoder.columns(events_from_pieces_strict(last)))
            except ValueError:
                pass
        return True, b""

    def _bounded(self, head: bytes, blocks: Iterable[bytes], limit: int, why: str) -> bytes:
        parts, size = [head], len(head)
        for block in blocks:
            size += len(block)
            if size > limit:
                raise TraceError(f"{self.stream.path} is over {limit >> 20} MB of JSON {why}: "
                                 "kerneltui reads such files up to that size")
            parts.append(block)
        return b"".join(parts)

    def _decode(self, chunk: bytes) -> None:
        body = chunk.rstrip(_WS).rstrip(b",")
        if body.strip(_WS):
            self._decode_array(b"[" + body + b"]")

    def _decode_array(self, array_json) -> None:
        if self.pool is not None:
            self.pool.submit(bytes(array_json), self.separator)
        elif self.ahead is not None:
            self.ahead.submit(array_json)
        else:
            self.chunks.append(self.decoder.decode(array_json, self.separator), len(array_json))

    def _drain(self) -> None:
        """Collect chunks decoded by threads or worker processes, in file order."""
        if self.ahead is not None:
            scanning, self.ahead = self.ahead, None
            scanning.drain()
        if self.pool is None:
            return
        try:
            for part in self.pool.results():
                self.chunks.append(self.decoder.merge(part))
        finally:
            self.pool.close()
            self.pool = None

    def _whole(self, data: bytes) -> RawTrace:
        self.repeated = tuple(dict.fromkeys(self.repeated + repeated_in_whole(data)))
        doc, truncated = loads_repairing(data, self.stream.path, self.decoder.losses)
        if truncated is False and self.stream.cut_short:
            truncated = True
        if isinstance(doc, (list, msgspec.Raw)):
            items, top = doc, {}
        elif isinstance(doc, dict) and isinstance(doc.get("traceEvents"), (list, msgspec.Raw)):
            items, top = doc.pop("traceEvents"), doc
        else:
            raise NotATrace(f"{self.stream.path} is JSON but not a Chrome trace (no traceEvents array)", json=True)
        if isinstance(items, msgspec.Raw):  # deeply nested: decoded typed, straight from the text
            try:
                self.chunks.append(self.decoder.decode(bytes(items)))
            except msgspec.DecodeError:
                raise NotATrace(f"{self.stream.path} is JSON but not a Chrome trace (traceEvents is not an array of events)", json=True) from None
        elif items:
            events = events_from_items(items, self.decoder.losses)
            self.chunks.append(self.decoder.columns(events))
        return self._finish(top, truncated)

    def _finish(self, top: dict, truncated: bool, end_damaged: bool = False) -> RawTrace:
        if self.decoder.begin_end:
            paired = pair_begin_end(self.decoder.begin_end, self.decoder.losses)
            self.decoder.begin_end = []
            self.chunks.append(self.decoder.columns(paired))
        columns, memory, kernel_fields = self.chunks.joined()
        heap.give_back(len(columns["ts"]))  # what the chunks' decoding freed (trace/heap.py)
        return RawTrace(columns, self.decoder, top, truncated, end_damaged, memory, kernel_fields)


def _before_blank(buffer, at: int) -> int:
    """Index of the last byte before ``at`` that is not JSON whitespace, -1 if none: where a chunk cut
    at an event's start ends (its comma, when the events before it are whole)."""
    at -= 1
    while at >= 0 and buffer[at] in _WS:
        at -= 1
    return at


def _array_end_finder(max_indent: int) -> Callable[[bytes | bytearray, int], tuple[int, int] | None]:
    """Finds where the events array ends, at or after an index: the ``\n`` of the first line that
    is ``]`` indented at most ``max_indent`` (spaces or tabs), and the index after that ``]``."""
    if scanner.scanner_in_use():
        return lambda text, start: scanner.array_end(text, start, max_indent)
    pattern = re.compile(rb"\n[ \t]{0,%d}\]" % max_indent)

    def search(text, start):
        found = pattern.search(text, start)
        return None if found is None else (found.start(), found.end())

    return search


def events_from_pieces_strict(piece: bytes):
    """The last event of a cut-off file: only if it is whole JSON (else ValueError)."""
    piece = repair.escape_lone_surrogates(piece) or piece
    try:
        return [_ONE_EVENT.decode(piece)]
    except msgspec.ValidationError:
        return events_from_pieces([piece], Losses())
    except msgspec.DecodeError:
        raise ValueError("cut off") from None
