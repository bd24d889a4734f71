"""Bytes, FLOPs and achieved rates per GPU event of a trace (the table every view reads)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from kerneltui.analysis.traffic.ops import BASIS, FLOP_BASES, OFF_HBM_BASES, op_traffic
from kerneltui.analysis.traffic.records import ITEMSIZE, short_op
from kerneltui.trace.devices import DeviceSpec, device_spec
from kerneltui.trace.model import parse_shapes
from kerneltui.trace.one_of import one_of
from kerneltui.trace.schema import Kind
from kerneltui.trace.shape_texts import text_classes
from kerneltui.trace.text_columns import text_values, texts

if TYPE_CHECKING:
    from kerneltui.trace.model import Trace


# An op that launched kernels for its caller is judged by the caller's record: torch runs
# aten::embedding -> aten::index_select -> aten::gather, whose index is the row index expanded
# (stride 0) to [rows, row size], so the gather's own record shows a full-size int64 index.
CALLERS = {"gather": frozenset({"index_select", "embedding"}), "index_select": frozenset({"embedding"})}


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
    lane, ts, kind, name_code = (ev[c].to_numpy() for c in ("lane", "ts", "kind", "name"))  # not .iat per row
    out = op_rows.copy()
    codes = name_code[op_rows]
    # which ops a caller may speak for, judged once per distinct name (not per op: 300k ops at 1 GB)
    spoken_for = trace.by_name(codes, lambda n: bool(CALLERS.get(short_op(n))), bool)
    for i in np.flatnonzero(spoken_for).tolist():
        row, name = op_rows[i], names[i]
        allowed = CALLERS.get(short_op(str(name)))
        stack = trace.op_stack(int(lane[row]))
        if stack is None:
            continue
        enclosing = [int(r) for r in stack.enclosing(int(ts[row])) if kind[r] == Kind.CPU_OP]
        at = enclosing.index(int(row)) if int(row) in enclosing else -1
        while at > 0:  # outermost first: walk up from the op while its caller may speak for it
            parent = enclosing[at - 1]
            parent_name = short_op(trace.name(int(name_code[parent])))
            if parent_name not in allowed:
                break
            out[i], allowed, at = parent, CALLERS.get(parent_name, frozenset()), at - 1
    return out


def _parse_ops(trace: Trace, op_rows: np.ndarray) -> dict[str, np.ndarray]:
    """OpTraffic per op row, as arrays ("bytes", "flops", "largest": float; "basis", "dtype": object), each
    distinct (name, shapes text) parsed once."""
    ev = trace.events
    codes = ev["name"].to_numpy()[op_rows]
    names = trace.names_of(codes)
    inductor = ev["kernel_hash"].to_numpy()[op_rows] >= 0
    # once a distinct name (not np.char on names.astype(str): a fixed-width copy of every name at the longest
    # one's width)
    inductor |= trace.by_name(codes, lambda n: n.startswith("triton_"), bool)
    judged = _callers(trace, op_rows, names)  # gather inside embedding: the embedding's record
    judged_codes = ev["name"].to_numpy()[judged]  # the op's own name, or its caller's where that judges it
    at = ev["shapes_at"].to_numpy()[judged]
    length = ev["shapes_len"].to_numpy()[judged]
    blob = trace.shapes_blob
    # each distinct (name, inductor, record) parsed once: rows grouped by their record's text without a
    # bytes object each (text_classes), then by name and inductor (130k ops at 1 GB, a few hundred records)
    texts, _ = text_classes(blob, at, length)
    key = (texts * 2 + inductor) * (len(trace.names) + 1) + (judged_codes.astype(np.int64) + 1)
    _, first, which = np.unique(key, return_index=True, return_inverse=True)
    records = []
    for i in first.tolist():
        a, n = int(at[i]), int(length[i])
        records.append(op_traffic(trace.name(int(judged_codes[i])),
                                  parse_shapes(bytes(blob[a : a + n]) if a >= 0 else b""), bool(inductor[i])))
    which = which.reshape(-1)
    return {"bytes": np.array([t.bytes for t in records], np.float64)[which],
            "flops": np.array([t.flops for t in records], np.float64)[which],
            "largest": np.array([t.largest for t in records], np.float64)[which],
            "basis": np.array([t.basis for t in records], object)[which],
            "dtype": np.array([t.dtype for t in records], object)[which]}


# Fused optimizers: bytes per byte of parameters (params, grads and states read, params and states
# written: Adam(W) reads p, g, m, v and writes p, m, v); SGD without momentum 3.
FUSED_OPTIMIZERS = {"_fused_adam_": 7, "_fused_adamw_": 7, "_fused_sgd_": 5, "_fused_adagrad_": 5}
AMSGRAD_AT = 11  # _fused_adam(w)_(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, lr,
#                  beta1, beta2, weight_decay, eps, amsgrad, ...): max_exp_avg_sqs read and written too
MOMENTUM_AT = 4  # _fused_sgd_(params, grads, momentum_buffer_list, weight_decay, momentum, ...)
ACCUMULATE_GRAD = "torch::autograd::AccumulateGrad"


def _fused_optimizers(trace: Trace, op_rows: np.ndarray, ops: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Bytes of fused optimizer steps (``_fused_adamw_``...), whose tensor lists the record drops.

    Kineto records a TensorList of more than 30 tensors as empty (torch 2.13), and never its dtype.
    The lists are the parameters that received a gradient in the step, each once: the step's
    ``AccumulateGrad`` ops record each gradient's shape and dtype. Known only for a step that runs
    one fused optimizer call (more would be param groups of unknown sizes). ``ops``: _parse_ops' arrays
    for ``op_rows``, returned as they are or as copies with the known steps' entries replaced."""
    ev = trace.events
    codes = ev["name"].to_numpy()[op_rows]
    fused = trace.by_name(codes, lambda n: short_op(n) in FUSED_OPTIMIZERS, bool)  # once a distinct name
    if not fused.any():
        return ops
    names = trace.names_of(codes)
    its = trace.iterations
    rows = op_rows[fused]
    step = its.assign(ev["ts"].to_numpy()[rows])
    params = _parameter_bytes(trace)
    calls = np.bincount(step[step >= 0], minlength=its.count)
    known, moved, tags = [], [], []
    for position, row, k, name in zip(np.flatnonzero(fused).tolist(), rows.tolist(), step.tolist(), names[fused]):
        if k < 0 or calls[k] != 1 or not params.get(k):
            continue
        op = short_op(str(name))
        factor = FUSED_OPTIMIZERS[op]
        concrete = (trace.shapes(row) or {}).get("concrete") or []
        if op in ("_fused_adam_", "_fused_adamw_") and len(concrete) > AMSGRAD_AT and concrete[AMSGRAD_AT] == "True":
            factor += 2
        if op == "_fused_sgd_" and len(concrete) > MOMENTUM_AT and concrete[MOMENTUM_AT] in ("0", "0.0", "0."):
            factor -= 2
        size, tag = params[k]
        known.append(position)
        moved.append(float(factor * size))
        tags.append(tag)
    if not known:
        return ops
    ops = {column: values.copy() for column, values in ops.items()}
    ops["bytes"][known] = moved
    ops["largest"][known] = np.nan
    ops["basis"][known] = "optimizer"
    ops["dtype"][known] = tags
    return ops


