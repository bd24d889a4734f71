"""What the browser computes, checked without a terminal: lanes, filters, event list, details."""

from __future__ import annotations

import numpy as np
import pytest

from kerneltui.errors import UserError
from kerneltui.trace import load_trace
from kerneltui.trace.schema import Kind
from kerneltui.trace.summary import kernel_stats
from kerneltui.tui.details import event_details, launch_details, occupancy_text
from kerneltui.tui.lanes import Lane, lanes_from_trace, nice_step
from kerneltui.tui.model import DEFAULT_SHOWN, build_browse, build_kernels, event_list, names_matching
from tests.conftest import shared_trace
from tests.tui.helpers import browse_of

NVJET = "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_bias_TNT"


@pytest.fixture(scope="module")
def mlp():
    kernels = build_kernels(load_trace(shared_trace("mlp_bf16_eager")))
    return kernels, browse_of(kernels)


def lane(starts, ends) -> Lane:
    n = len(starts)
    return Lane("t", "t", np.array(starts), np.array(ends), np.arange(n), np.zeros(n, np.int8), np.zeros(n, np.int32))


def test_cells_aggregate_busy_time_and_counts_exactly():
    # three intervals: [0,10) [15,20) [40,100)
    l = lane([0, 15, 40], [10, 20, 100])
    cells = l.cells(np.array([0, 10, 20, 30, 50, 100]))
    assert cells.fraction.tolist() == [1.0, 0.5, 0.0, 0.5, 1.0]
    assert cells.count.tolist() == [1, 1, 0, 1, 1]


def test_cells_match_brute_force_on_many_small_intervals():
    rng = np.random.default_rng(1)
    starts = np.cumsum(rng.integers(5, 50, 2000))
    ends = starts + rng.integers(1, 5, 2000)
    l = lane(starts, ends)
    edges = np.linspace(starts[0] - 7, ends[-1] + 3, 37).astype(np.int64)
    cells = l.cells(edges)
    for k in range(len(edges) - 1):
        lo, hi = edges[k], edges[k + 1]
        busy = np.clip(np.minimum(ends, hi) - np.maximum(starts, lo), 0, None).sum()
        overlapping = int(((starts < hi) & (ends > lo)).sum())
        assert cells.fraction[k] == pytest.approx(busy / (hi - lo))
        assert cells.count[k] == overlapping


def test_lane_lookups():
    l = lane([0, 15, 40], [10, 20, 100])
    assert l.position_of(2) == 2 and l.position_of(7) == -1
    assert l.nearest(12) == 0 and l.nearest(14) == 1 and l.nearest(60) == 2
    assert l.subset(np.array([True, False, True])).starts.tolist() == [0, 40]


def test_nice_ticks():
    assert nice_step(5_660_000, 60, 10) == 1_000_000
    assert nice_step(2_490_000, 60, 10) == 500_000


def test_lanes_of_a_trace_one_per_stream_and_launching_thread(mlp):
    kernels, browse = mlp
    labels = [l.label for l in browse.lanes]
    assert labels == ["GPU0 s7", "CPU t416"]
    # the icicle is per launching thread: the timeline shows the selected launch's
    assert [l.label for l in next(iter(browse.icicles.values()))] == ["ops d0", "ops d1", "ops d2", "ops d3", "ops d4"]
    gpu, cpu = browse.lanes[:2]
    assert len(gpu) == len(cpu) == 21
    trace = kernels.trace
    assert gpu.starts[0] == trace.gpu["ts"].iat[0] - trace.window[0]  # times from the trace start
    assert gpu.label_of(2) == NVJET and cpu.label_of(2) == "aten::addmm"


def test_two_streams_give_two_gpu_lanes():
    trace = load_trace(shared_trace("gpt_train_eager"))
    # the main thread before the autograd thread (which launches more), then the main thread's op icicle
    assert [l.label for l in lanes_from_trace(trace, op_depths=0)] == ["GPU0 s7", "CPU t416", "CPU autograd"]


def test_filter_is_substring_or_regex_on_short_or_full_names(mlp):
    kernels, _ = mlp
    by_name = dict(zip(kernels.key_short, range(len(kernels.key_short))))
    ok = kernels.key_matches("NVJET")  # any case
    assert ok.sum() == 1 and ok[by_name[NVJET]]
    assert kernels.key_matches("at::native").sum() == 3  # layer norm, gelu, add: only in full names
    ok = kernels.key_matches("/^mem")
    assert ok.sum() == 1 and ok[by_name["Memset (Device)"]]
    with pytest.raises(UserError, match="bad filter regex"):
        kernels.key_matches("/(")


