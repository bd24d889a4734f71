"""`kerneltui summary` output: the engine's facts as an 80-column table, JSON or CSV."""

from __future__ import annotations

import csv
import io
import shutil

import orjson
import pandas as pd

from kerneltui.trace.model import Trace
from kerneltui.trace.schema import KIND_LABEL, Kind
from kerneltui.trace.summary import TraceSummary
from kerneltui.units import ellipsize, fmt_ns, fmt_share, middle_ellipsize, plural

LAUNCH_COLUMNS = ["ts_ns", "dur_ns", "device", "stream", "kind", "short", "full_name", "op", "launch", "iteration", "step"]


def launches_frame(trace: Trace, gpu: pd.DataFrame) -> pd.DataFrame:
    """Every GPU event, times relative to the start of the profiled window."""
    start = trace.window[0]
    return pd.DataFrame(
        {
            "ts_ns": gpu["ts"].to_numpy() - start,
            "dur_ns": gpu["dur"].to_numpy(),
            "device": gpu["device"].to_numpy(),
            "stream": gpu["stream"].to_numpy(),
            "kind": [KIND_LABEL[Kind(k)] for k in gpu["kind"].to_numpy()],
            "short": gpu["short"].astype(str).to_numpy(),
            "full_name": gpu["full_name"].astype(str).to_numpy(),
            "op": gpu["op"].astype(str).to_numpy(),
            "launch": gpu["launch"].astype(str).to_numpy(),
            "iteration": gpu["iteration"].to_numpy(),
            "step": gpu["step"].to_numpy(),
        }
    )


def headline(s: TraceSummary) -> list[str]:
    unit = s.iteration_unit
    lines = [
        f"device      {s.device}",
        f"window      {fmt_ns(s.window_ns)}, GPU busy {fmt_ns(s.busy_ns)} ({fmt_share(s.busy_share)})"
        f", GPU time {fmt_ns(s.gpu_time_ns)}",
        f"GPU work    {plural(s.launches, 'launch')}: {plural(s.kernels, 'kernel')}, {s.memcpys:,} memcpy,"
        f" {s.memsets:,} memset; {s.distinct_kernels} distinct; {plural(s.streams, 'stream')}",
        f"per {unit:<7} {plural(s.launches_per_iteration, 'launch')}, {fmt_ns(s.gpu_ns_per_iteration)} GPU,"
        + (f" {fmt_ns(s.cpu_ns_per_iteration)} CPU (median)" if s.cpu_recorded else " CPU not recorded"),
        f"{unit}s{' ' * (10 - len(unit))} {s.iterations} ({s.iteration_source})",
        f"CPU ops     {fmt_ns(s.cpu_ns)} in top-level ops"
        if s.cpu_recorded
        else "CPU ops     not recorded (the profile has CUDA activity only)",
    ]
    if s.capture:
        lines.append(f"captured    {describe_capture(s.capture)}")
    return lines


def describe_capture(c: dict) -> str:
    """One line from the block `kerneltui capture` stores: what ran, how, on what."""
    params = " ".join(f"{k}={v}" for k, v in (c.get("params") or {}).items() if k != "device")
    mode = c.get("mode", "?")
    if c.get("compile_mode"):
        mode += f" ({c['compile_mode']})"
    parts = [f"{c.get('name', '?')} {params}".strip(), mode, f"torch {c.get('torch', '?')}"]
    if c.get("profiled_calls") is not None:
        parts.append(f"{c['profiled_calls']} calls after {c.get('warmup_calls', '?')} warm-up")
    if c.get("compile_seconds") is not None:
        parts.append(f"compiled in {c['compile_seconds']:.1f}s")
    return ", ".join(parts)


NUMBERS_HEAD = f"{'count':>7} {'total':>8} {'mean':>8} {'min':>8} {'max':>8} {'share':>6}"
WIDE = 120  # below this a kernel takes two lines: its name, then its op and numbers


