"""Is B faster, and what bounds each side? Real pairs, and made pairs for each rule of the verdict."""

from __future__ import annotations

import numpy as np
import pytest

from kerneltui.analysis.compare.timing import grouped_union, timing, verdict
from kerneltui.analysis.compare.workload import compare_workloads
from kerneltui.trace import load_trace
from tests.conftest import shared_trace
from tests.kineto_builder import TraceBuilder


def pair(workload):
    a, b = load_trace(shared_trace(f"{workload}_eager")), load_trace(shared_trace(f"{workload}_compiled"))
    return a, b, verdict(timing(a), timing(b), compare_workloads(a, b))


# -- real pairs ---------------------------------------------------------------------------------

def test_add_relu_100_is_launch_bound_and_compiled_is_slower():
    a, b, v = pair("add_relu_100")
    ta, tb = timing(a), timing(b)
    assert [s.gpu_ns for s in ta.steps] == [1888, 1888, 1887] and [s.gpu_ns for s in tb.steps] == [736, 736, 703]
    # call 1 holds the profiler's start-up (Activity Buffer Request): out of the CPU median
    assert [s.startup for s in ta.steps] == [True, False, False]
    assert [s.cpu_ns for s in ta.steps][1:] == [42422, 32775] and [s.cpu_ns for s in tb.steps][1:] == [190017, 114310]
    assert (ta.cpu_ns, tb.cpu_ns) == (37598.5, 152163.5)
    assert (ta.bound, tb.bound) == ("cpu", "cpu")
    # even with its CPU time cut to a third (the most the profiler adds), B's call outlasts A's
    assert v.kind == "slower" and v.quantity == "end to end"
    assert v.text == ("CPU-bound: B's GPU time fell 1.89 → 0.72 µs per call, but launching takes 37.6 → 152.2 µs "
                      "of CPU ops per call: B is slower end to end, at least 1.20x, even allowing for the "
                      "profiler's overhead.")
    # A at most its dispatch with all its GPU work after it (40.5 + 1.9 µs), B at least a third of its CPU ops
    assert v.ratio == pytest.approx((40472 + 1887.667) / (152163.5 / 3), rel=1e-6)


def test_the_start_up_is_taken_out_of_the_first_call():
    ta = timing(load_trace(shared_trace("add_relu_100_eager")))
    # 2,387,074 ns of top-level ops, 2,152,519 of them the Activity Buffer Request inside aten::add
    assert ta.steps[0].cpu_ns == 2387074 - 2152519


def test_norm_chain_with_two_calls_is_judged_on_the_undisturbed_one():
    a, b, v = pair("norm_chain")
    ta = timing(a)
    assert ta.cpu_ns == 176985  # call 2; a plain median of two calls would be 2.09 ms
    assert (ta.bound, timing(b).bound) == ("gpu", "cpu")
    # B's call at most its dispatch (214.4 µs) with all its GPU work after it (47.0): A needs its GPU's 383.3
    assert v.text == ("B is faster end to end, at least 1.47x: its GPU time fell 383.3 → 47.0 µs per call, and even "
                      "its profiled dispatch with all of its GPU work after it (261.4 vs 383.3 µs for A's GPU) is "
                      "shorter than A needs.")


def test_mlp_is_gpu_bound_and_compiled_slightly_faster():
    a, b, v = pair("mlp_bf16")
    ta, tb = timing(a), timing(b)
    assert (ta.bound, tb.bound) == ("gpu", "gpu")
    assert ta.gpu_ns == pytest.approx(510483.0) and tb.gpu_ns == pytest.approx(1484917 / 3)
    assert (ta.python_per_step, tb.python_per_step) == (45.0, 228.0)  # the CPU does not decide: not mentioned
    assert (v.kind, v.quantity) == ("faster", "gpu")
    assert v.text == "B is 1.03x faster (GPU time per call 510.5 → 495.0 µs)."


