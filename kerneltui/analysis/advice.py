"""What to try next: findings from rules a GPU engineer applies, each with this trace's evidence (docs/overview.md).

Each rule fires only with evidence from the trace it reads; a finding holds the rule's id, what it
found, the figures that show it, one concrete action, and how sure the rule is ("high"/"medium").
Rules (thresholds in the constants below):

1. ``cpu_bound``: the GPU waits on the CPU: CPU-only >= 30 % of the mean step, GPU utilization
   < 50 %, and >= 100 kernel launches per step → CUDA graphs / ``mode="reduce-overhead"``.
2. ``dataloader``: DataLoader >= 10 % of the mean step → ``num_workers``, ``pin_memory``.
3. ``pageable_copies``: memcpy events from or to pageable host memory → pinned memory.
4. ``tiny_kernels``: eager (no Inductor kernels, no compiled graph), >= 100 kernels per step,
   mean kernel time < 10 µs → ``torch.compile``.
5. ``sync_in_step``: host-device synchronisations inside steps on a trace with GPU work.
6. ``low_occupancy``: a kernel (not communication: NCCL and the like wait by design) that holds
   >= 10 % of the trace's kernel time at a known est. achieved occupancy < 25 %.
7. ``gemm_below_peak`` (advice_gemm.py): GEMM/convolution kernels whose FLOPs are known (the launching
   op's record_shapes) and that run below half of their dtype's peak on a device in the peak table
   hold >= 10 % of non-communication kernel time → TF32/bf16 for fp32, pad misaligned dims, or more
   work per GEMM / ``mode="max-autotune"``. Quiet when the device, the shapes or the peak is unknown.
8. ``unfused_casts`` (advice_casts.py): an eager trace whose fp32 <-> bf16/fp16 cast kernels
   (``aten::copy_`` with the dtype change in its record) hold >= 5 % of kernel time or >= 20
   launches per step → ``torch.compile`` or low-precision weights.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd

from kerneltui.analysis.overview import Overview, step_spans
from kerneltui.analysis.ranks.collectives import kind_of_name
from kerneltui.analysis.traffic.events import Traffic, copy_kind
from kerneltui.trace.model import Trace
from kerneltui.trace.one_of import one_of
from kerneltui.trace.schema import Kind
from kerneltui.units import fmt_ns, fmt_share

CPU_BOUND_SHARE = 0.30  # CPU-only share of the mean step
CPU_BOUND_HIGH = 0.50  # ... at or above which the finding is "high"
CPU_BOUND_MAX_UTIL = 0.50  # GPU utilization below this
MANY_LAUNCHES = 100  # kernel launches per step
DATALOADER_SHARE = 0.10  # DataLoader share of the mean step
DATALOADER_HIGH = 0.20
TINY_KERNEL_NS = 10_000  # mean kernel duration
SYNC_NAMES = ("cudaStreamSynchronize", "cudaDeviceSynchronize", "aten::item", "aten::_local_scalar_dense")
LOW_OCCUPANCY_PCT = 25.0  # est. achieved occupancy (known: > 0)
LOW_OCCUPANCY_SHARE = 0.10  # of all non-communication kernel time
COMPILED_MARKS = ("## Call CompiledFxGraph", "triton_", "Torch-Compiled Region", "CompiledFunction")


@dataclass(frozen=True)
class Finding:
    rule: str
    finding: str
    evidence: str
    action: str
    confidence: str  # "high" or "medium"

    def to_dict(self) -> dict:
        return asdict(self)


def advice(trace: Trace, o: Overview, traffic: Traffic | None = None) -> list[Finding]:
    """The findings, in rule order; empty when no rule has evidence.

    ``traffic`` (``compute_traffic(trace)``) is computed here unless the caller has it."""
    # here, not at the top: those modules import Finding and the helpers from this one
    from kerneltui.analysis.advice_casts import unfused_casts
    from kerneltui.analysis.advice_gemm import gemm_below_peak

    found = [_cpu_bound(trace, o), _dataloader(o), _pageable(trace), _tiny_kernels(trace, o), _syncs(trace),
             _low_occupancy(trace), gemm_below_peak(trace, traffic), unfused_casts(trace, o)]
    return [f for f in found if f is not None]


def _in_steps(trace: Trace, ts: np.ndarray) -> np.ndarray:
    """Per time: inside a ProfilerStep span (ends included)."""
    starts, ends, _, _ = step_spans(trace)
    if not len(starts):
        return np.zeros(len(ts), bool)
    i = np.searchsorted(starts, ts, side="right") - 1
    return (i >= 0) & (ts <= ends[np.clip(i, 0, None)])


def _step_kernels(trace: Trace) -> tuple[int, float]:
    """(kernels launched inside steps, their mean duration ns)."""
    g = trace.gpu
    k = g["kind"].to_numpy() == Kind.KERNEL  # a mask over the columns used, not a copy of every column
    inside = _in_steps(trace, g["launch_ts"].to_numpy()[k].astype(np.int64))
    durs = (g["end"].to_numpy()[k] - g["ts"].to_numpy()[k])[inside]
    return int(inside.sum()), float(durs.mean()) if len(durs) else 0.0


def _cpu_bound(trace: Trace, o: Overview) -> Finding | None:
    mean = o.mean()
    if not mean or not mean["span_ns"] or o.gpu_utilization is None:
        return None
    share = mean["cpu_only_ns"] / mean["span_ns"]
    launches, _ = _step_kernels(trace)
    per_step = launches / len(o.steps)
    if share < CPU_BOUND_SHARE or o.gpu_utilization >= CPU_BOUND_MAX_UTIL or per_step < MANY_LAUNCHES:
        return None
    return Finding(
        "cpu_bound", "the steps are CPU-bound: the GPU waits while the CPU runs ops",
        (f"CPU-only {fmt_share(share)} of the mean step ({fmt_ns(mean['cpu_only_ns'])} of {fmt_ns(mean['span_ns'])}),"
         f" GPU utilization {fmt_share(o.gpu_utilization)}, {per_step:.0f} kernel launches per step"),
        'capture the step in a CUDA graph: torch.compile(model, mode="reduce-overhead") or torch.cuda.graphs',
        "high" if share >= CPU_BOUND_HIGH else "medium")


def _dataloader(o: Overview) -> Finding | None:
    mean = o.mean()
    if not mean or not mean["span_ns"]:
        return None
    share = mean["dataloader_ns"] / mean["span_ns"]
    if share < DATALOADER_SHARE:
        return None
    return Finding(
        "dataloader", "the steps wait on the DataLoader",
        f"DataLoader {fmt_share(share)} of the mean step ({fmt_ns(mean['dataloader_ns'])} of {fmt_ns(mean['span_ns'])})",
        "load in background processes: DataLoader(num_workers=N, pin_memory=True, persistent_workers=True)",
        "high" if share >= DATALOADER_HIGH else "medium")


def _pageable(trace: Trace) -> Finding | None:
    g = trace.gpu
    m = g[g["kind"].to_numpy() == Kind.MEMCPY]
    if not len(m):
        return None
    labels, per_row = _per_name(m["full_name"], lambda n: copy_kind(n)[0])
    pageable_label = np.array([label.endswith("pageable") for label in labels], bool)
    pageable = pageable_label[per_row]
    if not pageable.any():
        return None
    time = int((m["end"].to_numpy() - m["ts"].to_numpy())[pageable].sum())
    kinds = sorted({labels[i] for i in np.unique(per_row[pageable])})
    return Finding(
        "pageable_copies", "host copies use pageable memory (staged through a pinned buffer, slower, never async)",
        f"{int(pageable.sum())} pageable copies ({', '.join(kinds)}), {fmt_ns(time)} of copy time",
        "pin the host tensors: tensor.pin_memory() / DataLoader(pin_memory=True), then .to(device, non_blocking=True)",
        "high")


def _per_name(names: pd.Series, f) -> tuple[list, np.ndarray]:
    """``f`` of each distinct name (run once per name, in sorted order; a missing name is ""), and per row
    the index of its name's value."""
    if not isinstance(names.dtype, pd.CategoricalDtype):
        cat = pd.Categorical(names.astype(object).where(names.notna(), ""))
        return [f(str(c)) for c in cat.categories], cat.codes.astype(np.int64)
    # trace.gpu's names are categorical already: their codes renumbered, not a million strings factorized
    codes = names.cat.codes.to_numpy().astype(np.int64) + 1  # 0: missing
    categories = names.cat.categories.to_numpy(dtype=object)
    used = np.flatnonzero(np.bincount(codes, minlength=len(categories) + 1))
    text = ["" if u == 0 else str(categories[u - 1]) for u in used.tolist()]
    distinct = sorted(set(text))
    rank = {name: i for i, name in enumerate(distinct)}
    renumber = np.zeros(len(categories) + 1, np.int64)
    renumber[used] = [rank[name] for name in text]
    return [f(name) for name in distinct], renumber[codes]


