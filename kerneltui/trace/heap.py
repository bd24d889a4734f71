"""Handing freed memory back to the system during a cold load (glibc; a no-op elsewhere).

A cold load decodes ~16 MB chunks (on scan-ahead threads, each with its own malloc arena) into
many small column buffers, then joins each column into one array. glibc keeps the chunks'
freed buffers in its arenas instead of returning them, while each joined column is a fresh
mapping: measured on a 1 GB trace, the load's peak resident memory was 1.18 GB, of which about
0.4 GB was freed memory glibc held. ``malloc_trim(0)`` returns the free pages of every arena
(tens of ms); called every few joined columns it cut that peak to 0.79 GB, and what the load
leaves behind from about 1.1 GB to 0.68 GB, which the browser's later tables then do not add to.
The browser's worker calls it once more between its two stages (what linking freed): on that
trace the second stage's peak fell from 1.24 to 1.13 GB.

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
