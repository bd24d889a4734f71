"""What a command made for one trace file, kept in the cache directory under a key, to be given back.

Two commands keep their output this way: ``summary`` its report (report_cache.py) and ``open``
the first screen it drew (kept_screen.py). An entry is named ``<path digest>-<key digest><suffix>``
in the cache directory (trace/cache_dir.py: who may write there, how entries are opened and
swept). The key holds the file's identity (``cache_dir.file_identity``), the code (kerneltui's
version, and the size and time of every file of the package: an edit or an upgrade is a miss),
the ``KERNELTUI_*`` variables, and whatever else the command's output depends on. The body is
a one-line JSON head (the key, and the command's own fields) and bytes; a reader checks both,
so a damaged, foreign or truncated entry is a miss. Imports nothing heavy.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

from kerneltui import __version__
from kerneltui.trace import cache_dir as place

_code: str | None = None


@dataclass(frozen=True)
class Kept:
    directory: Path
    key: str
    entry: Path


def kept_for(path: str, suffix: str, what: dict) -> Kept | None:
    """Where the output for ``path`` keyed by ``what`` (JSON-able) is kept; None when it may not be:
    the cache is off, the trace is no regular file (a pipe is read once: no identity), or the
    directory is unsafe (one line on stderr says why)."""
    if not place.enabled() or not place.regular_file(path):
        return None  # a directory (a job), a pipe, a FIFO, missing: the normal path says what it is
    try:
        identity = place.file_identity(path)
    except OSError:
        return None
    directory = place.cache_dir()
    try:
        place.private_dir(directory)  # False when not there yet: a miss, and the write makes it
    except place.UnsafeDir as exc:
        place._tell(exc)
        return None
    except OSError:
        return None
    env = sorted((k, v) for k, v in os.environ.items() if k.startswith("KERNELTUI_"))
    full = {"file": identity, "env": env, "code": code_digest(), "version": __version__, "what": what}
    key = hashlib.blake2b(json.dumps(full, sort_keys=True, default=str).encode("utf-8", "surrogateescape"),
                          digest_size=16).hexdigest()
    return Kept(directory, key, directory / f"{place.path_digest(identity['path'])}-{key[:24]}{suffix}")


def read(kept: Kept, magic: bytes) -> tuple[dict, bytes] | None:
    """(head, body) of the entry if it is whole, ours and for this key; else None."""
    try:
        fd = place.open_entry(kept.entry)
    except (OSError, place.RefusedEntry):
        return None
    with os.fdopen(fd, "rb") as f:
        data = f.read()
    if not data.startswith(magic):
        return None
    try:
        head_end = data.index(b"\n", len(magic))
        head = json.loads(data[len(magic):head_end])
        body = data[head_end + 1:]
        if head["key"] != kept.key or head["bytes"] != len(body):
            return None
    except (ValueError, KeyError, TypeError):
        return None
    place._touch(kept.entry)  # recently used: evicted last
    return head, body


def write(kept: Kept, magic: bytes, head: dict, body: bytes) -> None:
    """Kept through a temporary file and a rename: a reader sees a whole entry or none. Never raises."""
    import tempfile

    tmp = None
    suffix = kept.entry.suffix
    try:
        place.private_dir(kept.directory, create=True)
        line = json.dumps({**head, "key": kept.key, "bytes": len(body)}).encode()
        fd, tmp = tempfile.mkstemp(prefix=place.TEMP_PREFIX, suffix=suffix, dir=kept.directory)  # 0600
        with os.fdopen(fd, "wb") as f:
            f.write(magic + line + b"\n" + body)
        if not place._free_or_ours(kept.entry):
            return  # a link, a FIFO or another user's file at this name: left alone
        os.replace(tmp, kept.entry)
        tmp = None
        place.evict(kept.directory, place.max_bytes(), keep=kept.entry)
    except place.UnsafeDir as exc:
        place._tell(exc)
    except Exception:  # noqa: BLE001, S110 - a full disk, a read-only directory: nothing kept, no error
        pass
    finally:
        if tmp is not None:
            place._remove(Path(tmp))


def code_digest() -> str:
    """Every file of the package by name, size and time: any edit, rebuild or upgrade changes it."""
    global _code
    if _code is None:
        root = Path(__file__).resolve().parents[1]
        h = hashlib.blake2b(digest_size=16)
        for folder, dirs, files in os.walk(root):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            for name in sorted(files):
                if name.endswith((".py", ".so", ".pyd", ".tcss")):
                    st = os.stat(os.path.join(folder, name))
                    h.update(f"{os.path.relpath(os.path.join(folder, name), root)}\0{st.st_size}\0"
                             f"{st.st_mtime_ns}\0".encode("utf-8", "surrogateescape"))
        _code = h.hexdigest()
    return _code
