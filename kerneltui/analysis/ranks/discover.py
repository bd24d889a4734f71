"""The rank traces of one job: a directory (tensorboard_trace_handler writes one file per rank) or files."""

from __future__ import annotations

import gzip
import json
import os
import zlib
from pathlib import Path

from kerneltui.errors import UserError
from kerneltui.trace.blocks import GZIP_MAGIC

TRACE_SUFFIXES = (".json", ".json.gz")


def is_job(paths: list[str]) -> bool:
    """More than one file, or a directory: a job rather than one trace."""
    return len(paths) > 1 or (len(paths) == 1 and Path(paths[0]).is_dir())


def rank_files(paths: list[str]) -> list[str]:
    """The trace files named, a directory standing for the traces directly in it (sorted)."""
    found: list[str] = []
    for p in paths:
        path = Path(p)
        if path.is_dir():
            inside = sorted(str(f) for f in path.iterdir() if f.is_file() and _is_trace_name(f.name))
            if not inside:
                raise UserError(f"{p}: no trace files (*.json, *.json.gz) in this directory")
            found.extend(inside)
        elif not path.exists():
            raise UserError(f"{p}: no such file or directory")
        else:
            found.append(str(path))
    seen: set[str] = set()
    unique = []
    for f in found:
        key = os.path.realpath(f)
        if key not in seen:
            seen.add(key)
            unique.append(f)
    return unique


def _is_trace_name(name: str) -> bool:
    # a sibling .truth.json (this project's test data), a summary or a capture's .provenance.json is not a rank
    return name.endswith(TRACE_SUFFIXES) and not name.endswith((".truth.json", ".summary.json", ".provenance.json"))


def peek_rank(path: str, head_bytes: int = 1 << 20) -> int | None:
    """The rank in a trace's distributedInfo, read from the file's head without loading it
    (Kineto writes the top-level keys before traceEvents); None when the head does not say."""
    try:
        with open(path, "rb") as f:
            gz = f.read(2) == GZIP_MAGIC
            f.seek(0)
            head = gzip.GzipFile(fileobj=f).read(head_bytes) if gz else f.read(head_bytes)
    except (OSError, EOFError, zlib.error):
        return None
    at = head.find(b'"distributedInfo"')
    events = head.find(b'"traceEvents"')
    if at < 0 or (0 <= events < at):  # after the events: not in the head's top-level keys
        return None
    text = head[at + len(b'"distributedInfo"'):].decode("utf-8", "replace").lstrip()
    try:
        info, _ = json.JSONDecoder().raw_decode(text.removeprefix(":").lstrip())
    except ValueError:
        return None
    rank = info.get("rank") if isinstance(info, dict) else None
    return rank if isinstance(rank, int) and not isinstance(rank, bool) and rank >= 0 else None
