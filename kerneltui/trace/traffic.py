"""Bytes moved through GPU memory, FLOPs, and achieved rates per GPU event.

Rules of doc sections 6 and 10. Bytes only where the rule is right for the op, else NaN
(unknown, never zero, never a guess); "above peak" follows from exact counts only.

* memset: its own ``bytes`` (written once). memcpy: ``copy_kind`` from the event name
  ("H2D pinned", "D2H pageable", "D2D", "P2P"). A copy within the device reads and writes
  HBM (twice its size) and is rated against HBM; host copies are rated against the host
  link (``link_gbs``, ``link_share``), never against HBM.
* kernels: from the record_shapes of the op that launched them (External id = innermost
  op): ``Input Dims`` x itemsize(``Input type``). A ``TensorList`` is a nested list of
  shapes whose dtype is not recorded: it takes the op's other tensors' dtype, else unknown.
* eager elementwise ops: inputs + output (their broadcast); no broadcast: unknown. In-place
  ``_`` ops read and write self; fills and ``copy_`` write self once.
* reductions read the input and write the reduced shape; losses read their inputs and write
  the reduced value; ``nll_loss`` reads the target and one value per target, not [N, C].
* embeddings and gathers: index + indexed rows read + rows written, not the table;
  ``gather`` inside ``index_select``/``embedding`` is judged by the embedding's record.
* norms: one read of each input, one write shaped like the activation. Pooling: input +
  output (+ int64 indices); its backward: grad_output (+ indices) + a gradient of self's size.
* FLOP/s, not GB/s: GEMMs (2*M*N*K), convolutions (2*N*K*C/groups*R*S*P*Q; backward: the
  grad-input and grad-weight convolutions that output_mask asks for), attention
  (4*B*H*Lq*Lk*D forward, half when causal, 2.5x backward), Triton templates
  (``triton_tem_*``: a GEMM or convolution from their buffers' shapes).
* Inductor ops (``triton_*``) list every buffer argument once: that is the traffic, except
  that a kernel with a single buffer updates it in place (``in_out_ptr``, under-counted by
  half), so that buffer counts twice, unless it is a fill (zeros, full, the zero-initialised
  accumulator of embedding_dense_backward...), which writes it once.
* Strides, paddings, reduction dims, is_causal, output_mask and reductions are Concrete
  Inputs: rules that need them read ``shapes["concrete"]`` and are unknown without it.
* an op that launched several kernels shares its bytes and FLOPs among them by duration,
  so each kernel of the op shows the op's figures / summed kernel time.
* CUDA-graph replays have no op, so no byte count.

Shapes are parsed once per distinct (op name, record_shapes text) among the ops
that launched GPU work; everything per event is vectorised.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from kerneltui.trace.devices import DeviceSpec, device_spec
from kerneltui.trace.model import parse_shapes
from kerneltui.trace.schema import Kind

if TYPE_CHECKING:
    from kerneltui.trace.model import Trace

# record_shapes "Input type" -> (itemsize, dtype tag). Types not listed are not tensors.
ITEMSIZE: dict[str, tuple[int, str]] = {
    "float": (4, "f32"), "double": (8, "f64"), "c10::Half": (2, "f16"), "c10::BFloat16": (2, "bf16"),
    "Half": (2, "f16"), "BFloat16": (2, "bf16"), "long int": (8, "i64"), "long": (8, "i64"),
    "int": (4, "i32"), "short int": (2, "i16"), "short": (2, "i16"), "signed char": (1, "i8"),
    "unsigned char": (1, "u8"), "bool": (1, "bool"), "unsigned int": (4, "u32"),
    "unsigned long": (8, "u64"), "unsigned short": (2, "u16"),
    "c10::complex<float>": (8, "c64"), "c10::complex<double>": (16, "c128"),
    "c10::complex<c10::Half>": (4, "c32"), "c10::Float8_e4m3fn": (1, "f8"), "c10::Float8_e5m2": (1, "f8"),
    "c10::Float8_e4m3fnuz": (1, "f8"), "c10::Float8_e5m2fnuz": (1, "f8"), "c10::Float8_e8m0fnu": (1, "f8"),
    "c10::qint8": (1, "i8"), "c10::quint8": (1, "u8"), "c10::qint32": (4, "i32"),
}
SKIPPED_TYPES = frozenset({"Scalar", "ScalarList", "", "GenericList", "None"})
GEMM_OPS = frozenset({"mm", "addmm", "bmm", "baddbmm", "matmul", "linear", "addbmm", "_addmm_activation",
                      "_scaled_mm", "_int_mm", "mv", "addmv", "dot"})
# Reductions read their input once and write the reduced output. The reduced dims are a
# ScalarList (or a Scalar) whose values only Concrete Inputs give: without them, unknown.
REDUCTIONS = frozenset({"mean", "sum", "std", "var", "std_mean", "var_mean", "amax", "amin", "max", "min",
                        "prod", "norm", "linalg_vector_norm", "argmax", "argmin", "any", "all", "logsumexp",
                        "nansum", "count_nonzero", "_foreach_norm"})
REDUCTION_DIM_AT = {"norm": 2, "linalg_vector_norm": 2}  # (self, p, dim, ...); the others (self, dim, ...)
TWO_OUTPUTS = frozenset({"std_mean", "var_mean"})  # two reduced outputs of the input's dtype
INDEX_OUTPUTS = frozenset({"argmax", "argmin", "count_nonzero"})  # int64 outputs
BOOL_OUTPUTS = frozenset({"any", "all"})
# Losses with a reduction argument (position in the record): read the inputs, write one value
# (reduction mean/sum) or the elementwise loss (reduction none).
LOSS_REDUCTION_AT = {"mse_loss": 2, "l1_loss": 2, "smooth_l1_loss": 2, "huber_loss": 2, "soft_margin_loss": 2,
                     "kl_div": 2, "binary_cross_entropy": 3, "binary_cross_entropy_with_logits": 4}
NLL_FORWARD = frozenset({"nll_loss_forward", "nll_loss2d_forward"})
NLL_BACKWARD = frozenset({"nll_loss_backward", "nll_loss2d_backward"})
# Norms write an output shaped like their first tensor (the activation or its gradient).
NORMS = frozenset({"native_batch_norm", "_native_batch_norm_legit", "_native_batch_norm_legit_no_training",
                   "cudnn_batch_norm", "miopen_batch_norm", "native_layer_norm", "native_group_norm",
                   "_fused_rms_norm", "native_batch_norm_backward", "cudnn_batch_norm_backward",
                   "miopen_batch_norm_backward", "native_layer_norm_backward", "native_group_norm_backward",
                   "_fused_rms_norm_backward", "batch_norm_backward"})
# Write-only in-place ops: they write self once and read only their other arguments.
WRITE_ONLY = frozenset({"fill_", "zero_", "copy_", "normal_", "uniform_", "random_", "bernoulli_", "exponential_",
                        "geometric_", "log_normal_", "cauchy_", "_copy_from"})
# Indexed reads and writes touch the indexed rows only, which the shapes do not say.
INDEXED = frozenset({"index", "_unsafe_index", "index_put", "index_put_", "_index_put_impl_", "_unsafe_index_put",
                     "index_add", "index_add_", "index_copy", "index_copy_", "index_fill", "index_fill_",
                     "index_reduce", "index_reduce_", "scatter", "scatter_", "scatter_add", "scatter_add_",
                     "scatter_reduce", "scatter_reduce_", "masked_scatter", "masked_scatter_", "put", "put_",
                     "take", "masked_select", "embedding_dense_backward", "embedding_backward",
                     "_embedding_bag", "_embedding_bag_forward_only", "embedding_bag", "index_select_backward"})
# Ops whose output is not the broadcast of their inputs and that no rule here covers.
SHAPE_CHANGING = frozenset({"arange", "linspace", "logspace", "repeat", "repeat_interleave", "tile", "expand",
                            "constant_pad_nd", "pad", "im2col", "col2im", "unfold", "unfold_backward",
                            "pixel_shuffle", "pixel_unshuffle", "sort", "topk", "argsort", "unique", "_unique",
                            "_unique2", "unique_consecutive", "unique_dim", "nonzero", "bincount", "histc",
                            "randperm", "multinomial", "diag", "diag_embed", "tril_indices", "triu_indices",
                            "narrow_copy", "slice_backward", "select_backward", "stack", "_stack", "hstack",
                            "vstack", "split_with_sizes_copy", "split_copy", "unbind_copy", "_cdist_forward",
                            "one_hot", "max_unpool2d", "max_unpool3d", "grid_sampler_2d", "grid_sampler_3d",
                            "as_strided_scatter", "diagonal_backward", "trace", "kthvalue", "median", "mode",
                            "nanmedian", "_pdist_forward", "cumsum_backward", "searchsorted", "bucketize"})
SHAPE_CHANGING_PREFIXES = ("upsample_", "_upsample_", "reflection_pad", "replication_pad", "fractional_max_pool")

# Convolutions (FLOP/s): the record positions of (stride, padding, dilation, groups, transposed);
# None where the op has no such argument. Which input is which follows native_functions.yaml.
CONV_ARGS: dict[str, tuple[int | None, ...]] = {
    "conv1d": (3, 4, 5, 6, None), "conv2d": (3, 4, 5, 6, None), "conv3d": (3, 4, 5, 6, None),
    "convolution": (3, 4, 5, 8, 6), "_convolution": (3, 4, 5, 8, 6),
    "cudnn_convolution": (3, 2, 4, 5, None),  # (self, weight, padding, stride, dilation, groups, ...)
    "cudnn_convolution_relu": (3, 4, 5, 6, None), "cudnn_convolution_add_relu": (5, 6, 7, 8, None),
    "miopen_convolution": (4, 3, 5, 6, None), "mkldnn_convolution": (4, 3, 5, 6, None),
}
CONV_BIAS_AT = {"conv1d": 2, "conv2d": 2, "conv3d": 2, "convolution": 2, "_convolution": 2,
                "cudnn_convolution_relu": 2, "cudnn_convolution_add_relu": 4, "miopen_convolution": 2,
                "mkldnn_convolution": 2}
CONV_TOKEN = re.compile(r"^conv(olution)?(\dd)?$")
# convolution_backward(grad_output, input, weight, bias_sizes, stride, padding, dilation, transposed,
#                      output_padding, groups, output_mask)
CONV_BACKWARD_ARGS = {"transposed": 7, "groups": 9, "output_mask": 10}

# Attention (FLOP/s): (layout of q/k/v, position of is_causal (or of efficient attention's
# custom_mask_type), backward?). "bhld" is [batch, heads, length, head dim]; the flash and
# efficient kernels' own ops take [batch, length, heads, head dim].
ATTENTION: dict[str, tuple[str, int, bool]] = {
    "_scaled_dot_product_flash_attention": ("bhld", 4, False),
    "_scaled_dot_product_efficient_attention": ("bhld", 6, False),
    "_scaled_dot_product_cudnn_attention": ("bhld", 6, False),
    "_cudnn_attention_forward": ("bhld", 10, False),
    "_flash_attention_forward": ("blhd", 8, False),
    "_efficient_attention_forward": ("blhd", 9, False),
    "_scaled_dot_product_flash_attention_backward": ("bhld", 11, True),
    "_scaled_dot_product_efficient_attention_backward": ("bhld", 11, True),
    "_scaled_dot_product_cudnn_attention_backward": ("bhld", 14, True),
    "_cudnn_attention_backward": ("bhld", 14, True),
    "_flash_attention_backward": ("blhd", 11, True),
    "_efficient_attention_backward": ("blhd", 14, True),
}
ATTENTION_MASK_TYPE = frozenset({"_efficient_attention_forward", "_efficient_attention_backward"})
ATTENTION_BACKWARD_FACTOR = 2.5  # backward FLOPs: dQ, dK, dV and the recomputed scores, about 2.5x forward

# An op that launched kernels for its caller is judged by the caller's record: torch runs
# aten::embedding -> aten::index_select -> aten::gather, whose index is the row index expanded
# (stride 0) to [rows, row size], so the gather's own record shows a full-size int64 index.
CALLERS = {"gather": frozenset({"index_select", "embedding"}), "index_select": frozenset({"embedding"})}

# Inductor kernels with one buffer that only write it (fills, and the zero-initialised
# accumulators of embedding_dense_backward, index_put and scatter): written once, not in_out_ptr.
FILLS = frozenset({"zeros", "zero", "full", "fill", "ones", "empty", "arange", "iota", "new", "embedding",
                   "index", "scatter"})

# basis of each event's figure, shown as the "how" of a number
BASIS = ("memcpy", "memset", "eager", "inductor", "gemm", "cuda-graph", "no-op", "no-shapes", "conv", "attention",
         "template", "reduction", "loss", "gather", "norm", "pool", "no-dtype", "no-rule", "copy-h2d", "copy-d2h",
         "copy-p2p", "copy-h2h", "copy-unknown")
# judged by FLOP/s, not GB/s: their bytes are what they must move at least, not a bandwidth
FLOP_BASES = frozenset({"gemm", "conv", "attention", "template"})
# not through this device's HBM alone: no share of its peak
OFF_HBM_BASES = frozenset({"copy-h2d", "copy-d2h", "copy-p2p", "copy-h2h", "copy-unknown"})


@dataclass(frozen=True)
class OpTraffic:
    bytes: float  # NaN when unknown
    flops: float  # NaN unless judged by FLOP/s (GEMM, convolution, attention, template) and known
    largest: float  # bytes of the largest tensor argument (or output)
    basis: str
    dtype: str  # tag of the widest tensor (f32, bf16...), "" if none


def short_op(name: str) -> str:
    """aten::clamp_min -> clamp_min; triton_poi_fused_add_relu_0 unchanged."""
    return name.rsplit("::", 1)[-1]


def _tokens(name: str) -> list[str]:
    return [t for t in re.split(r"[_\W]+", name.lower()) if t]


MAX_TENSOR_BYTES = 2**62  # a record past this is not a tensor any device holds: the record is unusable


def _shape(value) -> list[int] | None:
    """A tensor shape as record_shapes writes it (a list of non-negative ints), else None."""
    if not isinstance(value, list) or not all(type(d) is int and d >= 0 for d in value):
        return None  # nested lists, strings, floats, booleans, negatives: not a shape
    return value if math.prod(value) <= MAX_TENSOR_BYTES else None


def _tensors(dims: list, types: list, fallback: tuple[int, str] | None) -> list[tuple[list[int], int, str]] | None:
    """(shape, itemsize, tag) for every tensor argument, TensorLists flattened; None if the record is malformed.

    A tensor argument whose shape is not a shape makes the whole record unusable: counting the
    other arguments only would give a byte count that looks right and is not.
    """
    out = []
    for shape, kind in zip(dims, types):
        if not isinstance(kind, str):
            return None
        if kind == "TensorList":
            # a TensorList's element dtype is not recorded: use the op's other tensors' dtype,
            # else the elements are tagged "unknown" (itemsize 0) and op_traffic counts no bytes
            size = fallback or (0, "unknown")
            if not isinstance(shape, list):
                return None
            for element in shape:
                element = _shape(element)
                if element is None:
                    return None
                out.append((element, size[0], size[1]))
        elif kind in ITEMSIZE:
            size, tag = ITEMSIZE[kind]
            checked = _shape(shape)
            if checked is None or math.prod(checked) * size > MAX_TENSOR_BYTES:
                return None
            out.append((checked, size, tag))
    return out


def _numel(shape: list) -> int:
    return math.prod(int(d) for d in shape)


def _broadcast(shapes: list[list[int]]) -> list[int] | None:
    """numpy broadcasting of the shapes, or None where they are incompatible."""
    ndim = max(len(s) for s in shapes)
    out = [1] * ndim
    for shape in shapes:
        for i, d in enumerate(shape, start=ndim - len(shape)):
            if d != 1 and out[i] not in (1, d):
                return None
            out[i] = max(out[i], d)
    return out


def _gemm(op: str, tensors: list[tuple[list[int], int, str]]) -> tuple[float, float, float] | None:
    """(bytes, flops, output bytes) from the first two matrix operands a[..., M, K] @ b[..., K, N]."""
    mats = [i for i, t in enumerate(tensors) if len(t[0]) >= 2]
    if op in ("mv", "addmv", "dot"):
        mats = [i for i, t in enumerate(tensors) if len(t[0]) >= 1]
    if len(mats) < 2:
        return None
    ia, ib = mats[0], mats[1]
    (a, size, _), (b, _, _) = tensors[ia], tensors[ib]
    if op == "linear":  # weight is [N, K]
        b = list(reversed(b))
    if len(b) == 1:  # matrix-vector / dot
        b = b + [1]
    if len(a) == 1:
        a = [1] + a
    m, k, n = a[-2], a[-1], b[-1]
    batch = _numel(a[:-2]) if len(a) > 2 else max(1, _numel(b[:-2]))
    # operands up to the second matrix (bias/self included), plus the output once;
    # later arguments are scalars or, in Inductor's extern calls, the out= buffer.
    last = len(tensors) if op == "linear" else ib + 1
    read = sum(_numel(s) * z for s, z, _ in tensors[:last])
    written = batch * m * n * size
    return float(read + written), float(2 * batch * m * n * k), float(written)


Tensor = tuple[list[int], int, str]  # (shape, itemsize, dtype tag)
UNKNOWN = (math.nan, math.nan, 0.0)  # a rule's (bytes, flops, output bytes) when it cannot tell


def _nbytes(t: Tensor | None) -> int:
    return _numel(t[0]) * t[1] if t is not None else 0


def _arguments(dims: list, types: list) -> list[Tensor | None]:
    """Per recorded argument: (shape, itemsize, tag) for a tensor, None for anything else.

    Only called on a record that _tensors accepted, so every tensor argument's shape is a shape.
    """
    out: list[Tensor | None] = []
    for shape, kind in zip(dims, types):
        checked = _shape(shape) if kind in ITEMSIZE else None
        out.append((checked, *ITEMSIZE[kind]) if checked is not None else None)
    return out


def _arg(args: list[Tensor | None], i: int | None) -> Tensor | None:
    return args[i] if i is not None and 0 <= i < len(args) else None


def _concrete(shapes: dict, n: int) -> list[str] | None:
    """The record's Concrete Inputs, one string per argument ("[2, 2]", "True", "1"), if the loader kept them."""
    values = shapes.get("concrete")
    if not isinstance(values, list) or len(values) != n or not all(isinstance(v, str) for v in values):
        return None
    return values


