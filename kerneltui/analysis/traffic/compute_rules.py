"""FLOPs (and the least bytes) of the work judged by FLOP/s: GEMMs, convolutions, attention, templates."""

from __future__ import annotations

import re

from kerneltui.analysis.traffic.records import (
    UNKNOWN,
    Tensor,
    _arg,
    _at,
    _flags,
    _ints,
    _nbytes,
    _numel,
    _spatial,
    _tokens,
    _window_out,
)

GEMM_OPS = frozenset({"mm", "addmm", "bmm", "baddbmm", "matmul", "linear", "addbmm", "_addmm_activation",
                      "_scaled_mm", "_int_mm", "mv", "addmv", "dot"})

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


def template_dims(name: str, shapes: list[list[int]]) -> tuple | None:
    """What an autotuned Triton template (triton_tem_*) computes, from the buffers it lists.

    GEMM: ("gemm", batch, M, N, K, output index): a [..., M, K] and a [..., K, N] operand, and an
    output of batch*M*N elements (its shape may be a view of another rank: [B*T, N] for [B, T, N]).
    Convolution: ("conv", input, weight, output index): input [N, C, H, W], weight [K, C/g, R, S]
    and output [N, K, P, Q]. None when the buffers show neither.
    """
    if any(CONV_TOKEN.match(token) for token in _tokens(name)):
        for i, x in enumerate(shapes):
            for j in range(i + 1, len(shapes)):
                w = shapes[j]
                if len(x) < 3 or len(w) != len(x) or w[1] <= 0 or x[1] % w[1]:
                    continue
                for o in range(j + 1, len(shapes)):
                    y = shapes[o]
                    if len(y) == len(x) and y[0] == x[0] and y[1] == w[0]:
                        return ("conv", x, w, o)
        return None
    for i, a in enumerate(shapes):
        for j, b in enumerate(shapes):
            if j <= i or len(a) < 2 or len(b) < 2 or a[-1] != b[-2] or (len(b) > 2 and a[:-2] != b[:-2]):
                continue
            m, kk, n = a[-2], a[-1], b[-1]
            batch = _numel(a[:-2]) if len(a) > 2 else _numel(b[:-2])
            outputs = [o for o, c in enumerate(shapes) if o not in (i, j) and len(c) >= 1 and c[-1] == n
                       and _numel(c) == batch * m * n]
            if outputs:
                return ("gemm", batch, m, n, kk, outputs[-1])
    return None


def _template(name: str, tensors: list[Tensor]) -> tuple[float, float, float]:
    """An autotuned Triton template: a GEMM (2*M*N*K) or a convolution (FLOPs from P x Q), see template_dims.

    The bytes are every buffer once, as for any Inductor kernel: operands, epilogue inputs, outputs.
    """
    total = float(sum(_nbytes(t) for t in tensors))
    dims = template_dims(name, [t[0] for t in tensors])
    if dims is None:
        return UNKNOWN
    if dims[0] == "conv":
        _, x, w, o = dims
        return total, float(2 * x[0] * w[0] * w[1] * _numel(w[2:]) * _numel(tensors[o][0][2:])), float(
            _nbytes(tensors[o]))
    _, batch, m, n, kk, o = dims
    return total, float(2 * batch * m * n * kk), float(_nbytes(tensors[o]))
