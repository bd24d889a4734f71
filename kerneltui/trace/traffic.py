"""Bytes moved through GPU memory, FLOPs of GEMMs, and achieved bandwidth per GPU event.

Rules of doc section 6:

* memcpy/memset: their own ``bytes``.
* kernels: the ``Input Dims`` x itemsize(``Input type``) of the op that launched
  them (External id = innermost op). ``Scalar``, ``ScalarList`` and ``""`` are
  skipped; a ``TensorList`` is a nested list of shapes.
* eager ops list inputs only: the output (broadcast shape x dtype) is added,
  except for in-place ``_`` ops, which write into an input.
* Inductor ops (``triton_*``) list every buffer argument once: that is the traffic,
  except that a kernel with a single buffer updates it in place (``in_out_ptr``,
  which the doc shows under-counted by half), so that buffer counts twice.
* GEMMs (mm, addmm, bmm, baddbmm, matmul, linear...) report FLOPs = 2*M*N*K.
* an op that launched several kernels shares its bytes among them by duration,
  so each kernel of the op shows the op's bytes / summed kernel time.
* CUDA-graph replays have no op, so no byte count (NaN, never zero).

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
import orjson
import pandas as pd

from kerneltui.trace.devices import DeviceSpec, device_spec
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
# Reductions write a small output whose shape record_shapes does not give (the
# reduced dims are a ScalarList): count the inputs only, a slight under-count.
REDUCTIONS = frozenset({"mean", "sum", "std", "var", "std_mean", "var_mean", "amax", "amin", "max", "min",
                        "prod", "norm", "linalg_vector_norm", "argmax", "argmin", "any", "all", "logsumexp",
                        "nansum", "count_nonzero", "_foreach_norm"})

# Inductor kernels that only write their one buffer
FILLS = frozenset({"zeros", "full", "fill", "ones", "empty", "arange", "new"})

# basis of each event's figure, shown as the "how" of a number
BASIS = ("memcpy", "memset", "eager", "inductor", "gemm", "cuda-graph", "no-op", "no-shapes")


@dataclass(frozen=True)
class OpTraffic:
    bytes: float  # NaN when unknown
    flops: float  # NaN unless a GEMM
    largest: float  # bytes of the largest tensor argument (or output)
    basis: str
    dtype: str  # tag of the widest tensor (f32, bf16...), "" if none


def short_op(name: str) -> str:
    """aten::clamp_min -> clamp_min; triton_poi_fused_add_relu_0 unchanged."""
    return name.rsplit("::", 1)[-1]


def _tokens(name: str) -> list[str]:
    return [t for t in re.split(r"[_\W]+", name.lower()) if t]


def _tensors(dims: list, types: list, fallback: tuple[int, str] | None) -> list[tuple[list[int], int, str]]:
    """(shape, itemsize, tag) for every tensor argument, TensorLists flattened."""
    out = []
    for shape, kind in zip(dims, types):
        if kind == "TensorList":
            # a TensorList's element dtype is not recorded: use the op's other tensors' dtype
            size = fallback or (4, "f32")
            out.extend((list(s), size[0], size[1]) for s in shape if isinstance(s, list))
        elif kind in ITEMSIZE and isinstance(shape, list):
            size, tag = ITEMSIZE[kind]
            out.append((shape, size, tag))
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


def op_traffic(op_name: str, shapes: dict | None, inductor: bool) -> OpTraffic:
    """Bytes (and GEMM FLOPs) of one op call from its record_shapes."""
    if not shapes:
        return OpTraffic(math.nan, math.nan, math.nan, "no-shapes", "")
    dims, types = shapes.get("dims") or [], shapes.get("types") or []
    concrete = [ITEMSIZE[t] for t in types if t in ITEMSIZE]
    fallback = max(concrete) if concrete else None
    tensors = _tensors(dims, types, fallback)
    if not tensors:
        return OpTraffic(math.nan, math.nan, math.nan, "no-shapes", "")
    sizes = [_numel(s) * z for s, z, _ in tensors]
    widest = max(range(len(tensors)), key=lambda i: (_numel(tensors[i][0]), tensors[i][1]))
    dtype = tensors[widest][2]
    name = short_op(op_name)
    if inductor:
        # A kernel with a single buffer updates it in place (Inductor's in_out_ptr):
        # it is read and written, though listed once (doc section 6, the GELU case).
        total = 2 * sizes[0] if len(sizes) == 1 and not FILLS.intersection(_tokens(name)) else sum(sizes)
        return OpTraffic(float(total), math.nan, float(max(sizes)), "inductor", dtype)
    if name in GEMM_OPS:
        gemm = _gemm(name, tensors)
        if gemm is not None:
            return OpTraffic(gemm[0], gemm[1], float(max(*sizes, gemm[2])), "gemm", dtype)
    total = float(sum(sizes))
    out = 0.0
    if not name.endswith("_") and name not in REDUCTIONS:
        shape = _broadcast([s for s, _, _ in tensors])
        out = float(_numel(shape) * tensors[widest][1]) if shape is not None else float(max(sizes))
    return OpTraffic(total + out, math.nan, float(max(max(sizes), out)), "eager", dtype)


@dataclass(frozen=True)
class Traffic:
    """Per GPU event (aligned with ``trace.gpu`` rows): bytes, FLOPs, achieved rates."""

    table: pd.DataFrame  # columns below; index = trace.gpu index
    device: DeviceSpec | None

    @cached_property
    def known_share(self) -> float:
        """Share of GPU time whose bytes are known."""
        t = self.table
        total = float(t["dur"].sum())
        return float(t.loc[t["bytes"].notna(), "dur"].sum()) / total if total else 0.0


TRAFFIC_COLUMNS = ["dur", "bytes", "flops", "largest", "basis", "dtype", "gbs", "peak_share", "above_peak",
                   "tflops", "flops_share"]


def _parse_ops(trace: Trace, op_rows: np.ndarray) -> pd.DataFrame:
    """OpTraffic per op row, each distinct (name, shapes text) parsed once."""
    ev = trace.events
    names = trace.names_of(ev["name"].to_numpy()[op_rows])
    inductor = ev["kernel_hash"].to_numpy()[op_rows] >= 0
    inductor |= np.char.startswith(names.astype(str), "triton_")
    at = ev["shapes_at"].to_numpy()[op_rows]
    length = ev["shapes_len"].to_numpy()[op_rows]
    blob = trace.shapes_blob
    cache: dict[tuple, tuple] = {}
    records = []
    for name, ind, a, n in zip(names, inductor, at, length):
        text = bytes(blob[a : a + n]) if a >= 0 else b""
        key = (name, bool(ind), text)
        if key not in cache:
            t = op_traffic(name, orjson.loads(text) if text else None, bool(ind))
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
    basis[copies] = np.where(kind[copies] == Kind.MEMCPY, "memcpy", "memset")
    basis[graph] = "cuda-graph"
    if not trace.meta.record_shapes:
        basis[(kind == Kind.KERNEL) & ~graph] = "no-shapes"
    out["basis"] = pd.Categorical(basis, categories=BASIS)
    out["dtype"] = dtype
    _rates(out, spec)
    return Traffic(out[TRAFFIC_COLUMNS], spec)


def _rates(out: pd.DataFrame, spec: DeviceSpec | None) -> None:
    dur = out["dur"].to_numpy().astype(np.float64)
    safe = np.where(dur > 0, dur, np.nan)
    gemm = out["basis"].to_numpy() == "gemm"
    # bytes per ns = GB/s; GEMMs are judged by FLOP/s, not bandwidth
    out["gbs"] = np.where(gemm, np.nan, out["bytes"].to_numpy() / safe)
    out["tflops"] = out["flops"].to_numpy() / safe / 1e3
    out["peak_share"] = out["gbs"] / spec.bandwidth_gbs if spec else np.nan
    out["above_peak"] = (out["peak_share"] > 1.0).to_numpy() if spec else False
    tags = pd.unique(out["dtype"])
    peak = {tag: (spec.peak_tflops(tag) if spec else None) or np.nan for tag in tags}
    out["flops_share"] = out["tflops"].to_numpy() / out["dtype"].map(peak).to_numpy(np.float64)
