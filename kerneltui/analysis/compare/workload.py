"""Are these two traces the same workload? Checked before any speed-up is claimed.

Evidence, per side, from one representative step/call (the one with the most
ops that recorded shapes; steps of one run repeat the same shapes):

* **tensors** - every tensor argument the step's ops recorded (record_shapes):
  eager aten ops list their inputs; Inductor's Triton ops and extern kernels
  (``aten::addmm``, ``aten::cudnn_convolution``) list their buffers; a CUDA-graph
  (``reduce-overhead``) step only shows ``aten::_foreach_copy_`` copying the
  inputs into the graph's static buffers. TensorLists are flattened; 0-d tensors
  are left out (they say nothing about the problem size).
* **largest** - the tensors of that step with the most elements, among those of
  rank >= 2 where there are any: flat 1-D buffers (FSDP flat parameters, DDP
  gradient buckets) differ between ranks and shardings of one job.
* **library ops** - (op, first two tensor shapes) of the GEMM, convolution and
  attention ops (``mm``, ``addmm``, ``bmm``, ``cudnn_convolution``,
  ``convolution_backward``, ``_scaled_dot_product_*``...): Inductor keeps these
  as extern aten ops, so eager and compiled runs of one model record the same.
* **library kernels** - launches per step by kernel-name class (``kernel_class``):
  gemm, conv, attention, collective.
* **device** - ``deviceProperties`` name.

Rules (any failing one makes ``ok`` False, with its evidence as the reason):

1. Largest tensors, in either direction: the workloads match when one of A's
   largest shapes is among B's tensors, or one of B's among A's (or, failing
   that, both largest hold the same element count: one buffer seen through two
   views). Either direction, because fusion removes intermediates: a compiled
   step records fewer tensors than its eager twin, but every buffer it does
   record is one eager also has. Where the matched shape's dtype is known on
   both sides and differs: "input dtypes differ".
2. Library op inputs: when both sides recorded library ops with shapes, at
   least one (op, shapes) must be common. A batch-size change alters every
   GEMM's activation operand, so the sets become disjoint; autotuning that
   replaces some GEMMs by Triton templates only shrinks one side.
3. Library kernels: a conv or collective class that one side launches and the
   other never does; likewise GEMM-or-attention kernels as one class (Inductor
   may rewrite an attention written as matmuls into one SDPA kernel).
4. Devices: a different device is reported but does not fail: times compare
   as measured, not per device (nothing is said where a trace names none).

``ok`` is None ("cannot tell") when either side recorded no shapes and no
rule found a difference.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from kerneltui.trace.schema import Kind
from kerneltui.analysis.traffic import ITEMSIZE

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
    largest: tuple[Shape, ...]
    library_ops: Counter  # (op, shape, shape) -> calls in the step
    library_kernels: dict[str, float]  # class -> launches per step
    device: str

    def to_dict(self) -> dict:
        return {
            "step": self.label,
            "shapes_recorded": self.shapes_recorded,
            "largest": [_dims(s) + _dtype_suffix(self.tensors[s]) for s in self.largest],
            "distinct_tensor_shapes": len(self.tensors),
            "library_ops": [_op_text(k) for k, _ in self.library_ops.most_common(5)],
            "library_kernels_per_step": {k: round(v, 2) for k, v in self.library_kernels.items()},
            "device": self.device,
        }


@dataclass(frozen=True)
class Comparability:
    ok: bool | None  # None: cannot tell
    reasons: tuple[str, ...]  # differences (and the device note), empty when all agree
    evidence: dict = field(default_factory=dict)  # {"a": signature dict, "b": ..., "matched": ...}


def workload_signature(trace: Trace) -> WorkloadSignature:
    its = trace.iterations
    ev = trace.events
    ops = np.flatnonzero((ev["kind"].to_numpy() == Kind.CPU_OP) & (ev["shapes_at"].to_numpy() >= 0))
    at = its.assign(ev["ts"].to_numpy()[ops])
    counts = np.bincount(at[at >= 0], minlength=its.count) if its.count else np.zeros(0, int)
    step = int(np.argmax(counts)) if len(counts) and counts.max() > 0 else 0
    tensors: dict[Shape, set[str]] = {}
    library: Counter = Counter()
    parsed: dict[bytes, list[tuple[Shape, str]]] = {}  # one parse per distinct record
    for row in ops[at == step].tolist():
        start, length = int(ev["shapes_at"].iat[row]), int(ev["shapes_len"].iat[row])
        blob = bytes(trace.shapes_blob[start : start + length])
        if blob not in parsed:
            parsed[blob] = _tensor_args(trace.shapes(row))
        args = parsed[blob]
        for shape, tag in args:
            if shape:
                tensors.setdefault(shape, set()).add(tag)
        name = trace.name(int(ev["name"].iat[row]))
        if LIBRARY_OP.match(name) and len(args) >= 2:
            library[(name, args[0][0], args[1][0])] += 1
    largest: tuple[Shape, ...] = ()
    pool = [s for s in tensors if len(s) >= 2] or list(tensors)  # flat 1-D buffers vary by rank/shard
    if pool:
        most = max(_numel(s) for s in pool)
        largest = tuple(sorted(s for s in pool if _numel(s) == most))
    return WorkloadSignature(
        label=its.labels[step] if its.count else "",
        shapes_recorded=bool(tensors),
        tensors={s: frozenset(t) for s, t in tensors.items()},
        largest=largest,
        library_ops=library,
        library_kernels=_library_kernels(trace),
        device=trace.meta.device_name,
    )


def compare_workloads(a: Trace, b: Trace) -> Comparability:
    sa, sb = workload_signature(a), workload_signature(b)
    differences: list[str] = []
    evidence: dict = {"a": sa.to_dict(), "b": sb.to_dict()}
    both_shapes = sa.shapes_recorded and sb.shapes_recorded
    if both_shapes:
        matched = _match_largest(sa, sb)
        evidence["matched"] = _dims(matched) if matched else None
        if matched is None:
            differences.append(f"inputs differ: largest tensor {_dims(sa.largest[0])} vs {_dims(sb.largest[0])}")
        else:
            ta, tb = sa.tensors.get(matched, frozenset()) - {""}, sb.tensors.get(matched, frozenset()) - {""}
            if ta and tb and not ta & tb:
                differences.append(
                    f"input dtypes differ: {_dims(matched)} is {'/'.join(sorted(ta))} vs {'/'.join(sorted(tb))}"
                )
    if sa.library_ops and sb.library_ops and not set(sa.library_ops) & set(sb.library_ops):
        first_a, first_b = sa.library_ops.most_common(1)[0][0], sb.library_ops.most_common(1)[0][0]
        differences.append(f"library op inputs differ: {_op_text(first_a)} vs {_op_text(first_b)}")
    unit = a.iterations.unit if a.iterations.unit == b.iterations.unit else "step/call"
    differences += _kernel_differences(sa.library_kernels, sb.library_kernels, unit)
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
        missing = " and ".join(side for side, s in (("A", sa), ("B", sb)) if not s.shapes_recorded)
        notes.insert(0, f"cannot tell: no input shapes recorded in {missing} (profile with record_shapes=True)")
    return Comparability(ok, tuple(differences + notes), evidence)


def valid_shapes(shapes) -> dict | None:
    """A record_shapes dict whose dims and types are lists (types of strings), else None: traces lie."""
    if not isinstance(shapes, dict):
        return None
    dims, types = shapes.get("dims"), shapes.get("types")
    if not isinstance(dims, list) or not isinstance(types, list) or not all(isinstance(t, str) for t in types):
        return None
    return shapes


def _tensor_args(shapes: dict | None) -> list[tuple[Shape, str]]:
    """(shape, dtype tag) of each tensor argument in order; TensorList elements get tag ""."""
    shapes = valid_shapes(shapes)
    if not shapes:
        return []
    out = []
    for dims, kind in zip(shapes["dims"], shapes["types"]):
        if kind == "TensorList" and isinstance(dims, list):
            out += [(s, "") for s in map(_shape, dims) if s is not None]
        elif isinstance(kind, str) and kind in ITEMSIZE:
            shape = _shape(dims)
            if shape is not None:
                out.append((shape, ITEMSIZE[kind][1]))
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
    """The shape that ties the two steps together (rule 1), or None."""
    for shape in sa.largest:
        if shape in sb.tensors:
            return shape
    for shape in sb.largest:
        if shape in sa.tensors:
            return shape
    if _numel(sa.largest[0]) == _numel(sb.largest[0]):
        return sa.largest[0]
    return None


def _library_kernels(trace: Trace) -> dict[str, float]:
    g = trace.gpu
    its = trace.iterations
    inside = g["iteration"].to_numpy() >= 0
    classes = gpu_kernel_classes(trace)[inside]
    steps = max(its.count, 1)
    return {c: float((classes == c).sum()) / steps for c in LIBRARY_CLASSES if (classes == c).any()}


def _kernel_differences(ka: dict[str, float], kb: dict[str, float], unit: str) -> list[str]:
    out = []
    groups = (("conv", ("conv",)), ("collective", ("collective",)), ("GEMM/attention", ("gemm", "attention")))
    for label, classes in groups:
        na, nb = sum(ka.get(c, 0.0) for c in classes), sum(kb.get(c, 0.0) for c in classes)
        if (na > 0) != (nb > 0):
            out.append(f"library kernels differ: {label} {_count(na)} vs {_count(nb)} per {unit}")
    return out


def _count(x: float) -> str:
    return f"{x:g}" if x == int(x) else f"{x:.1f}"


def _dims(shape: Shape) -> str:
    return "[" + ", ".join(map(str, shape)) + "]"


def _dtype_suffix(tags: frozenset[str]) -> str:
    known = sorted(tags - {""})
    return f" {'/'.join(known)}" if known else ""


def _op_text(key: tuple[str, Shape, Shape]) -> str:
    name, first, second = key
    return f"{name} {_dims(first)} x {_dims(second)}"
