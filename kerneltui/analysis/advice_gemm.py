"""Rule ``gemm_below_peak`` of analysis/advice.py: GEMMs and convolutions far below their dtype's peak.

The FLOPs are analysis/traffic's (``compute_traffic``): from the record_shapes of the op that
launched the kernel (``aten::mm``/``addmm``/``bmm``/``baddbmm``/``matmul``/``linear``: 2*M*N*K,
batch included; convolutions and their backward; Inductor GEMM templates), shared among the op's
kernels by duration. A kernel's rate is its FLOPs over its time, summed over its launches (by
short name and dtype); the peak is ``device_spec(device).peak_tflops(dtype)`` (dense tensor-core
figures; plain FP32 for f32). Unknown (the rule stays quiet): no device in the peak table, no
record_shapes, or no GEMM whose FLOPs and dtype peak are both known.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from kerneltui.analysis.advice import Finding
from kerneltui.analysis.overview import comm_kernels
from kerneltui.analysis.traffic import BASIS, Traffic, short_op, traffic_arrays
from kerneltui.analysis.traffic.compute_rules import CONV_ARGS, GEMM_OPS
from kerneltui.trace.devices import device_spec
from kerneltui.trace.model import Trace
from kerneltui.trace.one_of import one_of
from kerneltui.trace.schema import Kind
from kerneltui.trace.text_columns import text_in, text_values
from kerneltui.units import fmt_ns, fmt_share

GEMM_BASES = ("gemm", "conv", "template")  # analysis/traffic bases of GEMMs and convolutions (attention left out)
GEMM_PEAK_FRACTION = 0.5  # a kernel below this share of its dtype's peak is "below peak"
GEMM_SHARE = 0.10  # ... and those kernels together hold this share of non-communication kernel time
GEMM_CAUSE_HIGH = 0.5  # "high" when one cause (fp32, misaligned dims) covers this share of their time
GEMM_SHOWN = 3  # kernels named in the evidence
FP32_ACTION = ("run the fp32 GEMMs on tensor cores: torch.set_float32_matmul_precision('high')"
               " (TF32; torch.backends.cuda.matmul.allow_tf32 = True, torch.backends.cudnn.allow_tf32 = True)"
               " or torch.autocast('cuda', dtype=torch.bfloat16)")
PAD_ACTION = ("pad the misaligned dims to multiples of 8 (16 for 8-bit types) so tensor cores tile them whole"
              " (vocabulary, hidden and channel sizes; e.g. 3 image channels to 4 or 8)")
MORE_WORK_ACTION = ("give each GEMM more work (a larger batch, fused projections) or let Inductor autotune them:"
                    " torch.compile(model, mode='max-autotune')")
ALIGN = 8  # tensor-core alignment in elements (16 for 8-bit types)
ONE_BYTE = frozenset({"signed char", "unsigned char", "c10::Float8_e4m3fn", "c10::Float8_e5m2",
                      "c10::Float8_e4m3fnuz", "c10::Float8_e5m2fnuz", "c10::qint8", "c10::quint8"})


def _misaligned(op: str, shapes: dict | None) -> str:
    """The dims of a GEMM or convolution record that tensor cores cannot tile whole ("C=3 in input [64, 3, 128, 128] ..."), or ""."""
    if not shapes:
        return ""
    dims, types = shapes.get("dims") or [], shapes.get("types") or []
    tensors = [(d, t) for d, t in zip(dims, types) if isinstance(d, list) and all(isinstance(x, int) for x in d) and d]
    if not tensors:
        return ""
    step = 2 * ALIGN if any(t in ONE_BYTE for _, t in tensors) else ALIGN
    name = short_op(op)
    if name in GEMM_OPS:  # a[..., M, K] @ b[..., K, N] (linear's weight [N, K]): the last two dims of both
        mats = [d for d, _ in tensors if len(d) >= 2][:2]
        found = [str(d) for d in mats if any(x % step for x in d[-2:])]
        return f"{' and '.join(found)} (last two dims not multiples of {step})" if found else ""
    if name in CONV_ARGS or name == "convolution_backward":  # channels: input [N, C, ...], weight [K, C/g, ...]
        first = 1 if name == "convolution_backward" else 0  # (grad_output, input, weight, ...)
        if len(dims) < first + 2 or not all(isinstance(d, list) and len(d) >= 2 for d in dims[first:first + 2]):
            return ""
        inp, weight = dims[first], dims[first + 1]
        found = [f"{label}={v}" for label, v in (("C", inp[1]), ("K", weight[0])) if isinstance(v, int) and v % step]
        return f"{', '.join(found)} in input {inp} (channels not multiples of {step})" if found else ""
    return ""


def _flops_known(op: str) -> bool:
    """The ops (short names) whose kernels can be judged here: the traffic rules count FLOPs only for these."""
    return op in GEMM_OPS or op in CONV_ARGS or op == "convolution_backward" or op.startswith("triton_tem_")


def gemm_below_peak(trace: Trace, traffic: Traffic | None = None) -> Finding | None:
    spec = device_spec(trace.meta.device_name)
    if spec is None or not trace.meta.record_shapes:
        return None  # no peak to compare with, or no shapes to count FLOPs from: unknown, not fine
    g = trace.gpu
    kernel = g["kind"].to_numpy() == Kind.KERNEL
    if not kernel.any():
        return None
    counted = kernel & ~comm_kernels(trace)  # collectives wait by design: not kernel time to judge
    dur = g["dur"].to_numpy().astype(np.float64)
    total = float(dur[counted].sum())
    flops, dtype, gemm_basis = _gemm_figures(trace, traffic)
    # each GEMM's dtype peak, looked up for those rows alone (not a Python step per GPU event)
    candidate = np.flatnonzero(counted & gemm_basis & np.isfinite(flops) & (flops > 0) & (dur > 0))
    peaks = {tag: spec.peak_tflops(tag) or np.nan for tag in pd.unique(dtype[candidate])}
    peak = np.full(len(dtype), np.nan)
    peak[candidate] = [peaks[d] for d in dtype[candidate]]
    judged = np.isfinite(peak)
    if not total or not judged.any():
        return None
    rows = np.flatnonzero(judged)
    frame = pd.DataFrame({"short": text_values(g["short"].iloc[rows]), "dtype": dtype[rows], "dur": dur[rows],
                          "flops": flops[rows], "peak": peak[rows], "row": rows})
    per = frame.groupby(["short", "dtype"], sort=False).agg(dur=("dur", "sum"), flops=("flops", "sum"),
                                                            peak=("peak", "first"), launches=("row", "size"))
    per["tflops"] = per["flops"] / per["dur"] / 1e3  # FLOP per ns / 1e3 = TFLOP/s
    per["fraction"] = per["tflops"] / per["peak"]
    below = per[per["fraction"] < GEMM_PEAK_FRACTION].sort_values("dur", ascending=False)
    below_ns = float(below["dur"].sum())
    if below_ns / total < GEMM_SHARE:
        return None
    keys = set(below.index)
    rows = frame["row"].to_numpy()[[k in keys for k in zip(frame["short"], frame["dtype"])]]
    return _finding(trace, g, below, rows, dur, dtype, total, spec.name)


def _gemm_figures(trace: Trace, traffic: Traffic | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per row of trace.gpu: FLOPs, dtype (str) and whether the basis is a GEMM's or a convolution's, read
    from ``traffic``'s table, else from ``traffic_arrays`` of the GEMM ops alone (the same figures, without
    the table's text columns and rates: 80 -> 40 ms at 1 GB, on a cold summary's critical path)."""
    if traffic is not None:
        t = traffic.table
        return t["flops"].to_numpy(np.float64), text_values(t["dtype"]), text_in(t["basis"], GEMM_BASES)
    a = traffic_arrays(trace, ops=_flops_known)
    return a.flops, a.dtype, one_of(a.basis_code, [BASIS.index(b) for b in GEMM_BASES])


