"""`kerneltui summary` output: the engine's facts as an 80-column table, JSON or CSV.

Trace text is shown through ``terminal_text``: the table escapes control and bidi
characters (names are made printable before their widths are measured, and every
line once more on its way out); JSON keeps the exact strings, with the few
characters JSON encoders leave raw written as ``\\uNNNN``; CSV is exact unless
it goes to a terminal (``as_csv(..., for_terminal=True)``).
"""

from __future__ import annotations

import csv
import io
import math
import shutil
import textwrap
from concurrent.futures import Future

import orjson
import pandas as pd

from kerneltui.analysis.advice import advice
from kerneltui.analysis.cpu_work import cpu_work, is_cpu_capture
from kerneltui.analysis.health import Health, trace_health
from kerneltui.analysis.memory import MemoryTable, memory_dict, memory_table
from kerneltui.analysis.overview import overview
from kerneltui.terminal_text import json_safe, printable, printable_lines
from kerneltui.trace.model import Trace
from kerneltui.trace.schema import KIND_LABEL, Kind
from kerneltui.trace.summary import TraceSummary
from kerneltui.trace.text_columns import text_values
from kerneltui.units import distinct_cuts, ellipsize, fmt_ns, fmt_share, plural

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
            "short": text_values(gpu["short"]),
            "full_name": text_values(gpu["full_name"]),
            "op": text_values(gpu["op"]),
            "launch": text_values(gpu["launch"]),
            "iteration": gpu["iteration"].to_numpy(),
            "step": gpu["step"].to_numpy(),
        }
    )


def headline(s: TraceSummary, cpu_only: bool = False) -> list[str]:
    """``cpu_only``: a CPU capture (analysis/cpu_work.is_cpu_capture): the machine and a line saying so."""
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
    if cpu_only:
        machine = describe_machine(s.capture or {})
        if machine:
            lines.append(f"machine     {machine}")
        lines.append(CPU_CAPTURE_LINE)
    return lines


CPU_CAPTURE_LINE = "CPU capture no GPU activity: the work below is CPU self time; GPU time stays 0"


def describe_machine(c: dict) -> str:
    """'2 threads, 2 CPUs, load 1.15 0.81 0.67 (1, 5, 15 min)' from a capture block's machine keys, or ''."""
    parts = []
    threads, cpus, load = c.get("threads"), c.get("cpu_count"), c.get("load_average")
    if _whole(threads):
        parts.append(plural(threads, "thread"))
    if _whole(cpus):
        parts.append(plural(cpus, "CPU"))
    if isinstance(load, list) and len(load) == 3 and all(_number(x) for x in load):
        parts.append(f"load {' '.join(f'{x:.2f}' for x in load)} (1, 5, 15 min)")
    return ", ".join(parts)


