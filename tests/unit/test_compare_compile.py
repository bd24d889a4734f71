"""What torch.compile did: regions, recompiles, graph breaks, CUDA-graph replays, launch calls."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pytest

from kerneltui.analysis.compare.compile_facts import CompileFacts, compile_facts
from kerneltui.analysis.compare.timing import timing
from kerneltui.trace import load_trace
from tests.conftest import DATA, external_trace, shared_trace
from tests.kineto_builder import TraceBuilder


@pytest.mark.parametrize("name, regions, launches", [
    ("add_relu_100_eager", (), 2.0),
    ("add_relu_100_compiled", ("0/0",), 1.0),
    ("norm_chain_compiled", ("1/0",), 1.0),
    ("mlp_bf16_eager", (), 7.0),  # 5 kernels + 2 memsets (addmm) per call
    ("mlp_bf16_compiled", ("2/0",), 7.0),
    ("resnet18_train_eager", (), 365.0),
    ("resnet18_train_compiled", ("0/0",), 321.0),
])
def test_real_traces(name, regions, launches):
    f = compile_facts(load_trace(shared_trace(name)))
    assert (f.regions, f.launch_calls_per_step) == (regions, launches)
    assert (f.recompiles, f.graph_breaks, f.graph_replays_per_step) == (0, 0, 0.0)
    assert f.region_calls_per_step == (1.0 if regions else 0.0)


def test_a_recompiled_frame_in_a_foreign_trace():
    f = compile_facts(load_trace(external_trace("tracelens__b200__eager_trace.json.gz")))
    assert (f.regions, f.frames, f.recompiles) == (("0/1",), 1, 1)


def test_a_hip_graph_replay_in_a_foreign_trace():
    # one hipGraphLaunch whose correlation 421 kernels share; 14 launch calls in all (9 memcpy, 4 kernels)
    f = compile_facts(load_trace(external_trace("tracelens__inference__vllm_decode_full__graph_execution.json.gz")))
    assert (f.graph_replays_per_step, f.kernels_per_replay, f.launch_calls_per_step) == (1.0, 421.0, 14.0)


def compiled_steps(tmp_path, between, regions=("0/0", "1/0"), count=2):
    """Steps calling two compiled regions, with ``between(builder)`` run in the gap."""
    b = TraceBuilder()
    for _ in range(count):
        with b.step():
            for i, region in enumerate(regions):
                if i:
                    between(b)
                b.op("TorchDynamo Cache Lookup")
                with b.region(f"Torch-Compiled Region: {region}"):
                    b.op(f"triton_poi_fused_{i}", kernels=[(f"triton_poi_fused_{i}", 3.0)])
    return compile_facts(load_trace(b.write(tmp_path / "t.json")))


def test_an_eager_kernel_between_two_regions_is_a_graph_break(tmp_path):
    f = compiled_steps(tmp_path, lambda b: b.op("aten::add", kernels=[("vectorized_elementwise_kernel", 2.0)]))
    assert f == CompileFacts(regions=("0/0", "1/0"), frames=2, recompiles=0, graph_breaks=1,
                             graph_replays_per_step=0.0, kernels_per_replay=0.0, launch_calls_per_step=3.0,
                             region_calls_per_step=2.0, graph_breaks_source="at least", graph_breaks_in_trace=1)


def test_an_eager_op_without_gpu_work_between_regions_is_a_graph_break_too(tmp_path):
    assert compiled_steps(tmp_path, lambda b: b.op("aten::_local_scalar_dense")).graph_breaks == 1


def test_regions_back_to_back_are_no_break_we_can_see(tmp_path):
    assert compiled_steps(tmp_path, lambda b: b.idle(5)).graph_breaks == 0


def test_recompiles_count_the_highest_compile_of_each_frame(tmp_path):
    f = compiled_steps(tmp_path, lambda b: b.idle(5), regions=("0/1",))
    assert (f.regions, f.frames, f.recompiles) == (("0/1",), 1, 1)
    f = compiled_steps(tmp_path, lambda b: b.idle(5), regions=("0/2", "1/0"))
    assert (f.regions, f.frames, f.recompiles) == (("0/2", "1/0"), 2, 2)


def test_cuda_graph_replays_cut_launch_calls_not_kernels(tmp_path):
    b = TraceBuilder()
    x = [8, 128, 1024]
    for _ in range(2):
        with b.step():
            with b.region("Torch-Compiled Region: 0/0"):
                b.op("aten::_foreach_copy_", [[x], [x], []], ["TensorList", "TensorList", "Scalar"],
                     kernels=[("multi_tensor_apply_kernel", 4.0)])
                b.graph_replay([(f"triton_poi_fused_{i}", 2.0) for i in range(5)])
    trace = load_trace(b.write(tmp_path / "graphs.json"))
    f = compile_facts(trace)
    assert (f.graph_replays_per_step, f.kernels_per_replay, f.launch_calls_per_step) == (1.0, 5.0, 2.0)
    assert len(trace.gpu) == 12  # 6 kernels per step still run
    assert f.compiled


# -- real torch 2.13 traces of a graph break and of a recompile inside a step (tests/data/compile) ------------

def compile_trace(name):
    return load_trace(DATA / "compile" / f"{name}.json.gz")


def test_a_graph_break_in_nested_regions_is_counted_and_placed():
    """torch 2.13 runs the code after a break inside the region that broke: one outermost region per step
    calling two compiled graphs. Dynamo counted 1 break (the `print` in forward, line 8)."""
    trace = compile_trace("graph_break_stack")
    f = compile_facts(trace)
    assert (f.regions, f.region_calls_per_step) == (("0/0", "1/0"), 1.0)  # 1/0 nests inside 0/0: one outermost
    assert (f.graph_breaks, f.graph_breaks_source) == (1, "at least")
    assert f.graph_break_at == ("gb2.py:8 in forward",)  # from Dynamo's resume function in the Python frames
    assert f.recompiles_in_profile == 0


def test_dynamos_own_count_wins_where_the_capture_recorded_it(tmp_path):
    doc = json.loads(gzip.decompress((DATA / "compile" / "graph_break_stack.json.gz").read_bytes()))
    doc["kerneltui"] = {"capture": {"graph_breaks": 3}}
    (tmp_path / "t.json").write_text(json.dumps(doc))
    f = compile_facts(load_trace(tmp_path / "t.json"))
    assert (f.graph_breaks, f.graph_breaks_source) == (3, "dynamo")


def test_a_region_without_a_graph_around_another_broke_at_its_start(tmp_path):
    """Compiled code calls no Python but its graph, the call it broke at and its resume function: a region
    inside another is a break of the outer frame, graph or not (tests/data/cpu's CNN step: train_step's
    0/0 breaks at `opt.zero_grad()`, its first line, and holds 1/0; Dynamo counts it). Counted once per
    frame compile, however many steps run it."""
    b = TraceBuilder()
    for _ in range(2):
        with b.step():
            with b.region("Torch-Compiled Region: 0/0"):  # calls no graph of its own
                with b.region("Torch-Compiled Region: 1/0"):
                    with b.region("## Call CompiledFxGraph fabc ##", cat="user_annotation"):
                        b.op("triton_poi_fused_0", kernels=[("triton_poi_fused_0", 3.0)])
    assert compile_facts(load_trace(b.write(tmp_path / "t.json"))).graph_breaks == 1


def test_a_recompile_inside_a_profiled_step_is_counted_and_said_to_be_inside():
    trace = compile_trace("recompile_in_step")
    f = compile_facts(trace)
    # ProfilerStep#2 ran another batch size: each frame recompiled (0/1, 1/1), both inside the step
    assert (f.regions, f.recompiles, f.recompiles_in_profile) == (("0/0", "0/1", "1/0", "1/1"), 2, 2)
    t = timing(trace)
    assert [s.compiling for s in t.steps] == [False, False, True]
    assert t.compiles_in_steps == 2 and t.steps[2].wall_ns == 283723758  # 277 ms of it compiling
    # left out of the CPU and dispatch medians: those are the two settled steps'
    assert t.wall_ns == pytest.approx(np.median([s.wall_ns for s in t.steps[:2]]))
    assert compile_facts(load_trace(shared_trace("resnet18_train_compiled"))).recompiles_in_profile == 0
