"""Rule ``unfused_casts`` of analysis/advice.py: eager dtype casts (autocast's fp32 <-> bf16/fp16 copies) as kernels of their own.

A cast kernel is a GPU kernel (not a CUDA-graph replay) launched by ``aten::copy_``, ``aten::_to_copy``
or ``aten::to`` whose record_shapes show a float32 <-> bfloat16/float16 conversion: ``copy_(self, src)``
with ``Input type`` [dst, src] one ``float`` and the other ``c10::BFloat16``/``c10::Half``. That is
what autocast runs in eager mode: each fp32 weight cast to bf16 in the forward, each bf16 gradient
cast back in the backward (``ToCopyBackward0``), each a read and a write of the whole tensor.
Inductor fuses these casts into the kernels that consume them, so a compiled trace is left out.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from kerneltui.analysis.advice import Finding, _in_steps, is_compiled
from kerneltui.analysis.overview import Overview, comm_kernels
from kerneltui.analysis.traffic import ITEMSIZE
from kerneltui.trace.model import Trace, parse_shapes
from kerneltui.trace.schema import Kind
from kerneltui.trace.shape_texts import text_classes
from kerneltui.trace.text_columns import text_in, text_values
from kerneltui.units import fmt_ns, fmt_share

CAST_OPS = frozenset({"aten::copy_", "aten::_to_copy", "aten::to"})
LOW = frozenset({"c10::BFloat16", "BFloat16", "c10::Half", "Half"})  # autocast's dtypes
CAST_SHARE = 0.05  # of non-communication kernel time ...
CAST_PER_STEP = 20  # ... or this many cast kernels launched per step
CAST_HIGH = 0.10  # "high" at this share of kernel time
CAST_SHOWN = 2  # kernel names in the evidence


def _direction(text: bytes) -> str:
    """"f32→bf16" when a copy_ record converts float32 <-> bf16/fp16 (types [dst, src, ...]), else ""."""
    shapes = parse_shapes(text)
    types = (shapes or {}).get("types") or []
    if not isinstance(types, list) or len(types) < 2 or not all(isinstance(t, str) for t in types[:2]):
        return ""
    dst, src = types[0], types[1]
    if {dst, src} & LOW and "float" in (dst, src) and dst != src:
        return f"{ITEMSIZE[src][1]}→{ITEMSIZE[dst][1]}"
    return ""


def unfused_casts(trace: Trace, o: Overview) -> Finding | None:
    if is_compiled(trace):
        return None  # Inductor fuses its casts; the eager rest is the user's choice
    g = trace.gpu
    kernel = (g["kind"].to_numpy() == Kind.KERNEL) & ~g["graph"].to_numpy()
    if not kernel.any():
        return None
    counted = kernel & ~comm_kernels(trace)  # collectives wait by design: not kernel time to judge
    dur = g["dur"].to_numpy().astype(np.float64)
    total = float(dur[counted].sum())
    op_rows = g["op_row"].to_numpy()
    is_cast_op = text_in(g["op"], CAST_OPS)
    candidates = np.flatnonzero(counted & is_cast_op & (op_rows >= 0))
    if not total or not len(candidates):
        return None
    # each distinct record judged once (a training trace repeats a few hundred in every step)
    ev, blob, rows = trace.events, trace.shapes_blob, op_rows[candidates]
    at, length = ev["shapes_at"].to_numpy()[rows], ev["shapes_len"].to_numpy()[rows]
    texts, firsts = text_classes(blob, at, length)
    judged = [_direction(bytes(blob[a : a + n]) if a >= 0 else b"") for a, n in zip(at[firsts].tolist(),
                                                                                    length[firsts].tolist())]
    direction = np.array(judged, dtype=object)[texts]
    casts, direction = candidates[direction != ""], direction[direction != ""]
    if not len(casts):
        return None
    time = float(dur[casts].sum())
    share = time / total
    steps = len(o.steps)
    launched = int(_in_steps(trace, g["launch_ts"].to_numpy()[casts].astype(np.int64)).sum())
    per_step = launched / steps if steps else 0.0
    if share < CAST_SHARE and per_step < CAST_PER_STEP:
        return None
    d = pd.Series(dur[casts])
    per_kind = d.groupby(direction).agg(["size", "sum"]).sort_values("sum", ascending=False)
    kinds = [f"{k} x{int(r['size'])}, {fmt_ns(float(r['sum']))}" for k, r in per_kind.iterrows()]
    by_time = d.groupby(text_values(g["short"])[casts]).sum().sort_values(ascending=False).index
    ops = "/".join(sorted(set(text_values(g["op"])[casts])))
    low = "bf16" if any("bf16" in d for d in direction) else "fp16"
    return Finding(
        "unfused_casts", "eager dtype casts (autocast) run as kernels of their own",
        (f"{len(casts)} cast kernels ({'; '.join(kinds)}) launched by {ops}"
         f" with a dtype change: {fmt_share(share)} of kernel time ({fmt_ns(time)})"
         + (f", {per_step:.0f} per step" if steps else "") + f"; {', '.join(map(str, by_time[:CAST_SHOWN]))}"),
        (f"fuse the casts into the ops that consume them: model = torch.compile(model); or keep the weights in {low}"
         f" (model.to(torch.{'bfloat16' if low == 'bf16' else 'float16'}), fp32 master weights in the optimizer)"
         " so autocast has nothing to cast each step"),
        "high" if share >= CAST_HIGH else "medium")
