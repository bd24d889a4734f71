"""A trace file as a stream of byte blocks: plain or gzip (by magic bytes, not name).

Gzip is inflated in a background thread: zlib releases the GIL while inflating,
so decompression overlaps with decoding on a second core.

A pipe, FIFO or device (``kerneltui summary <(zcat t.json.gz)``) is opened once and read
as it comes: its size is what was read, and no progress is reported.
"""

from __future__ import annotations

import mmap
import os
import queue
import stat
import threading
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path

from kerneltui.errors import TraceError

try:  # ISA-L inflates 2-3x faster than zlib (a dependency; zlib where its wheel is missing).
    from isal import isal_zlib as _zlib
except ImportError:  # pragma: no cover - depends on the environment
    _zlib = zlib

_INFLATE_ERRORS = (zlib.error, getattr(_zlib, "error", zlib.error), OSError)
GZIP_MAGIC = b"\x1f\x8b"
GZIP_RATIO_GUESS = 12  # Kineto JSON inflates about 15x; guess low
GZIP_RATIO_MOST = 64  # a gzip file's own size past this many times its compressed size is not believed
BLOCK = 16 << 20
# fill's step: a block is read and looked at (for the array's end) 4 MB at a time, still in the CPU's
# last-level cache. Each step lets go of the GIL twice (the read, the search), and getting it back waits on
# whatever thread holds it (imports, Textual); at 256 KB a step, 7,680 waits a GB: a cold 1 GB read_trace
# took 1.00 s, 0.87 s now
PIECE = 4 << 20
Buffer = mmap.mmap | bytearray  # a block's room, as ahead.block_memory makes it
# gzip is inflated 16 KB of input at a time, each output (~250 KB, at most 1 MB) copied into the loader's
# buffer (fill) and let go: malloc hands the same memory back for the next, where a 16 MB output a call
# was fresh pages every time (1 GB inflated: 253K page faults and 1.9 s, against 13.5K and 0.8 s)
PIECE_IN = 16 << 10
PIECE_OUT = 1 << 20
_DONE = object()


def size_and_compression(path: str | os.PathLike) -> tuple[int, bool]:
    """A file's bytes on disk, and whether they are gzip (by content, as BlockStream reads it). Raises OSError.
    A pipe or device: (0, False), unopened (its first bytes are the load's to read)."""
    if not stat.S_ISREG(os.stat(path).st_mode):
        return 0, False
    with open(path, "rb") as f:
        return os.fstat(f.fileno()).st_size, f.read(2) == GZIP_MAGIC


