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
"""

from __future__ import annotations

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