def _strides(shapes: dict, i: int, ndim: int) -> list[int] | None:
    """Input Strides of argument i, if the loader kept them."""
    values = shapes.get("strides")
    value = values[i] if isinstance(values, list) and 0 <= i < len(values) else None
    if not isinstance(value, list) or len(value) != ndim or not all(type(s) is int for s in value):
        return None
    return value


def _at(values: list[str] | None, i: int | None) -> str | None:
    return values[i] if values is not None and i is not None and 0 <= i < len(values) else None


_INT = re.compile(r"-?\d{1,18}")
_WORDS = {"True": True, "False": False, "true": True, "false": False, "1": True, "0": False}


def _items(text: str | None) -> list[str] | None:
    if text is None:
        return None
    text = text.strip()
    if text.startswith("[") and text.endswith("]"):
        inner = text[1:-1].strip()
        return [p.strip() for p in inner.split(",")] if inner else []
    return [text] if text else None


def _ints(text: str | None) -> list[int] | None:
    """A Concrete Inputs int or int list ("2", "[2, 2]", "[]") as a list; None for anything else."""
    parts = _items(text)
    if parts is None or not all(_INT.fullmatch(p) for p in parts):
        return None
    return [int(p) for p in parts]


def _flags(text: str | None) -> list[bool] | None:
    """A Concrete Inputs bool or bool list ("True", "[True, True, False]"); None for anything else."""
    parts = _items(text)
    if not parts or not all(p in _WORDS for p in parts):
        return None
    return [_WORDS[p] for p in parts]


