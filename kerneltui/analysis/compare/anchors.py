"""What each GPU event is, for aligning two traces: library work (the anchors), casts, 0-d updates, the rest.

Library kernels (GEMMs, convolutions, attention, collectives, copies) survive
``torch.compile``: Inductor calls them as extern kernels, through the same aten
op with the same shapes. They are the fixed points both kernel sequences share.
Everything between two of them is what Inductor may have fused.

An anchor is one invocation of a library op (all the kernels it launched: the
memset and padding kernels cuDNN adds belong to the convolution), or, where a
kernel has no op (CUDA-graph replays), one library kernel. Its identity is the
op and its input shapes, so nvjet on one side and cutlass on the other are the
same GEMM; an autotuned Triton template (``triton_tem_*``) is a GEMM of the
same class, matched to the eager GEMM it replaced by position.
"""

from __future__ import annotations

import math
import re
import weakref
from dataclasses import dataclass, field

import numpy as np

from kerneltui.analysis.traffic.compute_rules import template_dims
from kerneltui.trace.intervals import innermost
from kerneltui.trace.model import Trace, parse_shapes
from kerneltui.trace.schema import Kind
from kerneltui.trace.text_columns import text_values, texts

# Innermost ops whose kernels are library calls, by prefix (aten ops keep these names when compiled).
LIBRARY_OPS = {
    "gemm": ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::_scaled_mm", "aten::_grouped_mm",
             "aten::addmv", "aten::mv", "aten::_int_mm", "aten::_addmm_activation"),
    "conv": ("aten::cudnn_convolution", "aten::convolution_backward", "aten::_convolution", "aten::miopen_convolution",
             "aten::cudnn_convolution_transpose", "aten::mkldnn_convolution", "aten::convolution_overrideable"),
    "attention": ("aten::_scaled_dot_product", "aten::_flash_attention", "aten::_efficient_attention",
                  "aten::_cudnn_attention", "aten::_fused_sdp"),
    "collective": ("nccl:", "c10d::", "record_param_comms", "_c10d_functional::"),
}
# Kernel names of library work launched without a library op (graph replays, other producers).
LIBRARY_KERNELS = (
    ("collective", re.compile(r"nccl|rccl|all_?reduce|all_?gather|reduce_?scatter|multimem", re.I)),
    ("attention", re.compile(r"flash|fmha|sdpa|attention", re.I)),
    ("conv", re.compile(r"fprop|dgrad|wgrad|convolve|conv2d|convolution", re.I)),
    ("gemm", re.compile(r"nvjet|gemm|cublas|^Cijk_|xmma|cutlass|_matmul", re.I)),
)
TEMPLATE = re.compile(r"^triton_tem_")
GRAPH_INPUT_COPY = "aten::_foreach_copy_"
FUSED_OPS = re.compile(r"^triton_[a-z]+_fused_(?P<ops>.+?)_\d+$")
SCALAR_TYPES = frozenset({"Scalar", "ScalarList", "", "None"})


@dataclass(frozen=True)
class EventRoles:
    """Per row of ``trace.gpu``: its library class ("" if none), anchor id (-1 if none) and identity."""

    library: np.ndarray  # str: "gemm", "conv", "attention", "collective", "copy" or ""
    anchor: np.ndarray  # int: the anchor (op invocation) it belongs to, -1 outside anchors
    identity: dict[int, tuple]  # anchor id -> (class, op, shapes) or (class, kernel key)
    cast: np.ndarray  # bool: a dtype conversion and nothing else
    scalar: np.ndarray  # bool: updates only 0-d tensors (BatchNorm's num_batches_tracked...)
    scalar_signature: np.ndarray  # str: the op's tensor types, to pair 0-d updates across sides
    call: dict[int, tuple] = field(default_factory=dict)  # anchor id -> what it computes (library_call)
    graph_input: np.ndarray = None  # bool: copies inputs into a CUDA graph's static buffers (reduce-overhead)


_ROLES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def event_roles(trace: Trace) -> EventRoles:
    """The roles of a trace's GPU rows, computed once per trace (comparability and alignment both ask)."""
    if trace not in _ROLES:
        _ROLES[trace] = _event_roles(trace)
    return _ROLES[trace]


