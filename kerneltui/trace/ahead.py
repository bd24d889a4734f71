"""Chunks scanned ahead on threads while the loader reads and cuts the rest of the file.

The C scanner runs without the GIL, so threads scan chunks truly at once, and their columns
need no trip through a pipe (what made worker processes slower than one process once the
scanner existed). The decoder adopts each chunk's columns in file order, so names and lanes
get the codes a one-chunk-at-a-time load gives them, and the sink copies them into the trace's
columns; the scanner then writes a later chunk's columns over them (memory already the process's,
not fresh pages). A chunk the scanner hands back is decoded by the Python path at its turn, in this thread.
"""

from __future__ import annotations

import mmap
from collections import deque
from concurrent.futures import Future

from kerneltui.trace.blocks import Buffer
from kerneltui.trace.decode import ChunkDecoder
from kerneltui.trace.pool import configured_workers
from kerneltui.trace.scanner import scan_chunk
from kerneltui.trace.sink import ColumnSink
from kerneltui.trace.threads import per_core, shared_pool


def wanted() -> bool:
    """Threads scan ahead unless KERNELTUI_WORKERS=0 asks for one thread (as the rank runner does:
    there the ranks, each in its own process, are the parallelism)."""
    return configured_workers() != 0


def scan_threads() -> int:
    """One per core, up to 4: past that the reading and cutting thread is the bottleneck."""
    return per_core()


class ScanAhead:
    def __init__(self, decoder: ChunkDecoder, separator: bytes | None, sink: ColumnSink):
        self.decoder = decoder
        self.separator = separator
        self.sink = sink
        self.executor = shared_pool("kerneltui-scan")
        self.pending: deque[tuple[Future, object, Buffer | None]] = deque()
        self.limit = scan_threads() + 1  # chunks held at once (~16 MB each, and their columns)
        self.buffers = Buffers()
        self.spare: list[list[bytearray]] = []  # adopted chunks' columns, for later scans to write over

    def submit(self, array_json, buffer: Buffer | None = None) -> None:
        """Start scanning a chunk; the oldest chunks go to the sink once more than ``limit`` wait.
        With ``buffer`` (one of ``buffers``), the chunk is its bare elements lying in it, and the
        buffer goes back to ``buffers`` once the chunk is adopted."""
        reuse = self.spare.pop() if self.spare else None
        future = self.executor.submit(scan_chunk, array_json, buffer is not None, reuse)
        self.pending.append((future, array_json, buffer))
        while len(self.pending) > self.limit:
            self._adopt_oldest()

    def drain(self) -> None:
        while self.pending:
            self._adopt_oldest()

    def _adopt_oldest(self) -> None:
        future, array_json, buffer = self.pending.popleft()
        scanned = future.result()
        if buffer is None:
            columns = self.decoder.decode(array_json, self.separator, scanned=scanned if scanned is not None else False)
        else:
            # a bare chunk in a buffer that is about to be reused: what is kept from it must be copies
            # (ChunkDecoder.adopt decodes its aside events from bytes), and the Python path, for what the
            # scanner handed back or adopt refused, reads whole arrays only
            columns = self.decoder.adopt(scanned, array_json) if scanned is not None else None
            if columns is None:
                columns = self.decoder.decode(b"[" + bytes(array_json) + b"]", self.separator, scanned=False)
        self.sink.append(columns, len(array_json))
        del columns  # its views of the scanner's columns: the scanner reuses only what nothing views
        if buffer is not None:
            self.buffers.give(buffer)
        if scanned is not None:
            self.spare.append(scanned[0])


class Buffers:
    """Reused blocks of memory for the chunks the loader cuts: a fresh 16 MB block a chunk costs its
    page faults every time (about 0.5 CPU-s a GB); a reused one has its pages already."""

    def __init__(self):
        self.free: list[Buffer] = []
        self.made = 0

    def take(self, size: int) -> Buffer:
        """A buffer at least ``size`` bytes long (longer is normal: the caller slices it)."""
        for i, buffer in enumerate(self.free):
            if len(buffer) >= size:
                return self.free.pop(i)
        if self.free:
            self.free.pop()  # too short for the blocks now coming: one made to fit replaces it
        self.made += 1
        return block_memory(size + max(size >> 4, 1 << 20))  # room for the next block's usual carry-over

    def give(self, buffer: Buffer) -> None:
        self.free.append(buffer)


def block_memory(size: int) -> Buffer:
    """``size`` bytes for a block, in huge pages where the system grants them on request (Linux's
    transparent huge pages, "madvise" mode): a 17 MB bytearray is zeroed, 4 KB page by page, when made
    (4,400 page faults; the few buffers of a 1 GB load, 17K and ~0.1 CPU-s). A fresh mapping is zero
    already, and touched 2 MB at a time. Where there are no private anonymous mappings, a bytearray."""
    private, anonymous = getattr(mmap, "MAP_PRIVATE", None), getattr(mmap, "MAP_ANONYMOUS", None)
    if private is None or anonymous is None:  # (not POSIX)
        return bytearray(size)
    try:
        block = mmap.mmap(-1, size, flags=private | anonymous)  # private: a shared one is shmem, never huge
    except (OSError, ValueError):
        return bytearray(size)
    advise = getattr(mmap, "MADV_HUGEPAGE", None)
    if advise is not None:
        try:
            block.madvise(advise)
        except OSError:  # a kernel without transparent huge pages: 4 KB pages, still not zeroed twice
            pass
    return block
