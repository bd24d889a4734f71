"""Writing what a table shows to a file: CSV (exact values, for scripts) or Markdown (as drawn).

A file is never overwritten: the name gets -2, -3... until it is new, and the
file is created exclusively, so two exports (or an export racing a user's own
file) cannot clobber each other. Text is written whole or not at all: it is
built in memory first, written to a hidden temporary name, then linked into place.
"""

from __future__ import annotations

import os
import re
import secrets
from pathlib import Path

import pandas as pd

from kerneltui.terminal_text import markdown_text, printable

FORMATS = {"csv": ".csv", "markdown": ".md"}


def export_name(trace_path: str, what: str) -> str:
    """``kerneltui-<trace>-<what>``: a file name from the trace's name and the table shown."""
    stem = Path(trace_path).name
    for suffix in (".gz", ".json"):
        stem = stem.removesuffix(suffix)
    safe = re.sub(r"[^A-Za-z0-9._+-]+", "_", f"{stem}-{what}").strip("._") or "table"
    return f"kerneltui-{safe}"


def as_markdown(headers: list[str], rows: list[list[str]], title: str = "",
                facts: list[tuple[str, str]] = ()) -> str:
    """A Markdown table under its title and what it is of (``facts``: search, scope...); cells are made
    printable, and their pipes and angle brackets escaped (GitHub drops `<Functor>` as a tag)."""
    cell = markdown_text
    lines = [f"{printable(title)}\n"] if title else []
    if facts:
        lines += [f"- {cell(k)}: {cell(v)}" for k, v in facts] + [""]
    lines.append("| " + " | ".join(cell(h) for h in headers) + " |")
    lines.append("|" + "|".join("---" for _ in headers) + "|")
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def as_csv(frame: pd.DataFrame) -> str:
    return frame.to_csv(index=False)


def write_new(directory: str | os.PathLike, name: str, suffix: str, text: str) -> Path:
    """Write text to directory/name+suffix, or name-2+suffix... whichever does not exist yet."""
    directory = Path(directory)
    tmp = _exclusive_temp(directory, name, text.encode("utf-8"))
    try:
        for n in range(1, 10_000):
            path = directory / f"{name}{'' if n == 1 else f'-{n}'}{suffix}"
            try:
                os.link(tmp, path)  # fails if the name exists: nothing is ever overwritten
                return path
            except FileExistsError:
                continue
        raise FileExistsError(f"{directory}: 10,000 exports named {name} already")
    finally:
        tmp.unlink(missing_ok=True)


def _exclusive_temp(directory: Path, name: str, data: bytes) -> Path:
    """A new hidden file holding ``data``: created exclusively, never through a symlink someone planted there."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    for _ in range(100):
        tmp = directory / f".{name}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
        try:
            fd = os.open(tmp, flags, 0o644)
        except FileExistsError:
            continue
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        return tmp
    raise FileExistsError(f"{directory}: no free temporary name for {name}")