def test_masks_from_filter_and_toggles(mlp):
    kernels, _ = mlp
    everything = kernels.key_matches("")
    assert kernels.launch_mask(everything, DEFAULT_SHOWN) is None
    no_memset = kernels.launch_mask(everything, frozenset({"memcpy"}))
    assert no_memset.sum() == 15
    assert len(kernels.stats_rows(everything, frozenset())) == 4
    assert kernels.launch_mask(kernels.key_matches("nvjet"), DEFAULT_SHOWN).sum() == 6


def test_event_list_merges_cpu_events_in_time_order(mlp):
    kernels, browse = mlp
    plain = event_list(browse, kernels, None, DEFAULT_SHOWN, None)
    assert len(plain) == 21 and (plain.launch == np.arange(21)).all()
    with_runtime = event_list(browse, kernels, None, DEFAULT_SHOWN | {"runtime"}, None)
    assert len(with_runtime) == 21 + 23
    ts = kernels.trace.events["ts"].to_numpy()[with_runtime.rows]
    assert (np.diff(ts) >= 0).all()
    ok = names_matching(kernels.trace, "cudaLaunchKernel")
    only = event_list(browse, kernels, np.zeros(21, bool), DEFAULT_SHOWN | {"runtime"}, ok)
    assert len(only) == 9 and (only.launch == -1).all()


def test_counts_of_every_noise_category(mlp):
    _, browse = mlp
    assert browse.counts == {"memcpy": 0, "memset": 6, "runtime": 23, "cpu_op": 69, "annotation": 6, "memory": 0}


def test_details_of_a_gemm_launch(mlp):
    kernels, browse = mlp
    d = launch_details(kernels, browse, 2)
    assert d.title == NVJET
    assert d.value("launch") == "1 of 6 · 191.2µs · starts 4.07ms"
    assert d.value("grid") == "2×66×1  block 384×1×1"
    assert d.value("registers") == "168"
    assert d.value("shared mem") == "213.2 KB"
    assert d.value("occupancy") == "unknown (not reported for this kernel)"
    assert d.value("stream") == "GPU 0, stream 7"
    assert d.value("op") == "mlp_forward › aten::linear › aten::addmm"
    assert d.value("source") == "gpu_corpus.py(197): forward  [MLP_0/Linear_0]"
    assert d.value("step") == "mlp_forward #1  (call 1 of 3)"
    assert d.value("bytes") == "176.2 MB (gemm)"
    assert d.value("compute") == "718.8 TFLOP/s, 72.7% of H200 bf16 peak"
    assert d.value("launched").startswith("cuLaunchKernelEx on CPU t416")


def test_details_before_the_second_stage_say_pending(mlp):
    kernels, _ = mlp
    d = launch_details(kernels, None, 2)
    assert d.value("op") == "aten::addmm" and d.value("source") == "…"


def test_details_of_a_memset_and_of_a_runtime_call(mlp):
    kernels, browse = mlp
    d = launch_details(kernels, browse, 1)
    assert d.title == "Memset (Device)" and d.value("kind") == "memset" and d.value("bytes") == "4 B (memset)"
    launch_call = int(kernels.trace.gpu["launch_row"].iat[2])
    d = event_details(kernels, browse, launch_call)
    assert d.title == "cuLaunchKernelEx" and d.value("launched") == NVJET


def test_occupancy_zero_is_unknown():
    assert occupancy_text(0.0).startswith("unknown")
    assert occupancy_text(float("nan")).startswith("unknown")
    assert occupancy_text(75.0) == "75% (estimated achieved)"


def test_step_spans_cover_the_gpu_work_of_each_step():
    kernels = build_kernels(load_trace(shared_trace("gpt_train_eager")))
    starts, ends, labels = build_browse(kernels).step_spans
    assert labels == ("ProfilerStep#2", "ProfilerStep#3", "ProfilerStep#4")
    g = kernels.trace.gpu
    for i in range(3):
        part = g[g["iteration"] == i]
        assert ends[i] >= part["end"].max() - kernels.origin
        assert starts[i] <= part["ts"].min() - kernels.origin


def test_kernel_table_rows_are_kernel_stats(mlp):
    kernels, _ = mlp
    expected = kernel_stats(kernels.trace)
    assert kernels.stats[["key", "count", "total_ns"]].equals(expected[["key", "count", "total_ns"]])
    assert int(kernels.launch_kind[1]) == Kind.MEMSET


