"""Whether a trace's load fits in the memory available: refused up front, in one line, rather than swapping.

A cold load (the columns decoded from the JSON) peaks at about LOAD_BASE + LOAD_PER_BYTE x the
JSON's size: measured 0.32 GB at 100 MB, 0.69 GB at 500 MB and 1.27 GB at 1 GB (README, "Speed").
A gzipped file's JSON is guessed from its size (pool.json_bytes: guessed low, so a refusal never
rests on a high guess). A load from the column cache maps its entry and is not checked. Where the
memory available cannot be read (not Linux, no /proc), nothing is refused.
``KERNELTUI_MEMORY_CHECK=0`` skips the check (a machine whose swap you trust).
"""

from __future__ import annotations

import os

from kerneltui.errors import TraceError

LOAD_BASE = 200_000_000  # bytes: the interpreter, numpy, pandas and the decoder's buffers
LOAD_PER_BYTE = 1.1  # peak bytes per byte of JSON, above LOAD_BASE
_OFF = {"0", "false", "no", "off"}


def available_memory() -> int | None:
    """Bytes the kernel says can be had without swapping (MemAvailable), None where unknown."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def load_needs(json_bytes: int) -> int:
    """About the peak memory of a cold load of ``json_bytes`` of JSON."""
    return int(LOAD_BASE + LOAD_PER_BYTE * json_bytes)


def check_fits(path: str | os.PathLike) -> None:
    """Raise TraceError, in one line that says what the load needs, when it would not fit in memory."""
    if os.environ.get("KERNELTUI_MEMORY_CHECK", "1").strip().lower() in _OFF:
        return
    from kerneltui.trace.blocks import size_and_compression
    from kerneltui.trace.pool import json_bytes

    try:
        size, compressed = size_and_compression(path)
    except OSError:
        return  # missing or unreadable: the load words the error
    available = available_memory()
    if not size or available is None:
        return  # a pipe (no size), or a system that does not say
    text = json_bytes(size, compressed)
    needs = load_needs(text)
    if needs > available:
        what = f"{_gb(size)} gzipped, about {_gb(text)} of JSON" if compressed else f"{_gb(size)} of JSON"
        raise TraceError(f"{path}: loading it needs about {_gb(needs)} of memory ({what}) and {_gb(available)}"
                         " is available: free some memory or open it on a larger machine"
                         " (KERNELTUI_MEMORY_CHECK=0 loads it anyway, swapping)")


def _gb(n: float) -> str:
    return f"{n / 1e9:.1f} GB"