def _gradient_bytes(shapes: dict) -> tuple[int, str] | None:
    """(bytes, dtype tag) of the gradient an AccumulateGrad record names, None where it names none."""
    dims, types = shapes.get("dims") or [], shapes.get("types") or []
    if not dims or not types or types[0] not in ITEMSIZE or not isinstance(dims[0], list):
        return None
    size, tag = ITEMSIZE[types[0]]
    return int(np.prod(dims[0], dtype=np.int64)) * size, tag


def _parameter_bytes(trace: Trace) -> dict[int, tuple[int, str]]:
    """Per step: bytes of the gradients its AccumulateGrad ops received, and their dtype tag."""
    ev = trace.events
    codes = [i for i, n in enumerate(trace.names) if n == ACCUMULATE_GRAD]
    if not codes:
        return {}
    rows = np.flatnonzero(one_of(ev["name"].to_numpy(), codes) & (ev["kind"].to_numpy() == Kind.CPU_OP))
    step = trace.iterations.assign(ev["ts"].to_numpy()[rows])
    # each distinct record sized once (every step repeats the same records), and only where a step holds
    # it (a record outside the steps is never read, as before)
    texts, firsts = text_classes(trace.shapes_blob, ev["shapes_at"].to_numpy()[rows], ev["shapes_len"].to_numpy()[rows])
    sized: dict[int, tuple[int, str] | None] = {}
    out: dict[int, list] = {}
    for k, text in zip(step.tolist(), texts.tolist()):
        if k < 0:
            continue
        if text not in sized:
            shapes = trace.shapes(int(rows[firsts[text]]))
            sized[text] = None if shapes is None else _gradient_bytes(shapes)
        if sized[text] is None:
            continue
        nbytes, tag = sized[text]
        entry = out.setdefault(k, [0, tag])
        entry[0] += nbytes
        if entry[1] != tag:
            entry[1] = ""  # mixed dtypes: the bytes stand, no one dtype
    return {k: (v[0], v[1]) for k, v in out.items()}