def _event_roles(trace: Trace) -> EventRoles:
    g = trace.gpu
    n = len(g)
    shapes_of_op = _ShapeReader(trace)
    ops = text_values(g["op"])
    names = text_values(g["full_name"])
    keys = text_values(g["key"])
    kinds = g["kind"].to_numpy()
    op_rows = g["op_row"].to_numpy()
    classes: dict[tuple, str] = {}  # one decision per distinct (op, kernel, kind)
    library = np.array(
        [classes[k] if (k := (op, name, kind)) in classes else classes.setdefault(k, _library_class(*k))
         for op, name, kind in zip(ops, names, kinds.tolist())],
        dtype=object,
    )
    anchor = np.full(n, -1, np.int64)
    identity: dict[int, tuple] = {}
    call: dict[int, tuple] = {}
    # one anchor per library op invocation; without one (graph replays, whose kernels all share the
    # region as their op; templates), one per library kernel
    for i in np.flatnonzero(library != ""):
        op_row = int(op_rows[i])
        op_class = _op_class(ops[i]) if op_row >= 0 else ""
        by_op = bool(op_class) and not TEMPLATE.match(names[i])
        aid = op_row if by_op else -(i + 2)
        anchor[i] = aid
        if by_op:
            # the op's class, not its first row's: addmm may copy its bias into the output (a DtoD
            # memcpy) before its GEMM kernel runs
            library[i] = op_class
        if aid not in identity:
            if by_op:
                shapes = shapes_of_op(op_row)
                identity[aid] = (library[i], ops[i], _shape_key(shapes, 3 if library[i] == "conv" else 2))
                call[aid] = library_call(library[i], ops[i], shapes)
            else:
                identity[aid] = (library[i], keys[i])
                template = TEMPLATE.match(names[i]) and op_row >= 0
                call[aid] = _template_call(names[i], shapes_of_op(op_row)) if template else (library[i], None)
    _join_gemm_helpers(g, library, anchor, names, identity, call)
    # kernels a library op launched that are not library kernels themselves (cuDNN's memsets), also
    # from an op inside it (the mul, sum and copy_ of aten::_efficient_attention_backward)
    rows, aids = _enclosing_anchor(trace, np.flatnonzero((library == "") & (op_rows >= 0)), op_rows, identity)
    anchor[rows] = aids
    for aid in np.unique(aids).tolist():
        library[rows[aids == aid]] = identity[aid][0]
    cast = np.zeros(n, bool)
    scalar = np.zeros(n, bool)
    signature = texts(n)
    for i in np.flatnonzero(anchor < 0):
        op_row = int(op_rows[i])
        if op_row < 0:
            continue
        shapes = shapes_of_op(op_row)
        fused = FUSED_OPS.match(names[i])
        if fused and fused["ops"].strip("_") in ("to_copy",):
            cast[i] = True
        elif ops[i] == "aten::copy_" and _converts(shapes):
            cast[i] = True  # copy_ between two dtypes (autocast's to/_to_copy end here)
        if kinds[i] == Kind.KERNEL and _all_zero_d(shapes):
            scalar[i] = True
            signature[i] = ",".join(str(t) for t in shapes["types"])
    # reduce-overhead copies each call's inputs into the graph's static buffers before replaying it
    graph_input = (ops == GRAPH_INPUT_COPY) & bool(g["graph"].to_numpy().any()) & (anchor < 0)
    cast &= ~graph_input
    return EventRoles(library, anchor, identity, cast, scalar, signature, call, graph_input)


def _enclosing_anchor(trace: Trace, rows: np.ndarray, op_rows: np.ndarray,
                      identity: dict) -> tuple[np.ndarray, np.ndarray]:
    """Of GPU `rows`, those whose launching op is a library op with an anchor, or runs inside one on
    its thread, and that op's row (their anchor)."""
    library_ops = np.array(sorted(a for a in identity if a >= 0), np.int64)
    found_rows, found_ops = [np.empty(0, np.int64)], [np.empty(0, np.int64)]
    if len(rows) and len(library_ops):
        ev = trace.events
        lane, ts, dur = ev["lane"].to_numpy(), ev["ts"].to_numpy(), ev["dur"].to_numpy()
        launching = op_rows[rows]
        for this_lane in np.unique(lane[library_ops]).tolist():
            mine = library_ops[lane[library_ops] == this_lane]
            ask = np.flatnonzero(lane[launching] == this_lane)
            if len(ask):
                k = innermost(ts[mine], ts[mine] + dur[mine], ts[launching[ask]])
                found_rows.append(rows[ask[k >= 0]])
                found_ops.append(mine[k[k >= 0]])
    return np.concatenate(found_rows), np.concatenate(found_ops)


