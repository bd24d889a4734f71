"""Trace health (analysis/health): every trace the tests hold gets a stated report, and real traces
damaged one way each are counted exactly, nothing else flagged."""

from __future__ import annotations

import copy
import gzip
import json

import numpy as np
import pytest

from kerneltui.analysis.compare.diff import diff_traces
from kerneltui.analysis.health import trace_health
from kerneltui.trace import load_trace
from tests.conftest import DATA
from tests.kineto_builder import TraceBuilder

GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")

# Every trace in tests/data: (cause, events) of its report, and whether it is ok.
EXPECTED = {
    "traces/add_relu_100_eager.json.gz": (True, []),
    "traces/add_relu_100_compiled.json.gz": (True, []),
    "traces/add_relu_10000000_eager.json.gz": (True, []),
    "traces/add_relu_10000000_compiled.json.gz": (True, []),
    "traces/add_relu_1M_eager.json.gz": (True, []),
    "traces/add_relu_1M_compiled.json.gz": (True, []),
    "traces/add_relu_1M_eager_cudaonly.json.gz": (True, []),
    "traces/add_relu_1M_compiled_cudaonly.json.gz": (True, []),
    "traces/gpt_train_eager.json.gz": (True, []),
    "traces/mlp_bf16_eager.json.gz": (True, []),
    "traces/mlp_bf16_compiled.json.gz": (True, []),
    "traces/norm_chain_eager.json.gz": (True, []),
    "traces/norm_chain_compiled.json.gz": (True, []),
    # cuDNN's wgrad kernels (cudaLaunchKernelExC) start ≤ 1.25 µs before the one they follow ends: PDL;
    # two cudaMemsetAsync calls fill zero bytes
    "traces/resnet18_train_eager.json.gz": (True, [("overlap_pdl", 8), ("empty_launch", 2)]),
    "traces/resnet18_train_compiled.json.gz": (True, [("overlap_pdl", 4), ("empty_launch", 2)]),
    "compile/graph_break_stack.json.gz": (True, []),
    "compile/recompile_in_step.json.gz": (True, [("compile_in_step", 1)]),
    # `kerneltui capture` on an H200 (tests/data/capture_h200): every GPU event has its launch call
    "capture_h200/train_step_batch64_width128_eager.json.gz": (True, []),
    "capture_h200/train_step_batch64_width128_compiled.json.gz": (True, []),
    "capture_h200/train_step_batch64_width128_compiled-reduce-overhead.json.gz": (True, []),
    "capture_h200/gpt_step_batch8_context64_width128_layers2_heads4_vocab512_eager.json.gz": (True, []),
    "capture_h200/gpt_step_batch8_context64_width128_layers2_heads4_vocab512_compiled.json.gz": (True, []),
    # CPU captures (tests/data/cpu): no GPU work, nothing to find
    "cpu/add_relu_n1000000_eager.json.gz": (True, []),
    "cpu/add_relu_n1000000_compiled.json.gz": (True, []),
    "cpu/item_print_batch32_width64_eager.json.gz": (True, []),
    "cpu/item_print_batch32_width64_compiled.json.gz": (True, []),
    "cpu/cnn_sgd_batch8_eager.json.gz": (True, []),
    "cpu/cnn_sgd_batch8_compiled.json.gz": (True, []),
    "external/hta__amd_trace__mi250_minitoy_train_ROCm6_2_kineto.json.gz": (True, []),
    "external/hta__nccl_parser_config__nccl_data.json.gz": (True, [("empty_launch", 3)]),
    "external/hta__trace_filter__sampled_rank-0.json.gz": (True, []),
    "external/hta__trace_filter__sampled_rank-1.json.gz": (True, []),
    # torch 1.8: the first 733 GPU events were launched before the profiler started; its times are whole µs,
    # so 292 fills shorter than 1 µs read as 0
    "external/kineto__tb_resnet50_nw0_worker0_2021early.pt.trace.json.gz":
        (False, [("below_resolution", 292), ("no_launch", 733)]),
    "external/nonpytorch__tf_trace_viewer_demo_trace.json": (True, []),
    # B200: cuBLAS and TRT-LLM GEMMs chained by programmatic dependent launch, up to 3.7 µs (3.6%) early
    "external/tracelens__b200__eager_trace.json.gz": (True, [("overlap_pdl", 74)]),
    "external/tracelens__inference__vllm_decode_full__graph_execution.json.gz": (True, []),
    "synthetic/cupti_range_profiler.json": (True, [("range_profiled", 4)]),
    "synthetic/indent2_deviceprops_after.json": (True, []),
    "synthetic/nan_ts.json": (False, [("bad_duration", 1)]),
}