@dataclass(frozen=True)
class TrafficArrays:
    """``compute_traffic``'s figures per GPU event (aligned with ``trace.gpu`` rows) before they are a table:
    what a rule that reads a few of them needs (advice_gemm), without the table's text columns and rates."""

    moved: np.ndarray  # bytes, NaN unknown (the table's "bytes")
    flops: np.ndarray
    largest: np.ndarray
    basis_code: np.ndarray  # int8 index into BASIS, -1 none (the table's categorical "basis")
    dtype: np.ndarray  # object: str, "" unknown
    copy_kind: np.ndarray  # object: str, "" for all but memcpys


def compute_traffic(trace: Trace, device_name: str | None = None,
                    ops: Callable[[str], bool] | None = None) -> Traffic:
    """Bytes, FLOPs and achieved bandwidth for every GPU event of a trace.

    The peak comes from the trace's device name unless ``device_name`` is given. ``ops``: only the
    kernels of ops whose short name (``short_op``) it accepts are judged (the GEMM rule needs only
    GEMMs'); every other kernel is left as of no op ("no-op", NaN).
    """
    g = trace.gpu
    spec = device_spec(device_name or trace.meta.device_name)
    a = traffic_arrays(trace, ops)
    out = pd.DataFrame({"dur": g["dur"].to_numpy(), "bytes": a.moved, "flops": a.flops, "largest": a.largest,
                        "basis": pd.Categorical.from_codes(a.basis_code, categories=BASIS)}, index=g.index)
    out["dtype"] = a.dtype
    out["copy_kind"] = a.copy_kind
    _rates(out, spec, a.basis_code, a.dtype)
    return Traffic(out[TRAFFIC_COLUMNS], spec)