# cuBLAS runs some GEMMs as several kernels: a beta scaling before the product, a split-K reduction
# or an epilogue after it. Under an op they share its anchor; in a CUDA-graph replay (no op) each
# joins the GEMM kernel next to it on its stream.
GEMM_BEFORE = re.compile(r"\bscal_kernel<")
GEMM_AFTER = re.compile(r"splitKreduce_kernel|epilogue::impl::globalKernel")


def _join_gemm_helpers(g, library: np.ndarray, anchor: np.ndarray, names: np.ndarray, identity: dict,
                       call: dict) -> None:
    loose = np.flatnonzero((anchor < -1) & (library == "gemm"))  # a library kernel of its own (no op)
    helper = {int(i): 1 if GEMM_BEFORE.search(names[i]) else -1 for i in loose.tolist()
              if GEMM_BEFORE.search(names[i]) or GEMM_AFTER.search(names[i])}
    if not helper:
        return
    stream, ts = g["stream"].to_numpy(), g["ts"].to_numpy()
    order = np.lexsort((ts, stream))
    place = np.empty(len(order), np.int64)
    place[order] = np.arange(len(order))
    # before-helpers look ahead, after-helpers back, past helpers of their own direction
    for i, step in helper.items():
        at = int(place[i]) + step
        while 0 <= at < len(order) and helper.get(int(order[at])) == step:
            at += step
        if not 0 <= at < len(order):
            continue
        j = int(order[at])
        if stream[j] == stream[i] and library[j] == "gemm" and anchor[j] < -1 and int(j) not in helper:
            identity.pop(int(anchor[i]), None)
            call.pop(int(anchor[i]), None)
            anchor[i] = anchor[j]


# GEMM ops whose first argument is an added term (bias, self), not an operand
ADDED_FIRST = ("aten::addmm", "aten::baddbmm", "aten::_addmm_activation", "aten::addmv", "aten::addbmm")


def library_call(cls: str, op: str, shapes: dict | None) -> tuple:
    """What one library call computes, the same whichever op or kernel ran it: a comparable key.

    GEMM: ("gemm", batch, K, min(M, N), max(M, N)): a transposed product (Inductor may compute a
    weight gradient as its transpose) is the same call. Convolution: ("conv" or "conv backward",
    input, weight). Attention: ("attention" or "attention backward", q, k). Collective: (op, first
    tensor). The shapes unknown: (class, None).
    """
    tensors = [tuple(d) for d in (_tensor_dims(shapes) or [])]
    if cls == "gemm":
        operands = tensors[1:3] if op.startswith(ADDED_FIRST) else tensors[:2]
        dims = _gemm_dims(*operands) if len(operands) == 2 else None
        return ("gemm", *dims) if dims else ("gemm", None)
    if cls == "conv":
        backward = "backward" in op
        x, w = (tensors[1:3] if backward else tensors[:2]) if len(tensors) >= (3 if backward else 2) else (None, None)
        return ("conv backward" if backward else "conv", x, w) if x else ("conv", None)
    if cls == "attention":
        backward = "backward" in op
        qk = tensors[1:3] if backward else tensors[:2]
        return ("attention backward" if backward else "attention", *qk) if len(qk) == 2 else ("attention", None)
    return (op, tensors[0] if tensors else None)


def _gemm_dims(a: tuple, b: tuple) -> tuple | None:
    """(batch, K, min(M, N), max(M, N)) of a [..., M, K] @ b [..., K, N] (b may be a vector)."""
    if len(b) == 1:
        b = (*b, 1)
    if len(a) < 2 or a[-1] != b[-2]:
        return None
    batch = math.prod(a[:-2]) if len(a) > 2 else math.prod(b[:-2])
    m, k, n = a[-2], a[-1], b[-1]
    return batch, k, min(m, n), max(m, n)