def test_each_stage_computes_what_each_part_computes_alone(monkeypatch):
    """build_browse makes the attribution and the timeline's lanes and icicles on a second thread, the
    memory table on this one; build_analyses each analysis in turn on this one: each result equals the one
    computed alone, on one thread, on a fresh load."""
    import threading

    from kerneltui.analysis.advice import advice
    from kerneltui.analysis.health import trace_health
    from kerneltui.analysis.memory import memory_dict, memory_table
    from kerneltui.analysis.overview import overview
    from kerneltui.analysis.traffic import compute_traffic
    from kerneltui.trace.summary import summarize
    from kerneltui.tui import model

    path = shared_trace("gpt_train_eager")
    alone = load_trace(path, cache=False)
    steps = overview(alone)
    traffic = compute_traffic(alone)
    threads = []

    def noted(name, real):
        monkeypatch.setattr(model, name, lambda *a: threads.append((name, threading.current_thread().name)) or real(*a))

    real_icicles = model.icicles
    for name in ("attribute", "icicles", "memory_table", "overview", "summarize", "trace_health", "_traffic",
                 "advice"):
        noted(name, getattr(model, name))
    kernels = build_kernels(load_trace(path, cache=False))
    browse = build_browse(kernels)
    assert browse.analyses is None
    analyses = model.build_analyses(kernels.trace)
    here = threading.current_thread().name
    stage_two = 3
    assert sorted(threads[:stage_two]) == sorted([("attribute", "kerneltui-browse"), ("icicles", "kerneltui-browse"),
                                                  ("memory_table", here)])
    assert threads[stage_two:] == [("overview", here), ("summarize", here), ("_traffic", here), ("advice", here),
                                   ("trace_health", here)]  # one at a time: the browser's peak memory
    origin = build_kernels(alone).origin
    lanes = model.lanes_from_trace(alone, origin, op_depths=0)
    assert [x.key for x in browse.lanes] == [x.key for x in lanes] == ["gpu:0:7", "cpu:1", "cpu:0"]
    assert all(np.array_equal(getattr(a, c), getattr(b, c)) for a, b in zip(browse.lanes, lanes)
               for c in ("starts", "ends", "ids", "kinds", "names"))
    icicle = real_icicles(alone, origin)
    assert {k: [(x.label, len(x)) for x in v] for k, v in browse.icicles.items()} == {
        k: [(x.label, len(x)) for x in v] for k, v in icicle.items()}
    assert sum(len(x) for v in icicle.values() for x in v) > 1000
    assert memory_dict(browse.memory) == memory_dict(memory_table(alone))
    assert len(browse.memory.devices) == 1  # the trace has [memory] events: the table is not empty
    assert analyses.summary.to_dict() == summarize(alone).to_dict()
    assert analyses.overview.to_dict() == steps.to_dict()
    assert analyses.traffic.equals(traffic.table)
    assert [f.to_dict() for f in analyses.findings] == [f.to_dict() for f in advice(alone, steps, traffic)]
    assert analyses.health.to_dict() == trace_health(alone).to_dict()


def test_the_launches_sources_are_made_once_on_the_second_thread_before_the_launch_context(monkeypatch):
    """trace.gpu_sources (source line and module per launch) is the second thread's first work, made
    once; the launch context, on this thread, reads it after, and the browser's sources are the same."""
    import threading

    from kerneltui.trace import model as trace_model
    from kerneltui.tui import model

    path = shared_trace("gpt_train_eager")
    alone = load_trace(path, cache=False).gpu_sources
    made, order = [], []
    real_sources = trace_model.sources
    monkeypatch.setattr(trace_model, "sources", lambda t, frame: made.append(threading.current_thread().name)
                        or real_sources(t, frame))
    real_context = model.launch_context
    monkeypatch.setattr(model, "launch_context", lambda t: order.append(("context", len(made))) or real_context(t))
    browse = build_browse(build_kernels(load_trace(path, cache=False)))
    assert made == ["kerneltui-browse"] and order == [("context", 1)]
    assert browse.sources.equals(alone) and browse.context.sources.count("") == 1
    assert browse.context.sources[1:] == ("gpu_corpus.py(268): one", "gpu_corpus.py(253): forward",
                                          "gpu_corpus.py(235): forward")  # the trace's source lines, placed
    assert len(browse.context.modules) > 20