def is_compiled(trace: Trace) -> bool:
    """Inductor ran: a compiled-graph annotation or a Triton kernel name."""
    names = trace.names_of(trace.name_codes)
    return any(str(n).startswith(COMPILED_MARKS) for n in names)


def _tiny_kernels(trace: Trace, o: Overview) -> Finding | None:
    if not len(o.steps) or is_compiled(trace):
        return None
    launches, mean_ns = _step_kernels(trace)
    per_step = launches / len(o.steps)
    if per_step < MANY_LAUNCHES or not launches or mean_ns >= TINY_KERNEL_NS:
        return None
    return Finding(
        "tiny_kernels", "many short kernels in eager mode: launch cost and memory round trips dominate",
        f"{per_step:.0f} kernels per step, mean {fmt_ns(mean_ns)} each; no compiled graph in the trace",
        "fuse them: model = torch.compile(model)",
        "medium")


def _syncs(trace: Trace) -> Finding | None:
    if not (trace.gpu["kind"].to_numpy() == Kind.KERNEL).any():
        return None  # a CPU capture: .item() waits on nothing
    ev = trace.events
    codes = trace.name_codes
    names = trace.names_of(codes)
    # a membership test per name: names.astype(str) would be a fixed-width array as wide as the longest
    # name (a 2M-character name in a hostile trace made it 3 GB)
    wanted = codes[np.fromiter((n in SYNC_NAMES for n in names.tolist()), bool, len(names))]
    if not len(wanted):
        return None
    rows = np.flatnonzero(one_of(ev["name"].to_numpy(), wanted))
    ts = ev["ts"].to_numpy()[rows].astype(np.int64)
    inside = rows[_in_steps(trace, ts)]
    if not len(inside):
        return None
    steps = len(step_spans(trace)[0])
    found, counts = np.unique(trace.names_of(ev["name"].to_numpy()[inside]), return_counts=True)  # object: short names
    time = int(ev["dur"].to_numpy()[inside].sum())
    listed = ", ".join(f"{n} x{c}" for n, c in zip(found, counts))
    return Finding(
        "sync_in_step", "the CPU waits for the GPU inside the step",
        f"{listed} inside {steps} steps, {fmt_ns(time)} on the CPU",
        "remove .item()/.cpu()/print of GPU tensors and explicit synchronize() calls from the step;"
        " keep metrics on the GPU and read them every N steps",
        "high")


