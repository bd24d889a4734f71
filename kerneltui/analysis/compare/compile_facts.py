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
  (``graph_breaks_source`` "dynamo"). Otherwise read off the trace (``graph_breaks_source``
  "at least"); ``graph_breaks_in_trace`` holds that reading in both cases. A frame compile
  (``f/c``) breaks at most once (the rest of the function becomes a resume function, a frame
  of its own), so Dynamo's count is the number of frame compiles that broke. One broke when,
  in a profiled step:
  - a region runs inside it (torch 2.13 nests them): the code after a break (the resume
    function) and any frame the unsupported call enters (``opt.step`` after a break at it)
    run inside the region that broke, and compiled code calls no other Python;
  - it calls more than one compiled graph itself, outside the regions nested in it (a
    ``loss.backward()`` it ran eagerly calls the backward graph);
  - (older torch, one region per graph) the next outermost region on its thread, in the
    same step, follows eager work: a GPU launch outside any compiled code, or a top-level
    cpu_op other than Dynamo's own (``TorchDynamo Cache Lookup``). Two regions back to
    back with nothing between them are two compiled calls, not a break we can see.
  Distinct ``f/c`` are counted, as Dynamo counts a break once per compile however often
  the frame runs. Breaks the trace cannot show: a frame compile not run in the profiled
  steps, a break whose resume function Dynamo skipped (nothing left to compile) and whose
  call entered no compiled frame, a frame Dynamo skipped whole (a break in a loop).
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
    graph_breaks: int  # Dynamo's count where recorded, else the frame compiles the trace shows breaking
    graph_replays_per_step: float
    kernels_per_replay: float
    launch_calls_per_step: float
    region_calls_per_step: float = 0.0
    recompiles_in_profile: int = 0
    graph_breaks_source: str = "at least"  # "dynamo": the capture's own count; "at least": read off the trace
    graph_break_at: tuple[str, ...] = ()  # "gb.py:8 in forward", where the trace has Python frames
    graph_breaks_in_trace: int = 0  # read off the trace, whatever the capture recorded

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
    region_rows, region_ids = [], []
    for row, name in zip(ops.tolist(), names):
        m = REGION.match(name)
        if m:
            ids[(int(m.group(1)), int(m.group(2)))] = None
            region_rows.append(row)
            region_ids.append((int(m.group(1)), int(m.group(2))))
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
    rows = np.asarray(region_rows, np.int64)
    by_row = dict(zip(region_rows, region_ids))
    broken = _nested_breaks(trace, rows, region_ids) | _flat_breaks(trace, top_regions, calls_at, by_row)
    breaks = len(broken)
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
        graph_breaks_in_trace=breaks,
    )


def compile_spans(trace: Trace) -> tuple[np.ndarray, np.ndarray]:
    """Start and end (ns) of each Dynamo compile (``_compile.compile_inner``) in the trace."""
    rows = np.union1d(named_rows(trace, Kind.CPU_OP, _is_compile), named_rows(trace, Kind.ANNOTATION, _is_compile))
    ts = trace.events["ts"].to_numpy()[rows]
    return ts, ts + trace.events["dur"].to_numpy()[rows]


def _is_compile(name: str) -> bool:
    return name.startswith(COMPILE_INNER)


def _nested_breaks(trace: Trace, rows: np.ndarray, ids: list[tuple[int, int]]) -> set[tuple[int, int]]:
    """The frame compiles seen to break in a profiled step: a region runs inside one of their regions,
    or one of their regions calls more than one compiled graph outside its nested regions."""
    if not len(rows):
        return set()
    ev = trace.events
    calls = named_rows(trace, Kind.ANNOTATION, lambda n: n.startswith(GRAPH_CALL))
    every = np.concatenate([rows, calls])
    is_region = np.arange(len(every)) < len(rows)
    ts = ev["ts"].to_numpy()[every]
    ends = ts + ev["dur"].to_numpy()[every]
    lanes = ev["lane"].to_numpy()[every]
    in_step = trace.iterations.assign(ts) >= 0
    broken: set[tuple[int, int]] = set()
    direct = np.zeros(len(rows), np.int64)  # graph calls each region row makes itself, in a step
    for lane in np.unique(lanes[is_region]).tolist():
        mine = np.flatnonzero(lanes == lane)
        stack: list[int] = []  # open regions and graph calls, innermost last
        for i in mine[np.lexsort((-ends[mine], ts[mine]))].tolist():
            while stack and ts[i] >= ends[stack[-1]]:
                stack.pop()
            parent = stack[-1] if stack else -1
            if parent >= 0 and is_region[parent] and in_step[i]:
                if is_region[i]:
                    broken.add(ids[parent])
                else:
                    direct[parent] += 1
            stack.append(i)
    broken.update(ids[r] for r in np.flatnonzero(direct > 1).tolist())
    return broken


def _break_locations(trace: Trace) -> tuple[str, ...]:
    """'gb.py:8 in forward' for each resume function Dynamo made that ran inside a step."""
    rows = named_rows(trace, Kind.PYTHON, lambda n: RESUME.match(n) is not None)
    if not len(rows):
        return _break_locations_in_records(trace)
    inside = trace.iterations.assign(trace.events["ts"].to_numpy()[rows]) >= 0
    names = trace.names_of(trace.events["name"].to_numpy()[rows[inside]])
    out = {}
    for name in names:
        m = RESUME.match(name)
        out[f"{m['file'].rsplit('/', 1)[-1]}:{m['at']} in {m['fn']}"] = None
    return tuple(out)


_RESUME_FUNCTION = re.compile(r"^(?:torch_dynamo_resume_in_)+(?P<fn>\w+?)_at_(?P<at>\d+)$")


def _break_locations_in_records(trace: Trace) -> tuple[str, ...]:
    """Without Python frames, the compiled kernels' provenance records name the resume functions
    their code ran in (a kernel after a break is compiled from one): the same 'gb.py:8 in forward'."""
    from kerneltui.analysis.provenance.join import of_trace

    provenance = of_trace(trace)
    out = {}
    for record in provenance.kernels if provenance else ():
        for source in record.source_lines:
            m = _RESUME_FUNCTION.match(source.function)
            if m:
                out[f"{source.file.rsplit('/', 1)[-1]}:{m['at']} in {m['fn']}"] = None
    return tuple(sorted(out))


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


def _flat_breaks(trace: Trace, regions: np.ndarray, calls_at: np.ndarray,
                 ids: dict[int, tuple[int, int]]) -> set[tuple[int, int]]:
    """The frame compiles of outermost regions followed, on their thread and in their step, by eager work
    and then the next region (older torch: one region per graph)."""
    if len(regions) < 2:
        return set()
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
    broken: set[tuple[int, int]] = set()
    for lane in np.unique(lanes).tolist():
        mine = np.flatnonzero(lanes == lane)  # regions are in time order
        prev, nxt = mine[:-1], mine[1:]
        pair = (calls_at[prev] == calls_at[nxt]) & (calls_at[nxt] >= 0)
        times = np.sort(work_t[work_lane == lane])
        held = np.searchsorted(times, starts[nxt], "right") - np.searchsorted(times, ends[prev], "left")
        broken.update(ids[int(r)] for r in regions[prev[pair & (held > 0)]].tolist())
    return broken