def test_every_trace_in_the_tests_is_listed():
    held = {str(p.relative_to(DATA)) for p in DATA.rglob("*.json*") if not p.name.endswith(".truth.json")
            and p.parent.name != "provenance"}  # Inductor's generated code, saved for the provenance parser
    not_traces = {"synthetic/memory_timeline.json", "synthetic/memory_timeline_raw.json"}
    assert held - not_traces == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_health_report_of_each_trace(name):
    ok, causes = EXPECTED[name]
    h = trace_health(load_trace(DATA / name))
    assert (h.ok, [(c.cause, c.events) for c in h.causes]) == (ok, causes)


def test_a_clean_trace_says_healthy_in_one_word():
    h = trace_health(load_trace(DATA / "traces/gpt_train_eager.json.gz"))
    assert h.line() == "healthy"
    assert h.to_dict() == {"ok": True, "line": "healthy", "gpu_events": 945, "launches": 945, "causes": []}


def test_explained_causes_are_listed_and_keep_ok():
    h = trace_health(load_trace(DATA / "traces/resnet18_train_eager.json.gz"))
    assert h.line() == "healthy (8 PDL overlaps; 2 empty copy/fill calls)"
    pdl = h.cause("overlap_pdl")
    assert (pdl.overlap_ns, pdl.gpu_ns, pdl.changes_figures) == (1248, 39745, False)
    assert pdl.affects == "8 overlaps of up to 1.25µs explained by programmatic dependent launch"


def test_kernels_launched_before_the_profiler_are_placed_at_the_start():
    h = trace_health(load_trace(DATA / "external/kineto__tb_resnet50_nw0_worker0_2021early.pt.trace.json.gz"))
    lost = h.cause("no_launch")
    assert (lost.gpu_ns, lost.steps, round(lost.share, 4)) == (35_170_000, ("ProfilerStep#5",), 0.0732)
    assert lost.affects == ("7.3% of GPU events (733) have no launch call (all at the start: launched before the "
                            "profiler started): their op and source line are unknown")
    assert h.step_causes == {0: ("no_launch",)}


# -- real traces, damaged one way each ------------------------------------------------------------

@pytest.fixture(scope="module")
def gpt_doc() -> dict:
    with gzip.open(DATA / "traces/gpt_train_eager.json.gz") as f:
        return json.load(f)


def _load(tmp_path, doc: dict, name: str):
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return load_trace(path, cache=False)


def _gpu(events: list[dict]) -> list[dict]:
    return sorted((e for e in events if e.get("cat") in GPU_CATS), key=lambda e: e["ts"])


def _causes(trace) -> list[tuple[str, int]]:
    return [(c.cause, c.events) for c in trace_health(trace).causes]


