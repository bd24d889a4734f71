"""The C scanner (``_scan.c``): whether it is built and in use, a chunk's scan, the array's end.

It reads a chunk in one pass of C when it can, and hands back None for any text it does
not read exactly as msgspec would; ChunkDecoder (decode.py) then decodes the chunk in
Python, to the same columns. Without a C compiler at install time there is no scanner and
the Python path is all there is (``KERNELTUI_DECODER=python`` chooses it, for comparison).
"""

from __future__ import annotations

import os

from kerneltui.trace.schema import (
    ASIDE_PHASES,
    EVENT_COLUMNS,
    FLOW_PHASES,
    KEPT_PHASES,
    MEMORY_COLUMNS,
    kind_of,
)

try:
    from kerneltui.trace import _scan
except ImportError:  # built without a C compiler
    _scan = None
SCAN_VERSION = 3  # scan() hands back its rows and reuses the columns it is given
if _scan is not None and (dict(_scan.COLUMNS) != EVENT_COLUMNS
                          or dict(getattr(_scan, "MEMORY_COLUMNS", ())) != MEMORY_COLUMNS
                          or getattr(_scan, "VERSION", 0) != SCAN_VERSION):
    _scan = None  # a stale build whose columns or results are not what this code reads: never use it

COLUMNS: tuple[tuple[str, str], ...] = _scan.COLUMNS if _scan is not None else ()  # (name, dtype), scan()'s order
# the side table of Kind.MEMORY rows, as scan() lays out each row's int64s
MEMORY_LAYOUT: tuple[tuple[str, str], ...] = _scan.MEMORY_COLUMNS if _scan is not None else ()


def scanner_in_use() -> bool:
    """Whether chunks go to the C scanner first: built, and not turned off by KERNELTUI_DECODER=python."""
    return _scan is not None and os.environ.get("KERNELTUI_DECODER", "").strip().lower() != "python"


def scan_chunk(array_json, bare: bool = False, reuse: list[bytearray] | None = None) -> tuple | None:
    """The C scanner's reading of a chunk, for ``ChunkDecoder.adopt``; None: the Python path's to
    decode. Thread-safe and run without the GIL, so threads can scan chunks at once. ``bare``: the
    chunk is the array's elements without its brackets (read where it lies, not copied into them).
    ``reuse``: an earlier scan's columns (the first item of its result), written over where nothing
    views them any more; the result's last item is how many rows of its columns this chunk's are."""
    return _scan.scan(array_json, _classify, bare, reuse)


def array_end(text, start: int, max_indent: int) -> tuple[int, int] | None:
    """The loader's ``\\n[ \\t]{0,max_indent}\\]`` search, in C: (its start, its end) or None."""
    return _scan.array_end(text, start, max_indent)


def _classify(ph: str, cat: str) -> int:
    """For the C scanner, once per new (ph, cat): kind | kept << 8 | flow << 9 | aside << 10."""
    kept = ph in KEPT_PHASES
    kind = kind_of(ph == "X", cat) if kept else 0
    return kind | kept << 8 | (ph in FLOW_PHASES) << 9 | (ph in ASIDE_PHASES) << 10
