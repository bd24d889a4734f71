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
import os
import shutil
import sys
from collections.abc import Callable

from kerneltui.commands import kept as keep
from kerneltui.trace.cache_dir import REPORT_SUFFIX

MAGIC = b"kerneltui-report 2\n"
KEEP_UP_TO = 16 << 20  # characters of output: a bigger one (every launch of a big trace) is cheaper to recompute
OWN_NOTES = ("kerneltui: cache not used:", "the cached columns of this trace could not be read")


def answered(args: argparse.Namespace, compute: Callable[[argparse.Namespace], int]) -> int:
    """``compute(args)``, or what it wrote and returned the last time for this very file and command."""
    where = _entry(args)
    if where is None:
        return compute(args)
    kept = _read(where)
    if kept is not None:
        rc, out, err = kept
        sys.stdout.write(out)
        sys.stdout.flush()
        sys.stderr.write(err)
        return rc
    out, err = _Tee(sys.stdout), _Tee(sys.stderr)
    sys.stdout, sys.stderr = out, err
    try:
        rc = compute(args)
    finally:
        sys.stdout, sys.stderr = out.inner, err.inner
    if not out.overflowed and not err.overflowed and not any(note in err.text() for note in OWN_NOTES):
        body_out, body_err = out.text().encode("utf-8", "surrogateescape"), err.text().encode("utf-8", "surrogateescape")
        keep.write(where, MAGIC, {"rc": int(rc or 0), "out": len(body_out)}, body_out + body_err)
    return rc


def _entry(args: argparse.Namespace) -> keep.Kept | None:
    """Where this run's report is kept, when it may be answered or kept; else None."""
    paths = args.trace if isinstance(args.trace, list) else [args.trace]
    if len(paths) != 1 or getattr(args, "no_cache", False) or getattr(args, "scheduler", None):
        return None
    asked = {k: v for k, v in vars(args).items() if not k.startswith("_") and k != "argv"}
    terminal = (shutil.get_terminal_size((80, 24)).columns, _isatty(sys.stdout), _isatty(sys.stderr))
    what = {"argv": list(getattr(args, "argv", [])), "args": repr(sorted(asked.items())),
            "terminal": terminal, "cwd": os.getcwd()}
    return keep.kept_for(paths[0], REPORT_SUFFIX, what)


def _isatty(stream) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def _read(where: keep.Kept) -> tuple[int, str, str] | None:
    """(exit status, stdout, stderr) kept for this run; None when missing, foreign or damaged."""
    found = keep.read(where, MAGIC)
    if found is None:
        return None
    head, body = found
    try:
        n_out = int(head["out"])
        rc = int(head["rc"])
    except (KeyError, TypeError, ValueError):
        return None
    if not 0 <= n_out <= len(body):
        return None
    return rc, body[:n_out].decode("utf-8", "surrogateescape"), body[n_out:].decode("utf-8", "surrogateescape")


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
