"""Are these two traces the same workload? Checked before any speed-up is claimed.

Evidence, per side:

* **inputs** - from one representative step/call (the one with the most ops that
  recorded shapes; steps of one run repeat the same shapes): the first tensor argument
  of each outermost op that recorded shapes (record_shapes), TensorLists flattened. In
  eager code those are the ops the program called. Under ``torch.compile`` the
  compiled region records none: in training, AOTAutograd's ``CompiledFunction`` is
  called with the graph's inputs and parameters (all of its arguments count); in
  inference the outermost recorded ops are Inductor's kernels and extern calls; a
  CUDA-graph (``reduce-overhead``) step only shows ``aten::_foreach_copy_`` copying the
  inputs into the graph's static buffers. 0-d tensors are left out (they say nothing
  about the problem size).
* **largest** - the inputs with the most elements, among those of rank >= 2 where there
  are any: flat 1-D buffers (FSDP flat parameters, DDP gradient buckets) differ between
  ranks and shardings of one job.
* **tensors** - every tensor argument the step's ops recorded (the dtypes of a shape).
* **library calls** - per step (mean over steps), the GEMM, convolution, attention and
  collective calls, by what each computes (``anchors.library_call``): a GEMM by its
  batch, K and {M, N}, whichever op ran it (``mm``, ``addmm``, an extern call, an
  autotuned Triton template in its place); a convolution by its input and weight;
  without an op (CUDA-graph replays), a library kernel by its class alone.
* **device** - ``deviceProperties`` name.

Rules (any failing one makes ``ok`` False, with its evidence as the reason):

1. Inputs, in either direction: the workloads match when one of A's largest inputs is
   among B's inputs, or one of B's among A's (or, failing that, both largest hold the
   same element count: one buffer seen through two views). Where the matched shape's
   dtype is known on both sides and differs: "input dtypes differ".
2. Library calls per step, class by class: the same count within 5% ("B runs 13 GEMMs
   per step, A 25": another depth), and where the counts are equal and both sides know
   every call's shapes, the same calls ("A runs GEMM 8×768×50000 that B does not":
   another width or batch). Inductor may
   rewrite attention written as matmuls into one attention call: where the attention
   counts differ, GEMM counts may too.
3. Devices: a different device is reported but does not fail: times compare as
   measured, not per device (nothing is said where a trace names none).

``ok`` is None ("cannot tell") when either side recorded no shapes and no rule found a
difference.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from kerneltui.analysis.compare.anchors import event_roles, valid_shapes
from kerneltui.analysis.traffic import ITEMSIZE
from kerneltui.trace.intervals import depth_by_group
from kerneltui.trace.model import parse_shapes
from kerneltui.trace.schema import Kind

if TYPE_CHECKING:
    from kerneltui.trace.model import Trace

Shape = tuple[int, ...]

LIBRARY_OP = re.compile(
    r"^aten::(mm|addmm|bmm|baddbmm|_scaled_mm|_int_mm|_addmm_activation|cudnn_convolution\w*|miopen_convolution\w*"
    r"|mkldnn_convolution|convolution_backward|_scaled_dot_product_\w+|_flash_attention_\w+|_efficient_attention_\w+)$"
)

# Kernel-name classes, tried in this order (a cuDNN SDPA kernel is attention, not conv).
KERNEL_CLASSES = (
    ("collective", re.compile(r"nccl|rccl|all_?reduce|all_?gather|reduce_?scatter|all_?to_?all|cross_device_reduce",
                              re.I)),
    ("attention", re.compile(r"flash|fmha|sdpa|attention|attn|cudnn::fusion", re.I)),
    ("conv", re.compile(r"conv(?!ert)|fprop|dgrad|wgrad|cudnn", re.I)),
    ("gemm", re.compile(r"nvjet|gemm|cutlass|cublas|Cijk_|xmma|^sm\d+_|^ampere_|^volta_|^turing_|triton_tem_", re.I)),
)
LIBRARY_CLASSES = tuple(name for name, _ in KERNEL_CLASSES)


def kernel_class(name: str) -> str:
    """gemm / conv / attention / collective for a library kernel's name, "" for anything else.

    Triton kernels are named after the ops they fused (``..._convolution_backward_...``):
    only Inductor's GEMM templates (``triton_tem_*``) count, as GEMMs.
    """
    if name.startswith("triton_"):
        return "gemm" if name.startswith("triton_tem_") else ""
    for label, pattern in KERNEL_CLASSES:
        if pattern.search(name):
            return label
    return ""


def gpu_kernel_classes(trace: Trace) -> np.ndarray:
    """kernel_class of every row of ``trace.gpu`` (one regex pass per distinct name)."""
    full = trace.gpu["full_name"].array
    classes = np.array([kernel_class(str(n)) for n in full.categories] + [""], dtype=object)
    return classes[full.codes]


@dataclass(frozen=True)
class WorkloadSignature:
    label: str  # the representative step/call
    shapes_recorded: bool  # some op of that step recorded tensor shapes
    tensors: dict[Shape, frozenset[str]]  # shape -> dtype tags seen ("" for a TensorList element)
    inputs: frozenset[Shape]  # first tensor argument of the step's outermost recorded ops
    largest: tuple[Shape, ...]  # the largest of the inputs
    library_calls: dict[tuple, float]  # library_call key -> calls per step
    library_counts: dict[str, float]  # class -> calls per step
    device: str
    unit: str = "step"
    shapes_asked: bool = False  # the capture says it profiled with record_shapes (kerneltui's block)

    @property
    def library_kernels(self) -> dict[str, float]:  # the old name of library_counts
        return self.library_counts

    def to_dict(self) -> dict:
        top = sorted(self.library_calls.items(), key=lambda kv: (-kv[1], str(kv[0])))[:5]
        return {
            "step": self.label,
            "shapes_recorded": self.shapes_recorded,
            "largest": [_dims(s) + _dtype_suffix(self.tensors.get(s, frozenset())) for s in self.largest],
            "distinct_tensor_shapes": len(self.tensors),
            "distinct_input_shapes": len(self.inputs),
            "library_calls_per_step": {CLASS_NAMES[c]: round(v, 2) for c, v in self.library_counts.items()},
            "library_calls": [f"{call_text(k)} ×{_count(v)}" for k, v in top],
            "device": self.device,
        }


@dataclass(frozen=True)
class Comparability:
    ok: bool | None  # None: cannot tell
    reasons: tuple[str, ...]  # differences (and the device note), empty when all agree
    evidence: dict = field(default_factory=dict)  # {"a": signature dict, "b": ..., "matched": ...}


# Library call counts this close are one workload: ranks of a job may differ a little (data-dependent
# work, sampled traces: 205.5 vs 211.5 GEMMs per step in HTA's sampled ranks); a model one layer in
# twelve deeper is 8% apart, twice as deep 100%.
COUNT_SLACK = 0.05
GRAPH_CALLS = frozenset({"CompiledFunction", "CompiledFunctionBackward"})  # AOTAutograd's call of a graph
CLASS_NAMES = {"gemm": "GEMM", "conv": "convolution", "attention": "attention", "collective": "collective"}


def workload_signature(trace: Trace) -> WorkloadSignature:
    its = trace.iterations
    ev = trace.events
    ops = np.flatnonzero((ev["kind"].to_numpy() == Kind.CPU_OP) & (ev["shapes_at"].to_numpy() >= 0))
    at = its.assign(ev["ts"].to_numpy()[ops])
    counts = np.bincount(at[at >= 0], minlength=its.count) if its.count else np.zeros(0, int)
    step = int(np.argmax(counts)) if len(counts) and counts.max() > 0 else 0
    mine = ops[at == step]
    outermost = set(_outermost(trace, mine).tolist())
    tensors: dict[Shape, set[str]] = {}
    inputs: set[Shape] = set()
    parsed: dict[bytes, list[tuple[Shape, str, int]]] = {}  # one parse per distinct record
    shapes_at, shapes_len, names = (ev[c].to_numpy() for c in ("shapes_at", "shapes_len", "name"))
    graph_calls = {i for i, n in enumerate(trace.names) if n in GRAPH_CALLS}
    for row in mine.tolist():
        start, length = int(shapes_at[row]), int(shapes_len[row])
        blob = bytes(trace.shapes_blob[start : start + length])
        if blob not in parsed:
            parsed[blob] = _tensor_args(valid_shapes(parse_shapes(blob)))
        args = parsed[blob]
        for shape, tag, _ in args:
            if shape:
                tensors.setdefault(shape, set()).add(tag)
        if row in outermost and args:
            # a compiled graph's call takes the workload's own inputs (and parameters): all of them
            whole = int(names[row]) in graph_calls
            first = args[0][2]
            inputs.update(shape for shape, _, arg in args if (whole or arg == first) and shape)
    if not inputs:  # no outermost op recorded a tensor: every tensor stands in
        inputs = set(tensors)
    largest: tuple[Shape, ...] = ()
    pool = [s for s in inputs if len(s) >= 2] or list(inputs)  # flat 1-D buffers vary by rank/shard
    if pool:
        most = max(_numel(s) for s in pool)
        largest = tuple(sorted(s for s in pool if _numel(s) == most))
    calls, classes = _library_calls(trace)
    return WorkloadSignature(
        label=its.labels[step] if its.count else "",
        shapes_recorded=bool(tensors),
        tensors={s: frozenset(t) for s, t in tensors.items()},
        inputs=frozenset(inputs),
        largest=largest,
        library_calls=calls,
        library_counts=classes,
        device=trace.meta.device_name,
        unit=its.unit,
        shapes_asked=(trace.meta.capture or {}).get("record_shapes") is True,
    )


def compare_workloads(a: Trace, b: Trace) -> Comparability:
    return compare_signatures(workload_signature(a), workload_signature(b))


def compare_signatures(sa: WorkloadSignature, sb: WorkloadSignature) -> Comparability:
    differences: list[str] = []
    evidence: dict = {"a": sa.to_dict(), "b": sb.to_dict()}
    both_shapes = sa.shapes_recorded and sb.shapes_recorded
    if both_shapes and sa.largest and sb.largest:
        matched = _match_largest(sa, sb)
        evidence["matched"] = _dims(matched) if matched else None
        if matched is None:
            differences.append(f"inputs differ: largest input {_dims(sa.largest[0])} vs {_dims(sb.largest[0])}")
        else:
            ta, tb = sa.tensors.get(matched, frozenset()) - {""}, sb.tensors.get(matched, frozenset()) - {""}
            if ta and tb and not ta & tb:
                differences.append(
                    f"input dtypes differ: {_dims(matched)} is {'/'.join(sorted(ta))} vs {'/'.join(sorted(tb))}"
                )
    unit = sa.unit if sa.unit == sb.unit else "step/call"
    differences += _library_differences(sa, sb, unit)
    notes = []
    unknown = "unknown device"
    if sa.device != sb.device and unknown not in (sa.device, sb.device):
        notes.append(f"different devices ({sa.device} vs {sb.device}): times compare as measured, not per device")
    if differences:
        ok: bool | None = False
    elif both_shapes:
        ok = True
    else:
        ok = None
        sides = [(side, s) for side, s in (("A", sa), ("B", sb)) if not s.shapes_recorded]
        missing = " and ".join(side for side, _ in sides)
        if all(s.shapes_asked for _, s in sides):  # record_shapes was on: compiled code calls few ATen ops
            notes.insert(0, f"cannot tell: no input shapes in {missing}, though profiled with record_shapes: "
                            "no op of its steps took a tensor")
        else:
            notes.insert(0, f"cannot tell: no input shapes recorded in {missing} (profile with record_shapes=True)")
    return Comparability(ok, tuple(differences + notes), evidence)


TAG_SIZE = {tag: size for size, tag in ITEMSIZE.values()}


def reference_tensor(sa: WorkloadSignature, sb: WorkloadSignature) -> tuple[float, str]:
    """(bytes, "[64, 3, 128, 128] bf16") of the tensor both sides' transfers are counted in.

    A tensor the traces recorded, the same for both sides, so bytes and transfers move together:
    the largest (in bytes) that both recorded, with its dtype; failing that, the larger of each
    side's largest. (nan, "") where neither recorded a tensor of known dtype and some size: an empty
    tensor (a dim of 0) is no unit to count transfers in."""
    def sized(sig: WorkloadSignature) -> dict[tuple, int]:
        return {(shape, tag): _numel(shape) * TAG_SIZE[tag] for shape, tags in sig.tensors.items()
                for tag in tags if tag in TAG_SIZE and _numel(shape)}
    ta, tb = sized(sa), sized(sb)
    pool = {k: v for k, v in ta.items() if k in tb} or {**ta, **tb}
    if not pool:
        return float("nan"), ""
    (shape, tag), size = max(pool.items(), key=lambda kv: (kv[1], kv[0]))
    return float(size), f"{_dims(shape)} {tag}"


def _outermost(trace: Trace, rows: np.ndarray) -> np.ndarray:
    """Of op rows, those no other of them encloses on their thread."""
    if not len(rows):
        return rows
    ev = trace.events
    ts = ev["ts"].to_numpy()[rows]
    return rows[depth_by_group(ev["lane"].to_numpy()[rows], ts, ts + ev["dur"].to_numpy()[rows]) == 0]


def _tensor_args(shapes: dict | None) -> list[tuple[Shape, str, int]]:
    """(shape, dtype tag, argument index) of each tensor in order; TensorList elements get tag ""."""
    shapes = valid_shapes(shapes)
    if not shapes:
        return []
    out = []
    for i, (dims, kind) in enumerate(zip(shapes["dims"], shapes["types"])):
        if kind == "TensorList" and isinstance(dims, list):
            out += [(s, "", i) for s in map(_shape, dims) if s is not None]
        elif isinstance(kind, str) and kind in ITEMSIZE:
            shape = _shape(dims)
            if shape is not None:
                out.append((shape, ITEMSIZE[kind][1], i))
    return out


def _shape(value) -> Shape | None:
    if isinstance(value, list) and all(type(d) is int and d >= 0 for d in value):
        return tuple(value)
    return None


def _numel(shape: Shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def _match_largest(sa: WorkloadSignature, sb: WorkloadSignature) -> Shape | None:
    """The input shape that ties the two steps together (rule 1), or None."""
    for shape in sa.largest:
        if shape in sb.inputs:
            return shape
    for shape in sb.largest:
        if shape in sa.inputs:
            return shape
    if _numel(sa.largest[0]) == _numel(sb.largest[0]):
        return sa.largest[0]
    return None


def _library_calls(trace: Trace) -> tuple[dict[tuple, float], dict[str, float]]:
    """Library calls per step: by what each computes, and by class (see anchors.library_call)."""
    roles = event_roles(trace)
    its = trace.iterations
    inside = (trace.gpu["iteration"].to_numpy() >= 0) & (roles.anchor != -1)
    steps = max(its.count, 1)
    calls: Counter = Counter()
    for aid in np.unique(roles.anchor[inside]).tolist():
        key = roles.call.get(aid)
        if key is not None and key[0] != "copy":
            calls[key] += 1
    by_class: Counter = Counter()
    for key, n in calls.items():
        by_class[_class_of(key)] += n
    return ({k: n / steps for k, n in calls.items()},
            {c: by_class[c] / steps for c in LIBRARY_CLASSES if by_class[c]})


def _class_of(key: tuple) -> str:
    first = key[0]
    if first in ("gemm", "conv", "attention"):
        return first
    if first in ("conv backward", "attention backward"):
        return first.split()[0]
    return "collective"


def _library_differences(sa: WorkloadSignature, sb: WorkloadSignature, unit: str) -> list[str]:
    out = []
    ka, kb = sa.library_counts, sb.library_counts
    rewritten = round(ka.get("attention", 0.0), 2) != round(kb.get("attention", 0.0), 2)
    exact = True
    for cls in LIBRARY_CLASSES:
        na, nb = ka.get(cls, 0.0), kb.get(cls, 0.0)
        exact &= round(na, 2) == round(nb, 2)
        if abs(na - nb) <= COUNT_SLACK * max(na, nb) or (cls == "gemm" and rewritten and na and nb):
            continue
        what = CLASS_NAMES[cls] + ("s" if cls != "attention" else " calls")
        out.append(f"library calls differ: B runs {_count(nb)} {what} per {unit}, A {_count(na)}")
    if out or not exact:
        return out
    # the same counts: where both sides know every call's shapes, the same calls
    known_a = {k: v for k, v in sa.library_calls.items() if k[-1] is not None}
    known_b = {k: v for k, v in sb.library_calls.items() if k[-1] is not None}
    if len(known_a) != len(sa.library_calls) or len(known_b) != len(sb.library_calls):
        return out
    for first, second, label in ((known_a, known_b, "A runs {} that B does not"),
                                 (known_b, known_a, "B runs {} that A does not")):
        extra = [k for k in first if round(first[k], 2) > round(second.get(k, 0.0), 2)]
        if extra:
            out.append("library calls differ: " + label.format(call_text(max(extra, key=_call_size))))
            break
    return out


def _call_size(key: tuple) -> int:
    if key[0] == "gemm" and key[1] is not None:
        return int(np.prod(key[1:], dtype=np.float64))
    return max((_numel(s) for s in key[1:] if isinstance(s, tuple)), default=0)


def call_text(key: tuple) -> str:
    """'GEMM 768×3072×4096' (M×K×N, M the smaller of M and N), 'convolution [64, 3, 128, 128] * [64, 3, 7, 7]'."""
    kind = key[0]
    if key[-1] is None:
        return CLASS_NAMES.get(kind, kind)
    if kind == "gemm":
        batch, k, m, n = key[1:]
        return f"GEMM {m}×{k}×{n}" + (f" (batch {batch})" if batch > 1 else "")
    if kind.startswith(("conv", "attention")):
        name = kind.replace("conv", "convolution")
        return f"{name} {_dims(key[1])} * {_dims(key[2])}"
    return f"{kind.removeprefix('aten::')} {_dims(key[1])}"


def _count(x: float) -> str:
    return f"{x:g}" if x == int(x) else f"{x:.1f}"


def _dims(shape: Shape) -> str:
    return "[" + ", ".join(map(str, shape)) + "]"


def _dtype_suffix(tags: frozenset[str]) -> str:
    known = sorted(tags - {""})
    return f" {'/'.join(known)}" if known else ""
