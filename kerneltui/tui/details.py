"""The facts of one launch (or one CPU-side event) as label/value lines, without Textual.

Everything here is a lookup into tables built in the loading worker; nothing
scans the trace, so moving the cursor through a million launches stays cheap.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from kerneltui.analysis.attribution import attribute
from kerneltui.analysis.health import Health
from kerneltui.analysis.provenance.join import records_of
from kerneltui.analysis.provenance.records import eager_op_name
from kerneltui.analysis.traffic import copy_kind
from kerneltui.trace.schema import KIND_LABEL, Kind
from kerneltui.tui.model import Analyses, Browse, Kernels
from kerneltui.units import fmt_bytes, fmt_ns, fmt_share

PENDING = "…"  # shown while a later loading stage (2: sources; 3: bytes) is still running


@dataclass(frozen=True)
class Details:
    title: str
    rows: tuple[tuple[str, str], ...]

    def value(self, label: str) -> str | None:
        return next((v for k, v in self.rows if k == label), None)


def fmt_rate(gbs: float) -> str:
    if gbs >= 1000:
        return f"{gbs / 1000:.2f} TB/s"
    return f"{gbs:.1f} GB/s" if gbs >= 1 else f"{gbs * 1000:.1f} MB/s"


def dims(x: int, y: int, z: int) -> str:
    return f"{x}×{y}×{z}" if x >= 0 else "–"


def occupancy_text(value: float) -> str:
    # Kineto writes 0 for nvjet/cuDNN/sm80 kernels: a kernel that ran was not at 0 %, so 0 means unknown
    if value is None or math.isnan(value) or value <= 0:
        return "unknown (not reported for this kernel)"
    return f"{value:.0f}% (estimated achieved)"


def launch_details(kernels: Kernels, browse: Browse | None, launch: int, full_names: bool = False) -> Details:
    trace = kernels.trace
    g = trace.gpu
    r = g.iloc[launch]
    code = int(kernels.key_codes[launch])
    short, full = kernels.key_short[code], kernels.key_full[code]
    kind = Kind(int(r["kind"]))
    rows: list[tuple[str, str]] = []
    if kind == Kind.MEMCPY:
        # "memcpy H2D (pinned)": which way and from what host memory, from Kineto's name of the copy
        direction, _, memory = copy_kind(str(r["full_name"]))[0].partition(" ")
        label = "" if direction == "copy" else f" {direction}" + (f" ({memory})" if memory else "")
        rows.append(("kind", f"{KIND_LABEL[kind]}{label}"))
    elif kind != Kind.KERNEL:
        rows.append(("kind", KIND_LABEL[kind]))
    nth = int(np.count_nonzero(kernels.key_codes[:launch] == code)) + 1  # the launches before it only
    stat = kernels.stats.iloc[int(kernels.stats_row_of_code[code])]
    # most telling first: the narrow layout shows the first six lines without scrolling
    rows.append(("launch", f"{nth:,} of {int(stat['count']):,} · {fmt_ns(int(r['dur']))} · "
                           f"starts {fmt_ns(int(r['ts']) - kernels.origin)}"))
    rows.append(("all launches", f"{fmt_ns(stat['total_ns'])} total, mean {fmt_ns(stat['mean_ns'])} "
                                 f"({fmt_ns(stat['min_ns'])}–{fmt_ns(stat['max_ns'])}), "
                                 f"{fmt_share(stat['share'])} of GPU time"))
    analyses = browse.analyses if browse is not None else None
    if analyses is not None and analyses.health is not None:
        told = health_text(kernels, analyses.health, launch)
        if told:
            rows.append(("health", told))
    if browse is None:
        rows.append(("op", str(r["op"]) or "–"))
    else:
        stack = [trace.name(int(trace.events["name"].iat[a])) for a in trace.ancestors(int(r["launch_row"]))]
        rows.append(("op", " › ".join(stack) if stack else (str(r["op"]) or "–")))
        rows.append(("source", _source(trace, browse, launch)))
        rows.append(("placed on", placed_text(trace, launch)))
    record = records_of(trace)[launch]
    if record is not None:  # Inductor's own record of this generated kernel (kerneltui capture)
        ops = ", ".join(dict.fromkeys(eager_op_name(o) for o in record.aten_ops)) or "–"
        rows.append(("computes", ops))
        rows.append(("from", ", ".join(s.label() for s in record.source_lines) or "–"))
        if record.module_paths:
            rows.append(("modules", ", ".join(record.module_paths)))
    rows.append(("step", _step_label(trace, int(r["iteration"]))))
    if full_names:
        rows.append(("short name", short))
    elif full != short:
        rows.append(("full name", full))  # after the short facts: it can take several lines
    if kind == Kind.KERNEL:
        rows.append(("grid", f"{dims(int(r['grid_x']), int(r['grid_y']), int(r['grid_z']))}"
                             f"  block {dims(int(r['block_x']), int(r['block_y']), int(r['block_z']))}"))
        rows.append(("registers", str(int(r["registers"])) if r["registers"] >= 0 else "–"))
        rows.append(("shared mem", fmt_bytes(int(r["shared_memory"])) if r["shared_memory"] >= 0 else "–"))
        rows.append(("occupancy", occupancy_text(float(r["occupancy"]))))
    rows.append(("stream", f"GPU {int(r['device'])}, stream {int(r['stream'])}"))
    rows.append(("launched", _launch_text(kernels, r)))
    if browse is None:
        rows += [("source", PENDING), ("bytes", PENDING)]
    elif analyses is None:
        rows.append(("bytes", PENDING))
    else:
        rows += _traffic_rows(trace, analyses, launch, kind)
    return Details(full if full_names else short, tuple(rows))


def health_text(kernels: Kernels, health: Health, launch: int) -> str:
    """What is wrong with this event (analysis/health), or "" for a sound one; overlaps name the other event."""
    cause = health.row_cause(launch)
    g = kernels.trace.gpu
    if cause.startswith("overlap"):
        other = int(health.overlapped[launch])
        why = {"overlap": "nothing explains it", "overlap_pdl": "programmatic dependent launch (expected)",
               "overlap_graph": "branches of one CUDA-graph replay (expected)"}[cause]
        mark = "⚠ " if cause == "overlap" else ""
        return (f"{mark}starts {fmt_ns(int(health.overlap_ns[launch]))} before {_named(kernels, other)} ends, "
                f"on its stream: {why}; drawn on a row of its own")
    later = health.overlapped_by(launch)
    if len(later) and not cause:
        first = int(later[0])
        more = f" and {len(later) - 1:,} more" if len(later) > 1 else ""
        return (f"{_named(kernels, first)}{more} starts {fmt_ns(int(health.overlap_ns[first]))} before this one "
                "ends, on its stream")
    return {
        "": "",
        "duplicate": "⚠ an extra copy of the event before it (same name, times, stream and correlation): "
                     "counted twice",
        "bad_duration": f"⚠ its duration is {'zero, negative or missing' if int(g['dur'].iat[launch]) <= 0 else 'longer than the profiled window'} in the file: its GPU time is unknown",
        "below_resolution": "lasted under the trace's 1 µs resolution: reads as 0",
        "no_launch": "⚠ no launch call in the trace (dropped, or made before the profiler started): its source "
                     f"line{' and op are' if int(g['op_row'].iat[launch]) < 0 else ' is'} unknown",
        "shared_correlation": "⚠ its correlation is an earlier GPU event's (one launch makes one event): its "
                              "launch call, op and step may be another's",
        "before_launch": f"⚠ starts {fmt_ns(int(g['launch_ts'].iat[launch]) - int(g['ts'].iat[launch]))} before "
                         "its launch call: the GPU and CPU clocks disagree",
        "outside_window": "⚠ outside the profiler's window: the clocks disagree, or the window is cut",
    }[cause]


def _named(kernels: Kernels, launch: int) -> str:
    """'gemm_kernel (at 3.21ms)': another launch, by name and start."""
    start = int(kernels.trace.gpu["ts"].iat[launch]) - kernels.origin
    return f"{kernels.key_short[int(kernels.key_codes[launch])]} (at {fmt_ns(start)})"


def placed_text(trace, launch: int) -> str:
    """Where the launch's time belongs (analysis/attribution): 'TinyGPT_0.Block_3.Linear_12 (backward of
    aten::addmm at gpt.py(42): forward)', 'optimizer (AdamW)', '(outside any module)'."""
    a = attribute(trace)
    unit = str(a.unit[launch])
    if not unit:
        return f"nothing: {a.unplaced[launch]}"
    text = a.labels.get(unit, unit)
    if a.phase[launch] == "backward" and a.forward_op[launch] >= 0:
        forward = trace.name(int(trace.events["name"].iat[int(a.forward_op[launch])]))
        where = f" at {a.source[launch]}" if a.source[launch] else ""
        text += f" (backward of {forward}{where})"
    elif a.how[launch] == "provenance":
        text += " (Inductor's provenance record)"
    return text