def kernel_table_text(kernels: pd.DataFrame, width: int, full_names: bool = False) -> list[str]:
    name_col = "full_name" if full_names else "short"
    if width >= WIDE:
        name_width = min(70, max(len(n) for n in kernels[name_col])) if len(kernels) else 6
        op_width = max(4, width - name_width - len(NUMBERS_HEAD) - 2)
        lines = [f"{'kernel':<{name_width}} {NUMBERS_HEAD} op"]
        for r in kernels.itertuples(index=False):
            name = middle_ellipsize(getattr(r, name_col), name_width)
            lines.append(f"{name:<{name_width}} {_numbers(r)} {ellipsize(r.op, op_width)}".rstrip())
        return lines
    op_width = width - len(NUMBERS_HEAD) - 3
    lines = [f"{'kernel':<{op_width + 2}} {NUMBERS_HEAD}", "  launched by"]
    for r in kernels.itertuples(index=False):
        lines.append(middle_ellipsize(getattr(r, name_col), width))
        lines.append(f"  {ellipsize(r.op, op_width):<{op_width}} {_numbers(r)}")
    return lines


def _numbers(r) -> str:
    return (
        f"{r.count:>7,} {fmt_ns(r.total_ns):>8} {fmt_ns(r.mean_ns):>8} {fmt_ns(r.min_ns):>8}"
        f" {fmt_ns(r.max_ns):>8} {fmt_share(r.share):>6}"
    )


def launch_table_text(launches: pd.DataFrame, width: int, full_names: bool = False) -> list[str]:
    head = f"{'start':>10} {'dur':>8} {'strm':>4} {'step':>4} "
    name_width = max(16, ((width - len(head)) * 2) // 3)
    op_width = max(4, width - len(head) - name_width - 1)
    lines = [f"{head}{'kernel':<{name_width}} {'op'}"]
    name_col = "full_name" if full_names else "short"
    for r in launches.itertuples(index=False):
        it = str(r.step if r.step >= 0 else (r.iteration + 1 if r.iteration >= 0 else "-"))
        lines.append(
            f"{fmt_ns(r.ts_ns):>10} {fmt_ns(r.dur_ns):>8} {r.stream:>4} {it:>4} "
            f"{middle_ellipsize(getattr(r, name_col), name_width):<{name_width}} {ellipsize(r.op, op_width)}".rstrip()
        )
    return lines


def as_table(trace: Trace, s: TraceSummary, kernels: pd.DataFrame, launches: pd.DataFrame | None, full_names: bool) -> str:
    width = max(80, shutil.get_terminal_size((80, 24)).columns)
    lines = [trace.meta.path, *headline(s), ""]
    if s.launches == 0:
        lines.append(no_gpu_work_line(trace))
    elif launches is not None:
        lines += launch_table_text(launches, width, full_names)
    else:
        lines += kernel_table_text(kernels, width, full_names)
    return "\n".join(lines) + "\n"


def no_gpu_work_line(trace: Trace) -> str:
    return (
        f"no GPU work in this trace ({len(trace.events):,} events, none a kernel, memcpy or memset):"
        " was it profiled with CUDA activity on a GPU?"
    )


def as_json(trace: Trace, s: TraceSummary, kernels: pd.DataFrame, launches: pd.DataFrame | None) -> str:
    doc = {
        "trace": {
            "path": trace.meta.path,
            "device": trace.meta.device_name,
            "producer": trace.meta.producer,
            "truncated": trace.meta.truncated,
            "events": len(trace.events),
        },
        "summary": s.to_dict(),
        "kernels": labelled(kernels).to_dict("records"),
    }
    if launches is not None:
        doc["launches"] = launches.to_dict("records")
    return orjson.dumps(doc, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY).decode() + "\n"


def labelled(kernels: pd.DataFrame) -> pd.DataFrame:
    """The kernel table with its kind as a word (kernel, memcpy, memset), as the launch list has it."""
    return kernels.assign(kind=[KIND_LABEL[Kind(k)] for k in kernels["kind"]])


def as_csv(kernels: pd.DataFrame, launches: pd.DataFrame | None) -> str:
    out = io.StringIO()
    frame = launches if launches is not None else labelled(kernels)
    frame.to_csv(out, index=False, quoting=csv.QUOTE_MINIMAL)
    return out.getvalue()
