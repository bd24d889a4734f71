"""Whether the full screen may start, and the checks made before it does.

The screen needs a terminal on both ends: with stdout redirected (`kerneltui diff A B > out.txt`, a
CI log) it would draw escape codes into the file and wait for keys that never come, and with stdin
from a pipe it could never read a key. There the commands print their `--format table` report.
"""

from __future__ import annotations

import os
import stat
import sys

from kerneltui.errors import TraceError


def interactive() -> bool:
    """stdin and stdout are both terminals: the full screen can start, and be answered."""
    return sys.stdin.isatty() and sys.stdout.isatty()


def check_trace_path(path: str) -> None:
    """The one-line errors the loader would give, before a screen starts only to show one of them.

    Only ``stat``: a pipe (``<(zcat t.json.gz)``) must not lose the bytes a read would take."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise TraceError(f"{path}: no such file") from None
    except PermissionError:
        raise TraceError(f"{path}: permission denied") from None
    except OSError as exc:
        raise TraceError(f"{path}: {exc.strerror or exc}") from None
    if stat.S_ISDIR(st.st_mode):
        raise TraceError(f"{path} is a directory, not a trace file")
    if stat.S_ISREG(st.st_mode):
        if st.st_size == 0:
            raise TraceError(f"{path} is empty (0 bytes): not a trace")
        if not os.access(path, os.R_OK):
            raise TraceError(f"{path}: permission denied")