def traffic_arrays(trace: Trace, ops: Callable[[str], bool] | None = None) -> TrafficArrays:
    """``compute_traffic``'s figures as arrays (``ops`` as there): the bytes, FLOPs and basis of each event."""
    g = trace.gpu
    kind = g["kind"].to_numpy()
    dur = g["dur"].to_numpy().astype(np.float64)
    op_row = g["op_row"].to_numpy()
    graph = g["graph"].to_numpy()
    is_kernel = (kind == Kind.KERNEL) & (op_row >= 0) & ~graph
    if ops is not None and is_kernel.any():
        codes = trace.events["name"].to_numpy()[op_row[is_kernel]]
        is_kernel[is_kernel] = trace.by_name(codes, lambda name: ops(short_op(name)), bool)

    n = len(g)
    moved, flops, largest = np.full(n, np.nan), np.full(n, np.nan), np.full(n, np.nan)
    basis_code = np.full(n, _basis_code("no-op"), np.int8)  # index into BASIS, -1 none of them
    dtype = texts(n)
    if is_kernel.any():
        op_rows = np.unique(op_row[is_kernel])
        ops = _fused_optimizers(trace, op_rows, _parse_ops(trace, op_rows))
        at = np.searchsorted(op_rows, op_row[is_kernel])  # each kernel's op among op_rows
        # an op's bytes and FLOPs are shared among its kernels by duration: whole ns, summed exactly in float64
        # below 2**53 ns; past that (absurd durations) by pandas' compensated sum, as before
        kernel_dur = dur[is_kernel]
        if len(kernel_dur) and float(np.abs(kernel_dur).max()) * len(kernel_dur) < 2.0**53:
            op_dur = np.bincount(at, weights=kernel_dur, minlength=len(op_rows))[at]
        else:
            op_dur = pd.Series(kernel_dur).groupby(at).transform("sum").to_numpy()
        weight = np.divide(kernel_dur, op_dur, out=np.ones_like(op_dur), where=op_dur > 0)
        moved[is_kernel] = ops["bytes"][at] * weight
        flops[is_kernel] = ops["flops"][at] * weight
        largest[is_kernel] = ops["largest"][at]
        # (each op's basis coded once, not each kernel's text: a factorize of every row was 12 ms at 1 GB)
        distinct, per_op = pd.factorize(ops["basis"], use_na_sentinel=False)[::-1]
        basis_code[is_kernel] = np.array([_basis_code(b) for b in distinct], np.int8)[per_op][at]
        dtype[is_kernel] = ops["dtype"][at]
    copies = (kind == Kind.MEMCPY) | (kind == Kind.MEMSET)
    copy_bytes = g["bytes"].to_numpy().astype(np.float64)
    known_copy = copies & (copy_bytes >= 0)
    moved[known_copy] = copy_bytes[known_copy]
    largest[known_copy] = copy_bytes[known_copy]
    basis_code[copies] = _basis_code("memset")
    labels = texts(n)
    memcpy = np.flatnonzero(kind == Kind.MEMCPY)
    if len(memcpy):
        full = text_values(g["full_name"])[memcpy]
        parsed = {name: copy_kind(name) for name in pd.unique(full)}
        coded = {name: _basis_code(basis) for name, (_, basis, _) in parsed.items()}  # once a name, as the ops'
        labels[memcpy] = [parsed[n][0] for n in full]
        basis_code[memcpy] = [coded[n] for n in full]
        factor = np.array([parsed[n][2] for n in full], np.float64)
        known = copy_bytes[memcpy] >= 0
        moved[memcpy[known]] = copy_bytes[memcpy[known]] * factor[known]
    basis_code[graph] = _basis_code("cuda-graph")
    if not trace.meta.record_shapes:
        basis_code[(kind == Kind.KERNEL) & ~graph] = _basis_code("no-shapes")
    return TrafficArrays(moved, flops, largest, basis_code, dtype, labels)


def _basis_code(basis: str) -> int:
    """A basis's index in BASIS (the table's categories), -1 for one that is none of them."""
    return BASIS.index(basis) if basis in BASIS else -1


def _rates(out: pd.DataFrame, spec: DeviceSpec | None, basis_code: np.ndarray, dtype: np.ndarray) -> None:
    """The rates' columns; ``basis_code`` and ``dtype`` as the arrays the basis and dtype columns were made from."""
    dur = out["dur"].to_numpy().astype(np.float64)
    safe = np.where(dur > 0, dur, np.nan)
    # per basis code (the last entry for -1, no basis)
    by_flops, off_hbm, host = (np.array([b in chosen for b in BASIS] + [False])[basis_code]
                               for chosen in (FLOP_BASES, OFF_HBM_BASES, ("copy-h2d", "copy-d2h")))
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
    tags, per_row = pd.factorize(dtype)[::-1]  # each distinct dtype's peak looked up once
    peak = np.array([(spec.peak_tflops(tag) if spec else None) or np.nan for tag in tags], np.float64)
    out["flops_share"] = out["tflops"].to_numpy() / peak[per_row]
