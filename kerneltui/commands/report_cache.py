"""`summary TRACE` answered from its last run: the exact output of a summary of this very file.

A warm `summary` still loaded the trace's cached columns and ran every analysis (1.2-1.5 s at
1 GB, 0.7 s for a 2 KB trace, most of it importing pandas); the report itself is a few KB.
So a `summary` of one trace that returned is kept whole (stdout, stderr and exit status) in the
cache directory (trace/cache_dir.py: the same rules on who may write there) as
``<path digest>-<key digest>.report``, under a key of everything its output depends on:

- the file: ``cache_dir.file_identity`` (resolved path, size, times, inode, first and last MiB);
- the command line as given (every option, the path as typed: it is printed);
- the terminal: the width tables are laid out for, and whether stdout and stderr are terminals
  (CSV escapes control characters on a terminal); the ``KERNELTUI_*`` variables;
- the code: kerneltui's version and the size and time of every file of the package, so an
  edit or an upgrade is a miss.

A hit is written out as it was, imports neither numpy nor pandas, and takes a few
milliseconds at any size. Not kept: a run that raised (a bad file, a bad option), one that
printed the cache's own notes (they are about that run), an output over KEEP_UP_TO (every launch
of a big trace: cheaper to recompute than to keep), a trace that is no regular file,
``--no-cache`` or ``KERNELTUI_CACHE=0``. ``kerneltui cache --clear`` removes reports too.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

from kerneltui import __version__
from kerneltui.trace import cache_dir as place

MAGIC = b"kerneltui-report 1\n"
KEEP_UP_TO = 16 << 20  # characters of output: a bigger one (every launch of a big trace) is cheaper to recompute
OWN_NOTES = ("kerneltui: cache not used:", "the cached columns of this trace could not be read")
_code: str | None = None


def answered(args: argparse.Namespace, compute: Callable[[argparse.Namespace], int]) -> int:
    """``compute(args)``, or what it wrote and returned the last time for this very file and command."""
    where = _entry(args)
    if where is None:
        return compute(args)
    directory, key, entry = where
    kept = _read(entry, key)
    if kept is not None:
        rc, out, err = kept
        sys.stdout.write(out)
        sys.stdout.flush()
        sys.stderr.write(err)
        place._touch(entry)
        return rc
    out, err = _Tee(sys.stdout), _Tee(sys.stderr)
    sys.stdout, sys.stderr = out, err
    try:
        rc = compute(args)
    finally:
        sys.stdout, sys.stderr = out.inner, err.inner
    if not out.overflowed and not err.overflowed and not any(note in err.text() for note in OWN_NOTES):
        _write(directory, entry, key, int(rc or 0), out.text(), err.text())
    return rc


def _entry(args: argparse.Namespace) -> tuple[Path, str, Path] | None:
    """(cache directory, key digest, entry path) when this run may be answered or kept, else None."""
    paths = args.trace if isinstance(args.trace, list) else [args.trace]
    if len(paths) != 1 or getattr(args, "no_cache", False) or getattr(args, "scheduler", None):
        return None
    if not place.enabled() or not place.regular_file(paths[0]):
        return None  # a directory (a job), a pipe, a FIFO, missing: the normal path says what it is
    try:
        identity = place.file_identity(paths[0])
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
    key = _key(args, identity)
    entry = directory / f"{place.path_digest(identity['path'])}-{key[:24]}{place.REPORT_SUFFIX}"
    return directory, key, entry


def _key(args: argparse.Namespace, identity: dict) -> str:
    asked = {k: v for k, v in vars(args).items() if not k.startswith("_") and k != "argv"}
    env = sorted((k, v) for k, v in os.environ.items() if k.startswith("KERNELTUI_"))
    terminal = (shutil.get_terminal_size((80, 24)).columns, _isatty(sys.stdout), _isatty(sys.stderr))
    what = {"file": identity, "argv": list(getattr(args, "argv", [])), "args": repr(sorted(asked.items())),
            "env": env, "terminal": terminal, "code": _code_digest(), "version": __version__,
            "cwd": os.getcwd()}
    return hashlib.blake2b(json.dumps(what, sort_keys=True, default=str).encode("utf-8", "surrogateescape"),
                           digest_size=16).hexdigest()


def _code_digest() -> str:
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


def _isatty(stream) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def _read(entry: Path, key: str) -> tuple[int, str, str] | None:
    """(exit status, stdout, stderr) kept in ``entry`` for ``key``; None when missing, foreign or damaged."""
    try:
        fd = place.open_entry(entry)
    except (OSError, place.RefusedEntry):
        return None
    with os.fdopen(fd, "rb") as f:
        data = f.read()
    if not data.startswith(MAGIC):
        return None
    try:
        head_end = data.index(b"\n", len(MAGIC))
        head = json.loads(data[len(MAGIC):head_end])
        body = data[head_end + 1:]
        n_out, n_err = int(head["out"]), int(head["err"])
        if head["key"] != key or len(body) != n_out + n_err:
            return None
        out, err = body[:n_out].decode("utf-8", "surrogateescape"), body[n_out:].decode("utf-8", "surrogateescape")
        return int(head["rc"]), out, err
    except (ValueError, KeyError, TypeError):
        return None


def _write(directory: Path, entry: Path, key: str, rc: int, out: str, err: str) -> None:
    """Kept through a temporary file and a rename: a reader sees a whole entry or none. Never raises."""
    import tempfile

    tmp = None
    try:
        place.private_dir(directory, create=True)
        body_out, body_err = out.encode("utf-8", "surrogateescape"), err.encode("utf-8", "surrogateescape")
        head = json.dumps({"key": key, "rc": rc, "out": len(body_out), "err": len(body_err)}).encode()
        fd, tmp = tempfile.mkstemp(prefix=place.TEMP_PREFIX, suffix=place.REPORT_SUFFIX, dir=directory)  # 0600
        with os.fdopen(fd, "wb") as f:
            f.write(MAGIC + head + b"\n" + body_out + body_err)
        if not place._free_or_ours(entry):
            return  # a link, a FIFO or another user's file at this name: left alone
        os.replace(tmp, entry)
        tmp = None
        place.evict(directory, place.max_bytes(), keep=entry)
    except place.UnsafeDir as exc:
        place._tell(exc)
    except Exception:  # noqa: BLE001, S110 - a full disk, a read-only directory: no report kept, no error
        pass
    finally:
        if tmp is not None:
            place._remove(Path(tmp))


class _Tee:
    """A text stream that writes through to ``inner`` and keeps a copy (up to KEEP_UP_TO characters)."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self._parts: list[str] = []
        self._size = 0
        self.overflowed = False

    def write(self, text: str) -> int:
        if not self.overflowed:
            self._size += len(text)
            if self._size > KEEP_UP_TO:
                self.overflowed, self._parts = True, []
            else:
                self._parts.append(text)
        return self.inner.write(text)

    def text(self) -> str:
        return "".join(self._parts)

    def __getattr__(self, name: str):  # flush, isatty, fileno, encoding...: the terminal's own
        return getattr(self.inner, name)
