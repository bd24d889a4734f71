"""The analysis modules on the odd traces the fuzzer found (benchmarks/fuzz.py): tiny synthetic traces, real values.

Each test is one failure class of the fuzz run, fixed in kerneltui/trace (link, intervals, model,
iterations, frames, summary, traffic, diff, diff_match).
"""

from __future__ import annotations

import math

import numpy as np
import orjson
import pytest

from kerneltui.trace import load_trace
from kerneltui.analysis.compare.diff import diff_traces
from kerneltui.trace.intervals import Nesting, depth_by_group, union_length
from kerneltui.trace.summary import kernel_stats, summarize
from kerneltui.trace.model import parse_shapes
from kerneltui.analysis.traffic import compute_traffic, op_traffic


def _event(ph, cat, name, ts, dur=None, tid=1, pid=1, **args):
    e = {"ph": ph, "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "args": args}
    if dur is not None:
        e["dur"] = dur
    return e


def _kernel(name, ts, dur, correlation, **args):
    return _event("X", "kernel", name, ts, dur, tid=7, pid=0, correlation=correlation, stream=7, device=0, **args)


def _write(tmp_path, events, name="t.json", **top):
    path = tmp_path / name
    path.write_bytes(orjson.dumps({"traceEvents": events, **top}, option=orjson.OPT_INDENT_2))
    return path


# -- linking --------------------------------------------------------------------------------------


def test_a_kernel_launched_from_a_thread_without_ops_has_no_op(tmp_path):
    """Three events: an op on thread 1, a launch on thread 2 (no op there), its kernel (no External id).

    Was IndexError in OpStack.innermost_op: thread 2's stack held runtime events and no cpu_op.
    """
    events = [
        _event("X", "cpu_op", "aten::add", 0, 10, tid=1),
        _event("X", "cuda_runtime", "cudaLaunchKernel", 20, 5, tid=2, correlation=9),
        _kernel("k", 30, 4, 9),
    ]
    trace = load_trace(_write(tmp_path, events))
    g = trace.gpu
    assert g["launch"].astype(str).tolist() == ["cudaLaunchKernel"]
    assert g["launch_row"].tolist() == [1]
    assert g["op_row"].tolist() == [-1]
    assert g["op"].astype(str).tolist() == [""]
    assert summarize(trace).gpu_time_ns == 4000


def test_an_op_on_the_launching_thread_is_still_found_without_external_ids(tmp_path):
    """The grouped-by-thread lookup of innermost ops: two threads, each launch inside its own op."""
    events = [
        _event("X", "cpu_op", "aten::add", 0, 100, tid=1),
        _event("X", "cpu_op", "aten::mul", 0, 100, tid=2),
        _event("X", "cuda_runtime", "cudaLaunchKernel", 10, 5, tid=2, correlation=2),
        _event("X", "cuda_runtime", "cudaLaunchKernel", 20, 5, tid=1, correlation=1),
        _event("X", "cuda_runtime", "cudaLaunchKernel", 30, 5, tid=2, correlation=3),
        _kernel("k1", 200, 4, 1),
        _kernel("k2", 210, 4, 2),
        _kernel("k3", 220, 4, 3),
    ]
    g = load_trace(_write(tmp_path, events)).gpu
    assert g["op"].astype(str).tolist() == ["aten::add", "aten::mul", "aten::mul"]


# -- huge numbers ------------------------------------------------------------------------------------


def test_durations_near_the_limit_sum_exactly_instead_of_wrapping(tmp_path):
    """Three kernels of 4.5e15 µs (4.5e18 ns, under the loader's 2**52 µs): their sum is past int64.

    Was a negative GPU time (-4946744073.71s) and shares of -91%: int64 sums wrap silently.
    """
    big = 4.5e15  # µs
    events = [
        _event("X", "cpu_op", "aten::add", -4.5e15, big, **{"External id": 1}),
        _event("X", "cuda_runtime", "cudaLaunchKernel", -4.4e15, 10, correlation=1, **{"External id": 1}),
        *[_kernel(f"k{i}", 4.4e15, big, 1, **{"External id": 1}) for i in range(3)],
    ]
    trace = load_trace(_write(tmp_path, events, deviceProperties=[{"id": 0, "name": "NVIDIA H200"}]))
    s = summarize(trace)
    assert s.gpu_time_ns == 3 * 4.5e18  # past int64: a float, never a wrapped int
    assert s.busy_ns == 4_500_000_000_000_000_000
    assert s.window_ns == 13_400_000_000_000_000_000
    assert s.cpu_ns == 4_500_000_000_000_000_000
    assert s.gpu_ns_per_iteration == 3 * 4.5e18
    k = kernel_stats(trace)
    assert k["total_ns"].tolist() == [4.5e18] * 3
    assert k["share"].tolist() == pytest.approx([1 / 3] * 3)
    d = diff_traces(trace, trace)
    assert d.a.gpu_ns == 3 * 4.5e18
    assert d.verdict.kind == "unchanged"


def test_union_length_past_int64_is_exact():
    starts = np.array([-4_500_000_000_000_000_000, 4_000_000_000_000_000_000], np.int64)
    ends = np.array([-4_000_000_000_000_000_000, 9_000_000_000_000_000_000], np.int64)
    assert union_length(starts, ends) == 500_000_000_000_000_000 + 5_000_000_000_000_000_000
    one = np.array([-4_500_000_000_000_000_000], np.int64), np.array([9_000_000_000_000_000_000], np.int64)
    assert union_length(*one) == 13_500_000_000_000_000_000


# -- record_shapes ------------------------------------------------------------------------------------


def _shaped_trace(tmp_path, dims, types, name="aten::add"):
    events = [
        _event("X", "cpu_op", name, 0, 10, **{"External id": 1, "Input Dims": dims, "Input type": types}),
        _event("X", "cuda_runtime", "cudaLaunchKernel", 1, 2, correlation=1, **{"External id": 1}),
        _kernel("k", 5, 1, 1, **{"External id": 1}),
        _event("X", "cpu_op", "aten::mul", 20, 10, **{"External id": 2, "Input Dims": [[1000], [1000]],
                                                       "Input type": ["float", "float"]}),
        _event("X", "cuda_runtime", "cudaLaunchKernel", 21, 2, correlation=2, **{"External id": 2}),
        _kernel("k2", 25, 1, 2, **{"External id": 2}),
    ]
    return load_trace(_write(tmp_path, events, record_shapes=1))


@pytest.mark.parametrize(
    "dims, types",
    [
        ([[[1, 2], [3]], [4]], ["float", "float"]),  # a nested list where a shape belongs (was TypeError)
        ([[1000000, [2]]], ["float"]),
        ([[2**63]], ["float"]),  # was OverflowError: int too large to convert to float
        ([[10**6] * 8], ["float"]),  # 1e48 elements
        ([["a"]], ["float"]),
        ([[1.5]], ["float"]),
        ([[True, 2]], ["float"]),
        ([[-1]], ["float"]),
        ([[4]], [["float"]]),  # a type that is a list (was TypeError: unhashable type)
        ([[4]], [{"a": 1}]),
        ([[4]], 5),  # types not a list (was TypeError: 'int' object is not iterable)
        ("string", ["float"]),
        ([[[1], 2]], ["TensorList"]),  # a TensorList element that is not a shape
        ([7], ["TensorList"]),
    ],
)
def test_malformed_record_shapes_make_bytes_unknown_not_an_error(tmp_path, dims, types):
    trace = _shaped_trace(tmp_path, dims, types)
    t = compute_traffic(trace).table
    odd, good = t.iloc[0], t.iloc[1]
    assert math.isnan(odd["bytes"]) and odd["basis"] == "no-shapes"
    assert good["bytes"] == 12_000.0 and good["basis"] == "eager"  # 2 reads + 1 write of 1000 float32


def test_a_tensorlist_of_shapes_is_counted(tmp_path):
    """Well-formed nesting (a TensorList of shapes) is still read; the rule for the op decides the figure."""
    trace = _shaped_trace(tmp_path, [[[10], [20]], [10]], ["TensorList", "float"], name="aten::_foreach_add")
    t = compute_traffic(trace).table
    assert t["bytes"].iloc[0] >= 160.0  # at least the 40 + 80 + 40 bytes of its inputs
    assert math.isfinite(t["bytes"].iloc[0]) and t["basis"].iloc[0] != "no-shapes"
    assert t["bytes"].iloc[1] == 12_000.0


def test_op_traffic_on_values_no_trace_should_hold():
    assert op_traffic("aten::add", {"dims": {"a": 1}, "types": ["float"]}, False).basis == "no-shapes"
    assert op_traffic("aten::add", ["not", "a", "dict"], False).basis == "no-shapes"
    gemm = op_traffic("aten::mm", {"dims": [[10**6, 10**6], [10**6, 10**6]], "types": ["float", "float"]}, False)
    assert (gemm.bytes, gemm.flops) == (12e12, 2e18)


@pytest.mark.parametrize("depth", [65, 2000, 100_000, 1_000_000])
@pytest.mark.parametrize("open_close", [(b"[", b"]"), (b'{"a":', b"}")])
def test_record_shapes_nested_deep_read_as_absent(depth, open_close):
    """orjson 3.8 segfaults (C stack overflow) on ~100,000 levels: it must never see them."""
    opening, closing = open_close
    deep = b'{"dims":' + opening * depth + b"1" + closing * depth + b',"types":[]}'
    assert parse_shapes(deep) is None


def test_record_shapes_read_as_recorded():
    assert parse_shapes(b'{"dims":[[1]],"types":["float"]}') == {"dims": [[1]], "types": ["float"]}
    tensor_list = b'{"dims":[[[2,3],[4]],[]],"types":["TensorList","Scalar"]}'
    assert parse_shapes(tensor_list) == {"dims": [[[2, 3], [4]], []], "types": ["TensorList", "Scalar"]}
    assert parse_shapes(b"") is None and parse_shapes(b"[1]") is None


def test_a_one_megabyte_op_name_does_not_blow_up_traffic(tmp_path):
    """np.char on names.astype(str) copied every name at the longest one's width (1 MB x 4 bytes each)."""
    events = []
    for i in range(200):
        name = "aten::" + ("x" * (1 << 20) if i == 0 else f"op{i}")
        events += [
            _event("X", "cpu_op", name, 100 * i, 10, **{"External id": i + 1, "Input Dims": [[4]], "Input type": ["float"]}),
            _event("X", "cuda_runtime", "cudaLaunchKernel", 100 * i + 1, 2, correlation=i + 1, **{"External id": i + 1}),
            _kernel(f"k{i}", 100 * i + 5, 1, i + 1, **{"External id": i + 1}),
        ]
    trace = load_trace(_write(tmp_path, events, record_shapes=1))
    t = compute_traffic(trace).table
    assert t["bytes"].tolist() == [32.0] * 200  # one read and one write of 4 float32


# -- scale --------------------------------------------------------------------------------------------


def _many_kernels(n):
    events = [_event("X", "cpu_op", "aten::add", 0, 10 * n, **{"External id": 1})]
    for i in range(n):
        events.append(_event("X", "cuda_runtime", "cudaLaunchKernel", 1 + 2 * i, 1, correlation=10 + i))
        events.append(_kernel(f"kernel_{i}", 5 + 2 * i, 1, 10 + i))
    return events


def test_diff_of_20000_distinct_kernels_is_one_segment(tmp_path):
    """20,000 kernels with no library call to align on, against 2: one row holding every launch.
    (Speed is measured in benchmarks/fuzz.py's many_kernels class, not here.)"""
    small = load_trace(_write(tmp_path, _many_kernels(2), "small.json"))
    big = load_trace(_write(tmp_path, _many_kernels(20_000), "big.json"))
    d = diff_traces(big, small)
    assert d.matches["kind"].tolist() == ["changed"]  # neither side ran compiled code: nothing fused
    assert (d.matches["a_count"].sum(), d.matches["b_count"].sum()) == (20_000, 2)


def test_diff_of_20000_kernels_against_unrelated_ones(tmp_path):
    """No library call and no op in common: the whole step is one segment, every launch in it."""
    events = []
    for i in range(20_000):
        events.append(_event("X", "cuda_runtime", "cudaLaunchKernel", 1 + 2 * i, 1, correlation=10 + i))
        events.append(_kernel(f"triton_poi_fused_add_{i}", 5 + 2 * i, 1, 10 + i))
    big = load_trace(_write(tmp_path, events, "big.json"))
    other = load_trace(_write(tmp_path, [
        _event("X", "cpu_op", "aten::add", 0, 10, **{"External id": 1}),
        _event("X", "cuda_runtime", "cudaLaunchKernel", 1, 1, correlation=1, **{"External id": 1}),
        _kernel("vectorized_add", 5, 2, 1, **{"External id": 1}),
    ], "other.json"))
    d = diff_traces(other, big)
    assert d.matches["kind"].tolist() == ["fused"]
    assert d.matches["b_count"].sum() == 20_000


def test_thirty_thousand_threads_summarise_in_one_pass(tmp_path):
    """Was 12 s: each thread's op stack scanned every event (threads x events)."""
    n = 30_000
    events = [_event("X", "cpu_op", "aten::add", i, 1 + i % 3, tid=i, pid=i) for i in range(n)]
    events += [_event("X", "cuda_runtime", "cudaLaunchKernel", 8, 0.5, tid=7, pid=7, correlation=1), _kernel("k", 9, 2, 1)]
    trace = load_trace(_write(tmp_path, events))
    s = summarize(trace)
    assert s.cpu_ns == sum(1 + i % 3 for i in range(n)) * 1000
    assert s.iteration_source == "whole trace"
    assert len(trace.top_level_ops()) == n
    assert trace.gpu["op"].astype(str).tolist() == ["aten::add"]  # thread 7's op (no External id)


@pytest.mark.parametrize(("group_step", "far"), [(1, 0), (1 + 2**21, 2**61), (1, 2**61)],
                         ids=["one time axis", "times ranked first", "four groups times 2^61: past int64"])
def test_depth_by_group_is_nesting_per_group(group_step, far):
    """Both ways of keying (group, time): groups laid end to end on one axis, and, where that would pass
    int64 (times 2^61 apart, as a hostile trace may write), times ranked to dense codes first."""
    rng = np.random.default_rng(0)
    for _ in range(200):
        n = int(rng.integers(0, 50))
        groups = rng.integers(0, 4, n) * group_step
        starts = rng.integers(-20, 20, n) + rng.integers(0, 2, n) * far
        ends = starts + rng.integers(0, 6, n)
        depth = depth_by_group(groups, starts, ends)
        for group in np.unique(groups):
            mine = groups == group
            nesting = Nesting(starts[mine], ends[mine])
            expected = np.empty(mine.sum(), np.int64)
            expected[nesting.order] = nesting.depth
            assert depth[mine].tolist() == expected.tolist()


def test_gpu_lanes_named_oddly_give_unknown_device_and_stream(tmp_path):
    """A kernel's device and stream fall back to its lane's pid and tid; a pid of -Infinity was
    IntCastingNaNError (pandas' astype), out-of-range ones wrapped silently."""
    import json

    lanes = [(float("-inf"), 7), ("NaN", "7"), ("gpu0", "stream 3"), (10**6, 2**40), ("7", "1e30"), (3, "0x10"), (True, 5)]
    events = []
    for i, (pid, tid) in enumerate(lanes):
        events.append(_event("X", "cuda_runtime", "cudaLaunchKernel", 10 * i, 1, correlation=i + 1))
        events.append({"ph": "X", "cat": "kernel", "name": f"k{i}", "pid": pid, "tid": tid, "ts": 10 * i + 2, "dur": 1,
                       "args": {"correlation": i + 1}})
    path = tmp_path / "lanes.json"
    path.write_text(json.dumps({"traceEvents": events}))  # json, not orjson: it writes -Infinity
    g = load_trace(path).gpu
    assert g["device"].tolist() == [-1, -1, -1, -1, 7, 3, -1]  # int16: 10**6 is no device
    assert g["stream"].tolist() == [7, 7, -1, 2**40, -1, -1, 5]
    assert g["device"].dtype == np.int16


def test_a_long_device_name_is_matched_in_linear_time():
    """The table's patterns (".*80\\s*gb.*pcie") backtrack quadratically: 80 KB of "a100 " took 12 s."""
    from kerneltui.trace.devices import device_spec

    spec = device_spec("a100 " * 200_000)
    assert spec.name == "A100 40GB"
    assert device_spec("NVIDIA A100-SXM4-80GB").name == "A100 80GB SXM"
    assert device_spec(["not", "a", "name"]) is None


def test_a_profiler_step_number_past_int64_is_not_a_step(tmp_path):
    """Was OverflowError: Python int too large to convert to C long."""
    events = [
        _event("X", "user_annotation", "ProfilerStep#" + "9" * 30, 0, 100),
        _event("X", "user_annotation", "ProfilerStep#7", 200, 100),
        _event("X", "cuda_runtime", "cudaLaunchKernel", 210, 5, correlation=1),
        _kernel("k", 220, 4, 1),
    ]
    trace = load_trace(_write(tmp_path, events))
    its = trace.iterations
    assert (its.source, its.labels) == ("ProfilerStep", ("ProfilerStep#7",))
    assert trace.gpu["step"].tolist() == [7]


def test_twenty_thousand_nested_ops_on_one_thread(tmp_path):
    """Nesting grouped its intervals by depth with one pass per depth: depth x ops."""
    n = 20_000
    events = [_event("X", "cpu_op", f"aten::op{i}", i, 10 * n - 2 * i) for i in range(n)]
    events += [_event("X", "cuda_runtime", "cudaLaunchKernel", n + 1, 1, correlation=1), _kernel("k", 9 * n, 2, 1)]
    trace = load_trace(_write(tmp_path, events))
    g = trace.gpu
    s = summarize(trace)
    assert g["op"].astype(str).tolist() == [f"aten::op{n - 1}"]  # the innermost of all
    assert trace.top_level_ops().tolist() == [0]
    assert s.cpu_ns == 10 * n * 1000
    assert len(trace.ancestors(int(g["launch_row"].iat[0]))) == n


@pytest.mark.parametrize("name", ["gpt_train_eager", "resnet18_train_compiled", "mlp_bf16_eager"])
def test_top_level_ops_read_from_built_op_stacks_are_depth_by_groups(name):
    """Once every thread's op stack is built (the browser builds them), top_level_ops reads them: the
    same rows, in the same order, as from depth_by_group over all threads."""
    from tests.conftest import shared_trace

    trace = load_trace(shared_trace(name), cache=False)
    by_group = trace.top_level_ops()
    assert trace._built_op_stacks() is None  # nothing built yet: depth_by_group's
    for lane in trace.cpu_lanes():
        trace.op_stack(lane)
    assert trace._built_op_stacks() is not None
    from_stacks = trace.top_level_ops()
    assert len(by_group) > 10 and by_group.dtype == from_stacks.dtype == np.int64
    assert np.array_equal(from_stacks, by_group)