def test_dropping_a_fifth_of_the_runtime_events(tmp_path, gpt_doc):
    doc = copy.deepcopy(gpt_doc)
    runtime = [i for i, e in enumerate(doc["traceEvents"]) if e.get("cat") == "cuda_runtime"]
    dropped = set(runtime[::5])
    lost = {doc["traceEvents"][i]["args"]["correlation"] for i in dropped}
    doc["traceEvents"] = [e for i, e in enumerate(doc["traceEvents"]) if i not in dropped]
    counted = sum(1 for e in doc["traceEvents"] if e.get("cat") in GPU_CATS and e["args"]["correlation"] in lost)
    assert counted == 149
    t = _load(tmp_path, doc, "dropped.json")
    assert _causes(t) == [("no_launch", 149)]
    h = trace_health(t)
    assert not h.ok and h.abstain_reason("B") == "B lost 15.8% of its kernel launches (GPU events with no launch call)"


def test_dropping_gpu_events_at_the_start(tmp_path, gpt_doc):
    doc = copy.deepcopy(gpt_doc)
    first = {id(e) for e in _gpu(doc["traceEvents"])[:50]}
    doc["traceEvents"] = [e for e in doc["traceEvents"] if id(e) not in first]
    t = _load(tmp_path, doc, "start.json")
    assert _causes(t) == [("no_kernel", 50)]
    h = trace_health(t)
    # the figure that changes is the GPU time of the step that launched them
    assert h.cause("no_kernel").steps == ("ProfilerStep#2",) and h.step_causes == {0: ("no_kernel",)}
    assert h.abstain_reason("A") == "A lost 5.3% of its GPU events (launches with no GPU event)"


def test_a_kernel_shifted_onto_its_neighbour(tmp_path, gpt_doc):
    t = load_trace(DATA / "traces/gpt_train_eager.json.gz")
    g = t.gpu
    middle = g["ts"].to_numpy()[:-1] + g["dur"].to_numpy()[:-1] // 2
    # the first kernel launched (by cudaLaunchKernel: no PDL) before the middle of the one ahead of it:
    # moved there, it overlaps it
    plain = g["launch"].astype(str).to_numpy()[1:] == "cudaLaunchKernel"
    i = int(np.flatnonzero((g["launch_ts"].to_numpy()[1:] < middle) & plain)[0])
    first, second = (int(g["correlation"].iat[j]) for j in (i, i + 1))
    doc = copy.deepcopy(gpt_doc)
    by_corr = {e["args"]["correlation"]: e for e in doc["traceEvents"] if e.get("cat") in GPU_CATS}
    by_corr[second]["ts"] = by_corr[first]["ts"] + by_corr[first]["dur"] / 2
    shifted = _load(tmp_path, doc, "shift.json")
    h = trace_health(shifted)
    assert _causes(shifted) == [("overlap", 1)]
    moved = int(np.flatnonzero(shifted.gpu["correlation"].to_numpy() == second)[0])
    assert shifted.gpu["correlation"].iat[int(h.overlapped[moved])] == first
    # it starts half way through the first: half of the first's duration before the first ends
    assert h.overlap_ns[moved] == pytest.approx(by_corr[first]["dur"] * 1000 / 2, abs=1)
    # the details pane asks the other way: which events overlap the first one
    overlapped = int(np.flatnonzero(shifted.gpu["correlation"].to_numpy() == first)[0])
    assert h.overlapped_by(overlapped).tolist() == [moved]
    assert h.overlapped_by(moved).tolist() == []


def test_overlapping_rows_are_found_per_overlapped_row_in_ascending_order():
    from kerneltui.analysis.health import Health

    # rows 1, 2 and 5 overlap row 0; row 4 overlaps row 2 (asked again and again, as the browser's moves do)
    overlapped = np.array([-1, 0, 0, -1, 2, 0])
    h = Health(causes=(), gpu_events=6, launches=6, gpu_cause=np.zeros(6, np.int8), overlapped=overlapped,
               overlap_ns=np.zeros(6, np.int64), lost_launches=np.empty(0, np.int64))
    for _ in range(2):
        assert [h.overlapped_by(row).tolist() for row in range(6)] == [[1, 2, 5], [], [4], [], [], []]
    # slices of one index made once: read-only, so no caller can change what the next one is told
    assert h.overlapped_by(0).base is h.overlapped_by(2).base and not h.overlapped_by(0).flags.writeable
    with pytest.raises(ValueError):
        h.overlapped_by(0)[:] = 4
    sound = Health(causes=(), gpu_events=2, launches=2, gpu_cause=np.zeros(2, np.int8),
                   overlapped=np.full(2, -1), overlap_ns=np.zeros(2, np.int64), lost_launches=np.empty(0, np.int64))
    assert sound.overlapped_by(0).tolist() == []


