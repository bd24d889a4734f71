"""Diff two traces: the facts of each side, their ratios, and the matched kernel table.

``diff_traces(a, b)`` is a pure function of two loaded traces and returns a
frozen ``TraceDiff`` that the CLI report, the JSON output and the diff screen all
read, so they show the same numbers. Per-step/per-call figures come from
``summary.summarize``; bytes from ``traffic``; kernel matching from
``diff_match``.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import numpy as np
import pandas as pd

from kerneltui.trace.diff_match import kernel_keys, match_kernels
from kerneltui.trace.model import Trace
from kerneltui.trace.schema import Kind
from kerneltui.trace.summary import summarize
from kerneltui.trace.traffic import Traffic, compute_traffic
from kerneltui.units import plural

# The profiler inflates CPU time per op several-fold, so a side counts as
# launch-bound only when its GPU time is under this share of its CPU time.
LAUNCH_BOUND_SHARE = 0.1
# With fewer calls than this, the median CPU time per call still holds the
# first call, which absorbs the profiler's start-up (doc section 7).
MIN_CALLS_FOR_CPU = 3


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
    gpu_ns: float  # GPU time per step/call
    busy_share: float  # GPU busy / profiled window
    cpu_ns: float  # top-level CPU op time per step/call (median)
    bytes: float  # moved through GPU memory per step/call; NaN when unknown
    bytes_known_share: float  # share of GPU time whose bytes are known
    largest_tensor: float  # bytes of the largest tensor of a step/call
    transfers: float  # bytes / largest tensor: "array-sized transfers"
    gbs: float  # achieved bandwidth over the kernels with known bytes (GEMMs excluded)
    peak_gbs: float  # device peak, NaN when the device is not in the table
    record_shapes: bool
    with_stack: bool
    iteration_starts: tuple[int, ...] = ()
    iteration_labels: tuple[str, ...] = ()


@dataclass(frozen=True)
class Verdict:
    kind: str  # "faster", "slower", "unchanged", "launch-bound", "mixed", "incomparable"
    text: str


@dataclass(frozen=True)
class TraceDiff:
    a: SideFacts
    b: SideFacts
    ratios: dict  # B / A for launches, kernels, gpu_ns, cpu_ns, bytes, transfers
    verdict: Verdict
    matches: pd.DataFrame  # see diff_match.MATCH_COLUMNS, plus transfers and rates
    notes: tuple[str, ...]  # what could not be compared, and why
    facts: tuple[str, ...] = field(default_factory=tuple)  # plain sentences: "2 kernels → 1 per call"

    @property
    def gpu_change(self) -> float:
        """B's GPU time per step/call relative to A's: +0.05 = 5 % slower."""
        r = self.ratios.get("gpu_ns", math.nan)
        return r - 1.0 if r == r else math.nan

    def to_dict(self) -> dict:
        matches = self.matches.drop(columns=["a_keys", "b_keys"]).copy()
        matches = matches.astype(object).where(matches.notna(), None)
        return {
            "a": asdict(self.a),
            "b": asdict(self.b),
            "ratios": {k: (None if v != v else v) for k, v in self.ratios.items()},
            "verdict": asdict(self.verdict),
            "facts": list(self.facts),
            "notes": list(self.notes),
            "matches": matches.to_dict("records"),
        }


def diff_traces(a: Trace, b: Trace) -> TraceDiff:
    ta, tb = compute_traffic(a), compute_traffic(b)
    side_a, side_b = _side("A", a, ta), _side("B", b, tb)
    unit = side_a.unit if side_a.unit == side_b.unit else "step/call"
    matches = match_kernels(kernel_keys(a, ta), kernel_keys(b, tb), unit)
    matches = _with_rates(matches, side_a, side_b, ta, tb)
    ratios = {
        name: _ratio(getattr(side_b, name), getattr(side_a, name))
        for name in ("launches", "kernels", "gpu_ns", "cpu_ns", "bytes", "transfers")
    }
    notes = _notes(a, b, side_a, side_b) + _unrelated(matches)
    cpu_ok = side_a.iterations >= MIN_CALLS_FOR_CPU and side_b.iterations >= MIN_CALLS_FOR_CPU and (
        side_a.cpu_ns > 0 and side_b.cpu_ns > 0
    )
    if not cpu_ok:
        ratios["cpu_ns"] = math.nan
    verdict = _verdict(side_a, side_b, cpu_ok)
    return TraceDiff(side_a, side_b, ratios, verdict, matches, tuple(notes), tuple(_facts(side_a, side_b, matches)))


def _ratio(b: float, a: float) -> float:
    return b / a if a and a == a and b == b else math.nan


def _side(label: str, trace: Trace, traffic: Traffic) -> SideFacts:
    s = summarize(trace)
    g = trace.gpu
    its = trace.iterations
    counted = g["iteration"].to_numpy() >= 0
    n = max(its.count, 1)
    t = traffic.table[counted]
    kernels = float((g["kind"].to_numpy()[counted] == Kind.KERNEL).sum()) / n
    known = t["bytes"].notna().to_numpy()
    total_bytes = float(t["bytes"].sum()) if known.any() else math.nan
    # the largest tensor of each call, then the typical (median) call
    largest = t["largest"].groupby(g["iteration"].to_numpy()[counted]).max()
    largest_tensor = float(largest.median()) if len(largest) and largest.notna().any() else math.nan
    per_call = total_bytes / n
    rate = t[known & (t["basis"] != "gemm").to_numpy()]
    gbs = float(rate["bytes"].sum()) / float(rate["dur"].sum()) if len(rate) and rate["dur"].sum() > 0 else math.nan
    capture = trace.meta.capture or {}
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
        gpu_ns=s.gpu_ns_per_iteration,
        busy_share=s.busy_share,
        cpu_ns=s.cpu_ns_per_iteration if s.cpu_recorded else math.nan,  # CUDA-only: unknown, not 0
        bytes=per_call,
        bytes_known_share=traffic.known_share,
        largest_tensor=largest_tensor,
        transfers=per_call / largest_tensor if largest_tensor and largest_tensor == largest_tensor else math.nan,
        gbs=gbs,
        peak_gbs=float(traffic.device.bandwidth_gbs) if traffic.device else math.nan,
        record_shapes=trace.meta.record_shapes,
        with_stack=trace.meta.with_stack,
        iteration_starts=tuple(int(x) for x in its.starts),
        iteration_labels=tuple(its.labels),
    )


def _with_rates(m: pd.DataFrame, a: SideFacts, b: SideFacts, ta: Traffic, tb: Traffic) -> pd.DataFrame:
    """Transfers per call (in units of each side's largest tensor) and achieved rates per row."""
    m = m.copy()
    for side, facts, traffic in (("a", a, ta), ("b", b, tb)):
        ns = m[f"{side}_ns"].to_numpy(np.float64)
        by = m[f"{side}_bytes"].to_numpy(np.float64)
        fl = m[f"{side}_flops"].to_numpy(np.float64)
        safe = np.where(ns > 0, ns, np.nan)
        gemm = fl > 0
        m[f"{side}_transfers"] = by / facts.largest_tensor if facts.largest_tensor == facts.largest_tensor else np.nan
        m[f"{side}_gbs"] = np.where(gemm, np.nan, by / safe)
        m[f"{side}_tflops"] = np.where(gemm, fl / safe / 1e3, np.nan)
        peak = traffic.device.bandwidth_gbs if traffic.device else np.nan
        m[f"{side}_peak_share"] = m[f"{side}_gbs"] / peak
        # flagged when the row, or any one kernel in it, beat the peak (gemms are judged by FLOP/s)
        fastest = np.where(gemm, np.nan, m[f"{side}_max_gbs"].to_numpy(np.float64))
        m[f"{side}_above_peak"] = ((m[f"{side}_peak_share"] > 1.0) | (fastest / peak > 1.0)).to_numpy()
        tags = pd.unique(m[f"{side}_dtype"])
        peaks = {t: (traffic.device.peak_tflops(t) if traffic.device else None) or np.nan for t in tags}
        m[f"{side}_flops_share"] = m[f"{side}_tflops"] / m[f"{side}_dtype"].map(peaks).to_numpy(np.float64)
    return m


def _verdict(a: SideFacts, b: SideFacts, cpu_ok: bool) -> Verdict:
    unit = b.unit
    gpu = _ratio(b.gpu_ns, a.gpu_ns)
    if gpu != gpu or not b.gpu_ns:  # either side ran no GPU work
        empty = " and ".join(s.label for s in (a, b) if not s.gpu_ns)
        whose = "their" if " and " in empty else "its"
        return Verdict("incomparable", f"{empty} ran no GPU work in {whose} {unit}s: no GPU time to compare.")
    cpu = _ratio(b.cpu_ns, a.cpu_ns) if cpu_ok else math.nan
    gpu_text = f"{_us(b.gpu_ns)} vs {_us(a.gpu_ns)} GPU µs/{unit}"
    if gpu < 1 and cpu == cpu and cpu > 1:
        cpu_text = f"{_us(b.cpu_ns)} vs {_us(a.cpu_ns)} CPU µs/{unit}"
        if b.gpu_ns < LAUNCH_BOUND_SHARE * b.cpu_ns:
            return Verdict(
                "launch-bound",
                f"Launch-bound: B has less GPU time ({gpu_text}) but more CPU time ({cpu_text}); "
                f"its GPU is idle most of the {unit} waiting for launches, so end to end B is likely slower.",
            )
        return Verdict(
            "mixed",
            f"B has less GPU time ({gpu_text}) but more CPU time ({cpu_text}): faster on the GPU; "
            "end to end it depends on launch overhead.",
        )
    if abs(gpu - 1) < 0.005:
        return Verdict("unchanged", f"GPU time unchanged ({gpu_text}).")
    word = "faster" if gpu < 1 else "slower"
    factor = 1 / gpu if gpu < 1 else gpu
    text = f"B is {factor:.2f}x {word} on the GPU ({gpu_text})."
    if cpu == cpu and cpu > 1 and gpu > 1:
        text += f" It also spends more CPU time ({_us(b.cpu_ns)} vs {_us(a.cpu_ns)} µs/{unit})."
    return Verdict(word, text)


def _us(ns: float) -> str:
    return f"{ns / 1e3:.2f}"


def _count(x: float) -> str:
    return f"{x:.0f}" if abs(x - round(x)) < 0.05 else f"{x:.1f}"


def _facts(a: SideFacts, b: SideFacts, matches: pd.DataFrame) -> list[str]:
    unit = b.unit
    word = "kernels" if a.kernels == a.launches and b.kernels == b.launches else "launches"
    facts = [f"{_count(a.launches)} {word} → {_count(b.launches)} per {unit}"]
    if a.transfers == a.transfers and b.transfers == b.transfers:
        facts.append(f"{_count(a.transfers)} array-sized transfers → {_count(b.transfers)}")
    facts.append(f"GPU time {_us(a.gpu_ns)} → {_us(b.gpu_ns)} µs per {unit}")
    for row in matches[matches["kind"] == "fused"].itertuples():
        if round(row.a_count, 1) != round(row.b_count, 1):
            facts.append(f"{row.name}: {_count(row.a_count)} launches → {_count(row.b_count)}")
    return facts


def _unrelated(matches: pd.DataFrame) -> list[str]:
    """Say so when nothing ties the two sides together: they may be different workloads."""
    paired = matches[matches["kind"].isin(["same", "fused", "op"])] if len(matches) else matches
    if not len(matches) or not len(paired):
        return [] if not len(matches) else ["no kernel of A matched one of B: different workloads?"]
    # every trace has steps or calls: only a named region (annotation, nn.Module) ties two sides
    named_region = ~paired["region"].isin(["", "call", "step", "step/call"])
    if (paired["kind"] == "same").any() or (paired["confidence"] == "high").any() or named_region.any():
        return []
    return ["no kernel, op or region in common, only guesses: A and B may be different workloads"]


def _notes(ta: Trace, tb: Trace, a: SideFacts, b: SideFacts) -> list[str]:
    notes = []
    if a.device != b.device:
        notes.append(f"different devices ({a.device} vs {b.device}): times and bandwidth do not compare directly")
    if a.torch and b.torch and a.torch != b.torch:
        notes.append(f"different torch versions ({a.torch} vs {b.torch})")
    for side in (a, b):
        if side.peak_gbs != side.peak_gbs:
            notes.append(f"{side.label}: device {side.device!r} is not in the peak table: GB/s without % of peak")
        if not side.record_shapes:
            notes.append(f"{side.label}: no record_shapes: bytes moved and transfers unknown")
        elif side.bytes_known_share < 0.999:
            notes.append(f"{side.label}: bytes known for {100 * side.bytes_known_share:.0f}% of GPU time only")
    if a.with_stack != b.with_stack:
        missing = "A" if not a.with_stack else "B"
        notes.append(f"{missing}: no with_stack: nn.Module regions not used for matching")
    if a.iterations != b.iterations or a.iteration_source != b.iteration_source:
        notes.append(
            f"{plural(a.iterations, a.unit)} ({a.iteration_source}) vs {plural(b.iterations, b.unit)}"
            f" ({b.iteration_source}): compared per step/call"
        )
    if a.iterations < MIN_CALLS_FOR_CPU or b.iterations < MIN_CALLS_FOR_CPU:
        notes.append(
            f"CPU time: only {plural(min(a.iterations, b.iterations), b.unit)}, and the first absorbs profiler start-up"
        )
    elif a.cpu_ns <= 0 or b.cpu_ns <= 0:
        notes.append("CPU time: a trace has no CPU ops (CUDA activity only)")
    for label, trace in (("A", ta), ("B", tb)):
        if not (trace.events["kind"].to_numpy() == Kind.CPU_OP).any():
            notes.append(f"{label}: no CPU ops (CUDA activity only): kernels matched by name only, not by op or region")
        if trace.meta.truncated:
            notes.append(f"{trace.meta.path}: truncated trace: later events missing")
    return notes