def _finding(trace: Trace, g: pd.DataFrame, below: pd.DataFrame, rows: np.ndarray, dur: np.ndarray,
             dtype: np.ndarray, total: float, device: str) -> Finding:
    below_ns = float(below["dur"].sum())
    overall = []
    for tag, part in below.groupby(level="dtype", sort=False):
        rate = float(part["flops"].sum() / part["dur"].sum() / 1e3)
        peak = float(part["peak"].iloc[0])
        overall.append(f"{tag} {rate:.0f} TFLOP/s, {fmt_share(rate / peak)} of the {device}'s {tag} peak {peak:.0f} TFLOP/s")
    shown = []
    for (short, _), r in below.head(GEMM_SHOWN).iterrows():
        n = int(r["launches"])
        shown.append(f"{short}: its ops at {r['tflops']:.1f} TFLOP/s ({fmt_share(float(r['fraction']))} of peak),"
                     f" {fmt_share(float(r['dur'] / total))} of kernel time, {n} launch{'es' if n != 1 else ''}")
    more = len(below) - len(shown)
    # causes: fp32 GEMMs (no TF32), and dims tensor cores cannot tile, by the launching op's record
    fp32_ns = float(dur[rows][dtype[rows] == "f32"].sum())
    ops = g["op_row"].to_numpy()[rows]
    bad_ns, bad_text, seen = 0.0, {}, {}
    for op_row, d in zip(ops.tolist(), dur[rows].tolist()):
        if op_row not in seen:
            op = trace.name(int(trace.events["name"].iat[op_row])) if op_row >= 0 else ""
            seen[op_row] = (op, _misaligned(op, trace.shapes(op_row)) if op_row >= 0 else "")
        op, why = seen[op_row]
        if why:
            bad_ns += d
            bad_text[(op, why)] = bad_text.get((op, why), 0.0) + d
    many = len(below) != 1
    evidence = (f"{len(below)} kernel{'s' if many else ''} of GEMM/convolution ops below half of peak"
                f" hold{'' if many else 's'}"
                f" {fmt_share(below_ns / total)} of kernel time ({fmt_ns(below_ns)}), together {'; '.join(overall)}"
                " (a rate is its ops': their FLOPs over all their kernels' time);"
                f" {'; '.join(shown)}{f'; {more} more' if more else ''}")
    if fp32_ns:
        evidence += f"; fp32 in {fmt_share(fp32_ns / below_ns)} of that time"
    worst = max(bad_text, key=bad_text.get) if bad_text else None
    if worst:
        evidence += f"; misaligned dims in {fmt_share(bad_ns / below_ns)} of that time, most in {worst[0]} {worst[1]}"
    causes = sorted(((ns, text) for ns, text in ((fp32_ns, FP32_ACTION), (bad_ns, PAD_ACTION)) if ns),
                    key=lambda c: -c[0])
    actions = [text for _, text in causes]
    cause = bool(causes) and causes[0][0] / below_ns >= GEMM_CAUSE_HIGH
    if not cause:  # no cause in the records holds most of it: give the GEMMs more work, or autotune them
        actions.insert(0, MORE_WORK_ACTION)
    return Finding("gemm_below_peak", "GEMMs and convolutions that hold much of the GPU time run below half of their"
                   " dtype's peak", evidence, "; ".join(actions), "high" if cause else "medium")