def _step_label(trace, iteration: int) -> str:
    its = trace.iterations
    if iteration < 0:
        return f"outside any {its.unit}"
    return f"{its.labels[iteration]}  ({its.unit} {iteration + 1} of {its.count})"


def _launch_text(kernels: Kernels, r) -> str:
    if int(r["launch_row"]) < 0:
        return "no launch call in the trace"
    trace = kernels.trace
    lane = int(r["launch_lane"])
    thread = f"t{trace.lanes['tid'].iat[lane]}" if lane >= 0 else "?"
    wait = int(r["ts"]) - int(r["launch_ts"])
    graph = f", {replay_text(trace, int(r['launch_row']))}" if bool(r["graph"]) else ""
    return f"{r['launch']} on CPU {thread} ({fmt_ns(int(r['launch_dur']))}); GPU began {fmt_ns(wait)} later{graph}"


def replay_text(trace, launch_row: int) -> str:
    """'replay 3 of 5 of the graph launched from Torch-Compiled Region: 0/0': the graph is told by the op
    its cudaGraphLaunch runs in (the trace names no graph), the replay by its order among that op's."""
    g = trace.gpu
    ev = trace.events
    rows = np.unique(g["launch_row"].to_numpy()[g["graph"].to_numpy() & (g["launch_row"].to_numpy() >= 0)])
    where = [_enclosing_op(trace, int(r)) for r in rows.tolist()]
    mine = _enclosing_op(trace, launch_row)
    same = sorted((int(ev["ts"].iat[r]), int(r)) for r, w in zip(rows.tolist(), where) if w == mine)
    n = next((i for i, (_, r) in enumerate(same) if r == launch_row), 0) + 1
    source = f" launched from {mine}" if mine else ""
    return f"CUDA-graph replay {n} of {len(same)} of the graph{source}"