def test_a_duplicated_event(tmp_path, gpt_doc):
    doc = copy.deepcopy(gpt_doc)
    doc["traceEvents"].append(copy.deepcopy(_gpu(doc["traceEvents"])[100]))
    t = _load(tmp_path, doc, "dup.json")
    assert _causes(t) == [("duplicate", 1)]


@pytest.mark.parametrize("dur", [-5.0, 1e12, 0.0])
def test_an_impossible_duration(tmp_path, gpt_doc, dur):
    doc = copy.deepcopy(gpt_doc)
    _gpu(doc["traceEvents"])[100]["dur"] = dur
    t = _load(tmp_path, doc, "dur.json")
    assert _causes(t) == [("bad_duration", 1)]
    assert trace_health(t).cause("bad_duration").gpu_ns is None  # unknown, not 0 and not 11 days


def test_a_missing_duration(tmp_path, gpt_doc):
    doc = copy.deepcopy(gpt_doc)
    del _gpu(doc["traceEvents"])[100]["dur"]
    assert _causes(_load(tmp_path, doc, "nodur.json")) == [("bad_duration", 1)]


def test_two_kernels_sharing_a_correlation(tmp_path, gpt_doc):
    doc = copy.deepcopy(gpt_doc)
    kernels = [e for e in _gpu(doc["traceEvents"]) if e["cat"] == "kernel"]
    kernels[200]["args"]["correlation"] = kernels[199]["args"]["correlation"]
    # the later one is linked to the other's launch, and its own launch has lost its kernel
    assert _causes(_load(tmp_path, doc, "shared.json")) == [("shared_correlation", 1), ("no_kernel", 1)]


def test_a_gpu_event_before_its_launch(tmp_path, gpt_doc):
    doc = copy.deepcopy(gpt_doc)
    k = _gpu(doc["traceEvents"])[0]
    launch = next(e for e in doc["traceEvents"]
                  if e.get("cat") == "cuda_runtime" and e["args"].get("correlation") == k["args"]["correlation"])
    k["ts"] = launch["ts"] - 5.0
    assert _causes(_load(tmp_path, doc, "clock.json")) == [("before_launch", 1)]


def test_a_gpu_event_past_the_profilers_window(tmp_path, gpt_doc):
    doc = copy.deepcopy(gpt_doc)
    span = next(e for e in doc["traceEvents"] if e.get("cat") == "Trace")
    last = _gpu(doc["traceEvents"])[-1]
    last["ts"] = span["ts"] + span["dur"] - last["dur"] / 2
    assert _causes(_load(tmp_path, doc, "outside.json")) == [("outside_window", 1)]


