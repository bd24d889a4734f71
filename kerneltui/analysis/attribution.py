"""Every GPU event on the user's code: forward and backward placed on the forward op and its nn.Module.

``attribute(trace)`` gives, per row of ``trace.gpu``, where its time belongs (a table any
view groups by: the module tree, ``summary --by module``, the per-module diff):

* **forward** (launched in a step, not from the autograd engine or the optimizer): the
  launching op is its forward op; its place is the innermost ``nn.Module`` around the
  launch (``with_stack`` frames).
* **backward**: from the launching op, the nearest enclosing op with a ``Sequence number``
  (the autograd node, ``AddmmBackward0``, or the engine's ``evaluate_function`` around it,
  which holds the node's own work such as a bias gradient's ``sum``). Its forward op is
  the op that made the node in the forward pass: of the forward ops recording the
  node's sequence number, the last to start (an op records the number the next node
  will take, so ops before the maker share it: an input's ``aten::to``, the
  ``nll_loss`` around ``nll_loss_forward``). The ends of a ``fwdbwd`` flow join the
  same two ops; torch 1.8 traces have the numbers and no flows. Its place is that
  forward op's module.
* **optimizer**: launched inside ``Optimizer.step#…``/``zero_grad#…``: "optimizer", with
  the optimizer's class.
* **loss**: a forward op (or the forward op of a backward node) inside a loss op
  (``cross_entropy``, ``nll_loss``, ``mse_loss``…) and outside every module: "loss".
* **compiled code**: a kernel Inductor generated, placed on the modules its provenance
  record names (``kerneltui capture`` writes it); without a record, "whole model
  (compiled region)", never a layer it may not belong to.

A trace without module frames (no ``with_stack``) places each event on its forward op's
outermost op instead, numbered by name within its step so the same op of every step
merges: ``aten::conv2d #17``. ``by`` says which.

What no rule places is named for what it is (``unplaced``): "outside the steps", "outside
any module" (forward work no module encloses: an input's H2D copy), "no forward op",
"autograd engine" (backward work with no forward op: ``AccumulateGrad``), "gradient
communication" (DDP's reducer and the collectives its hooks run), "CUDA-graph replay (no
provenance)", "no launch call in the trace" (CUDA-only traces, torch 1.8's unlinked kernels).
"""

from __future__ import annotations

import re
import weakref
from dataclasses import dataclass

import numpy as np
import pandas as pd

from kerneltui.analysis.compare.phases import OPTIMIZER_PREFIXES, gpu_compiled, gpu_phases, named_rows
from kerneltui.analysis.provenance.join import records_of
from kerneltui.trace.frames import MODULE_FRAME, innermost_frames, sources
from kerneltui.trace.intervals import innermost, split_by
from kerneltui.trace.model import Trace
from kerneltui.trace.schema import Kind
from kerneltui.trace.text_columns import texts

OPTIMIZER = "optimizer"
LOSS = "loss"
COMPILED = "whole model (compiled region)"
UNPLACED = ("outside the steps", "outside any module", "no forward op", "autograd engine", "gradient communication",
            "CUDA-graph replay (no provenance)", "no launch call in the trace")
COMMUNICATION = re.compile(r"reducer|^c10d::|^nccl:|^record_param_comms|^_c10d_functional::|^fsdp::")
LOSS_OPS = re.compile(r"^aten::(cross_entropy_loss|nll_loss\w*|mse_loss|l1_loss|smooth_l1_loss|huber_loss|kl_div"
                      r"|binary_cross_entropy\w*|soft_margin_loss|multi_margin_loss|multilabel_margin_loss\w*"
                      r"|hinge_embedding_loss|cosine_embedding_loss|margin_ranking_loss|triplet_margin_loss"
                      r"|poisson_nll_loss|ctc_loss|_ctc_loss)$")
AUTOGRAD_NODE = re.compile(r"Backward\d*$|^autograd::|^torch::autograd::")
OPTIMIZER_CLASS = re.compile(r"^Optimizer\.(?:step|zero_grad)#(?P<cls>[^.]+)\.")


