"""range_totals: launches, clipped GPU time, busy time and bytes of a time range."""

from __future__ import annotations

import numpy as np
import pytest

from kerneltui.analysis.explore import range_totals
from kerneltui.trace import load_trace
from kerneltui.trace.intervals import union_length
from kerneltui.trace.summary import summarize
from kerneltui.analysis.traffic import compute_traffic
from tests.conftest import shared_trace, shared_trace_names
from tests.kineto_builder import TraceBuilder


@pytest.mark.parametrize("name", shared_trace_names())
def test_the_whole_window_is_the_summary(name):
    trace = load_trace(shared_trace(name))
    s = summarize(trace)
    r = range_totals(trace, *trace.window)
    assert (r.busy_ns, r.gpu_ns, r.launches, r.kernels) == (s.busy_ns, s.gpu_time_ns, s.launches, s.kernels)
    assert r.partial == 0 and (r.start, r.end) == trace.window
    assert sum(n for _, n, _ in r.top) <= r.launches and len(r.top) == min(5, s.distinct_kernels)


def brute(trace, start, end, mask, traffic):
    g = trace.gpu
    ts, en = g["ts"].to_numpy(), g["end"].to_numpy()
    keep = (ts < end) & ((en > start) | (ts >= start)) & mask
    a, z = np.maximum(ts[keep], start), np.minimum(en[keep], end)
    moved = traffic["bytes"].to_numpy()[keep]
    return {"launches": int(keep.sum()), "gpu_ns": int((z - a).sum()), "busy_ns": union_length(a, z),
            "partial": int(((ts[keep] < start) | (en[keep] > end)).sum()),
            "bytes": float(np.nansum(moved)), "bytes_unknown": int(np.isnan(moved).sum())}


@pytest.mark.parametrize("name", ["gpt_train_eager", "resnet18_train_compiled"])
def test_random_ranges_and_masks_against_brute_force(name):
    trace = load_trace(shared_trace(name))
    traffic = compute_traffic(trace).table
    rng = np.random.default_rng(7)
    w0, w1 = trace.window
    for _ in range(40):
        start, end = sorted(int(x) for x in rng.integers(w0 - 10_000, w1 + 10_000, 2))
        mask = rng.random(len(trace.gpu)) < 0.6
        r = range_totals(trace, start, end, mask, traffic)
        expected = brute(trace, start, end, mask, traffic)
        got = {k: getattr(r, k) for k in expected}
        assert got.pop("bytes") == pytest.approx(expected.pop("bytes"))
        assert got == expected


def test_small_trace_by_hand(tmp_path):
    b = TraceBuilder()
    b.op("aten::mm", kernels=[("gemm", 10.0)])  # GPU 103-113 µs
    b.op("aten::add", kernels=[("add", 2.0), ("add", 2.0)])  # 113-115, 115-117
    b.op("aten::zero_", kernels=[("Memset (Device)", 1.0)])  # 117-118
    trace = load_trace(b.write(tmp_path / "t.json"))
    g = trace.gpu
    assert g["ts"].tolist() == [103_000, 113_000, 115_000, 117_000]
    r = range_totals(trace, 108_000, 116_000)
    assert (r.launches, r.kernels, r.partial) == (3, 3, 2)
    assert (r.gpu_ns, r.busy_ns) == (5_000 + 2_000 + 1_000, 8_000)
    assert r.top == (("gemm", 1, 5_000), ("add", 2, 3_000))
    r = range_totals(trace, 117_500, 200_000)
    assert (r.launches, r.kernels, r.gpu_ns, r.bytes_unknown) == (1, 0, 500, 1)  # the builder's memset has no bytes
    assert range_totals(trace, 200_000, 300_000).launches == 0
    assert range_totals(trace, 116_000, 116_000).launches == 0  # empty range
    r = range_totals(trace, 0, 10**9, np.array([True, False, True, False]))
    assert (r.launches, r.gpu_ns) == (2, 12_000)


def test_a_long_kernel_that_starts_long_before_the_range(tmp_path):
    b = TraceBuilder()
    b.op("aten::long", kernels=[("long_kernel", 1000.0)])  # GPU 103-1103 µs on stream 7
    # short kernels on another stream, all before the range
    for i in range(5):
        b.events.append({"ph": "X", "cat": "kernel", "name": "short", "pid": 0, "tid": 8, "ts": 110.0 + i,
                         "dur": 0.5, "args": {"stream": 8, "device": 0}})
    trace = load_trace(b.write(tmp_path / "t.json"))
    r = range_totals(trace, 500_000, 600_000)
    assert (r.launches, r.partial, r.gpu_ns, r.busy_ns) == (1, 1, 100_000, 100_000)
    assert r.top == (("long_kernel", 1, 100_000),)
    r = range_totals(trace, 110_000, 112_000)  # long kernel + shorts at 110 and 111 µs, overlapping
    assert (r.launches, r.gpu_ns, r.busy_ns) == (3, 2_000 + 1_000, 2_000)


def test_bytes_with_and_without_the_traffic_table():
    trace = load_trace(shared_trace("gpt_train_eager"))
    traffic = compute_traffic(trace).table
    r = range_totals(trace, *trace.window, traffic=traffic)
    known = traffic["bytes"].notna()
    assert r.bytes == pytest.approx(float(traffic["bytes"][known].sum())) and r.bytes_unknown == int((~known).sum())
    plain = range_totals(trace, *trace.window)  # memcpy and memset bytes of the events themselves
    g = trace.gpu
    copies = (g["kind"].to_numpy() != 0) & (g["bytes"].to_numpy() >= 0)
    assert plain.bytes == float(g["bytes"][copies].sum()) and plain.bytes_unknown == len(g) - int(copies.sum())