def _enclosing_op(trace, row: int) -> str:
    ev = trace.events
    ops = [a for a in trace.ancestors(row) if ev["kind"].iat[a] == Kind.CPU_OP]
    return trace.name(int(ev["name"].iat[ops[-1]])) if ops else ""


def _source(trace, browse: Browse, launch: int) -> str:
    if browse.sources is None:
        return "not recorded (profile with with_stack=True)"
    source = str(browse.sources["source"].iat[launch])
    module = str(browse.sources["module"].iat[launch])
    if not source:
        return "no frame of your code around this launch"
    return f"{source}  [{module}]" if module else source


HOST_COPIES = ("copy-h2d", "copy-d2h")  # traffic.copy_kind's bases of copies over the host link
OTHER_COPIES = ("copy-p2p", "copy-h2h", "copy-unknown")


def _traffic_rows(trace, analyses: Analyses, launch: int, kind: Kind) -> list[tuple[str, str]]:
    t = analyses.traffic
    if t is None:
        g = trace.gpu
        if kind != Kind.KERNEL and g["bytes"].iat[launch] >= 0:
            b = int(g["bytes"].iat[launch])
            return [("bytes", f"{fmt_bytes(b)}, {fmt_rate(b / max(int(g['dur'].iat[launch]), 1))}")]
        return [("bytes", "unknown (traffic model not available)")]
    row = t.iloc[launch]
    basis = str(row["basis"])
    if math.isnan(row["bytes"]):
        no_shapes = ("its op recorded no tensor shapes" if trace.meta.record_shapes
                     else "profile with record_shapes=True")
        reason = {"no-shapes": no_shapes, "cuda-graph": "CUDA-graph replays have no op",
                  "no-op": "no launching op"}.get(basis, basis)
        return [("bytes", f"unknown ({reason})")]
    out = [("bytes", f"{fmt_bytes(row['bytes'])} ({basis})")]
    spec = analyses.device_spec
    peak = getattr(spec, "name", "peak")
    if spec is None and basis in HOST_COPIES:
        peak = f"device {trace.meta.device_name!r}"
    if not math.isnan(row["tflops"]):
        share = f", {fmt_share(row['flops_share'])} of {peak} {row['dtype']} peak" if not math.isnan(row["flops_share"]) else ""
        out.append(("compute", f"{row['tflops']:.1f} TFLOP/s{share}"))
    elif not math.isnan(row["gbs"]) and basis in HOST_COPIES:
        # host copies cross the host link (PCIe, NVLink-C2C), never HBM: rated against the link
        link = getattr(spec, "host_link", "")
        if math.isnan(row["link_gbs"]) or not link:
            where = f"{peak} not in the device table" if spec is None else f"no host link known for {peak}"
            out.append(("bandwidth", f"{fmt_rate(row['gbs'])}; host link peak unknown ({where})"))
        else:
            out.append(("bandwidth", f"{fmt_rate(row['gbs'])}, {fmt_share(row['link_share'])} of the host link "
                                     f"({link}, {fmt_rate(row['link_gbs'])})"))
    elif not math.isnan(row["gbs"]) and basis in OTHER_COPIES:
        out.append(("bandwidth", f"{fmt_rate(row['gbs'])} (a copy off the device's memory: no peak to rate it against)"))
    elif not math.isnan(row["gbs"]):
        share = f", {fmt_share(row['peak_share'])} of {peak} peak" if not math.isnan(row["peak_share"]) else ""
        flag = "  above HBM peak: data was in L2" if bool(row["above_peak"]) else ""
        out.append(("bandwidth", f"{fmt_rate(row['gbs'])}{share}{flag}"))
    return out