@dataclass(frozen=True, eq=False)
class Attribution:
    """Per row of ``trace.gpu`` (read-only arrays)."""

    by: str  # "module" (the trace has nn.Module frames) or "forward op"
    phase: np.ndarray  # "forward", "backward", "optimizer", "" (outside the steps)
    unit: np.ndarray  # the place: "TinyGPT_0.Block_3.Linear_12", "aten::conv2d #17", "optimizer", "loss", or ""
    unplaced: np.ndarray  # why the row has no place (one of UNPLACED), "" where placed
    forward_op: np.ndarray  # event row of its forward op, -1 where none
    source: np.ndarray  # the forward op's user source line, "" where unknown
    how: np.ndarray  # "frames", "sequence", "provenance", "compiled region", "forward op", "optimizer", ""
    labels: dict  # unit -> how it is shown ("optimizer (AdamW)")
    classes: dict = None  # unit placed by provenance -> its module class ("Net.mlp.act" -> "GELU")

    @property
    def placed(self) -> np.ndarray:
        return self.unit != ""


_CACHE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_PLACES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_CODES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def place_codes(trace: Trace) -> tuple[np.ndarray, tuple[str, ...]]:
    """Per row of trace.gpu: a code into the distinct places (``places``), for masks over a million rows."""
    if trace not in _CODES:
        codes, names = pd.factorize(pd.Series(places(trace), dtype=object), sort=False)
        _CODES[trace] = (codes.astype(np.int64), tuple(str(n) for n in names))
    return _CODES[trace]


def under(trace: Trace, path: str) -> np.ndarray:
    """Rows of trace.gpu placed on ``path`` or under it (a module's children are 'path.child')."""
    codes, names = place_codes(trace)
    wanted = np.array([n == path or n.startswith(path + ".") for n in names] + [False], bool)
    return wanted[np.where(codes >= 0, codes, len(names))]


def places(trace: Trace) -> np.ndarray:
    """Per row of trace.gpu: its place, or "(what)" where none (the module grouping's keys, the scope's test)."""
    if trace not in _PLACES:
        a = attribute(trace)
        # object strings (a fixed-width array is as wide as the longest name on every row); each reason's
        # "(what)" made once
        out = a.unit.copy()
        unplaced = np.flatnonzero(out == "")
        reason, reasons = pd.factorize(a.unplaced[unplaced])
        out[unplaced] = np.array([f"({w})" for w in reasons] + ["()"], dtype=object)[reason]
        _PLACES[trace] = out
    return _PLACES[trace]


def attribute(trace: Trace) -> Attribution:
    """The attribution of a trace, computed once per trace (every view asks)."""
    if trace not in _CACHE:
        _CACHE[trace] = _attribute(trace)
    return _CACHE[trace]


def _attribute(trace: Trace) -> Attribution:
    g = trace.gpu
    n = len(g)
    ev = trace.events
    phase = gpu_phases(trace)
    lane, t = g["launch_lane"].to_numpy(), g["launch_ts"].to_numpy()
    op_row = g["op_row"].to_numpy()
    by = "module" if _has_modules(trace) else "forward op"

    # each phase's rows once (a compare over a million strings costs ~25 ms)
    forward, in_backward, outside = phase == "forward", phase == "backward", phase == ""
    forward_op = np.where(forward, op_row, -1)
    backward = np.flatnonzero(in_backward)
    node = _innermost_of(trace, _rows_with_sequence(trace), lane[backward], t[backward])
    forward_op[backward] = _forward_of_nodes(trace, node)

    unit = texts(n)
    unplaced = texts(n)
    how = texts(n)
    source = texts(n)
    labels: dict[str, str] = {}

    # where the forward op is: launches of the forward pass at the launch, the backward's forward op at itself
    has_op = forward_op >= 0
    at_lane = np.where(forward, lane, ev["lane"].to_numpy()[np.clip(forward_op, 0, None)])
    at_t = np.where(forward, t, ev["ts"].to_numpy()[np.clip(forward_op, 0, None)])
    loss = has_op & (_innermost_of(trace, named_rows(trace, Kind.CPU_OP, LOSS_OPS.match), at_lane, at_t) >= 0)
    if by == "module":
        module, source[:] = _modules(trace, at_lane, at_t, has_op)
        placed = has_op & (module != "")
        unit[placed] = module[placed]
        how[placed] = np.where(in_backward[placed], "sequence", "frames")
    else:
        keys = _forward_op_keys(trace, at_lane, at_t, has_op)
        placed = has_op & (keys != "")
        unit[placed] = keys[placed]
        how[placed] = "forward op"
    unit[loss & ~placed] = LOSS
    how[loss & ~placed] = "loss op"

    compiled = _compiled_places(trace, forward, in_backward, forward_op)
    records = records_of(trace)
    classes: dict[str, str] = {}
    for i in np.flatnonzero(compiled).tolist():
        record = records[i]
        paths = [p for p in (record.module_paths if record is not None else ()) if p]
        unit[i] = _provenance_path(paths[0], classes) if paths else COMPILED
        how[i] = "provenance" if paths else "compiled region"
    # graph replays have no op: a record still places them
    for i in np.flatnonzero((op_row < 0) & ~outside & (unit == "")).tolist():
        record = records[i]
        paths = [p for p in (record.module_paths if record is not None else ()) if p]
        if paths:
            unit[i], how[i] = _provenance_path(paths[0], classes), "provenance"

    optimizer = phase == "optimizer"
    unit[optimizer] = OPTIMIZER
    how[optimizer] = "optimizer"
    labels[OPTIMIZER] = _optimizer_label(trace, lane[optimizer], t[optimizer])

    unit[outside] = ""
    unplaced[outside] = "outside the steps"
    rest = (unit == "") & ~outside
    graph = g["graph"].to_numpy()
    comms = _innermost_of(trace, named_rows(trace, Kind.CPU_OP, COMMUNICATION.search), lane, t) >= 0
    replay = rest & graph
    unplaced[replay] = "CUDA-graph replay (no provenance)"
    no_call = rest & ~graph & (g["launch_row"].to_numpy() < 0)
    unplaced[no_call] = "no launch call in the trace"
    reasonless = rest & ~replay & ~no_call  # the rest's rows without a reason yet (each reason is a word)
    backward_rest = reasonless & in_backward & ~has_op
    unplaced[backward_rest & comms] = "gradient communication"  # DDP's reducer, collectives run from hooks
    unplaced[backward_rest & ~comms] = "autograd engine"
    unplaced[reasonless & ~backward_rest] = "outside any module" if by == "module" else "no forward op"
    return Attribution(by, phase, unit, unplaced, forward_op, source, how, labels, classes)


