"""Bytes of memory-bound ops whose traffic is not their arguments' sizes: losses, gathers, reductions, pools."""

from __future__ import annotations

import math

from kerneltui.analysis.traffic.records import (
    UNKNOWN,
    Tensor,
    _arg,
    _at,
    _broadcast,
    _flags,
    _ints,
    _nbytes,
    _numel,
    _spatial,
    _strides,
    _window_out,
)

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