def _spatial(value: list[int] | None, nd: int) -> list[int] | None:
    """A per-spatial-dimension list (stride, padding, dilation) of nd entries; one entry stands for all."""
    if value is None:
        return None
    if len(value) == 1:
        return value * nd
    return value if len(value) == nd else None


def _window_out(size: list[int], kernel: list[int], stride: list[int], padding: list[int],
                dilation: list[int], ceil: bool = False) -> list[int] | None:
    """Output extent of a sliding window (convolution, pooling) per spatial dimension; None if not one."""
    out = []
    for h, r, s, p, d in zip(size, kernel, stride, padding, dilation):
        if s <= 0 or d <= 0 or p < 0 or r <= 0:
            return None
        span = h + 2 * p - d * (r - 1) - 1
        if span < 0:
            return None
        o = (span + (s - 1 if ceil else 0)) // s + 1
        if ceil and (o - 1) * s >= h + p:  # the last window must start inside the input or its left padding
            o -= 1
        out.append(o)
    return out


def _conv_forward(name: str, args: list[Tensor | None], concrete: list[str] | None) -> tuple[float, float, float]:
    """FLOPs = 2 * N * K * C/groups * R * S * P * Q, the output P x Q from stride, padding and dilation."""
    x, w = _arg(args, 0), _arg(args, 1)
    if x is None or w is None or len(x[0]) < 3 or len(w[0]) != len(x[0]):
        return UNKNOWN
    (n, c, *size), (k, cg, *kernel) = x[0], w[0]
    nd = len(size)
    at_stride, at_padding, at_dilation, at_groups, at_transposed = CONV_ARGS[name]
    if at_transposed is not None and _flags(_at(concrete, at_transposed)) != [False]:
        return UNKNOWN  # not recorded, or a transposed convolution (its output is not the window rule's)
    stride = _spatial(_ints(_at(concrete, at_stride)), nd)
    dilation = _spatial(_ints(_at(concrete, at_dilation)), nd)
    groups = _ints(_at(concrete, at_groups))
    mode = (_at(concrete, at_padding) or "").strip().strip("'\"")
    padding = [0] * nd if mode == "valid" else _spatial(_ints(_at(concrete, at_padding)), nd)
    if stride is None or dilation is None or groups is None or len(groups) != 1 or groups[0] <= 0 \
            or cg * groups[0] != c:
        return UNKNOWN
    if mode == "same":  # torch allows padding="same" with stride 1 only: the output keeps the input's size
        out = list(size) if all(s == 1 for s in stride) else None
    else:
        out = _window_out(size, kernel, stride, padding, dilation) if padding is not None else None
    if out is None:
        return UNKNOWN
    flops = 2 * n * k * cg * _numel(kernel) * _numel(out)
    written = n * k * _numel(out) * x[1]
    read = sum(_nbytes(a) for a in args)  # input, weight, bias (and the added tensor of add_relu)
    return float(read + written), float(flops), float(written)


