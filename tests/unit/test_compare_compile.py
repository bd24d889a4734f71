"""What torch.compile did: regions, recompiles, graph breaks, CUDA-graph replays, launch calls."""

from __future__ import annotations

import pytest

from kerneltui.analysis.compare.compile_facts import CompileFacts, compile_facts
from kerneltui.trace import load_trace
from tests.conftest import external_trace, shared_trace
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
                             region_calls_per_step=2.0)


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