def event_details(kernels: Kernels, browse: Browse | None, row: int) -> Details:
    """A CPU-side event of the launch list (runtime call, CPU op, annotation, allocator event)."""
    trace = kernels.trace
    ev = trace.events
    kind = Kind(int(ev["kind"].iat[row]))
    lane = int(ev["lane"].iat[row])
    rows = [
        ("kind", KIND_LABEL[kind]),
        ("thread", f"{trace.lanes['thread'].iat[lane] or trace.lanes['tid'].iat[lane]}"),
        ("start", fmt_ns(int(ev["ts"].iat[row]) - kernels.origin)),
        ("duration", fmt_ns(int(ev["dur"].iat[row]))),
    ]
    if kind == Kind.MEMORY:
        rows.append(("bytes", f"{int(ev['bytes'].iat[row]):+,} B"))
    if browse is not None and kind != Kind.MEMORY:
        stack = [trace.name(int(ev["name"].iat[a])) for a in trace.ancestors(row)]
        rows.append(("op stack", " › ".join(stack) if stack else "–"))
    if kind == Kind.CPU_OP:
        shapes = trace.shapes(row)
        if shapes:
            rows.append(("input dims", str(shapes["dims"])))
            rows.append(("input types", ", ".join(str(t) for t in shapes["types"])))
    if browse is not None and kind in (Kind.RUNTIME, Kind.DRIVER):
        launched = int(browse.row_to_launch_of_call(row))
        if launched >= 0:
            rows.append(("launched", kernels.key_short[int(kernels.key_codes[launched])]))
    return Details(trace.name(int(ev["name"].iat[row])), tuple(rows))