def _conv_backward(args: list[Tensor | None], concrete: list[str] | None) -> tuple[float, float, float]:
    """The grad-input and grad-weight convolutions that output_mask asks for, each as many FLOPs as the forward."""
    go, x, w = _arg(args, 0), _arg(args, 1), _arg(args, 2)
    if go is None or x is None or w is None or not len(go[0]) == len(x[0]) == len(w[0]) or len(go[0]) < 3:
        return UNKNOWN
    (n, k, *out), (n2, c, *_), (k2, cg, *kernel) = go[0], x[0], w[0]
    transposed = _flags(_at(concrete, CONV_BACKWARD_ARGS["transposed"]))
    mask = _flags(_at(concrete, CONV_BACKWARD_ARGS["output_mask"]))
    groups = _ints(_at(concrete, CONV_BACKWARD_ARGS["groups"]))
    if transposed != [False] or mask is None or len(mask) != 3 or groups is None or len(groups) != 1 \
            or groups[0] <= 0 or cg * groups[0] != c or n != n2 or k != k2:
        return UNKNOWN
    forward = 2 * n * k * cg * _numel(kernel) * _numel(out)
    grad_input, grad_weight, grad_bias = mask
    g, xi, wi = _nbytes(go), _nbytes(x), _nbytes(w)
    # each gradient is its own kernel: grad-input reads grad_output and weight, grad-weight
    # grad_output and input, grad-bias sums grad_output
    moved = grad_input * (g + wi + xi) + grad_weight * (g + xi + wi) + grad_bias * (g + k * go[1])
    return float(moved), float(forward * (grad_input + grad_weight)), float(max(grad_input * xi, grad_weight * wi))


def _attention(name: str, args: list[Tensor | None], concrete: list[str] | None) -> tuple[float, float, float]:
    """About 4 * B * H * Lq * Lk * D forward (QK^T and PV), half that when causal, 2.5x that backward."""
    layout, causal_at, backward = ATTENTION[name]
    base = 1 if backward else 0
    q, k, v = _arg(args, base), _arg(args, base + 1), _arg(args, base + 2)
    if q is None or k is None or v is None or not len(q[0]) == len(k[0]) == len(v[0]) == 4:
        return UNKNOWN  # packed variable-length batches are [tokens, heads, head dim]
    if layout == "bhld":
        (b, h, lq, d), lk, dv = q[0], k[0][2], v[0][3]
    else:
        (b, lq, h, d), lk, dv = q[0], k[0][1], v[0][3]
    if name in ATTENTION_MASK_TYPE:  # custom_mask_type: 0 none, 1 and 2 causal (top-left, bottom-right)
        mask_type = _ints(_at(concrete, causal_at))
        causal = None if mask_type is None or len(mask_type) != 1 else mask_type[0] != 0
    else:
        flag = _flags(_at(concrete, causal_at))
        causal = flag[0] if flag is not None and len(flag) == 1 else None
    if causal is None or (causal and lq != lk):
        return UNKNOWN  # is_causal not recorded; a causal mask over unequal lengths depends on its alignment
    flops = 2 * b * h * lq * lk * (d + dv) * (0.5 if causal else 1.0)
    read = sum(_nbytes(a) for a in args)
    if backward:  # writes dQ, dK, dV
        written = _nbytes(q) + _nbytes(k) + _nbytes(v)
        return float(read + written), flops * ATTENTION_BACKWARD_FACTOR, float(written)
    written = b * h * lq * dv * q[1]  # the output
    return float(read + written), flops, float(written)


