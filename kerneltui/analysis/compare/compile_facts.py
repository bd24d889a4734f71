"""What did torch.compile do? Facts read off one trace.

* **regions** - the distinct ``Torch-Compiled Region: f/c`` ids invoked (``f`` the
  Dynamo frame, ``c`` that frame's compile). ``frames`` counts distinct ``f``.
* **recompiles** - per frame, its highest ``c`` seen, summed: ``0/2`` means frame 0
  was compiled three times, two recompiles, even if ``0/0`` never ran in the window.
* **recompiles_in_profile** - Dynamo compiles (``_compile.compile_inner`` events) that
  start inside a profiled step/call: that step's CPU time is mostly compiling. 0 when
  none, which means every compile happened before the profile.
* **region_calls_per_step** - top-level region invocations per step/call (mean).
* **graph_breaks** - Dynamo's own count where the capture recorded one
  (``graph_breaks_source`` "dynamo"). Otherwise a lower bound read off the trace
  (``graph_breaks_source`` "at least"), the most in any step of:
  - compiled graphs called (``## Call CompiledFxGraph``) inside one outermost
    region beyond the first: torch 2.13 runs the code after a break (Dynamo's resume
    function, another frame) inside the region that broke, so regions nest. A region
    that calls no graph (an empty wrapper) is no break;
  - consecutive outermost regions on one thread with eager work between them (older
    torch: one region per graph), i.e. a GPU launch outside any compiled code, or a
    top-level cpu_op other than Dynamo's own (``TorchDynamo Cache Lookup``), in the gap.
    Two regions back to back with nothing between them are two compiled calls, not a
    break we can see.
* **graph_break_at** - where the breaks are, when the trace has Python frames: the
  resume functions Dynamo made (``torch_dynamo_resume_in_forward_at_8``) name the
  function and line that broke ("gb.py:8 in forward").
* **graph_replays_per_step** - CUDA-graph launch calls (``cudaGraphLaunch``,
  ``cuGraphLaunch``, ``hipGraphLaunch``) per step (mean).
* **kernels_per_replay** - GPU events sharing one graph launch's correlation (mean; 0 without replays).
* **launch_calls_per_step** - CPU launch calls that put work on the GPU (kernel
  launches, memcpy/memset, graph launches): distinct launch events that GPU
  events link to, per step (mean). CUDA graphs cut this (7 -> 2 for the MLP) while
  the GPU still runs every kernel.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from kerneltui.analysis.compare.phases import compiled_rows, launched_inside, named_rows
from kerneltui.trace.schema import Kind

if TYPE_CHECKING:
    from kerneltui.trace.model import Trace

REGION = re.compile(r"^Torch-Compiled Region: (\d+)/(\d+)$")
DYNAMO_OWN = ("TorchDynamo",)  # Cache Lookup precedes every region call: part of the call, not eager work
COMPILE_INNER = "_compile.compile_inner"  # "_compile.compile_inner (dynamo_timed)": one Dynamo compile
GRAPH_CALL = "## Call CompiledFxGraph"
RESUME = re.compile(r"^(?P<file>.*?)\((?P<line>\d+)\): (?:torch_dynamo_resume_in_)+(?P<fn>\w+?)_at_(?P<at>\d+)")


@dataclass(frozen=True)
class CompileFacts:
    regions: tuple[str, ...]  # distinct "f/c", sorted by frame then compile
    frames: int
    recompiles: int
    graph_breaks: int  # most in any one step
    graph_replays_per_step: float
    kernels_per_replay: float
    launch_calls_per_step: float
    region_calls_per_step: float = 0.0
    recompiles_in_profile: int = 0
    graph_breaks_source: str = "at least"  # "dynamo": the capture's own count; "at least": read off the trace
    graph_break_at: tuple[str, ...] = ()  # "gb.py:8 in forward", where the trace has Python frames

    @property
    def compiled(self) -> bool:
        return bool(self.regions) or self.graph_replays_per_step > 0


def compile_facts(trace: Trace) -> CompileFacts:
    ev = trace.events
    its = trace.iterations
    steps = max(its.count, 1)
    ops = np.flatnonzero(ev["kind"].to_numpy() == Kind.CPU_OP)
    names = trace.names_of(ev["name"].to_numpy()[ops])
    ids: dict[tuple[int, int], None] = {}
    region_rows = []
    for row, name in zip(ops.tolist(), names):
        m = REGION.match(name)
        if m:
            ids[(int(m.group(1)), int(m.group(2)))] = None
            region_rows.append(row)
    regions = tuple(f"{f}/{c}" for f, c in sorted(ids))
    highest: dict[int, int] = {}
    for f, c in ids:
        highest[f] = max(highest.get(f, 0), c)
    top_regions = _top_level(trace, np.asarray(region_rows, np.int64))
    calls_at = its.assign(ev["ts"].to_numpy()[top_regions])

    g = trace.gpu
    in_step = g["iteration"].to_numpy() >= 0
    launch = g["launch_row"].to_numpy()
    graph = g["graph"].to_numpy() & (launch >= 0)
    replays = np.unique(launch[graph & in_step])
    per_replay = np.bincount(np.unique(launch[graph], return_inverse=True)[1]) if graph.any() else np.zeros(0)
    launches = np.unique(launch[(launch >= 0) & in_step])
    compile_starts, _ = compile_spans(trace)
    breaks = max(_graph_breaks(trace, top_regions, calls_at), _nested_graph_breaks(trace, top_regions, calls_at))
    recorded = (trace.meta.capture or {}).get("graph_breaks")
    dynamo = isinstance(recorded, int) and not isinstance(recorded, bool) and recorded >= 0
    return CompileFacts(
        regions=regions,
        frames=len(highest),
        recompiles=sum(highest.values()),
        graph_breaks=recorded if dynamo else breaks,
        graph_replays_per_step=len(replays) / steps,
        kernels_per_replay=float(per_replay.mean()) if len(per_replay) else 0.0,
        launch_calls_per_step=len(launches) / steps,
        region_calls_per_step=float((calls_at >= 0).sum()) / steps,
        recompiles_in_profile=int((its.assign(compile_starts) >= 0).sum()),
        graph_breaks_source="dynamo" if dynamo else "at least",
        graph_break_at=_break_locations(trace),
    )


def compile_spans(trace: Trace) -> tuple[np.ndarray, np.ndarray]:
    """Start and end (ns) of each Dynamo compile (``_compile.compile_inner``) in the trace."""
    rows = np.union1d(named_rows(trace, Kind.CPU_OP, _is_compile), named_rows(trace, Kind.ANNOTATION, _is_compile))
    ts = trace.events["ts"].to_numpy()[rows]
    return ts, ts + trace.events["dur"].to_numpy()[rows]


def _is_compile(name: str) -> bool:
    return name.startswith(COMPILE_INNER)


def _nested_graph_breaks(trace: Trace, regions: np.ndarray, calls_at: np.ndarray) -> int:
    """Most breaks in one step: compiled graphs called inside an outermost region beyond its first."""
    calls = named_rows(trace, Kind.ANNOTATION, lambda n: n.startswith(GRAPH_CALL))
    if not len(regions) or not len(calls):
        return 0
    ev = trace.events
    per_step = np.zeros(max(int(calls_at.max()) + 1, 1), np.int64)
    c_lane, c_ts = ev["lane"].to_numpy()[calls], ev["ts"].to_numpy()[calls]
    r_lane, r_ts = ev["lane"].to_numpy()[regions], ev["ts"].to_numpy()[regions]
    r_end = r_ts + ev["dur"].to_numpy()[regions]
    for lane in np.unique(r_lane).tolist():
        mine = np.flatnonzero((r_lane == lane) & (calls_at >= 0))
        times = np.sort(c_ts[c_lane == lane])
        held = np.searchsorted(times, r_end[mine], "right") - np.searchsorted(times, r_ts[mine], "left")
        np.add.at(per_step, calls_at[mine], np.maximum(held - 1, 0))
    return int(per_step.max())


def _break_locations(trace: Trace) -> tuple[str, ...]:
    """'gb.py:8 in forward' for each resume function Dynamo made that ran inside a step."""
    rows = named_rows(trace, Kind.PYTHON, lambda n: RESUME.match(n) is not None)
    if not len(rows):
        return ()
    inside = trace.iterations.assign(trace.events["ts"].to_numpy()[rows]) >= 0
    names = trace.names_of(trace.events["name"].to_numpy()[rows[inside]])
    out = {}
    for name in names:
        m = RESUME.match(name)
        out[f"{m['file'].rsplit('/', 1)[-1]}:{m['at']} in {m['fn']}"] = None
    return tuple(out)


def _top_level(trace: Trace, rows: np.ndarray) -> np.ndarray:
    """Of region rows, those not inside another region on their thread (a compiled fn calling one)."""
    if not len(rows):
        return rows
    ev = trace.events
    ts = ev["ts"].to_numpy()[rows]
    ends = ts + ev["dur"].to_numpy()[rows]
    lanes = ev["lane"].to_numpy()[rows]
    keep = np.ones(len(rows), bool)
    for lane in np.unique(lanes).tolist():
        mine = np.flatnonzero(lanes == lane)
        order = mine[np.lexsort((-ends[mine], ts[mine]))]
        reach = np.maximum.accumulate(ends[order])
        keep[order[1:]] = ts[order[1:]] > reach[:-1]
    top = rows[keep]
    return top[np.argsort(ev["ts"].to_numpy()[top], kind="stable")]


def _graph_breaks(trace: Trace, regions: np.ndarray, calls_at: np.ndarray) -> int:
    """Most breaks in one step: gaps between consecutive region calls (same thread, same step) holding eager work."""
    if len(regions) < 2:
        return 0
    ev = trace.events
    lanes = ev["lane"].to_numpy()[regions]
    starts = ev["ts"].to_numpy()[regions]
    ends = starts + ev["dur"].to_numpy()[regions]
    # eager work: launches of GPU events outside compiled code, and top-level ops other than Dynamo's own
    g = trace.gpu
    g_lane, g_t = g["launch_lane"].to_numpy(), g["launch_ts"].to_numpy()
    eager = ~launched_inside(trace, compiled_rows(trace), g_lane, g_t) & (g["launch_row"].to_numpy() >= 0)
    top = trace.top_level_ops()
    top_names = trace.names_of(ev["name"].to_numpy()[top])
    own = np.array([n.startswith(DYNAMO_OWN) or bool(REGION.match(n)) for n in top_names], bool)
    top = top[~own]
    work_lane = np.concatenate([g_lane[eager], ev["lane"].to_numpy()[top]])
    work_t = np.concatenate([g_t[eager], ev["ts"].to_numpy()[top]])
    per_step = np.zeros(max(int(calls_at.max()) + 1, 1), np.int64)
    for lane in np.unique(lanes).tolist():
        mine = np.flatnonzero(lanes == lane)  # regions are in time order
        prev, nxt = mine[:-1], mine[1:]
        pair = (calls_at[prev] == calls_at[nxt]) & (calls_at[nxt] >= 0)
        times = np.sort(work_t[work_lane == lane])
        held = np.searchsorted(times, starts[nxt], "right") - np.searchsorted(times, ends[prev], "left")
        np.add.at(per_step, calls_at[nxt][pair & (held > 0)], 1)
    return int(per_step.max())
