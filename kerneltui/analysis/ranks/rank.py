"""One rank's trace -> its summary: GPU time split into compute and communication, and its collectives.

A summary is small (a few numbers and one row per collective kernel) so that it can come
back from a worker process, or a Dask worker on another machine, instead of the trace.

Times are over the rank's GPU window, first GPU event start to last GPU event end:
  busy      union of every kernel, memcpy and memset;
  compute   union of the GPU work that is not communication;
  comm      union of the collective kernels;
  exposed   communication that no compute overlaps = busy - compute;
  idle      window - busy.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from kerneltui.analysis.health import trace_health
from kerneltui.analysis.ranks.collectives import (
    kind_of_name,
    kind_of_record,
    message_bytes,
)
from kerneltui.errors import NotATrace, TraceError
from kerneltui.trace.intervals import union_length, union_runs
from kerneltui.trace.model import Trace, load_trace
from kerneltui.trace.text_columns import texts

PROFILE_BINS = 400  # a rank's busy profile for the job timeline: enough for the widest terminal
_RANK_IN_NAME = re.compile(r"rank[-_ ]?(\d+)", re.IGNORECASE)


@dataclass(frozen=True)
class Collectives:
    """The collective kernels of one rank, in time order (its own clock)."""

    kind: np.ndarray  # object: "allreduce", ... ("collective" when the name says only that)
    group: np.ndarray  # object: process group name from the kernel's record, "" when none
    seq: np.ndarray  # int64: the record's sequence number, -1 when none
    start: np.ndarray  # int64 ns
    end: np.ndarray  # int64 ns
    nbytes: np.ndarray  # int64, -1 when the record does not say

    def __len__(self) -> int:
        return len(self.start)

    @classmethod
    def empty(cls) -> Collectives:
        none = np.empty(0, np.int64)
        return cls(np.empty(0, object), np.empty(0, object), none, none, none, none)


@dataclass(frozen=True)
class RankSummary:
    path: str
    rank: int | None  # from distributedInfo, else the file's name, else None
    rank_from: str  # "distributedInfo", "file name" or "" (none: numbered by order later)
    world_size: int | None
    backend: str
    device: str
    file_bytes: int = 0
    steps: int = 0
    step_ns: int = 0  # mean profiler step (or the GPU window when there are no steps)
    window_start_ns: int = 0
    window_ns: int = 0
    busy_ns: int = 0
    compute_ns: int = 0
    comm_ns: int = 0
    exposed_comm_ns: int = 0
    idle_ns: int = 0
    launches: int = 0
    collectives: Collectives = field(default_factory=Collectives.empty)
    # share of each of PROFILE_BINS equal slices of the window that compute / comm kept busy
    compute_profile: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float32))
    comm_profile: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float32))
    warnings: tuple[str, ...] = ()
    health: dict = field(default_factory=dict)  # analysis/health: {ok, line, causes...}; {} when unknown
    incomplete: bool = False  # the file is cut off or damaged: what could be read is summarised
    not_a_trace: bool = False  # with ``error``: the file is no trace at all (a notes.json beside the ranks)
    error: str = ""  # the load failed: the one line saying why; everything else is empty


def damaged(r: RankSummary) -> bool:
    """The rank's trace lost or garbled GPU work (analysis/health): its figures are not to be trusted."""
    return bool(r.health) and not r.health.get("ok", True)


def rank_of_file(path: str | os.PathLike) -> int | None:
    m = _RANK_IN_NAME.search(Path(path).name)
    return int(m.group(1)) if m else None


def _claims_trace(path: str | os.PathLike) -> bool:
    name = Path(path).name.lower()
    return "trace" in name or rank_of_file(path) is not None


def summarize_rank_file(path: str, cache: bool | None = None) -> RankSummary:
    """Load and summarise one rank; a trace that cannot be read gives a summary with ``error``."""
    try:
        trace = load_trace(path, cache=cache)
    except TraceError as exc:
        # A JSON document that is no trace (a notes.json, a truth file) is not one of the ranks; bytes that are
        # not JSON are, when the name claims a trace (rank3.json, worker1.pt.trace.json holding garbage: a
        # rank that failed), and otherwise not (a README.json, a binary dropped beside the ranks).
        foreign = isinstance(exc, NotATrace) and (exc.json or not _claims_trace(path))
        return replace(failed_rank(path, str(exc)), not_a_trace=foreign)
    except MemoryError:
        return failed_rank(path, f"{path}: not enough memory to load this rank")
    if not len(trace.events):
        return failed_rank(path, f"{path}: no events in this trace: nothing to summarise", trace.meta.rank,
                           trace.meta.world_size)
    return summarize_rank(trace)


def failed_rank(path: str, error: str, rank: int | None = None, world_size: int | None = None) -> RankSummary:
    """A rank that could not be summarised: the one line why, numbered from what is known of it."""
    rank, rank_from = rank_number(rank, path)
    return RankSummary(path=str(path), rank=rank, rank_from=rank_from, world_size=world_size, backend="", device="",
                       error=error)