def _nll(name: str, args: list[Tensor | None], concrete: list[str] | None) -> tuple[float, float, float]:
    """nll_loss reads the target and the one gathered value per target, not the [N, C] input.

    Forward (self, target, weight, reduction, ignore_index): writes the loss and total_weight, or
    one loss per target when reduction is none. Backward (grad_output, self, target, weight,
    reduction, ignore_index, total_weight): writes one value per target into a gradient that a
    separate fill op zeroed.
    """
    forward = name in NLL_FORWARD
    x, target, weight = (_arg(args, 0), _arg(args, 1), _arg(args, 2)) if forward else \
        (_arg(args, 1), _arg(args, 2), _arg(args, 3))
    if x is None or target is None:
        return UNKNOWN
    t = _numel(target[0])
    weights = t * weight[1] if weight is not None else 0  # the class weight of each target
    if forward:
        reduction = _ints(_at(concrete, 3))
        if reduction is None or len(reduction) != 1:
            return UNKNOWN
        written = t * x[1] if reduction[0] == 0 else 2 * x[1]
        return float(_nbytes(target) + t * x[1] + weights + written), math.nan, float(written)
    grad_output, total_weight = _arg(args, 0), _arg(args, 6)
    written = t * x[1]
    return float(_nbytes(grad_output) + _nbytes(target) + _nbytes(total_weight) + weights + written), math.nan, \
        float(written)


def _loss(name: str, args: list[Tensor | None], concrete: list[str] | None) -> tuple[float, float, float]:
    """Elementwise losses: read the inputs, write one value, or the elementwise loss (reduction none)."""
    reduction = _ints(_at(concrete, LOSS_REDUCTION_AT[name]))
    tensors = [a for a in args if a is not None]
    shape = _broadcast([t[0] for t in tensors]) if tensors else None
    if reduction is None or len(reduction) != 1 or shape is None:
        return UNKNOWN
    item = tensors[0][1]
    written = _numel(shape) * item if reduction[0] == 0 else item
    return float(sum(_nbytes(t) for t in tensors) + written), math.nan, float(written)


def _gather(name: str, args: list[Tensor | None], shapes: dict, concrete: list[str] | None
            ) -> tuple[float, float, float]:
    """Gathers and embeddings read the index and the indexed rows (not the table) and write the rows."""
    if name == "embedding":  # (weight [V, D], indices, ...)
        table, index = _arg(args, 0), _arg(args, 1)
        if table is None or index is None or len(table[0]) != 2:
            return UNKNOWN
        rows = _numel(index[0]) * table[0][1] * table[1]
        return float(_nbytes(index) + 2 * rows), math.nan, float(rows)
    if name == "index_select":  # (self, dim, index)
        table, index = _arg(args, 0), _arg(args, 2)
        if table is None or index is None:
            return UNKNOWN
        ndim = len(table[0])
        dim = [0] if ndim <= 1 else _ints(_at(concrete, 1))
        if dim is None or len(dim) != 1 or not -max(ndim, 1) <= dim[0] < max(ndim, 1):
            return UNKNOWN
        d = dim[0] % max(ndim, 1)
        row = _numel([s for i, s in enumerate(table[0]) if i != d])
        rows = _numel(index[0]) * row * table[1]
        return float(_nbytes(index) + 2 * rows), math.nan, float(rows)
    # gather(self, dim, index, sparse_grad[, out]): one value per index element; an index that is
    # expanded (stride 0) is read once per distinct element, which only Input Strides tell
    table, index = _arg(args, 0), _arg(args, 2)
    strides = _strides(shapes, 2, len(index[0])) if index is not None else None
    if table is None or strides is None:
        return UNKNOWN
    distinct = _numel([s for s, st in zip(index[0], strides) if st != 0])
    values = _numel(index[0]) * table[1]
    return float(distinct * index[1] + 2 * values), math.nan, float(values)


def _reduction(name: str, args: list[Tensor | None], types: list, concrete: list[str] | None
               ) -> tuple[float, float, float]:
    """Read the input once, write the reduced shape (the dims are Concrete Inputs; none given: all)."""
    x = _arg(args, 0)
    if x is None:
        return UNKNOWN
    at = REDUCTION_DIM_AT.get(name, 1)
    kind = types[at] if at < len(types) else None
    has_dim = kind == "ScalarList" or (kind == "Scalar" and (len(types) > at + 1 or name == "count_nonzero"))
    shape = x[0]
    if has_dim:
        dims = _ints(_at(concrete, at))
        ndim = max(len(shape), 1)
        if dims is None or not all(-ndim <= d < ndim for d in dims):
            return UNKNOWN
        reduced = {d % ndim for d in dims} or set(range(ndim))  # an empty dim list reduces everything
        out = _numel([s for i, s in enumerate(shape) if i not in reduced])
    elif kind in (None, "", "Scalar"):  # no dim argument (or only a dtype): the whole tensor
        out = 1
    else:
        return UNKNOWN
    if name in INDEX_OUTPUTS:
        per = 8
    elif name in BOOL_OUTPUTS:
        per = 1
    elif name in TWO_OUTPUTS:
        per = 2 * x[1]
    elif name in ("max", "min") and has_dim:  # values and int64 indices
        per = x[1] + 8
    else:
        per = x[1]
    return float(_nbytes(x) + out * per), math.nan, float(out * per)


# pooling: (ops, spatial dims, (kernel, stride, padding, dilation, ceil_mode) positions, writes indices)
POOLS: dict[str, tuple[int, tuple[int, int, int, int | None, int], bool]] = {
    **{f"max_pool{d}d_with_indices": (d, (1, 2, 3, 4, 5), True) for d in (1, 2, 3)},
    **{f"max_pool{d}d": (d, (1, 2, 3, 4, 5), False) for d in (1, 2, 3)},
    **{f"avg_pool{d}d": (d, (1, 2, 3, None, 4), False) for d in (1, 2, 3)},
}
ADAPTIVE_POOLS: dict[str, tuple[int, bool]] = {
    **{f"{p}adaptive_avg_pool{d}d": (d, False) for d in (1, 2, 3) for p in ("", "_")},
    **{f"adaptive_max_pool{d}d": (d, True) for d in (1, 2, 3)},
}
# backward of pooling (grad_output, self, ..., [indices]): reads grad_output (and indices), writes
# a gradient shaped like self, which it does not read
POOL_BACKWARD = frozenset({"max_pool2d_with_indices_backward", "max_pool3d_with_indices_backward",
                           "avg_pool2d_backward", "avg_pool3d_backward", "_adaptive_avg_pool2d_backward",
                           "_adaptive_avg_pool3d_backward", "adaptive_max_pool2d_backward",
                           "adaptive_max_pool3d_backward"})


