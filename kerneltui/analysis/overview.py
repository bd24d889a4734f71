"""Overview: where each step's time goes, as TensorBoard's overview pane showed it (docs/overview.md).

A step is a ``ProfilerStep#N`` annotation; its span is the annotation's own CPU interval
``[ts, ts + dur]``. Every instant of that interval goes to the first category that applies:

1. ``kernel``: a GPU kernel that is not communication runs (any device, any stream);
2. ``memcpy``; 3. ``memset``;
4. ``comm``: a communication kernel runs (NCCL/RCCL and the other collectives that
   ``analysis/ranks/collectives.kind_of_name`` recognises);
5. ``dataloader``: an op named ``enumerate(DataLoader)#…`` runs on the CPU;
6. ``cpu_only``: the GPU is idle and a cpu_op runs on one of the step's threads (the threads
   that hold a ``ProfilerStep#N`` annotation or launch GPU work; ``ProfilerStep#N`` itself,
   written as an op by old Kineto, does not count);
7. ``other``: the rest (idle).

GPU intervals are clipped to the step whichever step launched them, so the parts are
non-negative integers (ns) that sum to the span exactly. Everything is interval arithmetic on
numpy arrays: union runs per category, then a prefix sum of covered length queried at the
step bounds (no loop over events).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from kerneltui.analysis.ranks.collectives import kind_of_name
from kerneltui.trace.intervals import union_runs
from kerneltui.trace.iterations import STEP_NAME
from kerneltui.trace.model import Trace
from kerneltui.trace.one_of import one_of
from kerneltui.trace.schema import Kind

PARTS = ("kernel", "memcpy", "memset", "comm", "dataloader", "cpu_only", "other")  # in priority order
STEP_COLUMNS = ["step", "label", "start_ns", "span_ns", *(f"{p}_ns" for p in PARTS), "outlier"]
DATALOADER_PREFIX = "enumerate(DataLoader)#"

# Tensor Core rule (docs/overview.md): a kernel uses Tensor Cores when its name marks a tensor-core
# instruction, tile or library that only runs on them, or when it is a GEMM/convolution/attention
# kernel whose name gives a 16-bit, 8-bit or TF32 data type. SIMT FP32/FP64 GEMMs (sgemm, dgemm) do not.
TENSOR_CORE_MARK = re.compile(
    r"hmma|imma|wgmma|gmma|xmma|tensorop|nvjet|_?(?:884|1688|16816|16832)(?:gemm|_|$)|mma_|_mma|"
    r"flash|fmha|triton_tem_fused_(?:mm|addmm|bmm|baddbmm|convolution)", re.IGNORECASE)
TENSOR_CORE_OP = re.compile(r"gemm|conv|cutlass|cudnn|cublas|sdpa|attention|matmul", re.IGNORECASE)
TENSOR_CORE_DTYPE = re.compile(r"bf16|f16|fp16|half|bfloat16|__nv_bfloat|e4m3|e5m2|fp8|tf32|int8|i8|s8", re.IGNORECASE)
NO_TENSOR_CORE = re.compile(r"(?:^|_)(?:sgemm|dgemm|cgemm|zgemm)", re.IGNORECASE)


def uses_tensor_cores(name: str) -> bool:
    """The documented name rule, for one kernel name."""
    if NO_TENSOR_CORE.search(name):
        return False
    if TENSOR_CORE_MARK.search(name):
        return True
    return bool(TENSOR_CORE_OP.search(name) and TENSOR_CORE_DTYPE.search(name))


@dataclass(frozen=True)
class Overview:
    steps: pd.DataFrame  # STEP_COLUMNS, one row per ProfilerStep in time order
    gpu_utilization: float | None  # GPU busy share of the steps' spans
    sm_efficiency: float | None  # estimated, kernel-time weighted: min(blocks / SMs, 1)
    sm_efficiency_coverage: float  # share of kernel time whose block count and SM count are known
    achieved_occupancy: float | None  # estimated %, kernel-time weighted, over kernels with occupancy > 0
    occupancy_coverage: float  # share of kernel time those kernels hold
    tensor_core_share: float | None  # share of kernel time in kernels that use Tensor Cores
    kernel_time_ns: int  # all kernels' summed time in the steps (the weights above)

    def mean(self) -> dict:
        """The average step: each part's mean over the steps (ns, float)."""
        if not len(self.steps):
            return {}
        return {c: float(self.steps[c].mean()) for c in ("span_ns", *(f"{p}_ns" for p in PARTS))}

    def to_dict(self) -> dict:
        steps = [
            {"step": int(r.step), "span_ns": int(r.span_ns), **{f"{p}_ns": int(getattr(r, f"{p}_ns")) for p in PARTS},
             "outlier": bool(r.outlier)}
            for r in self.steps.itertuples(index=False)
        ]
        return {
            "steps": steps,
            "mean": self.mean(),
            "gpu_utilization": self.gpu_utilization,
            "est_sm_efficiency": self.sm_efficiency,
            "est_sm_efficiency_coverage": self.sm_efficiency_coverage,
            "est_achieved_occupancy_pct": self.achieved_occupancy,
            "est_achieved_occupancy_coverage": self.occupancy_coverage,
            "tensor_core_share": self.tensor_core_share,
            "kernel_time_ns": self.kernel_time_ns,
        }