class BlockStream:
    """Iterate blocks; afterwards ``cut_short`` says whether a gzip stream ended early."""

    def __init__(self, path: str | os.PathLike, progress: Callable[[float], None] | None = None):
        self.path = Path(path)
        self.progress = progress or (lambda fraction: None)
        self.pipe = None  # a pipe, FIFO or device: open from here on, its first bytes in self.head
        try:
            st = self.path.stat()
            if stat.S_ISDIR(st.st_mode):
                raise TraceError(f"{self.path} is a directory, not a trace file")
            if stat.S_ISREG(st.st_mode):
                self.file_bytes = st.st_size
                with open(self.path, "rb") as f:
                    self.compressed = f.read(2) == GZIP_MAGIC
            else:
                self.pipe = open(self.path, "rb")  # noqa: SIM115 - read in __iter__, once
                self.head = self.pipe.read(2)
                self.file_bytes = len(self.head)  # so far
                self.compressed = self.head == GZIP_MAGIC
        except FileNotFoundError:
            raise TraceError(f"{self.path}: no such file") from None
        except PermissionError:
            raise TraceError(f"{self.path}: permission denied") from None
        if self.file_bytes == 0:
            raise TraceError(f"{self.path} is empty (0 bytes): not a trace")
        self.cut_short = False
        self._file = None  # a plain file's, while its blocks are being read
        self.done = 0  # bytes of the file read so far
        self._inflated_parts: queue.Queue | None = None  # gzip: lists of inflated pieces, from the inflate thread
        self._held: list = []  # pieces taken from that queue and not yet handed on
        self._ended = False  # the inflate thread's last item has been taken

    def json_bytes(self) -> int:
        """About how many bytes of JSON the file holds (0: a pipe's, unknown): a plain file's size, a gzip
        file's own count in its last four bytes (the last member's size, modulo 4 GiB), where that is
        1-64x the compressed size (a file cut off ends in compressed bytes, read as any number), else a
        guess of 12x it. An estimate, not a limit."""
        if self.pipe is not None:
            return 0
        if not self.compressed:
            return self.file_bytes
        try:
            with open(self.path, "rb") as f:
                f.seek(-4, os.SEEK_END)
                size = int.from_bytes(f.read(4), "little")
        except OSError:
            return 0
        return size if self.file_bytes <= size <= GZIP_RATIO_MOST * self.file_bytes else self.file_bytes * GZIP_RATIO_GUESS

    def __iter__(self) -> Iterator[bytes]:
        return self._inflated() if self.compressed else self._plain()

    def _reads(self, size: int) -> Iterator[bytes]:
        """The file's bytes, ``size`` at a time (progress as they are read, where the size is known)."""
        if self.pipe is not None:
            yield from self._pipe_reads(size)
            return
        self.done = 0
        with open(self.path, "rb") as f:
            self._file = f  # where fill reads from, between blocks
            try:
                while block := f.read(size):
                    self.done += len(block)
                    self.progress(self.done / self.file_bytes)
                    yield block
            finally:
                self._file = None

    def fill(self, blocks: Iterator[bytes], take: Callable[[int], Buffer], carry: bytes | memoryview,
             block: bytes | memoryview | None = None,
             landed: Callable[[memoryview, int], bool] = lambda text, start: False) -> tuple[Buffer, int]:
        """``carry`` and then the next block (``block``, or the next of ``blocks``), in a buffer from
        ``take``: (the buffer, how many bytes of it are filled); nothing past ``carry`` at the end.

        A plain file's block is read straight into the buffer (no bytes object of 16 MB a block).
        ``landed(filled, start)`` sees the text filled so far as each PIECE from ``start`` on lands,
        while it is still in the CPU's cache; once it returns True, no more of the file is read."""
        at = len(carry)
        if block is None and self._file is not None and not self.compressed:
            buffer = take(at + BLOCK)
            buffer[:at] = carry
            view, end = memoryview(buffer), at + BLOCK
            while at < end:
                read = self._file.readinto(view[at : min(at + PIECE, end)])
                if not read:
                    break
                self.done += read
                at += read
                if landed(view[:at], at - read):
                    break
            self.progress(self.done / self.file_bytes)
            return buffer, at
        if block is None and self._inflated_parts is not None:
            return self._fill_inflated(take, carry, landed)
        if block is None:
            block = next(blocks, b"")
        size = at + len(block)
        buffer = take(size)
        buffer[:at] = carry
        view, found = memoryview(buffer), False
        for i in range(0, len(block), PIECE):
            piece = block[i : i + PIECE]
            view[at : at + len(piece)] = piece
            at += len(piece)
            found = found or landed(view[:at], at - len(piece))
        return buffer, size

    def _pipe_reads(self, size: int) -> Iterator[bytes]:
        with self.pipe as f:
            block = self.head + f.read(size - len(self.head))  # the bytes read to tell gzip from JSON first
            self.file_bytes = 0
            while block:
                self.file_bytes += len(block)
                yield block
                block = f.read(size)

    def _plain(self) -> Iterator[bytes]:
        yield from self._reads(BLOCK)

    def _inflated(self) -> Iterator[bytes]:
        self._inflated_parts = parts_queue = queue.Queue(maxsize=2)
        stop = threading.Event()
        worker = threading.Thread(target=self._inflate_into, args=(parts_queue, stop), daemon=True)
        worker.start()
        try:
            while (parts := self._next_parts()) is not None:
                yield parts[0] if len(parts) == 1 else b"".join(parts)
        finally:
            stop.set()
            while worker.is_alive():  # unblock a producer waiting on a full queue
                try:
                    parts_queue.get_nowait()
                except queue.Empty:
                    worker.join(0.01)

    def _next_parts(self) -> list | None:
        """The next inflated pieces (what fill left of a list first), None after the last."""
        if self._held:
            parts, self._held = self._held, []
            return parts
        if self._ended:
            return None
        item = self._inflated_parts.get()
        if item is _DONE:
            self._ended = True
            return None
        if isinstance(item, BaseException):
            self._ended = True
            raise item
        return item

    def _fill_inflated(self, take: Callable[[int], Buffer], carry, landed) -> tuple[Buffer, int]:
        """``fill`` for gzip: the inflate thread's pieces copied straight into the buffer, up to BLOCK
        bytes after ``carry`` (a piece that does not fit is split, its rest kept for the next fill)."""
        at = len(carry)
        buffer = take(at + BLOCK)
        buffer[:at] = carry
        view, end = memoryview(buffer), at + BLOCK
        while at < end:
            if not self._held and (parts := self._next_parts()) is not None:
                self._held = parts
            if not self._held:
                break
            piece = self._held.pop(0)
            room = min(end - at, PIECE)
            if len(piece) > room:
                self._held.insert(0, memoryview(piece)[room:])
                piece = memoryview(piece)[:room]
            view[at : at + len(piece)] = piece
            at += len(piece)
            if landed(view[:at], at - len(piece)):
                break
        return buffer, at

    def _inflate_into(self, parts_queue: queue.Queue, stop: threading.Event) -> None:
        try:
            for parts in self._inflate():
                if stop.is_set():
                    return
                parts_queue.put(parts)
        except BaseException as exc:  # handed to the reading thread
            parts_queue.put(exc)
        parts_queue.put(_DONE)

    def _inflate(self) -> Iterator[list]:
        """Lists of inflated pieces (each at most PIECE_OUT), BLOCK bytes a list but the last: the
        blocks a plain file's reads would be, so that every reader cuts the same chunks."""
        inflater = _zlib.decompressobj(wbits=31)
        parts, size = [], 0
        for compressed in self._reads(BLOCK // 16):  # ~16 MB once inflated
            whole = memoryview(compressed)
            for start in range(0, len(whole), PIECE_IN):
                pending = whole[start : start + PIECE_IN]
                while pending:
                    try:
                        out = inflater.decompress(pending, PIECE_OUT)  # a megabyte of zeros inflates to a gigabyte
                        pending = inflater.unconsumed_tail
                        # concatenated gzip members are one stream to gzip(1)
                        if inflater.eof and inflater.unused_data:
                            pending = inflater.unused_data
                            inflater = _zlib.decompressobj(wbits=31)
                    except _INFLATE_ERRORS as exc:
                        raise TraceError(f"{self.path}: corrupt gzip data ({exc})") from None
                    while size + len(out) >= BLOCK:
                        cut = BLOCK - size
                        parts.append(memoryview(out)[:cut])
                        yield parts
                        parts, size, out = [], 0, memoryview(out)[cut:]
                    if out:
                        parts.append(out)
                        size += len(out)
        tail = inflater.flush()
        if tail:
            parts.append(tail)
        if parts:
            yield parts
        self.cut_short = not inflater.eof