def _pool(name: str, args: list[Tensor | None], concrete: list[str] | None) -> tuple[float, float, float]:
    x = _arg(args, 0)
    if name in POOL_BACKWARD:
        go, x = _arg(args, 0), _arg(args, 1)
        if go is None or x is None:
            return UNKNOWN
        return float(sum(_nbytes(a) for a in args)), math.nan, float(_nbytes(x))
    if name in ADAPTIVE_POOLS:
        nd, indices = ADAPTIVE_POOLS[name]
        out = _spatial(_ints(_at(concrete, 1)), nd)
        out = out if out is not None and all(o >= 0 for o in out) else None
    else:
        nd, (at_k, at_s, at_p, at_d, at_c), indices = POOLS[name]
        kernel = _spatial(_ints(_at(concrete, at_k)), nd)
        stride = _ints(_at(concrete, at_s))
        stride = kernel if stride == [] else _spatial(stride, nd)  # stride [] means the kernel size
        padding = _spatial(_ints(_at(concrete, at_p)), nd)
        dilation = [1] * nd if at_d is None else _spatial(_ints(_at(concrete, at_d)), nd)
        ceil = _flags(_at(concrete, at_c))
        out = None
        if x is not None and None not in (kernel, stride, padding, dilation, ceil) and len(x[0]) > nd:
            out = _window_out(x[0][-nd:], kernel, stride, padding, dilation, ceil[0])
    if x is None or out is None or len(x[0]) <= nd:
        return UNKNOWN
    numel = _numel(x[0][:-nd]) * _numel(out)
    written = numel * x[1] + (numel * 8 if indices else 0)
    return float(_nbytes(x) + written), math.nan, float(written)


def _template(name: str, tensors: list[Tensor]) -> tuple[float, float, float]:
    """An autotuned Triton template (triton_tem_*): a GEMM or a convolution, whose buffers it lists.

    GEMM: a [..., M, K] and a [..., K, N] operand and a [..., M, N] output among them: 2*M*N*K.
    Convolution: input [N, C, H, W], weight [K, C/g, R, S] and output [N, K, P, Q]: FLOPs from P x Q.
    The bytes are every buffer once, as for any Inductor kernel.
    """
    total = float(sum(_nbytes(t) for t in tensors))
    shapes = [t[0] for t in tensors]
    if any(CONV_TOKEN.match(token) for token in _tokens(name)):
        for i, x in enumerate(shapes):
            for j in range(i + 1, len(shapes)):
                w = shapes[j]
                if len(x) < 3 or len(w) != len(x) or w[1] <= 0 or x[1] % w[1]:
                    continue
                for y in shapes[j + 1:]:
                    if len(y) == len(x) and y[0] == x[0] and y[1] == w[0]:
                        flops = 2 * x[0] * w[0] * w[1] * _numel(w[2:]) * _numel(y[2:])
                        return total, float(flops), float(_nbytes(tensors[shapes.index(y)]))
        return UNKNOWN
    for i, a in enumerate(shapes):
        for j, b in enumerate(shapes):
            if j <= i or len(a) < 2 or len(b) < 2 or a[-1] != b[-2] or a[:-2] != b[:-2] and len(b) > 2:
                continue
            m, kk, n = a[-2], a[-1], b[-1]
            outputs = [o for o, c in enumerate(shapes) if o not in (i, j) and c[-2:] == [m, n] and len(c) >= 2]
            if outputs:
                batch = _numel(a[:-2])
                return total, float(2 * batch * m * n * kk), float(_nbytes(tensors[outputs[0]]))
    return UNKNOWN


def _shape_changing(name: str) -> bool:
    return name in SHAPE_CHANGING or name.startswith(SHAPE_CHANGING_PREFIXES)