def test_a_file_cut_off_or_with_unreadable_events(tmp_path):
    raw = gzip.open(DATA / "traces/gpt_train_eager.json.gz").read()
    cut = tmp_path / "cut.json"
    cut.write_bytes(raw[: len(raw) * 2 // 3])
    t = load_trace(cut, cache=False)
    h = trace_health(t)
    assert _causes(t) == [("lost_in_file", 0)] and not h.ok
    assert h.cause("lost_in_file").affects == (
        f"the file is cut off after its {len(t.events):,} events: whatever came after (GPU work too) is lost")
    damaged = tmp_path / "corrupt.json"
    damaged.write_bytes(raw.replace(b'"ph": "X", "cat": "kernel"', b'"ph": "X", "cat": "kernel", ]]', 1))
    t = load_trace(damaged, cache=False)
    # the unreadable event was a kernel: its launch has lost it too
    assert _causes(t) == [("no_kernel", 1), ("lost_in_file", 1)]
    assert trace_health(t).cause("lost_in_file").affects == "1 event could not be read, and is counted nowhere"


# -- made traces: what the corpus lacks -----------------------------------------------------------

def test_launches_captured_into_a_cuda_graph_are_not_lost(tmp_path):
    b = TraceBuilder()
    with b.step():
        b.op("aten::add", kernels=[("add_kernel", 2.0)])
        b.events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaStreamBeginCapture", "pid": 1, "tid": 1,
                         "ts": b.t, "dur": 1, "args": {"correlation": 9001, "cbid": 1}})
        b.t += 2
        for i in range(3):
            b.events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
                             "ts": b.t, "dur": 1, "args": {"correlation": 9002 + i, "cbid": 211}})
            b.t += 2
        b.events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaStreamEndCapture", "pid": 1, "tid": 1,
                         "ts": b.t, "dur": 1, "args": {"correlation": 9010, "cbid": 1}})
        b.t += 2
        b.events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
                         "ts": b.t, "dur": 1, "args": {"correlation": 9011, "cbid": 211}})
        b.t += 2
    t = load_trace(b.write(tmp_path / "capture.json"), cache=False)
    assert _causes(t) == [("no_kernel", 1), ("captured_launch", 3)]


def test_pdl_explains_a_head_start_not_a_kernel_inside_another(tmp_path):
    b = TraceBuilder()
    with b.step():
        b.op("aten::mm", kernels=[("gemm_a", 100.0)], launch="cuLaunchKernelEx")
        b.op("aten::mm", kernels=[("gemm_b", 50.0)], launch="cuLaunchKernelEx")
        b.op("aten::mm", kernels=[("gemm_c", 50.0)], launch="cuLaunchKernelEx")
    kernels = {e["name"]: e for e in b.events if e.get("cat") == "kernel"}
    kernels["gemm_b"]["ts"] -= 4.0  # 4 µs before gemm_a ends: 4% of it, and it ends after it: PDL
    kernels["gemm_c"]["ts"] -= 45.0  # inside gemm_b: it cannot have waited for gemm_b's end
    kernels["gemm_c"]["dur"] = 2.0
    t = load_trace(b.write(tmp_path / "pdl.json"), cache=False)
    h = trace_health(t)
    assert _causes(t) == [("overlap", 1), ("overlap_pdl", 1)]
    assert (h.cause("overlap_pdl").overlap_ns, h.cause("overlap").overlap_ns) == (4000, 41000)


def test_a_graph_replay_overlapping_itself_is_explained(tmp_path):
    b = TraceBuilder()
    with b.step():
        b.graph_replay([("branch_a", 10.0), ("branch_b", 10.0)])
    next(e for e in b.events if e["name"] == "branch_b")["ts"] -= 5  # beside the first, on the graph's stream
    t = load_trace(b.write(tmp_path / "graph.json"), cache=False)
    assert _causes(t) == [("overlap_graph", 1)]


def test_a_step_holding_the_profilers_start_up(tmp_path):
    b = TraceBuilder()
    for _ in range(2):
        with b.step():
            b.op("aten::add", kernels=[("add_kernel", 2.0)])
    b.events.append({"ph": "X", "cat": "overhead", "name": "Activity Buffer Request", "pid": -1, "tid": 0,
                     "ts": 101.5, "dur": 1.0, "args": {}})
    t = load_trace(b.write(tmp_path / "startup.json"), cache=False)
    h = trace_health(t)
    assert (h.ok, _causes(t)) == (True, [("startup_in_step", 1)])
    assert h.cause("startup_in_step").steps == ("ProfilerStep#1",)


