"""Per-kernel statistics and the headline facts of one trace.

Every number here is what `summary`, `open` and `diff` show: the screen and the
JSON output read the same functions.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np
import pandas as pd

from kerneltui.trace.intervals import summable, union_length
from kerneltui.trace.model import Trace
from kerneltui.trace.schema import Kind

KERNEL_COLUMNS = ["key", "short", "full_name", "kind", "count", "total_ns", "mean_ns", "min_ns", "max_ns", "share", "op",
                  "no_launch"]


@dataclass(frozen=True)
class TraceSummary:
    path: str
    device: str
    window_ns: int
    busy_ns: int  # union of GPU intervals
    gpu_time_ns: int  # sum of GPU durations (streams may overlap)
    launches: int  # GPU events: kernels + memcpy + memset
    kernels: int
    memcpys: int
    memsets: int
    distinct_kernels: int
    iteration_source: str
    iteration_unit: str  # "step" or "call"
    iterations: int
    launches_per_iteration: float
    gpu_ns_per_iteration: float
    cpu_ns: int  # top-level cpu_op time on all threads
    cpu_ns_per_iteration: float  # median over iterations (the first absorbs profiler start-up)
    streams: int
    truncated: bool
    cpu_recorded: bool  # False for CUDA-activity-only traces: CPU times are unknown, not zero
    warnings: tuple[str, ...] = ()
    capture: dict | None = None
    per_iteration: tuple[dict, ...] = field(default_factory=tuple)

    @property
    def busy_share(self) -> float:
        return self.busy_ns / self.window_ns if self.window_ns else 0.0

    def to_dict(self) -> dict:
        out = asdict(self)
        out["busy_share"] = self.busy_share
        out["warnings"] = list(self.warnings)
        out["per_iteration"] = list(self.per_iteration)
        return out


def summarize(trace: Trace) -> TraceSummary:
    g = trace.gpu
    kinds = g["kind"].to_numpy()
    start, end = trace.window
    its = trace.iterations
    per_it = per_iteration(trace)
    counted = per_it[per_it["index"] >= 0] if len(per_it) else per_it
    return TraceSummary(
        path=trace.meta.path,
        device=trace.meta.device_name,
        window_ns=end - start,
        busy_ns=union_length(g["ts"].to_numpy(), g["end"].to_numpy()),
        gpu_time_ns=_ns(summable(g["dur"].to_numpy()).sum()),
        launches=len(g),
        kernels=int((kinds == Kind.KERNEL).sum()),
        memcpys=int((kinds == Kind.MEMCPY).sum()),
        memsets=int((kinds == Kind.MEMSET).sum()),
        distinct_kernels=int(g["key"].nunique()),
        iteration_source=its.source,
        iteration_unit=its.unit,
        iterations=its.count,
        launches_per_iteration=float(counted["launches"].mean()) if len(counted) else 0.0,
        gpu_ns_per_iteration=float(counted["gpu_ns"].mean()) if len(counted) else 0.0,
        cpu_ns=_ns(summable(per_it["cpu_ns"].to_numpy()).sum()) if len(per_it) else 0,
        cpu_ns_per_iteration=float(counted["cpu_ns"].median()) if len(counted) else 0.0,
        streams=int(g[["device", "stream"]].drop_duplicates().shape[0]),
        truncated=trace.meta.truncated,
        cpu_recorded=bool((trace.events["kind"].to_numpy() == Kind.CPU_OP).any()),
        warnings=trace.meta.warnings,
        capture=trace.meta.capture,
        per_iteration=tuple(counted.to_dict("records")),
    )


def _ns(total) -> int | float:
    """A sum of durations as an int, or a float past int64 (only absurd traces): JSON holds either."""
    return int(total) if abs(total) < 2**63 else float(total)


def per_iteration(trace: Trace) -> pd.DataFrame:
    """Launches, GPU time and top-level CPU op time per step/call (index -1: outside any)."""
    g = trace.gpu
    its = trace.iterations
    ops = trace.top_level_ops()
    ev = trace.events
    op_it = its.assign(ev["ts"].to_numpy()[ops])
    cpu = pd.Series(summable(ev["dur"].to_numpy()[ops])).groupby(op_it).sum()
    launches = g.groupby("iteration").size()
    gpu_ns = pd.Series(summable(g["dur"].to_numpy())).groupby(g["iteration"].to_numpy()).sum()
    index = sorted(set(range(its.count)) | set(launches.index) | set(cpu.index))
    frame = pd.DataFrame({"index": index})
    frame["label"] = [its.labels[i] if i >= 0 else "outside" for i in index]
    frame["launches"] = launches.reindex(index, fill_value=0).to_numpy()
    frame["gpu_ns"] = gpu_ns.reindex(index, fill_value=0).to_numpy()
    frame["cpu_ns"] = cpu.reindex(index, fill_value=0).to_numpy()
    return frame


def kernel_stats(trace: Trace, gpu: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per distinct kernel (key), sorted by total time; op = most frequent launching op.

    ``gpu`` may be a filtered part of ``trace.gpu``; shares stay shares of the whole trace's GPU time.
    """
    g = trace.gpu if gpu is None else gpu
    if not len(g):
        return pd.DataFrame(columns=KERNEL_COLUMNS)
    dur = summable(g["dur"].to_numpy())
    if dur.dtype != g["dur"].dtype:
        g = g.assign(dur=dur)
    grouped = g.groupby("key", observed=True, sort=False)
    stats = grouped["dur"].agg(["count", "sum", "mean", "min", "max"])
    stats.columns = ["count", "total_ns", "mean_ns", "min_ns", "max_ns"]
    first = grouped[["short", "full_name", "kind"]].first()
    ops = g.groupby(["key", "op"], observed=True).size().reset_index(name="n")
    ops = ops.sort_values(["key", "n"], ascending=[True, False]).drop_duplicates("key").set_index("key")["op"]
    table = first.join(stats)
    table["op"] = ops.reindex(table.index).astype(str).to_numpy()
    # instances whose launch call is not in the trace: their op is unknown (analysis/health: no_launch)
    # counted by the key's codes (trace.gpu's key is categorical; grouping a million keys as strings took 0.28 s)
    codes = g["key"].cat.codes.to_numpy()
    lost = np.bincount(codes[(g["launch_row"].to_numpy() < 0) & (codes >= 0)], minlength=len(g["key"].cat.categories))
    table["no_launch"] = lost[table.index.codes].astype(np.int64)
    total = float(summable(trace.gpu["dur"].to_numpy()).sum())
    table["share"] = table["total_ns"] / total if total else 0.0
    table = table.reset_index().sort_values(["total_ns", "key"], ascending=[False, True], kind="stable")
    for col in ("short", "full_name", "key", "op"):
        table[col] = table[col].astype(str)
    return table[KERNEL_COLUMNS].reset_index(drop=True)


def launches_in(trace: Trace, start_ns: int, end_ns: int) -> pd.DataFrame:
    """GPU work overlapping [start, end] (the time-window query of the timeline)."""
    g = trace.gpu
    lo = np.searchsorted(g["ts"].to_numpy(), start_ns - _longest(trace), side="left")
    hi = np.searchsorted(g["ts"].to_numpy(), end_ns, side="right")
    part = g.iloc[lo:hi]
    return part[part["end"].to_numpy() >= start_ns]


def _longest(trace: Trace) -> int:
    g = trace.gpu
    return int(g["dur"].max()) if len(g) else 0

