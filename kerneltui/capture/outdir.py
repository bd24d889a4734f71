"""Can the traces be written where -o says? Found before torch is imported and anything runs.

No torch here: the answer must come at once, not after the eager profile (issue 22, item 3).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from kerneltui.errors import UserError


def _nearest_existing(path: Path) -> Path:
    for candidate in (path, *path.parents):
        if os.path.lexists(candidate):
            return candidate
    return Path(".")


def check_writable(out_dir: Path) -> None:
    """One line (UserError, exit 2) unless files can be created in `out_dir` or, where it does not exist
    yet, in the directory it would be made in. Tried, not inferred from permission bits: root ignores
    them, and /proc or a read-only mount refuse whatever the bits say. Creates nothing that stays."""
    existing = _nearest_existing(out_dir)
    if not existing.is_dir():
        what = "not a directory" if existing == out_dir else f"{existing} is not a directory"
        raise UserError(f"-o {out_dir}: {what} (traces are written into a directory)")
    try:
        # A file, not a directory: /proc accepts neither, a read-only mount neither; the probe goes at once.
        with tempfile.TemporaryFile(dir=existing, prefix=".kerneltui-probe-"):
            pass
    except OSError as exc:
        where = "" if existing == out_dir else ", where it would be made"
        raise UserError(f"-o {out_dir}: cannot create files in {existing}{where} ({exc.strerror or exc})") from None
