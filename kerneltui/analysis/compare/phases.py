"""Where did the time go: forward, backward, optimizer, and what ran outside compiled code.

Each GPU row gets a phase from where it was launched (its launch call's thread and time):

* "optimizer" - inside an ``Optimizer.step#...`` or ``Optimizer.zero_grad#...``
  annotation. zero_grad counts: it is the optimizer's bookkeeping, not the model's
  (with ``set_to_none=False`` it launches fills). Checked first, so an optimizer
  stepped from a backward hook stays "optimizer". A compiled step loses its
  annotation (Dynamo drops record_function): inside the ``## Call CompiledFxGraph
  <key> ##`` of a graph whose provenance records (``kerneltui capture``) all come
  from ``torch/optim/`` counts too.
* "backward" - launched from the autograd engine's thread (thread name
  ``pt_autograd_*``) or under an ``autograd::engine::evaluate_function`` op. Both,
  because the thread is not always named: the ResNet-18 traces call it
  ``thread 935 (python3)``.
* "forward" - everything else launched inside a step/call (the loss included).
* "" - launched outside every step/call (whatever its thread).

``gpu_compiled`` flags rows launched inside compiled code: a ``Torch-Compiled
Region: f/c`` op, ``CompiledFunction``/``CompiledFunctionBackward`` (AOTAutograd's
forward and backward) or a ``## Call CompiledFxGraph`` annotation.

``phase_breakdown(a, b)``: one row per phase present on either side, in the order
forward, backward, optimizer; launches and summed GPU ns per step (mean over the
side's steps). For a side whose trace has compiled regions, the ``*_outside_*``
fields give the part of that phase launched outside compiled code (an eager
loss, an uncompiled optimizer); they are None for a side with no compiled code.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise
from pathlib import PurePath
from typing import TYPE_CHECKING

import numpy as np

from kerneltui.analysis.provenance.join import of_trace, region_key
from kerneltui.trace.intervals import summable
from kerneltui.trace.one_of import one_of
from kerneltui.trace.schema import Kind
from kerneltui.trace.text_columns import texts

if TYPE_CHECKING:
    from kerneltui.trace.model import Trace

PHASES = ("forward", "backward", "optimizer")
OPTIMIZER_PREFIXES = ("Optimizer.step#", "Optimizer.zero_grad#")
BACKWARD_PREFIX = "autograd::engine::evaluate_function"
AUTOGRAD_THREAD = "pt_autograd"
COMPILED_PREFIXES = ("Torch-Compiled Region", "## Call CompiledFxGraph")
COMPILED_NAMES = frozenset({"CompiledFunction", "CompiledFunctionBackward"})


@dataclass(frozen=True)
class PhaseRow:
    phase: str
    a_launches: float  # per step
    b_launches: float
    a_ns: float  # summed GPU time per step
    b_ns: float
    a_outside_launches: float | None = None  # of a_launches, launched outside compiled code (None: A has none)
    a_outside_ns: float | None = None
    b_outside_launches: float | None = None
    b_outside_ns: float | None = None


def gpu_phases(trace: Trace) -> np.ndarray:
    """Phase of every row of ``trace.gpu`` (object array of str, see module docstring)."""
    g = trace.gpu
    lane = g["launch_lane"].to_numpy()
    t = g["launch_ts"].to_numpy()
    optimizer_rows = named_rows(trace, Kind.ANNOTATION, lambda n: n.startswith(OPTIMIZER_PREFIXES))
    optimizer = launched_inside(trace, np.union1d(optimizer_rows, _optimizer_graph_calls(trace)), lane, t)
    backward = launched_inside(trace, named_rows(trace, Kind.CPU_OP, lambda n: n.startswith(BACKWARD_PREFIX)), lane, t)
    threads = trace.lanes["thread"].astype(str).str.contains(AUTOGRAD_THREAD, regex=False).to_numpy()
    backward |= (lane >= 0) & threads[np.clip(lane, 0, None)]
    in_step = g["iteration"].to_numpy() >= 0
    out = texts(len(g))
    out[in_step] = "forward"
    out[in_step & backward] = "backward"
    out[in_step & optimizer] = "optimizer"
    return out


def _optimizer_graph_calls(trace: Trace) -> np.ndarray:
    """Rows of the `## Call CompiledFxGraph <key> ##` annotations of graphs that only run torch.optim's
    code: every kernel record of the graph with source lines has them all in torch/optim/."""
    provenance = of_trace(trace)
    optim: dict[str, bool] = {}
    for record in provenance.kernels if provenance is not None else ():
        if record.cache_key and record.source_lines:
            ours = all(_in_torch_optim(line.file) for line in record.source_lines)
            optim[record.cache_key] = optim.get(record.cache_key, True) and ours
    keys = {key for key, ours in optim.items() if ours}
    if not keys:
        return np.empty(0, np.int64)
    return named_rows(trace, Kind.ANNOTATION, lambda n: region_key(n) in keys)


def _in_torch_optim(file: str) -> bool:
    parts = PurePath(file).parts
    return any(a == "torch" and b == "optim" for a, b in pairwise(parts))


def gpu_compiled(trace: Trace) -> np.ndarray:
    """True for rows of ``trace.gpu`` launched inside compiled code (see module docstring)."""
    g = trace.gpu
    rows = compiled_rows(trace)
    return launched_inside(trace, rows, g["launch_lane"].to_numpy(), g["launch_ts"].to_numpy())


def compiled_rows(trace: Trace) -> np.ndarray:
    """Event rows that mark compiled code: regions, AOTAutograd functions, CompiledFxGraph calls."""
    ops = named_rows(trace, Kind.CPU_OP, lambda n: n.startswith(COMPILED_PREFIXES) or n in COMPILED_NAMES)
    calls = named_rows(trace, Kind.ANNOTATION, lambda n: n.startswith(COMPILED_PREFIXES))
    return np.union1d(ops, calls)


def phase_breakdown(a: Trace, b: Trace) -> list[PhaseRow]:
    sa, sb = _per_step(a), _per_step(b)
    rows = []
    for phase in PHASES:
        if phase not in sa and phase not in sb:
            continue
        la, na, oa, oan = sa.get(phase, (0.0, 0.0, 0.0, 0.0))
        lb, nb, ob, obn = sb.get(phase, (0.0, 0.0, 0.0, 0.0))
        ca, cb = sa.get("compiled", False), sb.get("compiled", False)
        rows.append(PhaseRow(phase, la, lb, na, nb, oa if ca else None, oan if ca else None,
                             ob if cb else None, obn if cb else None))
    return rows


def _per_step(trace: Trace) -> dict:
    """phase -> (launches, ns, launches outside compiled code, their ns) per step; "compiled": has any."""
    g = trace.gpu
    phases = gpu_phases(trace)
    compiled = gpu_compiled(trace)
    dur = summable(g["dur"].to_numpy())
    steps = max(trace.iterations.count, 1)
    out: dict = {"compiled": bool(len(compiled_rows(trace)))}
    for phase in PHASES:
        mine = phases == phase
        if not mine.any():
            continue
        outside = mine & ~compiled
        out[phase] = (float(mine.sum()) / steps, float(dur[mine].sum()) / steps,
                      float(outside.sum()) / steps, float(dur[outside].sum()) / steps)
    return out


def named_rows(trace: Trace, kind: Kind, test) -> np.ndarray:
    """Rows of events of ``kind`` whose name passes ``test`` (one test per distinct name)."""
    wanted = [code for code, name in enumerate(trace.names) if test(name)]
    if not wanted:  # the usual answer (no loss op, no compiled region...): no pass over the events
        return np.empty(0, np.int64)
    ev = trace.events
    codes = ev["name"].to_numpy()
    return np.flatnonzero(one_of(codes, wanted) & (ev["kind"].to_numpy() == kind))


def launched_inside(trace: Trace, marker_rows: np.ndarray, lanes: np.ndarray, t: np.ndarray) -> np.ndarray:
    """For each (lane, time): does one of ``marker_rows``' intervals on that lane contain it?

    The markers of one lane are merged into disjoint runs first (they may nest),
    then one searchsorted per lane answers every query on it.
    """
    out = np.zeros(len(t), bool)
    if not len(marker_rows) or not len(t):
        return out
    ev = trace.events
    m_lane = ev["lane"].to_numpy()[marker_rows]
    m_start = ev["ts"].to_numpy()[marker_rows]
    m_end = m_start + ev["dur"].to_numpy()[marker_rows]
    for lane in np.unique(m_lane).tolist():
        queries = np.flatnonzero(lanes == lane)
        if not len(queries):
            continue
        mine = m_lane == lane
        starts, ends = _merge(m_start[mine], m_end[mine])
        at = np.searchsorted(starts, t[queries], side="right") - 1
        ok = at >= 0
        out[queries[ok]] = ends[at[ok]] >= t[queries[ok]]
    return out


def _merge(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    order = np.argsort(starts, kind="stable")
    s, e = starts[order], ends[order]
    reach = np.maximum.accumulate(e)
    new = np.ones(len(s), bool)
    new[1:] = s[1:] > reach[:-1]
    first = np.flatnonzero(new)
    return s[first], np.maximum.reduceat(e, first)