def _template_call(name: str, shapes: dict | None) -> tuple:
    """A template as the library call it replaced, from its buffers (traffic.template_dims)."""
    tensors = [list(d) for d in (_tensor_dims(shapes) or [])]
    dims = template_dims(name, tensors)
    if dims is None:
        return ("conv" if "convolution" in name else "gemm", None)
    if dims[0] == "conv":
        return ("conv", tuple(dims[1]), tuple(dims[2]))
    _, batch, m, n, k, _ = dims
    return ("gemm", batch, k, min(m, n), max(m, n))


def valid_shapes(shapes) -> dict | None:
    """A record_shapes dict whose dims and types are lists (types of strings), else None: traces lie."""
    if not isinstance(shapes, dict):
        return None
    dims, types = shapes.get("dims"), shapes.get("types")
    if not isinstance(dims, list) or not isinstance(types, list) or not all(isinstance(t, str) for t in types):
        return None
    return shapes


def _op_class(op: str) -> str:
    """The LIBRARY_OPS class of a library op (gemm for aten::addmm), "" for any other op."""
    return next((cls for cls, prefixes in LIBRARY_OPS.items() if op.startswith(prefixes)), "")


def _library_class(op: str, name: str, kind: int) -> str:
    if kind == Kind.MEMCPY:
        return "copy"
    if kind != Kind.KERNEL:
        return ""
    for cls, prefixes in LIBRARY_OPS.items():
        if op.startswith(prefixes):
            return cls
    if TEMPLATE.match(name):
        return "conv" if "convolution" in name else "gemm"
    if name.startswith("triton_"):
        return ""  # Inductor's own kernels are what the anchors bracket
    if op and op.startswith("aten::") and not op.startswith(("aten::linear", "aten::matmul")):
        return ""  # an aten op that is not a library call: elementwise, reductions
    for cls, pattern in LIBRARY_KERNELS:
        if pattern.search(name):
            return cls
    return ""


def _shape_key(shapes: dict | None, count: int = 2) -> tuple:
    """The op's first ``count`` operands of highest rank: what it computes on (not addmm's bias, not the
    ``out=`` buffer Inductor adds). Three for a convolution: its backward's gradient, input and weight
    (a 1x1 and a 3x3 convolution may share the first two)."""
    tensors = [d for d in (_tensor_dims(shapes) or []) if d]
    rank = max((len(d) for d in tensors), default=0)
    return tuple(_freeze(d) for d in tensors if len(d) == rank)[:count]


def _freeze(value):
    return tuple(_freeze(v) for v in value) if isinstance(value, list) else value


def _tensor_dims(shapes: dict | None) -> list | None:
    if not shapes:
        return None
    dims, types = shapes["dims"], shapes["types"]
    return [d for d, t in zip(dims, types)
            if t not in SCALAR_TYPES and isinstance(d, list) and all(type(x) is int for x in d)]


def _all_zero_d(shapes: dict | None) -> bool:
    """Every input a 0-d tensor (lists of tensors record no usable shape: never 0-d)."""
    types = [str(t) for t in (shapes or {}).get("types") or []]
    if any("List" in t for t in types):
        return False
    tensors = _tensor_dims(shapes)
    return bool(tensors) and all(d == [] for d in tensors)


def _converts(shapes: dict | None) -> bool:
    """copy_(dst, src) between two dtypes: a cast."""
    types = (shapes or {}).get("types") or []
    return len(types) >= 2 and types[0] != types[1] and str(types[0]) not in SCALAR_TYPES


class _ShapeReader:
    """record_shapes of an op row, parsed once per distinct record (ops repeat every step)."""

    def __init__(self, trace: Trace):
        self.trace = trace
        self.at = trace.events["shapes_at"].to_numpy()
        self.length = trace.events["shapes_len"].to_numpy()
        self.parsed: dict[bytes, dict | None] = {}

    def __call__(self, row: int) -> dict | None:
        at = int(self.at[row])
        if at < 0:
            return None
        text = self.trace.shapes_blob[at : at + int(self.length[row])]
        if text not in self.parsed:
            self.parsed[text] = valid_shapes(parse_shapes(text))
        return self.parsed[text]