def rank_number(recorded: int | None, path: str | os.PathLike) -> tuple[int | None, str]:
    """(rank, where it came from): distributedInfo's, else the file name's, else none."""
    if recorded is not None:
        return recorded, "distributedInfo"
    from_name = rank_of_file(path)
    return from_name, "file name" if from_name is not None else ""


def summarize_rank(trace: Trace) -> RankSummary:
    meta = trace.meta
    rank, rank_from = rank_number(meta.rank, meta.path)
    g = trace.gpu
    start = g["ts"].to_numpy()
    end = g["end"].to_numpy()
    names = trace.names_of(g["name"].to_numpy())
    collectives, comm = _collectives(trace, g, names)
    busy = union_length(start, end)
    compute = union_length(start[~comm], end[~comm])
    window_start = int(start.min()) if len(start) else 0
    window = int(end.max()) - window_start if len(start) else 0
    its = trace.iterations
    steps = its.count if its.unit == "step" else 0
    step_ns = int(np.mean(its.ends - its.starts)) if steps else window
    warnings = list(meta.warnings)
    if not len(start):
        warnings.append("no GPU work in this rank's trace")
    return RankSummary(
        path=meta.path, rank=rank, rank_from=rank_from, world_size=meta.world_size,
        backend=str((meta.distributed or {}).get("backend", "")), device=meta.device_name,
        file_bytes=meta.file_bytes, steps=steps, step_ns=step_ns, window_start_ns=window_start, window_ns=window,
        busy_ns=busy, compute_ns=compute, comm_ns=union_length(start[comm], end[comm]),
        exposed_comm_ns=busy - compute, idle_ns=window - busy, launches=len(g),
        collectives=collectives, warnings=tuple(warnings), incomplete=meta.incomplete,
        health=trace_health(trace).to_dict(),
        compute_profile=busy_profile(start[~comm], end[~comm], window_start, window),
        comm_profile=busy_profile(start[comm], end[comm], window_start, window),
    )


def busy_profile(starts: np.ndarray, ends: np.ndarray, t0: int, span: int, bins: int = PROFILE_BINS) -> np.ndarray:
    """Share of each of ``bins`` equal slices of [t0, t0 + span) covered by the intervals (overlaps once)."""
    if not span or not len(starts):
        return np.zeros(bins if span else 0, np.float32)
    run_start, run_end = union_runs(starts, ends)
    edges = t0 + np.arange(bins + 1, dtype=np.float64) * (span / bins)
    # covered(t): time covered before t, piecewise linear; a slice's share is its increase
    lengths = (run_end - run_start).astype(np.float64)
    before = np.concatenate(([0.0], np.cumsum(lengths)))

    def covered(t: np.ndarray) -> np.ndarray:
        i = np.searchsorted(run_start, t, side="right")  # runs starting at or before t
        inside = np.clip(t - run_start[np.maximum(i - 1, 0)], 0, lengths[np.maximum(i - 1, 0)])
        return before[np.maximum(i - 1, 0)] + np.where(i > 0, inside, 0.0)

    return (np.diff(covered(edges)) / (span / bins)).clip(0, 1).astype(np.float32)


def _collectives(trace: Trace, g, names: np.ndarray) -> tuple[Collectives, np.ndarray]:
    """The collective kernels (each distinct name classified once) and the mask of their rows."""
    codes = g["name"].to_numpy()
    distinct, inverse = np.unique(codes, return_inverse=True)
    kinds_of_code = np.array([kind_of_name(trace.name(int(c))) for c in distinct] + [None], dtype=object)
    kinds = kinds_of_code[inverse] if len(codes) else np.empty(0, object)
    rows = np.flatnonzero(kinds != None)
    comm = np.zeros(len(codes), bool)
    comm[rows] = True
    kind = kinds[rows].copy()
    group = texts(len(rows))
    seq = np.full(len(rows), -1, np.int64)
    nbytes = np.full(len(rows), -1, np.int64)
    event_rows = g["row"].to_numpy()[rows]  # the kernel's row in trace.events, where its record is
    for i, row in enumerate(event_rows.tolist()):
        record = (trace.shapes(int(row)) or {}).get("comm")
        if not isinstance(record, dict):
            continue
        recorded = kind_of_record(record.get("collective"))
        if recorded is not None:  # the record names the operation; a name may say only "Generic"
            kind[i] = recorded
        group[i] = str(record.get("group", ""))
        if isinstance(record.get("seq"), int):
            seq[i] = record["seq"]
        size = message_bytes(record)
        if size is not None:
            nbytes[i] = size
    start = g["ts"].to_numpy()[rows].astype(np.int64)
    end = g["end"].to_numpy()[rows].astype(np.int64)
    return Collectives(kind, group, seq, start, end, nbytes), comm