def test_resnet_training_steps_are_undecided_when_the_profiled_cpu_outlasts_the_gpu():
    a, b, v = pair("resnet18_train")
    ta, tb = timing(a), timing(b)
    assert [s.gpu_ns for s in ta.steps] == [2850634, 2853273] and [s.gpu_ns for s in tb.steps] == [2263164, 2259666]
    assert [s.cpu_ns for s in ta.steps] == [13264815, 14947267] and [s.cpu_ns for s in tb.steps] == [18019730, 23938644]
    assert [s.wall_ns for s in ta.steps] == [16952685, 19426514]
    assert not any(s.startup for s in ta.steps + tb.steps)  # no overhead events in these traces
    # profiled, the CPU outlasts the GPU on both sides, but not by more than the profiler may add: unknown
    assert (v.kind, v.ratio) == ("undecided", None)
    assert v.text == ("B's GPU time fell 2.85 → 2.26 ms per step (1.26x), but the CPU takes longer than the GPU on "
                      "A and B (14.1 → 21.0 ms of CPU ops per step), and the profiler inflates CPU time: this profile "
                      "cannot tell which is faster end to end (time both without the profiler).")


def test_gpt_python_events_are_counted_per_step():
    t = timing(load_trace(shared_trace("gpt_train_eager")))
    assert [s.python_events for s in t.steps] == [1253, 1253, 1253]
    assert (t.with_stack, t.bound, t.launches) == (True, "cpu", 315.0)


def test_cuda_only_traces_compare_gpu_time_and_say_the_cpu_is_unknown():
    a = load_trace(shared_trace("add_relu_1M_eager_cudaonly"))
    b = load_trace(shared_trace("add_relu_1M_compiled_cudaonly"))
    v = verdict(timing(a), timing(b), compare_workloads(a, b))
    assert timing(a).bound == "unknown"
    assert v.text == ("B is 1.81x faster (GPU time per call 4.58 → 2.53 µs). CPU time was not recorded, so whether "
                      "the CPU decides is unknown; whether the inputs match is unknown (no shapes recorded).")


def test_not_comparable_gives_no_speed_up():
    a = load_trace(shared_trace("add_relu_100_eager"))
    b = load_trace(shared_trace("add_relu_10000000_compiled"))
    v = verdict(timing(a), timing(b), compare_workloads(a, b))
    assert (v.kind, v.ratio, v.quantity) == ("not comparable", None, None)
    assert v.text == "not comparable: inputs differ: largest input [100] vs [10000000]."


# -- made pairs -----------------------------------------------------------------------------------

def steps(tmp_path, name, kernel_us, cpu_us=4.0, wall_us=None, python=0, count=2, **top):
    """``count`` ProfilerSteps, each one op of ``cpu_us`` launching one kernel of ``kernel_us``."""
    b = TraceBuilder()
    for _ in range(count):
        with b.step():
            start = b.t
            b.op("aten::mm", [[64, 64], [64, 64]], kernels=[("nvjet_sm90_tst_NNT", kernel_us)] if kernel_us else [],
                 cpu_us=cpu_us)
            for i in range(python):
                b.events.append({"ph": "X", "cat": "python_function", "name": f"f{i}", "pid": 1, "tid": 1,
                                 "ts": start + i * 0.1, "dur": 0.05, "args": {"Python id": i + 1}})
            if wall_us is not None:
                b.idle(wall_us - (b.t - start) - 2)  # the step adds 1 µs each side
    return timing(load_trace(b.write(tmp_path / name, **top)))


def test_gpu_bound_pair_says_plainly_how_much_faster(tmp_path):
    a, b = steps(tmp_path, "a.json", 1690.0), steps(tmp_path, "b.json", 1000.0)
    assert (a.bound, b.bound) == ("gpu", "gpu")
    v = verdict(a, b)
    assert (v.kind, v.ratio, v.quantity) == ("faster", pytest.approx(1.69), "gpu")
    assert v.text == "B is 1.69x faster (GPU time per step 1.69 → 1.00 ms)."
    assert verdict(b, a).text == "B is 1.69x slower (GPU time per step 1.00 → 1.69 ms)."
    assert verdict(a, steps(tmp_path, "c.json", 1680.0)).kind == "unchanged"