def _has_modules(trace: Trace) -> bool:
    if not trace.meta.with_stack:
        return False
    names = [n for n in trace.names if n.startswith(MODULE_FRAME)]
    return bool(names)


def _rows_with_sequence(trace: Trace) -> np.ndarray:
    ev = trace.events
    return np.flatnonzero((ev["kind"].to_numpy() == Kind.CPU_OP) & (ev["sequence"].to_numpy() >= 0))


def _innermost_of(trace: Trace, rows: np.ndarray, lanes: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Per (lane, time): the tightest of ``rows`` (ops that nest) containing it on that lane, or -1."""
    out = np.full(len(t), -1, np.int64)
    if not len(rows) or not len(t):
        return out
    ev = trace.events
    r_lane = ev["lane"].to_numpy()[rows]
    starts = ev["ts"].to_numpy()[rows]
    ends = starts + ev["dur"].to_numpy()[rows]
    # rows and queries split by lane in one sort each (a compare over all of them per lane cost 0.1 s at 1 GB,
    # with hundreds of threads)
    rows_of = split_by(r_lane, np.arange(len(r_lane)))
    for lane, queries in split_by(lanes, np.arange(len(lanes))).items():
        mine = rows_of.get(lane)
        if mine is None:
            continue
        found = innermost(starts[mine], ends[mine], t[queries])
        out[queries] = np.where(found >= 0, rows[mine][np.clip(found, 0, None)], -1)
    return out


def _forward_of_nodes(trace: Trace, nodes: np.ndarray) -> np.ndarray:
    """The forward op of each autograd node row (-1 stays -1): the outermost forward op recording its number."""
    out = np.full(len(nodes), -1, np.int64)
    if not len(nodes):
        return out
    ev = trace.events
    rows = _rows_with_sequence(trace)
    # a regex per distinct name, not per op (a 1 GB trace: 365k ops, 0.3 s)
    forward = rows[trace.by_name(ev["name"].to_numpy()[rows], lambda n: not AUTOGRAD_NODE.search(n), bool)]
    if not len(forward):
        return out
    seq = ev["sequence"].to_numpy()
    # the op that made the node is the last to start with its number: an op records the number the next
    # node will take, so the ops before it (an input's aten::to, an outer nll_loss) share it
    order = np.lexsort((ev["dur"].to_numpy()[forward], -ev["ts"].to_numpy()[forward], seq[forward]))
    forward = forward[order]
    numbers = seq[forward]
    first = np.ones(len(forward), bool)
    first[1:] = numbers[1:] != numbers[:-1]
    numbers, forward = numbers[first], forward[first]
    has = nodes >= 0
    wanted = seq[nodes[has]]
    at = np.clip(np.searchsorted(numbers, wanted), 0, len(numbers) - 1)
    hit = numbers[at] == wanted
    found = np.full(int(has.sum()), -1, np.int64)
    found[hit] = forward[at[hit]]
    out[has] = found
    return out


def _modules(trace: Trace, lanes: np.ndarray, t: np.ndarray, has: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The nn.Module path ("A_0.B_1") and user source line around each (lane, time)."""
    module = texts(len(t))
    source = texts(len(t))
    where = np.flatnonzero(has)
    if not len(where):
        return module, source
    # one frame lookup per distinct place (a backward node's forward op is shared by its kernels)
    place_lane, place_t = lanes[where], t[where]
    order = np.lexsort((place_t, place_lane))
    new = np.ones(len(order), bool)
    new[1:] = (place_lane[order][1:] != place_lane[order][:-1]) | (place_t[order][1:] != place_t[order][:-1])
    distinct = order[new]  # the first of each place, in (lane, time) order
    which = np.empty(len(order), np.int64)
    which[order] = np.cumsum(new) - 1  # each place's distinct one
    named = sources(trace, innermost_frames(trace, place_lane[distinct], place_t[distinct]))
    path, paths = pd.factorize(named["module"].to_numpy(dtype=object))  # a few paths: each rewritten once
    module[where] = np.array([p.replace("/", ".") for p in paths] + [""], dtype=object)[path][which]
    source[where] = named["source"].to_numpy(dtype=object)[which]
    return module, source


def _forward_op_keys(trace: Trace, lanes: np.ndarray, t: np.ndarray, has: np.ndarray) -> np.ndarray:
    """'aten::conv2d #17': the outermost op around each (lane, time), numbered by name within its step."""
    out = texts(len(t))
    top = trace.top_level_ops()
    if not len(top):
        return out
    ev = trace.events
    its = trace.iterations
    name_codes = ev["name"].to_numpy()[top]
    step = its.assign(ev["ts"].to_numpy()[top])
    # the k-th op of each name within its step and thread, in time order (top is in time order)
    k = pd.DataFrame({"s": step, "l": ev["lane"].to_numpy()[top], "n": name_codes}).groupby(
        ["s", "l", "n"], sort=False).cumcount().to_numpy() + 1
    distinct, inverse = np.unique(name_codes, return_inverse=True)
    kinds = np.array([COMPILED if n.startswith(("Torch-Compiled Region", "CompiledFunction"))
                      else LOSS if LOSS_OPS.match(n) else "" for n in trace.names_of(distinct).tolist()], dtype=object)
    names = trace.names_of(distinct)[inverse.reshape(-1)]
    special = kinds[inverse.reshape(-1)]
    label = np.array([s or f"{n} #{i}" for s, n, i in zip(special.tolist(), names.tolist(), k.tolist())], dtype=object)
    at = _innermost_of(trace, top, np.where(has, lanes, -1), t)
    position = pd.Series(np.arange(len(top)), index=top)  # top-level row -> its label
    found = (at >= 0) & has
    out[found] = label[position.loc[at[found]].to_numpy()]
    return out


def _compiled_places(trace: Trace, forward: np.ndarray, in_backward: np.ndarray, forward_op: np.ndarray) -> np.ndarray:
    """Rows of compiled code: launched inside a compiled region (forward), or whose forward op is AOTAutograd's
    ``CompiledFunction`` or inside a region (backward)."""
    compiled = gpu_compiled(trace) & forward
    ev = trace.events
    backward = np.flatnonzero(in_backward & (forward_op >= 0))
    if len(backward):  # once a distinct name, not per kernel
        compiled[backward] = trace.by_name(ev["name"].to_numpy()[forward_op[backward]],
                                           lambda n: n.startswith(("CompiledFunction", "Torch-Compiled Region")), bool)
    return compiled


def _provenance_path(path: str, classes: dict[str, str]) -> str:
    """'Net.block (Block)' -> 'Net.block' (and its class noted in ``classes``)."""
    place, _, cls = path.partition(" (")
    if cls:
        classes[place] = cls.rstrip(")")
    return place


def _optimizer_label(trace: Trace, lanes: np.ndarray, t: np.ndarray) -> str:
    rows = named_rows(trace, Kind.ANNOTATION, lambda n: n.startswith(OPTIMIZER_PREFIXES))
    if not len(rows) or not len(t):
        return OPTIMIZER
    found = _innermost_of(trace, rows, lanes, t)
    # once a distinct name, not per launch (a DataFrame lookup and a match each: 0.14 s at 1 GB)
    codes = np.unique(trace.events["name"].to_numpy()[found[found >= 0]])
    classes = {m["cls"] for code in codes.tolist() if (m := OPTIMIZER_CLASS.match(trace.name(code)))}
    return f"{OPTIMIZER} ({', '.join(sorted(classes))})" if classes else OPTIMIZER