def _prefix(run_s: np.ndarray, run_e: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Length the disjoint runs (in time order) cover before each time ``t``."""
    t = np.asarray(t, np.int64)
    if not len(run_s):
        return np.zeros(len(t), np.int64)
    before = np.concatenate([[0], np.cumsum(run_e - run_s)])  # covered by runs 0..i-1
    at = np.searchsorted(run_s, t, side="right") - 1
    safe = np.clip(at, 0, None)
    partial = np.minimum(t, run_e[safe]) - run_s[safe]
    return np.where(at >= 0, before[safe] + partial, 0)


def step_spans(trace: Trace) -> tuple[np.ndarray, np.ndarray, np.ndarray, tuple[str, ...]]:
    """(starts, ends, step numbers, labels) of the ProfilerStep annotations; empty without them."""
    its = trace.iterations
    if its.source != "ProfilerStep":
        empty = np.empty(0, np.int64)
        return empty, empty, empty, ()
    return its.starts.astype(np.int64), its.ends.astype(np.int64), its.step_numbers_.astype(np.int64), its.labels


def category_intervals(trace: Trace) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """The intervals of each part but ``other``, unclipped: (starts, ends) per part."""
    ev = trace.events
    g = trace.gpu
    kind = g["kind"].to_numpy()
    is_comm = comm_kernels(trace)
    ts, end = g["ts"].to_numpy(), g["end"].to_numpy()
    parts = {
        "kernel": (kind == Kind.KERNEL) & ~is_comm,
        "memcpy": kind == Kind.MEMCPY,
        "memset": kind == Kind.MEMSET,
        "comm": is_comm,
    }
    out = {p: (ts[m], end[m]) for p, m in parts.items()}

    ev_kind = ev["kind"].to_numpy()
    cpu = np.flatnonzero(one_of(ev_kind, (Kind.CPU_OP, Kind.ANNOTATION)))
    # one test per distinct name, not per op (a big trace has millions of ops, a few thousand names)
    names = ev["name"].to_numpy()[cpu]
    is_step = trace.by_name(names, lambda n: bool(STEP_NAME.match(n)), bool)
    loader = trace.by_name(names, lambda n: n.startswith(DATALOADER_PREFIX), bool)
    del names
    lanes = ev["lane"].to_numpy()[cpu]
    step_lanes = np.unique(np.concatenate([lanes[is_step], g["launch_lane"].to_numpy()]))
    ops = (ev_kind[cpu] == Kind.CPU_OP) & ~is_step & one_of(lanes, step_lanes)
    del lanes, is_step
    # each part's rows first, then their times: no time column for every CPU event (a million at 1 GB)
    ev_ts, ev_dur = ev["ts"].to_numpy(), ev["dur"].to_numpy()
    for part, rows in (("dataloader", cpu[loader]), ("cpu_only", cpu[ops])):
        ts = ev_ts[rows]
        out[part] = (ts, ts + ev_dur[rows])
    return out


def comm_kernels(trace: Trace) -> np.ndarray:
    """Per row of trace.gpu: a kernel whose name says it is a collective (NCCL/RCCL, symmetric memory...)."""
    g = trace.gpu
    return _by_name(g["full_name"], lambda n: kind_of_name(n) is not None) & (g["kind"].to_numpy() == Kind.KERNEL)


def _by_name(names: pd.Series, test) -> np.ndarray:
    """Per row of a categorical name column: ``test(name)``, run once per category."""
    cat = pd.Categorical(names)
    per_category = np.array([bool(test(str(c))) for c in cat.categories] + [False], bool)
    return per_category[cat.codes]  # code -1 (missing) reads the trailing False


def outliers(spans: np.ndarray) -> np.ndarray:
    """Steps whose span is far from the others: more than 3 MADs and 10 % from the median (3 steps or more)."""
    if len(spans) < 3:
        return np.zeros(len(spans), bool)
    median = float(np.median(spans))
    mad = float(np.median(np.abs(spans - median)))
    far = np.abs(spans - median)
    return (far > 3 * mad) & (far > 0.1 * median)


def overview(trace: Trace) -> Overview:
    starts, ends, numbers, labels = step_spans(trace)
    cats = category_intervals(trace)
    covered_so_far = np.zeros(len(starts), np.int64)
    run_s, run_e = np.empty(0, np.int64), np.empty(0, np.int64)
    parts: dict[str, np.ndarray] = {}
    for part in PARTS[:-1]:  # each part: what the union grows by when this category joins the higher ones
        # the union so far, as its runs, joined by this category's own runs (not every category's intervals
        # again; the same union). Each category's intervals let go once joined: the CPU ops' (a million at
        # 1 GB) are most of the scratch
        s, e = union_runs(*(np.asarray(x, np.int64) for x in cats.pop(part)))
        run_s, run_e = union_runs(np.concatenate([run_s, s]), np.concatenate([run_e, e]))
        now = _prefix(run_s, run_e, ends) - _prefix(run_s, run_e, starts)
        parts[part] = now - covered_so_far
        covered_so_far = now
    spans = ends - starts
    parts["other"] = spans - covered_so_far
    steps = pd.DataFrame({
        "step": numbers, "label": list(labels), "start_ns": starts, "span_ns": spans,
        **{f"{p}_ns": parts[p] for p in PARTS}, "outlier": outliers(spans),
    }, columns=STEP_COLUMNS)
    busy = int(sum(int(parts[p].sum()) for p in ("kernel", "memcpy", "memset", "comm")))
    total = int(spans.sum())
    return Overview(steps, busy / total if total else None, *_kernel_figures(trace, starts, ends))


def _kernel_figures(trace: Trace, starts: np.ndarray, ends: np.ndarray):
    """SM efficiency, occupancy and Tensor Core share, weighted by each kernel's time inside the steps."""
    g = trace.gpu
    kernel = g["kind"].to_numpy() == Kind.KERNEL  # a mask over the columns used, not a copy of every column
    ts, end = g["ts"].to_numpy()[kernel], g["end"].to_numpy()[kernel]
    if len(starts):  # the kernel's time inside steps (clipped, as the split clips it)
        at = np.searchsorted(starts, ts, side="right") - 1
        weight = np.zeros(len(ts), np.int64)
        for lo_i in (at, at + 1):  # a kernel may straddle a step boundary: its own step and the next
            valid = (lo_i >= 0) & (lo_i < len(starts))
            i = np.clip(lo_i, 0, len(starts) - 1)
            weight += np.where(valid, np.clip(np.minimum(end, ends[i]) - np.maximum(ts, starts[i]), 0, None), 0)
    else:
        weight = np.zeros(len(ts), np.int64)
    total = int(weight.sum())
    if not total:
        return None, 0.0, None, 0.0, None, 0
    w = weight.astype(np.float64)
    sms = {d.index: d.sm_count for d in trace.meta.devices if d.sm_count}
    device = g["device"].to_numpy()[kernel].astype(np.int64)
    table = np.zeros(max([*sms, int(device.max(initial=0))]) + 1 if len(device) else 1, np.float64)
    for index, count in sms.items():
        if index >= 0:
            table[index] = count
    sm_count = np.where(device >= 0, table[np.clip(device, 0, len(table) - 1)], 0.0)
    blocks = (g["grid_x"].to_numpy()[kernel].astype(np.float64) * g["grid_y"].to_numpy()[kernel]
              * g["grid_z"].to_numpy()[kernel])
    known = (sm_count > 0) & (blocks > 0)
    eff_cover = float(w[known].sum() / total)
    eff = float((np.minimum(blocks[known] / sm_count[known], 1.0) * w[known]).sum() / w[known].sum()) if known.any() and w[known].sum() else None
    occ = g["occupancy"].to_numpy()[kernel].astype(np.float64)
    has_occ = np.isfinite(occ) & (occ > 0)
    occ_cover = float(w[has_occ].sum() / total)
    occupancy = float((occ[has_occ] * w[has_occ]).sum() / w[has_occ].sum()) if w[has_occ].sum() else None
    tc = _by_name(g["full_name"].iloc[np.flatnonzero(kernel)], uses_tensor_cores)
    return eff, eff_cover, occupancy, occ_cover, float(w[tc].sum() / total), total