def test_cpu_bound_pair_is_judged_by_its_cpu(tmp_path):
    a, b = steps(tmp_path, "a.json", 2.0, cpu_us=40.0), steps(tmp_path, "b.json", 1.0, cpu_us=190.0)
    assert (a.bound, b.bound, a.cpu_ns, b.cpu_ns) == ("cpu", "cpu", 40000.0, 190000.0)
    v = verdict(a, b)
    # B needs at least 190/3 = 63.3 µs a step, A at most its 45 µs of dispatch and its 2 µs kernel after it
    assert (v.kind, v.ratio, v.quantity) == ("slower", pytest.approx(44.5 / (190 / 3)), "end to end")
    assert v.text == ("CPU-bound: B's GPU time fell 2.00 → 1.00 µs per step, but launching takes 40.0 → 190.0 µs "
                      "of CPU ops per step: B is slower end to end, at least 1.42x, even allowing for the profiler's "
                      "overhead.")


def test_with_stack_on_one_side_is_named_as_distortion(tmp_path):
    a = steps(tmp_path, "a.json", 2.0, cpu_us=40.0)
    b = steps(tmp_path, "b.json", 1.0, cpu_us=190.0, python=3, with_stack=1)
    assert verdict(a, b).text == (
        "CPU-bound: B's GPU time fell 2.00 → 1.00 µs per step, but launching takes 40.0 → 190.0 µs of CPU ops per "
        "step: B is slower end to end, at least 1.42x, even allowing for the profiler's overhead. B was traced "
        "with_stack and A was not: the profiler inflates B's CPU time."
    )


def test_python_events_far_apart_are_named_as_distortion(tmp_path):
    a = steps(tmp_path, "a.json", 2.0, cpu_us=40.0, python=2, with_stack=1)
    b = steps(tmp_path, "b.json", 1.0, cpu_us=190.0, python=6, with_stack=1)
    assert (a.python_per_step, b.python_per_step) == (2.0, 6.0)
    assert verdict(a, b).text.endswith(
        "even allowing for the profiler's overhead. Python events per step 2 → 6: the profiler inflates B's CPU time."
    )


def gappy_steps(tmp_path, name, first_us, second_us, gap_us, count=3, **top):
    """Steps of two ops, the second launched ``gap_us`` after the first: the GPU idles between them."""
    b = TraceBuilder()
    for _ in range(count):
        with b.step():
            b.op("aten::mm", [[64, 64], [64, 64]], kernels=[("nvjet_sm90_tst_NNT", first_us)])
            b.idle(gap_us)
            b.op("aten::mm", [[64, 64], [64, 64]], kernels=[("nvjet_sm90_tst_NNT", second_us)])
        b.idle(max(b.gpu_t - b.t, 0))  # the next step starts on an idle GPU
    return timing(load_trace(b.write(tmp_path / name, **top)))


def test_a_longer_span_is_never_called_faster_without_saying_why(tmp_path):
    # A: 12.6 ms of GPU work in one go; B: 10 ms, but its second kernel is launched 8 ms after the first
    a = steps(tmp_path, "a.json", 12600.0)
    b = gappy_steps(tmp_path, "b.json", 1000.0, 9000.0, 8000.0)
    assert (a.bound, b.bound) == ("gpu", "gpu")
    assert not (a.span_distorted or b.span_distorted)  # the GPU paced both: dispatch ≤ busy
    # from the step's start: the first op at 1 µs, 8 ms idle after it, the second kernel at 8,008.5 µs for 9 ms
    assert b.steps[1].span_ns == 17_008_500
    v = verdict(a, b)
    assert v.kind == "faster"
    assert v.text == ("B's GPU time is 1.26x lower, but its step spans longer (17.0 vs 12.6 ms): B's GPU is busy "
                      "only 59% of its span: something else sets the pace.")