# -- what it changes downstream --------------------------------------------------------------------

def test_a_damaged_side_makes_the_diff_abstain(tmp_path, gpt_doc):
    doc = copy.deepcopy(gpt_doc)
    runtime = [i for i, e in enumerate(doc["traceEvents"]) if e.get("cat") == "cuda_runtime"]
    dropped = set(runtime[::5])
    doc["traceEvents"] = [e for i, e in enumerate(doc["traceEvents"]) if i not in dropped]
    d = diff_traces(load_trace(DATA / "traces/gpt_train_eager.json.gz"), _load(tmp_path, doc, "b.json"))
    assert d.comparable.ok is False
    assert d.comparable.reasons[0] == "B lost 15.8% of its kernel launches (GPU events with no launch call)"
    assert d.verdict.text == "not comparable: B lost 15.8% of its kernel launches (GPU events with no launch call)."
    assert (d.a.health["ok"], d.b.health["ok"]) == (True, False)


def test_a_little_damage_marks_the_rows_that_hold_it(tmp_path, gpt_doc):
    doc = copy.deepcopy(gpt_doc)
    launches = [i for i, e in enumerate(doc["traceEvents"]) if e.get("name") == "cudaLaunchKernel"]
    dropped = set(launches[100:103])
    doc["traceEvents"] = [e for i, e in enumerate(doc["traceEvents"]) if i not in dropped]
    b = _load(tmp_path, doc, "b.json")
    d = diff_traces(load_trace(DATA / "traces/gpt_train_eager.json.gz"), b)
    assert d.comparable.ok is True  # 0.3% of B's GPU events: below the 1% it abstains at
    marked = d.matches[d.matches["health"] != ""]
    unlinked = set(np.flatnonzero(b.gpu["launch_row"].to_numpy() < 0).tolist())
    assert len(unlinked) == 3
    assert set(marked["health"]) == {"B: no_launch"}
    # exactly the rows holding the three unlinked kernels
    assert {r for rows in marked["b_rows"] for r in rows} >= unlinked
    assert all(set(rows) & unlinked for rows in marked["b_rows"])
    assert any(n.startswith("B's trace is damaged (0.3% of GPU events (3) have no launch call") for n in d.notes)


def test_two_threads_asking_for_a_traces_health_at_once_share_one_build(monkeypatch):
    """`summary --format json` builds the health on its background thread while its own thread may ask."""
    import threading
    import time

    from kerneltui.analysis import health

    trace = load_trace(DATA / "traces" / "add_relu_1M_eager.json.gz", cache=False)
    builds = []
    started = threading.Event()
    real = health._HEALTH._build

    def slow(t):
        builds.append(threading.current_thread().name)
        started.set()
        time.sleep(0.3)  # the second thread asks meanwhile (were it to ask later, it would still find one build)
        return real(t)

    monkeypatch.setattr(health._HEALTH, "_build", slow)
    found = {}
    threads = [threading.Thread(target=lambda n=n: found.setdefault(n, trace_health(trace)), name=n) for n in "ab"]
    threads[0].start()
    assert started.wait(10)  # "a" builds: "b" starts only now
    threads[1].start()
    for t in threads:
        t.join()
    assert builds == ["a"]
    assert found["a"] is found["b"] and found["a"].gpu_events == 2  # add and relu


def test_launches_among_gpu_correlations_is_isin():
    from kerneltui.analysis.health.launches import _among

    rng = np.random.default_rng(3)
    for n, m, span in ((1000, 900, 5000), (50, 0, 10), (0, 20, 10), (2000, 3000, 2**62)):
        queries, values = rng.integers(-span, span, n), rng.integers(-span, span, m)
        queries[: n // 2] = values[rng.integers(0, m, n // 2)] if m else queries[: n // 2]
        assert np.array_equal(_among(queries, values), np.isin(queries, values))
