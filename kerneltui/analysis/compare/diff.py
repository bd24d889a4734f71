"""Diff two traces: are they comparable, is B faster and why, where the time went, what became what.

``diff_traces(a, b)`` is a pure function of two loaded traces. It returns a
frozen ``TraceDiff`` that the CLI report, the JSON output and the diff screen
all read, so they show the same numbers:

* ``comparable`` (workload.py): the same inputs, library work and device?
* ``verdict`` (timing.py): wall, GPU, busy and CPU time per step, each side's
  bound, and the sentence that says which quantity decides;
* ``phases`` (phases.py): forward, backward, optimizer per step;
* ``compile`` per side (compile_facts.py): regions, recompiles, graph breaks,
  CUDA-graph replays;
* ``matches`` (align.py, matches.py): the kernel sequences aligned on library
  work, one row per match, every GPU µs of an aligned step in some row.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import numpy as np
import pandas as pd

from kerneltui.analysis.compare.capture_notes import (
    capture_notes,
    cpu_capture_note,
    recompiles_profiled,
)
from kerneltui.analysis.compare.compile_facts import CompileFacts, compile_facts
from kerneltui.analysis.compare.cpu_fusion import CpuFusion, cpu_fusions
from kerneltui.analysis.compare.matches import WORKING_COLUMNS, matched_kernels
from kerneltui.analysis.compare.memory_diff import MemoryDiff, memory_diff
from kerneltui.analysis.compare.module_diff import ModuleDiff, module_diff
from kerneltui.analysis.compare.phases import PhaseRow, gpu_phases, phase_breakdown
from kerneltui.analysis.compare.row_kernels import SideEvents
from kerneltui.analysis.compare.timing import Timing, Verdict, timing, verdict
from kerneltui.analysis.compare.workload import (
    Comparability,
    compare_signatures,
    reference_tensor,
    workload_signature,
)
from kerneltui.analysis.health import Health, trace_health
from kerneltui.analysis.memory import memory_table
from kerneltui.analysis.provenance.join import gpu_records, matching_side, of_trace
from kerneltui.analysis.provenance.records import Provenance
from kerneltui.analysis.traffic import Traffic, compute_traffic
from kerneltui.trace.model import Trace
from kerneltui.trace.schema import Kind
from kerneltui.trace.summary import summarize
from kerneltui.trace.text_columns import text_in
from kerneltui.units import plural


@dataclass(frozen=True)
class SideFacts:
    label: str  # "A" or "B"
    path: str
    device: str
    torch: str  # from `kerneltui capture` metadata, "" when the trace does not say
    unit: str  # "step" or "call"
    iteration_source: str
    iterations: int
    launches: float  # GPU events (kernels, memcpy, memset) per step/call
    kernels: float  # of which kernels
    wall_ns: float  # the CPU dispatch span (old name of dispatch_ns, kept for scripts)
    gpu_ns: float  # GPU time per step/call (sum of durations)
    busy_ns: float  # union of GPU intervals per step/call
    busy_share: float  # GPU busy / profiled window (start-up included: busy_in_steps is the figure to read)
    cpu_ns: float  # top-level CPU op time per step/call (median over settled steps); NaN when unknown
    bound: str  # "gpu", "cpu" or "unknown"
    bytes: float  # moved through GPU memory per step/call; NaN when unknown
    bytes_known_share: float  # share of GPU time whose bytes are known
    largest_tensor: float  # bytes of the reference tensor, the same on both sides (workload.reference_tensor)
    transfers: float  # bytes / largest_tensor: "array-sized transfers"
    gbs: float  # achieved bandwidth over the kernels with known bytes (GEMMs excluded)
    peak_gbs: float  # device peak, NaN when the device is not in the table
    record_shapes: bool
    with_stack: bool
    compile: dict = field(default_factory=dict)  # CompileFacts as a dict
    iteration_starts: tuple[int, ...] = ()
    iteration_labels: tuple[str, ...] = ()
    span_ns: float | None = None  # what a timer sees per step/call (timing.py); None: every one held start-up
    dispatch_ns: float = math.nan  # the CPU dispatch span per step/call: the step's span on the CPU
    busy_in_steps: float | None = None  # GPU busy share of the spans (0-1), None with span_ns
    span_note: str = ""  # "" or why the span is no measure: "profiler-distorted", "unknown: ..."
    span_steps: tuple[int, int] = (0, 0)  # (steps the span is the median of, settled steps with GPU work)
    reference_tensor: str = ""  # "[64, 3, 128, 128] bf16": the tensor transfers are counted in
    health: dict = field(default_factory=dict)  # analysis/health's report: {ok, line, causes}


@dataclass(frozen=True)
class TraceDiff:
    a: SideFacts
    b: SideFacts
    comparable: Comparability
    ratios: dict  # B / A for launches, kernels, wall_ns, gpu_ns, cpu_ns, bytes, transfers
    verdict: Verdict
    phases: tuple[PhaseRow, ...]
    matches: pd.DataFrame  # see matches.MATCH_COLUMNS, plus transfers and rates
    attribution: dict  # a_unmatched_share, b_unmatched_share: GPU time in rows whose other side is empty
    notes: tuple[str, ...]  # what could not be compared, and why
    facts: tuple[str, ...] = ()  # plain sentences: "2 kernels → 1 per call"
    pairs: int = 0  # steps/calls aligned kernel by kernel
    events: dict = field(default_factory=dict, repr=False, compare=False)  # "a"/"b" -> row_kernels.SideEvents
    modules: ModuleDiff | None = None  # forward and backward per module, A → B (module_diff.py)
    capture_notes: tuple[str, ...] = ()  # --allow-recompile, a compiled "eager" run, a CPU capture (capture_notes.py)
    cpu_fusions: tuple[CpuFusion, ...] = ()  # two CPU captures: what fused into what (cpu_fusion.py)
    cpu_fusions_direction: str = "A → B"  # eager side → compiled side ("B → A" when A is the compiled one)
    memory: MemoryDiff | None = None  # peak memory and allocation counts A → B, both sides with [memory] events

    @property
    def gpu_change(self) -> float:
        """B's GPU time per step/call relative to A's: +0.05 = 5 % slower."""
        r = self.ratios.get("gpu_ns", math.nan)
        return r - 1.0 if r == r else math.nan

    def to_dict(self) -> dict:
        matches = self.matches.drop(columns=WORKING_COLUMNS)
        matches = matches.rename(columns={"a_keys": "a_kernels", "b_keys": "b_kernels"})
        matches = matches.assign(a_kernels=[list(k) for k in matches["a_kernels"]],
                                 b_kernels=[list(k) for k in matches["b_kernels"]])
        matches = matches.astype(object).where(matches.notna(), None)
        return {
            "comparable": {"ok": self.comparable.ok, "reasons": list(self.comparable.reasons)},
            "a": _side_dict(self.a),
            "b": _side_dict(self.b),
            "ratios": {k: (None if v != v else v) for k, v in self.ratios.items()},
            "verdict": asdict(self.verdict),
            "phases": [{k: v for k, v in asdict(p).items()} for p in self.phases],
            "attribution": self.attribution,
            "steps_aligned": self.pairs,
            "facts": list(self.facts),
            "capture_notes": list(self.capture_notes),
            "cpu_fusions_direction": self.cpu_fusions_direction,
            "cpu_fusions": [asdict(f) | {"eager_ns": None if f.eager_ns != f.eager_ns else f.eager_ns}
                            for f in self.cpu_fusions],
            "notes": list(self.notes),
            "matches": matches.to_dict("records"),
            **({"modules": self.modules.to_dict()} if self.modules is not None else {}),
            "memory": self.memory.to_dict() if self.memory is not None else None,
        }


def _side_dict(s: SideFacts) -> dict:
    out = asdict(s)
    return {k: (None if isinstance(v, float) and v != v else v) for k, v in out.items()}


def diff_traces(a: Trace, b: Trace, provenance: Provenance | None = None) -> TraceDiff:
    """``provenance``: a `capture --provenance-only` file's records, for whichever side they name
    (a trace's own provenance block is used without it)."""
    ta, tb = compute_traffic(a), compute_traffic(b)
    time_a, time_b = timing(a), timing(b)
    sig_a, sig_b = workload_signature(a), workload_signature(b)
    reference = reference_tensor(sig_a, sig_b)
    side_a, side_b = _side("A", a, ta, time_a, reference), _side("B", b, tb, time_b, reference)
    health_a, health_b = trace_health(a), trace_health(b)
    comparable = _abstain_on_damage(compare_signatures(sig_a, sig_b), health_a, health_b)
    attached = {"a": None, "b": None}
    side = matching_side(a, b, provenance) if provenance is not None else None
    if side is not None:
        attached[side] = provenance
    records_a = gpu_records(a, of_trace(a, attached["a"]))
    records_b = gpu_records(b, of_trace(b, attached["b"]))
    matches, pairs = matched_kernels(a, b, ta, tb, gpu_phases(a), gpu_phases(b), records_a, records_b)
    matches = _with_rates(matches, side_a, side_b, ta, tb)
    matches["health"] = _row_health(matches, health_a, health_b)
    ratios = {
        name: _ratio(getattr(side_b, name), getattr(side_a, name))
        for name in ("launches", "kernels", "wall_ns", "dispatch_ns", "gpu_ns", "cpu_ns", "bytes", "transfers")
    }
    if "unknown" in (side_a.bound, side_b.bound):
        ratios["cpu_ns"] = math.nan
    # a span the profiler distorts (or that is unknown) is no measure of its side: no ratio; nor are the
    # profiled CPU figures then (they would be the profiler's ratio, pointing either way)
    spans_measure = not (side_a.span_note or side_b.span_note)
    ratios["span_ns"] = _ratio(side_b.span_ns, side_a.span_ns) if spans_measure else math.nan
    if not spans_measure:
        for name in ("wall_ns", "dispatch_ns", "cpu_ns"):
            ratios[name] = math.nan
    if min(side_a.bytes_known_share, side_b.bytes_known_share) < RATIO_KNOWN:
        # bytes counted over part of one side's GPU time would be set against the whole of the other's
        ratios["bytes"] = ratios["transfers"] = math.nan
    notes = _notes(a, b, side_a, side_b, comparable, pairs)
    for label, h in (("A", health_a), ("B", health_b)):
        if not h.ok and not h.abstain_reason(label):
            notes.append(f"{label}'s trace is damaged ({h.line().removeprefix('NOT HEALTHY: ')}): the rows holding "
                         "that work are marked")
    if provenance is not None and side is None:
        example = f", e.g. {provenance.kernels[0].name}" if provenance.kernels else ""
        cpu = provenance.kernels and all(k.name.startswith(("cpp_", "extern_kernels.")) for k in provenance.kernels)
        hint = ": C++ kernels, a CPU compile's record (capture it where the traces were profiled)" if cpu else ""
        notes.append(f"the provenance file names none of A's or B's kernels ({plural(len(provenance.kernels), 'record')}"
                     f"{example}){hint}: not used")
    memory, memory_note = memory_diff(memory_table(a), memory_table(b))
    if memory_note:
        notes.append(memory_note)
    events = {"a": SideEvents.of(a, ta, records_a), "b": SideEvents.of(b, tb, records_b)}
    fusions, direction = cpu_fusions(a, b), "A → B"
    if not fusions:
        fusions, direction = cpu_fusions(b, a), "B → A"
    return TraceDiff(
        side_a, side_b, comparable, ratios, _no_verdict_on_recompiles(verdict(time_a, time_b, comparable), a, b),
        tuple(phase_breakdown(a, b)), matches, _attribution(matches), tuple(notes),
        tuple(_facts(side_a, side_b, matches)), pairs, events, module_diff(a, b),
        tuple(capture_notes(a, "A") + capture_notes(b, "B") + cpu_capture_note(a, b)), fusions, direction, memory,
    )


def _no_verdict_on_recompiles(v: Verdict, a: Trace, b: Trace) -> Verdict:
    """A side written with --allow-recompile whose profiled calls recompiled times its compiles: no speed verdict."""
    sides = [label for label, t in (("A", a), ("B", b)) if recompiles_profiled(t)]
    if not sides or v.kind == "not comparable":
        return v
    who = " and ".join(sides)
    return Verdict("recompiled", f"no speed verdict: {who} recompiled inside {'its' if len(sides) == 1 else 'their'} "
                   "profiled calls (written with --allow-recompile), so its time per call holds compiling. "
                   f"As measured, compiles included: {v.text}", None, None,
                   short=f"no speed verdict: {who} recompiled inside the profiled calls (--allow-recompile)")


def _abstain_on_damage(comparable: Comparability, a: Health, b: Health) -> Comparability:
    """Not comparable when either side lost (or doubled, or garbled) more than DAMAGE_LIMIT of its GPU work."""
    reasons = [r for r in (a.abstain_reason("A"), b.abstain_reason("B")) if r]
    if not reasons:
        return comparable
    return Comparability(False, (*reasons, *comparable.reasons), comparable.evidence)


def _row_health(m: pd.DataFrame, a: Health, b: Health) -> list[str]:
    """Per row: the figure-changing causes among its GPU events, "A: no_launch; B: overlap", "" when sound."""
    out = []
    for rows_a, rows_b in zip(m["a_rows"], m["b_rows"]) if len(m) else ():
        parts = []
        for label, health, rows in (("A", a, rows_a), ("B", b, rows_b)):
            causes = health.figure_causes(np.asarray(rows, np.int64))
            if causes:
                parts.append(f"{label}: {', '.join(causes)}")
        out.append("; ".join(parts))
    return out


def _ratio(b: float | None, a: float | None) -> float:
    return b / a if a and b is not None and a == a and b == b else math.nan


def _side(label: str, trace: Trace, traffic: Traffic, t: Timing, reference: tuple[float, str]) -> SideFacts:
    s = summarize(trace)
    g = trace.gpu
    its = trace.iterations
    counted = g["iteration"].to_numpy() >= 0
    n = max(its.count, 1)
    tt = traffic.table[counted]
    kernels = float((g["kind"].to_numpy()[counted] == Kind.KERNEL).sum()) / n
    known = tt["bytes"].notna().to_numpy()
    total_bytes = float(tt["bytes"].sum()) if known.any() else math.nan
    largest_tensor, reference_text = reference
    per_call = total_bytes / n
    # GB/s of the memory-bound work: not what is judged by FLOP/s, not copies over the host link
    rate = tt[known & tt["flops"].isna().to_numpy() & ~text_in(tt["basis"], ["copy-h2d", "copy-d2h"])]
    rate_ns = float(rate["dur"].to_numpy(np.float64).sum())  # float: an int64 sum may wrap
    gbs = float(rate["bytes"].sum()) / rate_ns if len(rate) and rate_ns > 0 else math.nan
    capture = trace.meta.capture or {}
    facts: CompileFacts = compile_facts(trace)
    return SideFacts(
        label=label,
        path=trace.meta.path,
        device=trace.meta.device_name,
        torch=str(capture.get("torch", "")),
        unit=its.unit,
        iteration_source=its.source,
        iterations=its.count,
        launches=s.launches_per_iteration,
        kernels=kernels,
        wall_ns=t.wall_ns,
        gpu_ns=s.gpu_ns_per_iteration,
        busy_ns=t.busy_ns,
        busy_share=s.busy_share,
        cpu_ns=t.cpu_ns if t.cpu_recorded else math.nan,  # CUDA-only: unknown, not 0
        bound=t.bound,
        bytes=per_call,
        bytes_known_share=traffic.known_share,
        largest_tensor=largest_tensor,
        reference_tensor=reference_text,
        transfers=per_call / largest_tensor if largest_tensor and largest_tensor == largest_tensor else math.nan,
        gbs=gbs,
        peak_gbs=float(traffic.device.bandwidth_gbs) if traffic.device else math.nan,
        record_shapes=trace.meta.record_shapes,
        with_stack=trace.meta.with_stack,
        compile=_compile_dict(facts),
        iteration_starts=tuple(int(x) for x in its.starts),
        iteration_labels=tuple(its.labels),
        span_ns=t.span_ns,
        dispatch_ns=t.dispatch_ns,
        busy_in_steps=t.busy_in_steps,
        span_note=t.span_note,
        span_steps=t.span_steps,
        health=trace_health(trace).to_dict(),
    )


def _compile_dict(f: CompileFacts) -> dict:
    return {
        "regions": list(f.regions),
        "frames": f.frames,
        "recompiles": f.recompiles,
        "recompiles_in_profile": f.recompiles_in_profile,
        "graph_breaks": f.graph_breaks,
        "graph_breaks_source": f.graph_breaks_source,
        "graph_break_at": list(f.graph_break_at),
        "graph_breaks_in_trace": f.graph_breaks_in_trace,
        "graph_replays_per_step": f.graph_replays_per_step,
        "kernels_per_replay": f.kernels_per_replay,
        "launch_calls_per_step": f.launch_calls_per_step,
    }


def _with_rates(m: pd.DataFrame, a: SideFacts, b: SideFacts, ta: Traffic, tb: Traffic) -> pd.DataFrame:
    """Transfers per call (in units of the reference tensor) and achieved rates per row: FLOP/s of its
    GEMMs, convolutions and attention, GB/s of the rest (matches.py)."""
    m = m.copy()
    for side, facts, traffic in (("a", a, ta), ("b", b, tb)):
        device = traffic.device
        ns = m[f"{side}_ns"].to_numpy(np.float64)
        by = m[f"{side}_bytes"].to_numpy(np.float64)
        host = m[f"{side}_host_copy"].to_numpy(bool)
        m[f"{side}_transfers"] = by / facts.largest_tensor if facts.largest_tensor == facts.largest_tensor else np.nan
        flop_ns = m[f"{side}_flop_ns"].to_numpy(np.float64)
        m[f"{side}_tflops"] = m[f"{side}_flops"].to_numpy(np.float64) / np.where(flop_ns > 0, flop_ns, np.nan) / 1e3
        # memory-bound work by GB/s; a row of host copies as a whole, against the host link
        mem_ns = np.where(host, ns, m[f"{side}_mem_ns"].to_numpy(np.float64))
        mem_bytes = np.where(host, by, m[f"{side}_mem_bytes"].to_numpy(np.float64))
        gbs = mem_bytes / np.where(mem_ns > 0, mem_ns, np.nan)
        # a GEMM row's cuBLAS memset is no bandwidth to show: GB/s from a tenth of the row's time
        minor = (m[f"{side}_judged_ns"].to_numpy(np.float64) > 0) & (mem_ns < MEMORY_SHOWN * ns)
        m[f"{side}_gbs"] = np.where(minor & ~host, np.nan, gbs)
        peak = device.bandwidth_gbs if device else np.nan
        link = (device.host_link_gbs if device else None) or np.nan
        m[f"{side}_peak_share"] = m[f"{side}_gbs"] / np.where(host, link, peak)
        # flagged when the row's memory-bound part, or any one kernel in it, beat the peak
        m[f"{side}_above_peak"] = ((m[f"{side}_peak_share"] > 1.0)
                                   | (m[f"{side}_max_gbs"].to_numpy(np.float64) / peak > 1.0)).to_numpy()
        tags = pd.unique(m[f"{side}_dtype"])
        peaks = {t: (device.peak_tflops(t) if device else None) or np.nan for t in tags}
        m[f"{side}_flops_share"] = m[f"{side}_tflops"] / m[f"{side}_dtype"].map(peaks).to_numpy(np.float64)
    return m


def _attribution(m: pd.DataFrame) -> dict:
    """Shares of each side's aligned GPU time in rows whose other side is empty."""
    out = {}
    for side, kind in (("a", "only A"), ("b", "only B")):
        total = float(m[f"{side}_ns"].sum())
        out[f"{side}_unmatched_share"] = float(m.loc[m["kind"] == kind, f"{side}_ns"].sum()) / total if total else 0.0
    return out


def _count(x: float) -> str:
    return f"{x:.0f}" if abs(x - round(x)) < 0.05 else f"{x:.1f}"


def _us(ns: float) -> str:
    return f"{ns / 1e3:.2f}"


def _facts(a: SideFacts, b: SideFacts, matches: pd.DataFrame) -> list[str]:
    unit = b.unit
    word = "kernels" if a.kernels == a.launches and b.kernels == b.launches else "launches"
    facts = [f"{_count(a.launches)} {word} → {_count(b.launches)} per {unit}"]
    if a.transfers == a.transfers and b.transfers == b.transfers:
        known = (f" (bytes known for {_share(a.bytes_known_share)} → {_share(b.bytes_known_share)} of GPU time)"
                 if min(a.bytes_known_share, b.bytes_known_share) < KNOWN_ENOUGH else "")
        facts.append(f"{_count(a.transfers)} array-sized transfers → {_count(b.transfers)}{known}")
    facts.append(f"GPU time {_us(a.gpu_ns)} → {_us(b.gpu_ns)} µs per {unit}")
    for side in (a, b):
        c = side.compile
        if c.get("regions"):
            facts.append(f"{side.label}: {plural(len(c['regions']), 'compiled region')}, {_recompiles(c, unit)}, "
                         f"{_breaks(c)}")
        if c.get("graph_replays_per_step"):
            facts.append(f"{side.label}: {_count(c['graph_replays_per_step'])} CUDA-graph replays per {unit}, "
                         f"{_count(c['kernels_per_replay'])} kernels each")
    if a.compile.get("launch_calls_per_step") != b.compile.get("launch_calls_per_step"):
        facts.append(f"CPU launch calls {_count(a.compile.get('launch_calls_per_step', 0))} → "
                     f"{_count(b.compile.get('launch_calls_per_step', 0))} per {unit}")
    return facts


MEMORY_SHOWN = 0.1  # a row's memory-bound part is rated beside its FLOP/s from this share of its time
KNOWN_ENOUGH = 0.995  # below this share of GPU time with known bytes, the headline says how much is known
RATIO_KNOWN = 0.9  # below this share on either side, the bytes and transfers get no ratio


def _share(x: float) -> str:
    return f"{100 * x:.0f}%"


def _recompiles(c: dict, unit: str) -> str:
    """'0 recompiles', '2 recompiles (before the profile)', '2 recompiles, 2 compiles inside the profiled steps'."""
    total, inside = c.get("recompiles", 0), c.get("recompiles_in_profile", 0)
    text = plural(total, "recompile")
    if inside:
        return f"{text}, {plural(inside, 'Dynamo compile')} inside the profiled {unit}s"
    return f"{text} (before the profile)" if total else text


def _breaks(c: dict) -> str:
    """'0 graph breaks', 'at least 1 graph break (gb.py:8 in forward)', '2 graph breaks (Dynamo's count)'."""
    n = c.get("graph_breaks", 0)
    places = c.get("graph_break_at") or []
    where = ", ".join(places)
    if 0 < len(places) < n:  # the others left no resume function in the trace or its records
        where = f"{'one' if len(places) == 1 else len(places)} of them at {where}"
    if c.get("graph_breaks_source") == "dynamo":
        text = f"{plural(n, 'graph break')} (Dynamo's count)"
    else:
        text = f"at least {plural(n, 'graph break')}" if n else plural(n, "graph break")
    return f"{text} ({where})" if where and n else text


def _notes(ta: Trace, tb: Trace, a: SideFacts, b: SideFacts, comparable: Comparability, pairs: int) -> list[str]:
    notes = list(comparable.reasons)
    if a.torch and b.torch and a.torch != b.torch:
        notes.append(f"different torch versions ({a.torch} vs {b.torch})")
    for side in (a, b):
        if side.peak_gbs != side.peak_gbs:
            notes.append(f"{side.label}: device {side.device!r} is not in the peak table: GB/s without % of peak")
        if not side.record_shapes:
            notes.append(f"{side.label}: no record_shapes: bytes moved and transfers unknown")
        elif side.bytes_known_share < 0.999:
            no_ratio = ": bytes and transfers get no ratio" if side.bytes_known_share < RATIO_KNOWN else ""
            notes.append(f"{side.label}: bytes known for {100 * side.bytes_known_share:.0f}% of GPU time only{no_ratio}")
    if a.iterations != b.iterations or a.iteration_source != b.iteration_source:
        notes.append(
            f"{plural(a.iterations, a.unit)} ({a.iteration_source}) vs {plural(b.iterations, b.unit)}"
            f" ({b.iteration_source}): kernels aligned over the first {plural(pairs, b.unit)} of each"
        )
    for label, trace in (("A", ta), ("B", tb)):
        if not (trace.events["kind"].to_numpy() == Kind.CPU_OP).any():
            notes.append(f"{label}: no CPU ops (CUDA activity only): kernels aligned by name, not by op or shape")
        if trace.meta.incomplete:
            notes.append(f"{trace.meta.path}: the trace is not whole: {trace.meta.warnings[0]}")
    return notes


__all__ = ["SideFacts", "TraceDiff", "diff_traces"]
