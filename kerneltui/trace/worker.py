"""What a decode worker process runs (pool.py): one chunk decoded with tables of its own.

The loader's ChunkDecoder.merge maps the tables back onto its own, in file order.
"""

from __future__ import annotations

import os
from typing import NamedTuple

from kerneltui.trace.decode import ChunkDecoder
from kerneltui.trace.repair import Losses


class Partial(NamedTuple):
    """What a worker process sends back for one chunk."""

    columns: dict  # the event columns, and the [memory] side table under schema.MEMORY_PREFIX (rows within the chunk)
    names: list
    lanes: list
    metadata: list
    flow_events: int
    shapes: bytes
    losses: Losses
    begin_end: list


class FileChanged(Exception):
    """The file a worker was sent to read is not the one the loader opened (or is shorter now)."""


def decode_range(path: str, identity: tuple, offset: int, length: int, separator: bytes) -> Partial:
    """Decode the events array ``[`` + the file's bytes at ``offset`` + ``]`` (runs in a worker
    process, which reads those bytes itself: the loader sends where they are, not the bytes)."""
    with open(path, "rb") as f:
        st = os.fstat(f.fileno())
        body = os.pread(f.fileno(), length, offset)
    if (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns) != identity or len(body) != length:
        raise FileChanged(path)
    return decode_alone(b"".join((b"[", body, b"]")), separator)


def decode_alone(array_json: bytes, separator: bytes | None = None) -> Partial:
    """Decode one chunk with tables of its own (runs in a worker process)."""
    decoder = ChunkDecoder()
    cols = decoder.decode(array_json, separator)
    return Partial(
        cols,
        decoder.names.values(),
        decoder.lanes.values(),
        decoder.metadata,
        decoder.flow_events,
        decoder.shapes_blob(),
        decoder.losses,
        decoder.begin_end,
    )
