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
from kerneltui.trace.schema import Kind
from kerneltui.trace.shape_texts import text_classes
from kerneltui.trace.text_columns import text_values

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


def _parse_ops(trace: Trace, op_rows: np.ndarray) -> pd.DataFrame:
    """OpTraffic per op row, each distinct (name, shapes text) parsed once."""
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
    # bytes object each (text_classes), then by name and inductor, and the frame is made from the distinct
    # records alone (130k ops at 1 GB, a few hundred records)
    texts, _ = text_classes(blob, at, length)
    key = (texts * 2 + inductor) * (len(trace.names) + 1) + (judged_codes.astype(np.int64) + 1)
    _, first, which = np.unique(key, return_index=True, return_inverse=True)
    records = []
    for i in first.tolist():
        a, n = int(at[i]), int(length[i])
        t = op_traffic(trace.name(int(judged_codes[i])), parse_shapes(bytes(blob[a : a + n]) if a >= 0 else b""),
                       bool(inductor[i]))
        records.append((t.bytes, t.flops, t.largest, t.basis, t.dtype))  # tuples: pandas would asdict() a dataclass
    table = pd.DataFrame(records, columns=["bytes", "flops", "largest", "basis", "dtype"])
    return table.take(which.reshape(-1)).set_axis(op_rows)


# Fused optimizers: bytes per byte of parameters (params, grads and states read, params and states
# written: Adam(W) reads p, g, m, v and writes p, m, v); SGD without momentum 3.
FUSED_OPTIMIZERS = {"_fused_adam_": 7, "_fused_adamw_": 7, "_fused_sgd_": 5, "_fused_adagrad_": 5}
AMSGRAD_AT = 11  # _fused_adam(w)_(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, lr,
#                  beta1, beta2, weight_decay, eps, amsgrad, ...): max_exp_avg_sqs read and written too
MOMENTUM_AT = 4  # _fused_sgd_(params, grads, momentum_buffer_list, weight_decay, momentum, ...)
ACCUMULATE_GRAD = "torch::autograd::AccumulateGrad"


def _fused_optimizers(trace: Trace, ops: pd.DataFrame) -> pd.DataFrame:
    """Bytes of fused optimizer steps (``_fused_adamw_``...), whose tensor lists the record drops.

    Kineto records a TensorList of more than 30 tensors as empty (torch 2.13), and never its dtype.
    The lists are the parameters that received a gradient in the step, each once: the step's
    ``AccumulateGrad`` ops record each gradient's shape and dtype. Known only for a step that runs
    one fused optimizer call (more would be param groups of unknown sizes)."""
    ev = trace.events
    codes = ev["name"].to_numpy()[ops.index.to_numpy()]
    fused = trace.by_name(codes, lambda n: short_op(n) in FUSED_OPTIMIZERS, bool)  # once a distinct name
    if not fused.any():
        return ops
    names = trace.names_of(codes)
    its = trace.iterations
    rows = ops.index.to_numpy()[fused]
    step = its.assign(ev["ts"].to_numpy()[rows])
    params = _parameter_bytes(trace)
    calls = np.bincount(step[step >= 0], minlength=its.count)
    ops = ops.copy()
    known, moved, tags = [], [], []
    for row, k, name in zip(rows.tolist(), step.tolist(), names[fused]):
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
        known.append(row)
        moved.append(float(factor * size))
        tags.append(tag)
    if known:  # one assignment: .loc per row cost ~5 ms each (2.7 s on a 1 GB trace)
        at = ops.index.get_indexer(known)
        for column, values in (("bytes", moved), ("largest", [np.nan] * len(known)), ("basis", ["optimizer"] * len(known)),
                               ("dtype", tags)):
            column_values = ops[column].to_numpy().copy()
            column_values[at] = values
            ops[column] = column_values
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
    rows = np.flatnonzero(np.isin(ev["name"].to_numpy(), codes) & (ev["kind"].to_numpy() == Kind.CPU_OP))
    step = trace.iterations.assign(ev["ts"].to_numpy()[rows])
    # each distinct record sized once (every step repeats the same records); shapes() keeps one dict a
    # distinct text
    texts, firsts = text_classes(trace.shapes_blob, ev["shapes_at"].to_numpy()[rows], ev["shapes_len"].to_numpy()[rows])
    sized = [None if (shapes := trace.shapes(int(rows[i]))) is None else _gradient_bytes(shapes) for i in firsts]
    out: dict[int, list] = {}
    for k, text in zip(step.tolist(), texts.tolist()):
        if k < 0 or sized[text] is None:
            continue
        nbytes, tag = sized[text]
        entry = out.setdefault(k, [0, tag])
        entry[0] += nbytes
        if entry[1] != tag:
            entry[1] = ""  # mixed dtypes: the bytes stand, no one dtype
    return {k: (v[0], v[1]) for k, v in out.items()}


def compute_traffic(trace: Trace, device_name: str | None = None,
                    ops: Callable[[str], bool] | None = None) -> Traffic:
    """Bytes, FLOPs and achieved bandwidth for every GPU event of a trace.

    The peak comes from the trace's device name unless ``device_name`` is given. ``ops``: only the
    kernels of ops whose short name (``short_op``) it accepts are judged (the GEMM rule needs only
    GEMMs'); every other kernel is left as of no op ("no-op", NaN).
    """
    g = trace.gpu
    spec = device_spec(device_name or trace.meta.device_name)
    kind = g["kind"].to_numpy()
    dur = g["dur"].to_numpy().astype(np.float64)
    op_row = g["op_row"].to_numpy()
    graph = g["graph"].to_numpy()
    is_kernel = (kind == Kind.KERNEL) & (op_row >= 0) & ~graph
    if ops is not None and is_kernel.any():
        codes = trace.events["name"].to_numpy()[op_row[is_kernel]]
        is_kernel[is_kernel] = trace.by_name(codes, lambda name: ops(short_op(name)), bool)

    out = pd.DataFrame(index=g.index)
    out["dur"] = g["dur"].to_numpy()
    nan = np.full(len(g), np.nan)
    out["bytes"], out["flops"], out["largest"] = nan.copy(), nan.copy(), nan.copy()
    basis = np.full(len(g), "no-op", dtype=object)
    dtype = np.full(len(g), "", dtype=object)
    if is_kernel.any():
        ops = _fused_optimizers(trace, _parse_ops(trace, np.unique(op_row[is_kernel])))
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
        full = text_values(g["full_name"])[memcpy]
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
    basis = text_values(out["basis"])
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