def _whole(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and x > 0


def _number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def describe_capture(c: dict) -> str:
    """One line from the block `kerneltui capture` stores: what ran, how, on what.

    The block is read from the trace, so any field may hold anything: it is shown, never trusted.
    """
    if not isinstance(c, dict):
        return str(c)
    params = c.get("params")
    params = " ".join(f"{k}={v}" for k, v in params.items() if k != "device") if isinstance(params, dict) else ""
    mode = str(c.get("mode", "?"))
    if c.get("compile_mode"):
        mode += f" ({c['compile_mode']})"
    parts = [f"{c.get('name', '?')} {params}".strip(), mode, f"torch {c.get('torch', '?')}"]
    if c.get("profiled_calls") is not None:
        parts.append(f"{c['profiled_calls']} calls after {c.get('warmup_calls', '?')} warm-up")
    seconds = c.get("compile_seconds")
    if isinstance(seconds, (int, float)) and not isinstance(seconds, bool):
        parts.append(f"compiled in {seconds:.1f}s")
    return ", ".join(parts)


NUMBERS_HEAD = f"{'count':>7} {'total':>8} {'mean':>8} {'min':>8} {'max':>8} {'share':>6}"
WIDE = 120  # below this a kernel takes two lines: its name, then its op and numbers


def kernel_table_text(kernels: pd.DataFrame, width: int, full_names: bool = False, title: str = "kernel") -> list[str]:
    name_col = "full_name" if full_names else "short"
    # escaped before measuring, so a name with control characters keeps its row and its columns
    names = [printable(str(n)) for n in kernels[name_col]]
    if width >= WIDE:
        name_width = min(70, max(len(n) for n in names)) if len(kernels) else 6
        op_width = max(4, width - name_width - len(NUMBERS_HEAD) - 2)
        lines = [f"{title:<{name_width}} {NUMBERS_HEAD} op"]
        shown = distinct_cuts(names, name_width)  # cut so that rows stay told apart
        for name, r in zip(names, kernels.itertuples(index=False)):
            name = shown[name]
            lines.append(f"{name:<{name_width}} {_numbers(r)} {ellipsize(op_text(r), op_width)}".rstrip())
        return lines
    op_width = width - len(NUMBERS_HEAD) - 3
    lines = [f"{title:<{op_width + 2}} {NUMBERS_HEAD}", "  launched by" if title == "kernel" else "  op"]
    shown = distinct_cuts(names, width)
    for name, r in zip(names, kernels.itertuples(index=False)):
        lines.append(shown[name])
        lines.append(f"  {ellipsize(op_text(r), op_width):<{op_width}} {_numbers(r)}")
    return lines


def op_text(r) -> str:
    """The launching op, or why it is unknown: the launch calls are not in the trace."""
    if not str(r.op) and getattr(r, "no_launch", 0):
        return f"? no launch call ({r.no_launch:,} of {r.count:,})"
    return printable(str(r.op))


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
    shown = distinct_cuts((printable(str(n)) for n in launches[name_col].unique()), name_width)
    for r in launches.itertuples(index=False):
        it = str(r.step if r.step >= 0 else (r.iteration + 1 if r.iteration >= 0 else "-"))
        lines.append(
            f"{fmt_ns(r.ts_ns):>10} {fmt_ns(r.dur_ns):>8} {r.stream:>4} {it:>4} "
            f"{shown[printable(str(getattr(r, name_col)))]:<{name_width}}"
            f" {ellipsize(printable(r.op), op_width)}".rstrip()
        )
    return lines


def health_lines(health: Health, width: int) -> list[str]:
    """``health      healthy``, or what is damaged, wrapped under its label."""
    return textwrap.wrap(health.line(), width, initial_indent="health      ", subsequent_indent=" " * 12,
                         break_on_hyphens=False) or ["health"]


def as_table(trace: Trace, s: TraceSummary, kernels: pd.DataFrame, launches: pd.DataFrame | None, full_names: bool,
             work: pd.DataFrame | None = None) -> str:
    """``work``: a CPU capture's rows to show (``--top``/``--filter`` applied); None: all of them."""
    width = max(80, shutil.get_terminal_size((80, 24)).columns)
    cpu_only = is_cpu_capture(trace)
    lines = [printable(trace.meta.path), *headline(s, cpu_only), *health_lines(trace_health(trace), width), ""]
    if cpu_only and work is None:
        work = cpu_work(trace)
    if cpu_only and len(work):
        lines.append(f"CPU work by self time: {plural(len(work), 'row')} (compiled C++ kernels and ATen ops)")
        lines += kernel_table_text(work, width, full_names, title="CPU work")
    elif cpu_only and len(cpu_work(trace)):
        lines.append(NO_CPU_WORK_MATCHES)
    elif s.launches == 0:
        lines.append(no_gpu_work_line(trace))
    elif launches is not None:
        lines += launch_table_text(launches, width, full_names)
    else:
        lines += kernel_table_text(kernels, width, full_names)
    return printable_lines(lines)  # the device, step names and capture fields come from the trace too


NO_CPU_WORK_MATCHES = "no CPU work row matches the filter"


def no_gpu_work_line(trace: Trace) -> str:
    ranges = int((trace.events["kind"] == Kind.PROFILER_RANGE).sum())
    if ranges:
        # Kineto's range profiler replays kernels for counters and spaces the ranges
        # evenly in time: there is no kernel time to show.
        return (
            f"no kernel timings in this trace: it was recorded with the CUPTI range profiler"
            f" ({ranges:,} kernel ranges with hardware counters, at times Kineto spaces evenly"
            " rather than measures); profile with CUDA activity for kernel times"
        )
    return (
        f"no GPU work in this trace ({len(trace.events):,} events, none a kernel, memcpy or memset):"
        " was it profiled with CUDA activity on a GPU?"
    )


def as_json(trace: Trace, s: TraceSummary | Future, kernels: pd.DataFrame, launches: pd.DataFrame | None,
            work: pd.DataFrame | None = None, memory: MemoryTable | Future | None = None) -> str:
    """``work`` as for ``as_table``: a CPU capture's rows, ``cpu_work`` in the document. ``s`` and
    ``memory`` may be futures of them, computed on another thread meanwhile (commands/summary.py)."""
    o = overview(trace)
    findings = [f.to_dict() for f in advice(trace, o)]
    health = trace_health(trace).to_dict()
    doc = {
        "trace": {
            "path": trace.meta.path,
            "device": trace.meta.device_name,
            "producer": trace.meta.producer,
            "truncated": trace.meta.truncated,
            "incomplete": trace.meta.incomplete,
            "skipped_events": trace.meta.skipped_events,
            "warnings": list(trace.meta.warnings),
            "events": len(trace.events),
        },
        "summary": summary_dict(trace, _resolved(s)),
        "health": health,
        "kernels": labelled(kernels).to_dict("records"),
        "cpu_capture": is_cpu_capture(trace),
    }
    doc["overview"] = o.to_dict()  # analysis/overview.py, docs/overview.md
    doc["try_next"] = findings  # analysis/advice.py, docs/overview.md
    if doc["cpu_capture"]:  # the kernel table of a CPU capture: CPU self time, never GPU time
        doc["cpu_work"] = labelled(cpu_work(trace) if work is None else work).to_dict("records")
    # devices empty without [memory] events (docs/memory.md)
    doc["memory"] = memory_dict(memory_table(trace) if memory is None else _resolved(memory))
    if launches is not None:
        doc["launches"] = launches.to_dict("records")
    return json_safe(orjson.dumps(doc, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY).decode()) + "\n"


def _resolved(value):
    """A value, or the result of a future of it (raising what it raised)."""
    return value.result() if isinstance(value, Future) else value


def summary_dict(trace: Trace, s: TraceSummary) -> dict:
    """The summary, each step marked with the figure-changing health causes among its GPU work."""
    out = s.to_dict()
    marks = trace_health(trace).step_causes
    for record in out["per_iteration"]:
        record["health"] = list(marks.get(record["index"], ()))
    return out


def labelled(kernels: pd.DataFrame) -> pd.DataFrame:
    """The kernel table with its kind as a word (kernel, memcpy, memset), as the launch list has it."""
    return kernels.assign(kind=[KIND_LABEL[Kind(k)] for k in kernels["kind"]])


def as_csv(kernels: pd.DataFrame, launches: pd.DataFrame | None, for_terminal: bool = False,
           work: pd.DataFrame | None = None) -> str:
    """The table as CSV: exact names for a file or a pipe, escaped ones (``for_terminal``) for a screen.
    ``work``: a CPU capture's CPU work rows (its kernel table), written instead of the (empty) kernels."""
    out = io.StringIO()
    frame = launches if launches is not None else labelled(kernels if work is None else work)
    if for_terminal:
        frame = printable_frame(frame)
    frame.to_csv(out, index=False, quoting=csv.QUOTE_MINIMAL)
    return out.getvalue()


def printable_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """The frame with every text column made printable (once per distinct value; unchanged frames are returned)."""
    changed = {}
    for column in frame.columns:
        values = frame[column]
        dtype = values.dtype
        if not (dtype == object or pd.api.types.is_string_dtype(dtype) or isinstance(dtype, pd.CategoricalDtype)):
            continue
        distinct = pd.unique(values.astype(str))
        shown = {v: printable(v) for v in distinct}
        if any(shown[v] is not v for v in distinct):
            changed[column] = values.astype(str).map(shown)
    return frame.assign(**changed) if changed else frame
