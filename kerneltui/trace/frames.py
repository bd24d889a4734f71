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

from kerneltui.trace.intervals import index_dtype, innermost, split_by
from kerneltui.trace.link import KeyIndex
from kerneltui.trace.per_trace import PerTrace
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
    frames_of = split_by(lanes, python)
    for lane, which in split_by(launch_lane, np.arange(len(launch_lane))).items():
        rows = frames_of.get(lane)
        if rows is None:
            continue
        ts = ev["ts"].to_numpy()[rows]
        found = innermost(ts, ts + ev["dur"].to_numpy()[rows], launch_ts[which])
        out[which] = np.where(found >= 0, rows[np.clip(found, 0, None)], -1)
    return out


def sources(trace: Trace, frame_rows: np.ndarray) -> pd.DataFrame:
    """For each innermost frame row (-1: none): the user's source line and the nn.Module path."""
    frame_rows = np.asarray(frame_rows, np.int64)
    named = _named_frames.built(trace)
    if named is None:
        wanted = np.unique(frame_rows[frame_rows >= 0])
        frames = int((trace.events["kind"].to_numpy() == Kind.PYTHON).sum())
        # a few frames (the allocations the memory tables name): those and their stacks alone, not kept
        named = _name_frames(trace, wanted) if len(wanted) * FEW_FRAMES < frames else _named_frames(trace)
    at = _positions(named.rows, frame_rows)
    found = at >= 0
    source = np.full(len(frame_rows), -1, np.int64)
    source[found] = named.source[at[found]]
    module = np.zeros(len(frame_rows), np.int64)
    module[found] = named.module[at[found]]
    return pd.DataFrame({"source": trace.names_of(source), "module": named.module_text[module]})


def _positions(rows: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """Position of each wanted row in ``rows`` (ascending, distinct), -1 where it is not there."""
    if not len(rows):
        return np.full(len(wanted), -1, np.int64)
    at = np.minimum(np.searchsorted(rows, wanted), len(rows) - 1)
    return np.where(rows[at] == wanted, at, -1)


class _NamedFrames:
    """Every python_function frame's source line and module path."""

    def __init__(self, rows: np.ndarray, source: np.ndarray, module: np.ndarray, module_text: np.ndarray):
        self.rows = rows  # the python_function rows, ascending
        self.source = source  # per frame: the name code of its source line's frame, -1 none
        self.module = module  # per frame: code into module_text (0: "", none)
        self.module_text = module_text


FEW_FRAMES = 16  # asked for fewer than 1/16 of the frames: name only theirs


def _name_frames(trace: Trace, wanted: np.ndarray | None = None) -> _NamedFrames:
    """Each frame's stack, up to MAX_DEPTH frames from it outwards through ``Python parent id``: its source
    is the innermost user frame among them, its module the nn.Module frames among them, outermost first.

    All frames at once, by pointer doubling: after round k each frame knows what the first 2**k frames
    of its stack hold, and its 2**k-th ancestor, and two such halves make the next round's. (A frame at
    a time, climbing parents in Python, took 3.7 s for the 200k frames of a 1 GB trace.)

    ``wanted`` (python_function rows): only those frames and their stacks are named, and only theirs are
    right in what is returned (a frame higher up sees its stack cut where theirs ends)."""
    ev = trace.events
    rows = np.flatnonzero(ev["kind"].to_numpy() == Kind.PYTHON)
    # each frame's parent, as a position: the first frame (by id, then row) with its parent id
    parents = KeyIndex(ev["python_id"].to_numpy()[rows], np.arange(len(rows)))
    parent_ids = ev["python_parent"].to_numpy()[rows]
    if wanted is None:
        ancestor = parents.find(parent_ids)
    else:
        rows, ancestor = _stacks_of(rows, parents, parent_ids, wanted)
    n = len(rows)
    codes = ev["name"].to_numpy()[rows].astype(np.int64)
    user = trace.by_name(codes, is_user_frame, bool)
    source = np.where(user, codes, -1)  # the name code of the innermost user frame so far
    # module paths as tuples of name codes, outermost first, interned: 0 is the empty path
    paths: list[tuple[int, ...]] = [()]
    index: dict[tuple[int, ...], int] = {(): 0}
    module = np.zeros(n, np.int64)
    is_module = trace.by_name(codes, lambda name: name.startswith(MODULE_FRAME), bool)
    segments, segment_of = np.unique(codes[is_module], return_inverse=True)
    for code in segments.tolist():
        index[(code,)] = len(paths)
        paths.append((code,))
    module[is_module] = 1 + segment_of.reshape(-1)  # path 1 + i is segments[i] alone
    for _ in range(MAX_DEPTH.bit_length() - 1):  # 2**8 frames = MAX_DEPTH
        up = np.flatnonzero(ancestor >= 0)
        if not len(up):
            break
        upper = ancestor[up]
        inner = source[up]
        source[up] = np.where(inner >= 0, inner, source[upper])
        # the two halves' module paths joined: a few distinct pairs, each joined once
        width = len(paths)
        which, distinct = pd.factorize(module[upper] * width + module[up])  # hashed: np.unique's sort cost 0.5 s
        joined = np.empty(len(distinct), np.int64)
        for i, key in enumerate(distinct.tolist()):
            path = paths[key // width] + paths[key % width]
            code = index.get(path)
            if code is None:
                code = index[path] = len(paths)
                paths.append(path)
            joined[i] = code
        module[up] = joined[which]
        ancestor[up] = ancestor[upper]
    module_text = np.array([_module_text(trace, path) for path in paths], object)
    # kept while the trace is (a 5 GB trace has millions of frames): int32 where the values fit
    small = index_dtype(max(len(trace.names), len(paths), int(rows[-1]) + 1 if n else 0))
    return _NamedFrames(rows.astype(small), source.astype(small), module.astype(small), module_text)


# once a trace: the kernels', the attribution's and the allocations' sources all read it
_named_frames: PerTrace[_NamedFrames] = PerTrace(_name_frames)


def _stacks_of(rows: np.ndarray, parents: KeyIndex, parent_ids: np.ndarray,
               wanted: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The frames of ``wanted``'s stacks (MAX_DEPTH frames each) as (rows, parent positions among them).
    Parents are looked up for those frames alone (all 730k frames of the 1 GB trace: 30 ms)."""
    at = _positions(rows, wanted)
    frontier = np.unique(at[at >= 0])
    keep = np.zeros(len(rows), bool)
    for _ in range(MAX_DEPTH):  # level by level, all stacks at once: a frame is reached first at its lowest level
        keep[frontier] = True
        up = parents.find(parent_ids[frontier])
        frontier = np.unique(up[up >= 0])
        frontier = frontier[~keep[frontier]]
        if not len(frontier):
            break
    subset = np.flatnonzero(keep)
    position = np.full(len(rows), -1, np.int64)
    position[subset] = np.arange(len(subset))
    parent = parents.find(parent_ids[subset])
    return rows[subset], np.where(parent >= 0, position[np.maximum(parent, 0)], -1)


def _module_text(trace: Trace, path: tuple[int, ...]) -> str:
    text = ""
    for code in path:
        name = trace.name(code)[len(MODULE_FRAME):]
        text = f"{text}/{name}" if text else name
    return text