def op_traffic(op_name: str, shapes: dict | None, inductor: bool) -> OpTraffic:
    """Bytes (and FLOPs of GEMMs, convolutions, attention and templates) of one op call from its record_shapes.

    ``shapes`` is {"dims": Input Dims, "types": Input type} and, where the loader keeps them,
    "concrete" (Concrete Inputs: strides, paddings, reduction dims, flags) and "strides"
    (Input Strides). A rule that needs one of those gives NaN (unknown) without it.
    """
    unknown = OpTraffic(math.nan, math.nan, math.nan, "no-shapes", "")
    if not shapes or not isinstance(shapes, dict):
        return unknown
    dims, types = shapes.get("dims") or [], shapes.get("types") or []
    if not isinstance(dims, list) or not isinstance(types, list):
        return unknown
    # a TensorList's elements take the dtype of the op's other tensors, when they all have one
    others = {ITEMSIZE[t] for t in types if isinstance(t, str) and t in ITEMSIZE}
    fallback = next(iter(others)) if len(others) == 1 else None
    tensors = _tensors(dims, types, fallback)
    if not tensors:
        return unknown
    if any(tag == "unknown" for _, _, tag in tensors):
        return OpTraffic(math.nan, math.nan, math.nan, "no-dtype", "unknown")  # never a guessed itemsize
    sizes = [_numel(s) * z for s, z, _ in tensors]
    widest = max(range(len(tensors)), key=lambda i: (_numel(tensors[i][0]), tensors[i][1]))
    dtype = tensors[widest][2]
    largest = float(max(sizes))
    name = short_op(op_name)

    def result(figures: tuple[float, float, float], basis: str) -> OpTraffic:
        moved, flops, written = figures
        return OpTraffic(moved, flops, max(largest, written), basis, dtype)

    if inductor:
        if name.startswith("triton_tem_"):
            return result(_template(name, tensors), "template")
        # A kernel with a single buffer updates it in place (Inductor's in_out_ptr): it is read
        # and written, though listed once (doc section 6, the GELU case), unless it is a fill.
        total = 2 * sizes[0] if len(sizes) == 1 and not FILLS.intersection(_tokens(name)) else sum(sizes)
        return OpTraffic(float(total), math.nan, largest, "inductor", dtype)
    if name in GEMM_OPS:
        gemm = _gemm(name, tensors)
        if gemm is not None:
            return OpTraffic(gemm[0], gemm[1], float(max(*sizes, gemm[2])), "gemm", dtype)
        return result(UNKNOWN, "gemm")
    args = _arguments(dims, types)
    concrete = _concrete(shapes, len(dims))
    if name in CONV_ARGS:
        return result(_conv_forward(name, args, concrete), "conv")
    if name == "convolution_backward":
        return result(_conv_backward(args, concrete), "conv")
    if any(CONV_TOKEN.match(token) for token in _tokens(name)):
        return result(UNKNOWN, "conv")  # transposed, depthwise, slow paths: no rule, and not a bandwidth
    if name in ATTENTION:
        return result(_attention(name, args, concrete), "attention")
    if name in NLL_FORWARD or name in NLL_BACKWARD:
        return result(_nll(name, args, concrete), "loss")
    if name in LOSS_REDUCTION_AT:
        return result(_loss(name, args, concrete), "loss")
    if name in ("embedding", "index_select", "gather"):
        return result(_gather(name, args, shapes, concrete), "gather")
    if name in INDEXED:
        return result(UNKNOWN, "gather")
    if name in REDUCTIONS:
        return result(_reduction(name, args, types, concrete), "reduction")
    if name in POOLS or name in ADAPTIVE_POOLS or name in POOL_BACKWARD:
        return result(_pool(name, args, concrete), "pool")
    if name in NORMS:  # one read of each input, one write shaped like the first tensor
        first = next(t for t in args if t is not None) if any(args) else tensors[0]
        return result((float(sum(sizes) + _nbytes(first)), math.nan, float(_nbytes(first))), "norm")
    if name == "cat":  # reads each element of the list, writes them all side by side
        listed = dims[0] if types and types[0] == "TensorList" and dims and isinstance(dims[0], list) else None
        if listed is None or fallback is None:
            return result(UNKNOWN, "no-rule")
        elements = sum(_numel(_shape(e)) for e in listed) * fallback[0]
        return result((float(2 * elements), math.nan, float(elements)), "eager")
    if name.startswith("_foreach_"):  # one output (or in-place update) shaped like each element of the first list
        listed = dims[0] if types and types[0] == "TensorList" and dims and isinstance(dims[0], list) else None
        if listed is None or fallback is None:
            return result(UNKNOWN, "no-rule")
        first = sum(_numel(_shape(e)) for e in listed) * fallback[0]
        written = 0 if name in ("_foreach_zero_", "_foreach_copy_") else first  # those write without reading self
        return result((float(sum(sizes) + written), math.nan, float(first)), "eager")
    if _shape_changing(name):
        return result(UNKNOWN, "no-rule")
    total = float(sum(sizes))
    if name in WRITE_ONLY:  # fill_, copy_: write self once, read the other arguments
        return result((total, math.nan, 0.0), "eager")
    self_bytes = float(_nbytes(args[0])) if args and args[0] is not None else math.nan
    if name.endswith("_"):  # in place: reads self and the other arguments, writes self
        return result((total + self_bytes, math.nan, self_bytes), "eager")
    shape = _broadcast([s for s, _, _ in tensors])
    if shape is None:
        return result(UNKNOWN, "no-rule")  # not an elementwise op: its output is not the inputs' broadcast
    out = float(_numel(shape) * tensors[widest][1])
    return result((total + out, math.nan, out), "eager")


@dataclass(frozen=True)
class Traffic:
    """Per GPU event (aligned with ``trace.gpu`` rows): bytes, FLOPs, achieved rates."""

    table: pd.DataFrame  # columns below; index = trace.gpu index
    device: DeviceSpec | None

    @cached_property
    def known_share(self) -> float:
        """Share of GPU time whose bytes are known."""
        t = self.table
        dur = t["dur"].to_numpy(np.float64)  # float: an int64 sum may wrap
        total = float(dur.sum())
        return float(dur[t["bytes"].notna().to_numpy()].sum()) / total if total else 0.0


TRAFFIC_COLUMNS = ["dur", "bytes", "flops", "largest", "basis", "dtype", "gbs", "peak_share", "above_peak",
                   "tflops", "flops_share", "copy_kind", "link_gbs", "link_share"]

# Kineto's memcpy names: "Memcpy HtoD (Pinned -> Device)", "Memcpy DtoH (Device -> Pageable)"...
MEMCPY_NAME = re.compile(r"^Memcpy ([HDAP])to([HDAP])\b(?:\s*\(\s*([\w ]+?)\s*->\s*([\w ]+?)\s*\))?")


def copy_kind(name: str) -> tuple[str, str, int]:
    """(label, basis, bytes per copied byte) of a memcpy event from its name.

    Host<->device copies cross the host link and name the host memory ("H2D pinned",
    "D2H pageable": pageable copies are staged through a pinned buffer and run far below
    the link). A copy within the device reads and writes HBM: twice its size. Peer copies
    cross NVLink or PCIe to another device.
    """
    m = MEMCPY_NAME.match(name)
    if m is None:
        return "copy", "copy-unknown", 1
    src, dst = ("D" if c == "A" else c for c in m.group(1, 2))  # CUDA arrays live on the device
    host = (m.group(3) if src == "H" else m.group(4)) or ""
    host = f" {host.lower()}" if host and host.lower() not in ("unknown", "device") else ""
    if src == "H" and dst == "D":
        return f"H2D{host}", "copy-h2d", 1
    if src == "D" and dst == "H":
        return f"D2H{host}", "copy-d2h", 1
    if src == "D" and dst == "D":
        return "D2D", "memcpy", 2
    if "P" in (src, dst):
        return "P2P", "copy-p2p", 1
    return "H2H", "copy-h2h", 1


def _callers(trace: Trace, op_rows: np.ndarray, names: np.ndarray) -> np.ndarray:
    """Per op row, the row whose record judges its kernels: itself, or the caller CALLERS names."""
    ev = trace.events
    out = op_rows.copy()
    for i, (row, name) in enumerate(zip(op_rows, names)):
        allowed = CALLERS.get(short_op(str(name)))
        if not allowed:
            continue
        stack = trace.op_stack(int(ev["lane"].iat[row]))
        if stack is None:
            continue
        enclosing = [int(r) for r in stack.enclosing(int(ev["ts"].iat[row])) if ev["kind"].iat[r] == Kind.CPU_OP]
        at = enclosing.index(int(row)) if int(row) in enclosing else -1
        while at > 0:  # outermost first: walk up from the op while its caller may speak for it
            parent = enclosing[at - 1]
            parent_name = short_op(trace.name(int(ev["name"].iat[parent])))
            if parent_name not in allowed:
                break
            out[i], allowed, at = parent, CALLERS.get(parent_name, frozenset()), at - 1
    return out