def _low_occupancy(trace: Trace) -> Finding | None:
    g = trace.gpu
    k = np.flatnonzero(g["kind"].to_numpy() == Kind.KERNEL)  # rows of g (not a copy of its every column)
    comm, per_row = _per_name(g["full_name"].iloc[k], lambda n: kind_of_name(n) is not None)
    keep = ~np.array(comm, bool)[per_row] if len(comm) else np.zeros(len(k), bool)
    k, codes = k[keep], per_row[keep]
    if not len(k):
        return None
    dur = (g["end"].to_numpy()[k] - g["ts"].to_numpy()[k]).astype(np.float64)
    total = float(dur.sum())
    occ = g["occupancy"].to_numpy()[k].astype(np.float64)
    known = np.isfinite(occ) & (occ > 0)
    if not total or not known.any():
        return None
    size = int(codes.max()) + 1
    time = np.bincount(codes, dur, size)
    known_time = np.bincount(codes, np.where(known, dur, 0.0), size)
    weighted = np.bincount(codes, np.where(known, occ * dur, 0.0), size)
    launches = np.bincount(codes, minlength=size)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_occ = weighted / known_time
    low = np.flatnonzero((known_time > 0) & (time / total >= LOW_OCCUPANCY_SHARE) & (mean_occ < LOW_OCCUPANCY_PCT))
    if not len(low):
        return None
    top = int(low[np.argmax(time[low])])
    first = g.iloc[int(k[np.flatnonzero(codes == top)[0]])]
    n = int(launches[top])
    more = f"; {len(low) - 1} more kernel{'s' if len(low) > 2 else ''} like it" if len(low) > 1 else ""
    return Finding(
        "low_occupancy", "a kernel that holds much of the GPU time runs at low occupancy",
        (f"{first['short']}: {fmt_share(float(time[top] / total))} of kernel time ({n} launch{'es' if n != 1 else ''}),"
         f" est. achieved occupancy {float(mean_occ[top]):.1f}%, {int(first['registers'])} registers/thread,"
         f" {int(first['shared_memory'])} B shared memory, block {int(first['block_x'])}x{int(first['block_y'])}"
         f"x{int(first['block_z'])}, grid {int(first['grid_x'])}x{int(first['grid_y'])}x{int(first['grid_z'])}{more}"),
        "raise occupancy: fewer registers (__launch_bounds__, -maxrregcount; Triton: smaller BLOCK/num_warps),"
        " less shared memory per block, or more blocks in the grid",
        "medium")
