"""Python source for GPU work, in traces recorded with ``with_stack=True``.

python_function events partially overlap ops and annotations (doc section 4.3),
so they are nested among themselves only, per thread, and climbed through
``Python parent id``. A kernel's *source* is the innermost frame of the user's
own code (not torch, not the standard library, not a built-in); its *module*
is the chain of ``nn.Module: Name_0`` frames around the launch.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from kerneltui.trace.intervals import Nesting
from kerneltui.trace.schema import Kind

if TYPE_CHECKING:
    from kerneltui.trace.model import Trace

FILE_FRAME = re.compile(r"^(?P<file>.+?)\((?P<line>\d+)\): (?P<func>.+)$")
MODULE_FRAME = "nn.Module: "
LIBRARY_PARTS = ("torch/", "site-packages/", "dist-packages/", "triton/", "threading.py", "typing.py",
                 "contextlib.py", "functools.py", "runpy.py", "<frozen", "importlib/",
                 "torchinductor_", "<string>")
MAX_DEPTH = 256


def is_user_frame(name: str) -> bool:
    match = FILE_FRAME.match(name)
    return bool(match) and not any(part in match["file"] for part in LIBRARY_PARTS)


def innermost_frames(trace: Trace, launch_lane: np.ndarray, launch_ts: np.ndarray) -> np.ndarray:
    """Row of the innermost python_function around each launch, or -1."""
    ev = trace.events
    out = np.full(len(launch_ts), -1, np.int64)
    python = np.flatnonzero(ev["kind"].to_numpy() == Kind.PYTHON)
    if not len(python):
        return out
    lanes = ev["lane"].to_numpy()[python]
    launch_lane = np.asarray(launch_lane)
    # group frames and launches by thread once: a trace may have thousands of threads
    frames_of = _groups(lanes, python)
    for lane, which in _groups(launch_lane, np.arange(len(launch_lane))).items():
        rows = frames_of.get(lane)
        if rows is None:
            continue
        ts = ev["ts"].to_numpy()[rows]
        found = Nesting(ts, ts + ev["dur"].to_numpy()[rows]).innermost(launch_ts[which])
        out[which] = np.where(found >= 0, rows[np.clip(found, 0, None)], -1)
    return out


def _groups(keys: np.ndarray, values: np.ndarray) -> dict[int, np.ndarray]:
    """values split by key (each part in its original order), in one sort."""
    order = np.argsort(keys, kind="stable")
    keys, values = keys[order], values[order]
    distinct, first = np.unique(keys, return_index=True)
    bounds = np.append(first, len(keys))
    return {int(k): values[bounds[i] : bounds[i + 1]] for i, k in enumerate(distinct)}


class FrameTree:
    """python_function rows with their parents, for climbing a stack."""

    def __init__(self, trace: Trace):
        ev = trace.events
        self.trace = trace
        python = np.flatnonzero(ev["kind"].to_numpy() == Kind.PYTHON)
        ids = ev["python_id"].to_numpy()[python]
        order = np.argsort(ids, kind="stable")
        self._ids, self._rows = ids[order], python[order]
        self._parent_ids = ev["python_parent"].to_numpy()
        self._name_codes = ev["name"].to_numpy()

    def parent(self, row: int) -> int:
        parent_id = int(self._parent_ids[row])
        if parent_id < 0 or not len(self._ids):
            return -1
        at = int(np.searchsorted(self._ids, parent_id))
        return int(self._rows[at]) if at < len(self._ids) and self._ids[at] == parent_id else -1

    def stack(self, row: int) -> list[int]:
        """Frame rows from the innermost outwards."""
        out = []
        while row >= 0 and len(out) < MAX_DEPTH:
            out.append(row)
            row = self.parent(row)
        return out

    def name(self, row: int) -> str:
        return self.trace.name(int(self._name_codes[row]))


def sources(trace: Trace, frame_rows: np.ndarray) -> pd.DataFrame:
    """For each innermost frame row: the user's source line and the nn.Module path.

    Memoised per frame, outermost first, so each frame of the trace is named once.
    """
    tree = FrameTree(trace)
    known: dict[int, tuple[str, str]] = {-1: ("", "")}
    for start in np.unique(frame_rows):
        chain = []
        row = int(start)
        while row not in known and len(chain) < MAX_DEPTH:
            chain.append(row)
            row = tree.parent(row)
        source, module = known.get(row, ("", ""))
        for row in reversed(chain):  # outermost first
            name = tree.name(row)
            if is_user_frame(name):
                source = name
            if name.startswith(MODULE_FRAME):
                module = f"{module}/{name[len(MODULE_FRAME):]}" if module else name[len(MODULE_FRAME):]
            known[row] = (source, module)
    pairs = [known[int(r)] for r in frame_rows]
    return pd.DataFrame(pairs, columns=["source", "module"])
