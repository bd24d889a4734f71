"""OpTraffic of one op call from its record: the rule for its class, or unknown."""

from __future__ import annotations

import math
from dataclasses import dataclass

from kerneltui.analysis.traffic.compute_rules import (
    ATTENTION,
    CONV_ARGS,
    CONV_TOKEN,
    GEMM_OPS,
    _attention,
    _conv_backward,
    _conv_forward,
    _gemm,
    _template,
)
from kerneltui.analysis.traffic.memory_rules import (
    ADAPTIVE_POOLS,
    LOSS_REDUCTION_AT,
    NLL_BACKWARD,
    NLL_FORWARD,
    POOL_BACKWARD,
    POOLS,
    REDUCTIONS,
    _gather,
    _loss,
    _nll,
    _pool,
    _reduction,
)
from kerneltui.analysis.traffic.records import (
    ITEMSIZE,
    UNKNOWN,
    _arguments,
    _broadcast,
    _concrete,
    _nbytes,
    _numel,
    _shape,
    _tensors,
    _tokens,
    short_op,
)

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

# Inductor kernels with one buffer that only write it (fills, and the zero-initialised
# accumulators of embedding_dense_backward, index_put and scatter): written once, not in_out_ptr.
FILLS = frozenset({"zeros", "zero", "full", "fill", "ones", "empty", "arange", "iota", "new", "embedding",
                   "index", "scatter"})

# basis of each event's figure, shown as the "how" of a number
BASIS = ("memcpy", "memset", "eager", "inductor", "gemm", "cuda-graph", "no-op", "no-shapes", "conv", "attention",
         "optimizer", "template", "reduction", "loss", "gather", "norm", "pool", "no-dtype", "no-rule", "copy-h2d", "copy-d2h",
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


GATHER_TOKENS = frozenset({"embedding", "index", "gather"})
INDEX_TAGS = frozenset({"i64", "i32"})


def _inductor_gather(name: str, tensors: list[tuple[list[int], int, str]]) -> float | None:
    """Bytes of an Inductor kernel that gathers rows by index (``triton_poi_fused_embedding_0``), or None.

    It lists the whole table among its buffers but reads at most one row per index: a [V, D] buffer
    larger than (indices x D) counts as indices x D elements. Its other buffers count once."""
    if not GATHER_TOKENS.intersection(_tokens(name)):
        return None
    indices = max((_numel(s) for s, _, tag in tensors if tag in INDEX_TAGS), default=0)
    if not indices:
        return None
    total = 0
    for shape, size, tag in tensors:
        rows_read = indices * shape[-1] if tag not in INDEX_TAGS and len(shape) >= 2 else None
        total += min(_numel(shape), rows_read) * size if rows_read is not None else _numel(shape) * size
    return float(total)


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
        gathered = _inductor_gather(name, tensors)
        if gathered is not None:
            return OpTraffic(gathered, math.nan, largest, "gather", dtype)
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