def _parse_ops(trace: Trace, op_rows: np.ndarray) -> pd.DataFrame:
    """OpTraffic per op row, each distinct (name, shapes text) parsed once."""
    ev = trace.events
    names = trace.names_of(ev["name"].to_numpy()[op_rows])
    inductor = ev["kernel_hash"].to_numpy()[op_rows] >= 0
    # (not np.char on names.astype(str): a fixed-width copy of every name at the longest one's width)
    inductor |= np.fromiter((str(n).startswith("triton_") for n in names), bool, len(names))
    judged = _callers(trace, op_rows, names)  # gather inside embedding: the embedding's record
    names = np.where(judged != op_rows, trace.names_of(ev["name"].to_numpy()[judged]), names)
    at = ev["shapes_at"].to_numpy()[judged]
    length = ev["shapes_len"].to_numpy()[judged]
    blob = trace.shapes_blob
    cache: dict[tuple, tuple] = {}
    records = []
    for name, ind, a, n in zip(names, inductor, at, length):
        text = bytes(blob[a : a + n]) if a >= 0 else b""
        key = (name, bool(ind), text)
        if key not in cache:
            t = op_traffic(name, parse_shapes(text), bool(ind))
            # tuples, not dataclasses: pandas would call asdict() per row
            cache[key] = (t.bytes, t.flops, t.largest, t.basis, t.dtype)
        records.append(cache[key])
    return pd.DataFrame(records, columns=["bytes", "flops", "largest", "basis", "dtype"], index=op_rows)


def compute_traffic(trace: Trace, device_name: str | None = None) -> Traffic:
    """Bytes, FLOPs and achieved bandwidth for every GPU event of a trace.

    The peak comes from the trace's device name unless ``device_name`` is given.
    """
    g = trace.gpu
    spec = device_spec(device_name or trace.meta.device_name)
    kind = g["kind"].to_numpy()
    dur = g["dur"].to_numpy().astype(np.float64)
    op_row = g["op_row"].to_numpy()
    graph = g["graph"].to_numpy()
    is_kernel = (kind == Kind.KERNEL) & (op_row >= 0) & ~graph

    out = pd.DataFrame(index=g.index)
    out["dur"] = g["dur"].to_numpy()
    nan = np.full(len(g), np.nan)
    out["bytes"], out["flops"], out["largest"] = nan.copy(), nan.copy(), nan.copy()
    basis = np.full(len(g), "no-op", dtype=object)
    dtype = np.full(len(g), "", dtype=object)
    if is_kernel.any():
        ops = _parse_ops(trace, np.unique(op_row[is_kernel]))
        rows = op_row[is_kernel]
        # an op's bytes and FLOPs are shared among its kernels by duration
        op_dur = pd.Series(dur[is_kernel]).groupby(rows).transform("sum").to_numpy()
        weight = np.divide(dur[is_kernel], op_dur, out=np.ones_like(op_dur), where=op_dur > 0)
        per_op = ops.loc[rows]
        out.loc[is_kernel, "bytes"] = per_op["bytes"].to_numpy() * weight
        out.loc[is_kernel, "flops"] = per_op["flops"].to_numpy() * weight
        out.loc[is_kernel, "largest"] = per_op["largest"].to_numpy()
        basis[is_kernel] = per_op["basis"].to_numpy()
        dtype[is_kernel] = per_op["dtype"].to_numpy()
    copies = (kind == Kind.MEMCPY) | (kind == Kind.MEMSET)
    copy_bytes = g["bytes"].to_numpy().astype(np.float64)
    known_copy = copies & (copy_bytes >= 0)
    out.loc[known_copy, "bytes"] = copy_bytes[known_copy]
    out.loc[known_copy, "largest"] = copy_bytes[known_copy]
    basis[copies] = "memset"
    labels = np.full(len(g), "", dtype=object)
    memcpy = np.flatnonzero(kind == Kind.MEMCPY)
    if len(memcpy):
        full = g["full_name"].astype(str).to_numpy()[memcpy]
        parsed = {name: copy_kind(name) for name in pd.unique(full)}
        labels[memcpy] = [parsed[n][0] for n in full]
        basis[memcpy] = [parsed[n][1] for n in full]
        factor = np.array([parsed[n][2] for n in full], np.float64)
        known = copy_bytes[memcpy] >= 0
        out.loc[memcpy[known], "bytes"] = copy_bytes[memcpy[known]] * factor[known]
    basis[graph] = "cuda-graph"
    if not trace.meta.record_shapes:
        basis[(kind == Kind.KERNEL) & ~graph] = "no-shapes"
    out["basis"] = pd.Categorical(basis, categories=BASIS)
    out["dtype"] = dtype
    out["copy_kind"] = labels
    _rates(out, spec)
    return Traffic(out[TRAFFIC_COLUMNS], spec)


def _rates(out: pd.DataFrame, spec: DeviceSpec | None) -> None:
    dur = out["dur"].to_numpy().astype(np.float64)
    safe = np.where(dur > 0, dur, np.nan)
    basis = out["basis"].astype(str).to_numpy()
    by_flops = np.isin(basis, list(FLOP_BASES))
    off_hbm = np.isin(basis, list(OFF_HBM_BASES))
    host = np.isin(basis, ["copy-h2d", "copy-d2h"])
    # bytes per ns = GB/s; GEMMs, convolutions, attention and templates are judged by FLOP/s
    out["gbs"] = np.where(by_flops, np.nan, out["bytes"].to_numpy() / safe)
    out["tflops"] = out["flops"].to_numpy() / safe / 1e3
    # host copies are measured against the host link, not HBM (doc section 10)
    hbm = np.where(off_hbm, np.nan, out["gbs"].to_numpy())
    out["peak_share"] = hbm / spec.bandwidth_gbs if spec else np.nan
    out["above_peak"] = (out["peak_share"] > 1.0).to_numpy() if spec else False
    link = spec.host_link_gbs if spec and spec.host_link_gbs else np.nan
    out["link_gbs"] = np.where(host, link, np.nan)
    out["link_share"] = out["gbs"].to_numpy() / out["link_gbs"].to_numpy()
    tags = pd.unique(out["dtype"])
    peak = {tag: (spec.peak_tflops(tag) if spec else None) or np.nan for tag in tags}
    out["flops_share"] = out["tflops"].to_numpy() / out["dtype"].map(peak).to_numpy(np.float64)