def test_an_error_in_the_launches_sources_is_raised_by_build_browse(monkeypatch):
    from kerneltui.trace import model as trace_model

    def broken(trace, frame):
        raise RuntimeError("sources failed")

    monkeypatch.setattr(trace_model, "sources", broken)
    with pytest.raises(RuntimeError, match="sources failed"):
        build_browse(build_kernels(load_trace(shared_trace("gpt_train_eager"), cache=False)))


@pytest.mark.parametrize("part", ["attribute", "overview", "summarize", "trace_health"])
def test_an_error_in_a_stage_is_raised_by_the_stage(monkeypatch, part):
    """The attribution's (on stage 2's second thread) by build_browse, the analyses' by build_analyses."""
    from kerneltui.tui import model

    def broken(*args):
        raise RuntimeError(f"{part} failed")

    monkeypatch.setattr(model, part, broken)
    kernels = build_kernels(load_trace(shared_trace("mlp_bf16_eager"), cache=False))
    with pytest.raises(RuntimeError, match=f"{part} failed"):
        build_browse(kernels)
        model.build_analyses(kernels.trace)


def test_sources_failing_on_the_second_thread_alone_end_the_stage_with_its_error(monkeypatch):
    """The second thread's sources fail (say memory ran short while both threads allocated) and this
    one's, asked again, succeed: build_browse raises the error, and does not wait for good for an
    attribution the second thread never made."""
    import threading

    from kerneltui.trace import model as trace_model

    real = trace_model.sources

    def fails_on_the_second_thread(trace, frame):
        if threading.current_thread().name == "kerneltui-browse":
            raise MemoryError("sources failed")
        return real(trace, frame)

    monkeypatch.setattr(trace_model, "sources", fails_on_the_second_thread)
    kernels = build_kernels(load_trace(shared_trace("gpt_train_eager"), cache=False))
    raised = []

    def build():
        try:
            build_browse(kernels)
        except MemoryError as exc:
            raised.append(exc)

    worker = threading.Thread(target=build, daemon=True)
    worker.start()
    worker.join(30)
    assert not worker.is_alive() and [str(e) for e in raised] == ["sources failed"]


def test_the_attribution_is_made_once_on_the_second_thread_before_the_groupings_read_it(monkeypatch):
    """The groupings (this thread) wait for the attribution the second thread makes: made once, there,
    however long it takes."""
    import threading
    import time

    from kerneltui.analysis import attribution

    made = []
    real = attribution._attribute

    def slow(trace):
        made.append(threading.current_thread().name)
        time.sleep(0.3)  # this thread reaches the groupings long before
        return real(trace)

    monkeypatch.setattr(attribution, "_attribute", slow)
    browse = build_browse(build_kernels(load_trace(shared_trace("gpt_train_eager"), cache=False)))
    assert made == ["kerneltui-browse"]
    assert browse.modules is not None and len(browse.context.modules) > 20


def test_with_memory_short_each_stage_runs_one_part_at_a_time_on_the_loading_thread(monkeypatch):
    """Where the memory available would not hold two threads' scratch at once, each stage runs its parts
    on the caller's thread, one after the other (stage 2's other half first), to the same results."""
    import threading

    from kerneltui.analysis.memory import memory_dict
    from kerneltui.tui import model

    path = shared_trace("gpt_train_eager")
    kernels = build_kernels(load_trace(path, cache=False))
    both, both_analyses = build_browse(kernels), model.build_analyses(kernels.trace)
    trace = load_trace(path, cache=False)
    monkeypatch.setattr(model, "available_memory", lambda: model.BOTH_HALVES_PER_EVENT * len(trace.events) - 1)
    order = []

    def noted(name):
        real = getattr(model, name)
        monkeypatch.setattr(model, name, lambda *a: order.append((name, threading.current_thread().name))
                            or real(*a))

    for name in ("attribute", "launch_context", "memory_table", "overview", "summarize", "_traffic"):
        noted(name)
    kernels = build_kernels(trace)
    alone = build_browse(kernels)
    analyses = model.build_analyses(trace)
    here = threading.current_thread().name
    assert order == [("attribute", here), ("launch_context", here), ("memory_table", here), ("overview", here),
                     ("summarize", here), ("_traffic", here)]
    assert memory_dict(alone.memory) == memory_dict(both.memory)
    assert analyses.summary.to_dict() == both_analyses.summary.to_dict()
    assert [f.to_dict() for f in analyses.findings] == [f.to_dict() for f in both_analyses.findings]
    assert [x.key for x in alone.lanes] == [x.key for x in both.lanes]
