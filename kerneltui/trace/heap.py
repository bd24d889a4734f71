"""Handing freed memory back to the system after a cold load (glibc; a no-op elsewhere).

A cold load decodes ~16 MB chunks (on scan-ahead threads, each with its own malloc arena) into
column buffers, copied into the trace's columns as they come (trace/sink.py). glibc keeps freed
buffers in its arenas instead of returning them: once joined every column of a chunk held until the
end, and ``malloc_trim(0)`` (tens of ms), called every few joined columns, cut a 1 GB trace's peak
from 1.18 to 0.79 GB. The chunks' buffers are now reused from one chunk to the next, and the load
trims once at its end (what the load leaves behind, which the browser's later tables then do not
add to). The browser's worker calls it once more between its two stages (what linking freed): on
that trace the second stage's peak fell from 1.24 to 1.13 GB.

pandas keeps its strings in Arrow arrays, whose default allocator (mimalloc) holds freed memory
that malloc_trim cannot reach: the traffic table's strings left 0.16 GB held at 1 GB. Arrow is put
on the system allocator instead (``arrow_on_system_malloc``), so the same trims return it.

Between those points the kerneltui program keeps what it frees for its next allocation
(``keep_freed_memory``, from a large load on): a page handed back to the system is zeroed again
when next touched, and glibc's defaults hand back often (blocks from 128 KB mmapped until a free
raises that bound, the heap's top trimmed whenever twice the largest block freed so far lies free).
"""

from __future__ import annotations

import os

# glibc's mallopt parameters, and the largest mmap threshold it takes (HEAP_MAX_SIZE / 2, 64-bit)
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
MMAP_THRESHOLD_MOST = 32 << 20
NEVER_TRIM = -1  # the threshold as glibc's size_t: the largest, so only give_back's malloc_trim trims
LARGE_FILE = 16 << 20  # bytes (gzip: ~200 MB of JSON): a load this large keeps freed memory (keep_freed_memory)
_wanted = False  # keep_freed_memory was called, and before_loads has not acted on it yet
LARGE = 250_000  # events (~100 MB of JSON): below it, the memory held back is not worth the calls
_trim = None


def give_back(events: int) -> None:
    """After work on ``events`` events freed memory: return the allocator's free pages to the system,
    where the C library can (glibc's malloc_trim), for a large trace only."""
    global _trim
    if events < LARGE:
        return
    if _trim is None:
        try:
            import ctypes

            _trim = ctypes.CDLL(None).malloc_trim
            _trim.argtypes = [ctypes.c_size_t]
        except (OSError, AttributeError):  # not glibc (musl, macOS): nothing to call
            _trim = False
    if _trim:
        _trim(0)


def keep_freed_memory() -> None:
    """The kerneltui program's wish (cli.main), not a program's that imports kerneltui, nor capture's
    workload's: malloc keeps freed memory for what comes next, from the first large load on
    (``before_loads``). A cold 1 GB summary: 105K page faults -> 84K, 2.99 -> 2.87 CPU-s (ten runs each,
    alternating). Nothing is done here: a small trace's run does not import ctypes for it."""
    global _wanted
    _wanted = True


def before_loads(paths) -> None:
    """Where the program asked (``keep_freed_memory``) and one of ``paths`` is a large file, have malloc
    keep freed memory from now on (once). From the main thread before the loads start (trace/cache.py's
    ``start_workers_for``): glibc's mallopt is not safe beside other threads' allocations."""
    global _wanted
    if not _wanted:
        return
    for path in paths:
        try:
            large = os.stat(path).st_size >= LARGE_FILE
        except OSError:
            continue  # the load words the error
        if large:
            _wanted = False
            keep_in_heap()
            return


def keep_in_heap() -> bool:
    """Have glibc's malloc serve blocks up to 32 MB from its heaps and leave their freed memory there,
    trimmed only by ``give_back``. False where the C library has no mallopt (not glibc)."""
    try:
        import ctypes

        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_MOST)) and bool(mallopt(M_TRIM_THRESHOLD, NEVER_TRIM))


def arrow_on_system_malloc() -> None:
    """Allocate pandas' Arrow arrays with the C library's malloc, whose freed pages ``give_back``
    returns (Arrow's default, mimalloc, keeps them). Where pyarrow cannot, nothing changes."""
    try:
        import pyarrow
    except ImportError:  # pragma: no cover - a core dependency
        return
    try:
        pyarrow.set_memory_pool(pyarrow.system_memory_pool())
    except (AttributeError, NotImplementedError, OSError):  # pragma: no cover - depends on the build
        pass