def test_the_span_is_what_a_timer_sees_and_queued_work_is_not_charged_twice(tmp_path):
    # three steps of 1 µs of CPU launching 100 µs kernels: steps 2 and 3 start while step 1's kernel runs
    b = TraceBuilder()
    for _ in range(3):
        with b.step():
            b.op("aten::mm", [[64, 64], [64, 64]], kernels=[("nvjet_sm90_tst_NNT", 100.0)], cpu_us=1.0)
    t = timing(load_trace(b.write(tmp_path / "t.json")))
    # step 1 from its CPU start to its kernel's end (launched 2 µs in, started 2 µs later); steps 2 and 3
    # from the end of the kernel before theirs
    assert [s.span_ns for s in t.steps] == [104_000, 100_000, 100_000]
    assert [s.busy_in_span_ns for s in t.steps] == [100_000, 100_000, 100_000]
    assert (t.span_ns, t.busy_in_steps, t.span_distorted) == (100_000.0, 300 / 304, False)


def test_a_cpu_paced_side_has_a_profiler_distorted_span(tmp_path):
    t = steps(tmp_path, "t.json", 2.0, cpu_us=40.0, count=3)
    assert all(s.wall_ns > s.busy_ns for s in t.steps)
    assert t.span_distorted and t.span_note == "profiler-distorted"


def test_a_single_profiled_call_has_no_span():
    t = timing(load_trace(shared_trace("add_relu_1M_eager")))
    assert (t.span_ns, t.busy_in_steps) == (None, None)
    assert t.span_note == "unknown: every profiled call held the profiler's start-up"


def test_shared_pairs_span_and_busy_in_steps():
    # add_relu at 1e7 elements: eager is GPU-paced, its span 55.3 µs (timed without the profiler: 52.9 µs);
    # compiled is CPU-paced under the profiler (103.7 µs of CPU ops per call for 29.6 µs of GPU)
    a, b = (timing(load_trace(shared_trace(f"add_relu_10000000_{m}"))) for m in ("eager", "compiled"))
    assert (a.span_ns, a.span_distorted, round(a.busy_in_steps, 3)) == (55327.5, False, 0.885)
    assert (b.span_ns, b.span_distorted, round(b.busy_in_steps, 3)) == (122681.0, True, 0.236)
    # the MLP: compiled call 2 was paced by its profiled CPU (530.0 µs dispatch, 496.6 µs busy): call 3 speaks
    a, b = (timing(load_trace(shared_trace(f"mlp_bf16_{m}"))) for m in ("eager", "compiled"))
    assert [s.gpu_paced for s in b.steps] == [False, False, True]
    assert (a.span_ns, b.span_ns) == (518397.5, 498748.0)
    assert b.span_ns < a.span_ns and b.busy_ns < a.busy_ns  # the span points the way the GPU time does


def test_no_gpu_work(tmp_path):
    a, b = steps(tmp_path, "a.json", 5.0), steps(tmp_path, "b.json", 0)
    v = verdict(a, b)
    assert (v.kind, v.text) == ("no GPU work", "no GPU work in B: nothing to compare on the GPU")


def test_a_step_touched_by_profiler_overhead_leaves_the_medians(tmp_path):
    b = TraceBuilder()
    for cpu in (2040.0, 40.0, 50.0):
        with b.step():
            if cpu > 1000:
                b.events.append({"ph": "X", "cat": "overhead", "name": "Activity Buffer Request", "pid": -1, "tid": 0,
                                 "ts": b.t + 10, "dur": 2000})
            b.op("aten::mm", kernels=[("nvjet_sm90_tst_NNT", 1.0)], cpu_us=cpu)
    t = timing(load_trace(b.write(tmp_path / "t.json")))
    assert [s.startup for s in t.steps] == [True, False, False]
    assert [s.cpu_ns for s in t.steps] == [40000, 40000, 50000]
    assert t.cpu_ns == 45000.0


def test_grouped_union_counts_overlaps_once_per_group():
    groups = np.array([0, 0, 0, 1, 1, 2])
    starts = np.array([0, 5, 20, 100, 100, 7])
    ends = np.array([10, 12, 25, 150, 120, 7])
    assert grouped_union(groups, starts, ends, 4).tolist() == [17, 50, 0, 0]
