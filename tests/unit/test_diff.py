"""The facts `kerneltui diff` states, on the real traces (issue 4, "What it must get right")."""

from __future__ import annotations

import dataclasses
from functools import cache

import pytest

from kerneltui.trace import load_trace
from kerneltui.trace.diff import diff_traces
from kerneltui.trace.diff_match import fused_ops
from kerneltui.trace.schema import Device
from tests.conftest import PROJECT_TRACES, shared_trace


@cache
def trace(name: str):
    return load_trace(shared_trace(name))


@cache
def pair(workload: str):
    return diff_traces(trace(f"{workload}_eager"), trace(f"{workload}_compiled"))


ADD_RELU = ["add_relu_1M", "add_relu_100", "add_relu_10000000"]
# GPU ns per call, eager -> compiled (summary's means over the calls)
GPU_NS = {"add_relu_1M": (4256, 2528), "add_relu_100": (5663 / 3, 2175 / 3), "add_relu_10000000": (146911 / 3, 88928 / 3)}


@pytest.mark.parametrize("workload", ADD_RELU)
def test_add_relu_two_kernels_become_one(workload):
    d = pair(workload)
    assert (d.a.launches, d.b.launches) == (2, 1)
    assert (d.a.kernels, d.b.kernels) == (2, 1)
    assert d.facts[0] == "2 kernels → 1 per call"


@pytest.mark.parametrize("workload", ADD_RELU)
def test_add_relu_five_transfers_become_three(workload):
    d = pair(workload)
    assert (d.a.transfers, d.b.transfers) == (5.0, 3.0)
    assert d.facts[1] == "5 array-sized transfers → 3"
    assert d.ratios["transfers"] == pytest.approx(0.6)


@pytest.mark.parametrize("workload", ADD_RELU)
def test_add_relu_gpu_time_ratio(workload):
    d = pair(workload)
    a_ns, b_ns = GPU_NS[workload]
    assert (d.a.gpu_ns, d.b.gpu_ns) == (pytest.approx(a_ns), pytest.approx(b_ns))
    assert d.ratios["gpu_ns"] == pytest.approx(b_ns / a_ns)


@pytest.mark.parametrize("workload", ADD_RELU)
def test_fused_kernel_replaces_add_and_relu(workload):
    m = pair(workload).matches
    assert len(m) == 1
    row = m.iloc[0]
    assert row["kind"] == "fused" and row["confidence"] == "high"
    assert row["name"] == "triton_poi_fused_add_relu_0 ← add + relu"
    assert (row["a_count"], row["b_count"]) == (2, 1)
    assert (row["a_transfers"], row["b_transfers"]) == (5, 3)
    assert row["reason"] == "Inductor named it for add_relu; A's kernels were launched by add, relu"


def test_example_pair_headline():
    d = diff_traces(load_trace(PROJECT_TRACES / "add_relu_1M_eager.json.gz"),
                    load_trace(PROJECT_TRACES / "add_relu_1M_compiled.json.gz"))
    assert d.facts == (
        "2 kernels → 1 per call",
        "5 array-sized transfers → 3",
        "GPU time 4.26 → 2.53 µs per call",
        "triton_poi_fused_add_relu_0 ← add + relu: 2 launches → 1",
    )
    assert (d.a.bytes, d.b.bytes) == (20_000_000, 12_000_000)
    assert d.verdict.kind == "faster"
    assert d.verdict.text == "B is 1.68x faster on the GPU (2.53 vs 4.26 GPU µs/call)."
    # one call each, the first absorbs profiler start-up: CPU time is not compared
    assert d.notes == ("CPU time: only 1 call, and the first absorbs profiler start-up",)


def test_small_inputs_are_launch_bound():
    d = pair("add_relu_100")
    assert d.verdict.kind == "launch-bound"
    assert d.verdict.text == (
        "Launch-bound: B has less GPU time (0.72 vs 1.89 GPU µs/call) but more CPU time"
        " (190.02 vs 42.42 CPU µs/call); its GPU is idle most of the call waiting for launches,"
        " so end to end B is likely slower."
    )
    assert d.ratios["cpu_ns"] == pytest.approx(190017 / 42422)


def test_more_cpu_time_is_stated_even_when_not_launch_bound():
    d = pair("add_relu_10000000")
    assert d.verdict.kind == "mixed"
    assert "more CPU time" in d.verdict.text and "faster" not in d.verdict.text.split(":")[0]


def test_norm_chain_ten_kernels_become_one():
    d = pair("norm_chain")
    assert (d.a.launches, d.b.launches) == (10, 1)
    assert d.facts[0] == "10 kernels → 1 per call"
    m = d.matches
    assert m["kind"].tolist() == ["fused"]
    row = m.iloc[0]
    assert row["b_name"] == "triton_red_fused_add_div_mean_mul_sigmoid_std_sub_0"
    assert (row["a_count"], row["b_count"]) == (10, 1)
    assert len(row["a_keys"]) == 9  # ten launches of nine distinct kernels (add and sub share one)
    assert row["name"].endswith("← mul + sigmoid + add + sub + mean + std + div")
    assert d.ratios["gpu_ns"] == pytest.approx(46991 / 383294)


def test_mlp_seven_launches_match_by_region_and_op():
    d = pair("mlp_bf16")
    assert (d.a.launches, d.b.launches) == (7, 7)
    m = d.matches.set_index("b_name")
    assert set(d.matches["kind"]) == {"same", "fused"}
    assert m.loc["nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_bias_TNT", "kind"] == "same"
    assert m.loc["Memset (Device)", ["a_count", "b_count"]].tolist() == [2, 2]
    fused = {
        "triton_per_fused_native_layer_norm_0": "vectorized_layer_norm_kernel[bf16]",
        "triton_poi_fused_gelu_view_1": "vectorized_elementwise_kernel<GeluCUDAKernelImpl>[bf16]",
        "triton_poi_fused_add_view_2": "vectorized_elementwise_kernel<CUDAFunctor_add>[bf16]",
    }
    for b_name, a_name in fused.items():
        row = m.loc[b_name]
        assert (row["kind"], row["a_name"], row["confidence"]) == ("fused", a_name, "high")
        assert (row["a_count"], row["b_count"]) == (1, 1)
        assert "mlp_forward" in row["region"] and "in mlp_forward" in row["reason"]
    assert m.loc["triton_per_fused_native_layer_norm_0", "name"] == (
        "triton_per_fused_native_layer_norm_0 ← native_layer_norm"
    )
    assert d.ratios["gpu_ns"] == pytest.approx(494972.333 / 510483, rel=1e-6)


@pytest.mark.parametrize(
    "name", ["add_relu_1M_eager", "add_relu_100_compiled", "norm_chain_eager", "mlp_bf16_compiled", "gpt_train_eager"]
)
def test_trace_against_itself_is_unchanged(name):
    d = diff_traces(trace(name), trace(name))
    assert set(d.matches["kind"]) == {"same"}
    assert (d.matches["delta_ns"] == 0).all()
    assert (d.matches["a_count"] == d.matches["b_count"]).all()
    assert d.verdict.kind == "unchanged"
    assert all(v == 1.0 for k, v in d.ratios.items() if v == v)


def test_reversed_pair_is_slower_and_still_fused():
    d = diff_traces(trace("add_relu_1M_compiled"), trace("add_relu_1M_eager"))
    assert d.verdict.kind == "slower"
    row = d.matches.iloc[0]
    assert (row["kind"], row["a_count"], row["b_count"]) == ("fused", 1, 2)


def test_cuda_only_traces_still_diff_and_say_what_is_missing():
    d = diff_traces(trace("add_relu_1M_eager_cudaonly"), trace("add_relu_1M_compiled_cudaonly"))
    assert (d.a.launches, d.b.launches) == (2, 1)
    assert d.a.transfers != d.a.transfers  # unknown (NaN), not zero
    assert "A: no record_shapes: bytes moved and transfers unknown" in d.notes
    assert any(n.startswith("B: no CPU ops (CUDA activity only)") for n in d.notes)
    assert sorted(d.matches["kind"]) == ["only A", "only A", "only B"]


def test_different_step_counts_compare_per_call():
    d = diff_traces(trace("add_relu_1M_eager"), trace("add_relu_100_compiled"))
    assert (d.a.iterations, d.b.iterations) == (1, 3)
    assert (d.a.launches, d.b.launches) == (2, 1)
    assert "1 call (whole trace) vs 3 calls (repeated op sequence): compared per step/call" in d.notes
    assert d.matches.iloc[0]["kind"] == "fused"


def test_stack_and_shapes_mismatch_are_noted():
    d = diff_traces(trace("mlp_bf16_eager"), trace("norm_chain_compiled"))
    assert "B: no with_stack: nn.Module regions not used for matching" in d.notes
    # nothing in common but an add: the match is offered, with the doubt said
    fused = d.matches[d.matches["kind"] == "fused"].iloc[0]
    assert fused["confidence"] == "medium" and fused["reason"].endswith("no shared region")


def test_different_devices_and_torch_versions_are_noted():
    a, b = load_trace(shared_trace("add_relu_1M_eager")), load_trace(shared_trace("add_relu_1M_compiled"))
    a.meta = dataclasses.replace(a.meta, capture={"torch": "2.11.0"})
    b.meta = dataclasses.replace(b.meta, devices=(Device(0, "Mystery GPU"),), capture={"torch": "2.5.1"})
    d = diff_traces(a, b)
    assert d.notes[:3] == (
        "different devices (NVIDIA H200 vs Mystery GPU): times and bandwidth do not compare directly",
        "different torch versions (2.11.0 vs 2.5.1)",
        "B: device 'Mystery GPU' is not in the peak table: GB/s without % of peak",
    )
    assert d.b.peak_gbs != d.b.peak_gbs
    assert d.b.gbs == pytest.approx(12_000_000 / 2528)
    assert (d.a.launches, d.b.launches) == (2, 1)


def test_gpu_change_for_ci():
    assert pair("add_relu_1M").gpu_change == pytest.approx(2528 / 4256 - 1)


def test_to_dict_is_plain_data():
    doc = pair("mlp_bf16").to_dict()
    assert doc["a"]["launches"] == 7 and doc["verdict"]["kind"] == "mixed"
    assert {m["kind"] for m in doc["matches"]} == {"same", "fused"}
    assert "a_keys" not in doc["matches"][0]


@pytest.mark.parametrize(
    ("name", "ops"),
    [
        ("triton_poi_fused_add_relu_0", ("add", "relu")),
        ("triton_red_fused_add_div_mean_mul_sigmoid_std_sub_0", ("add", "div", "mean", "mul", "sigmoid", "std", "sub")),
        ("triton_per_fused_native_layer_norm_0", ("native", "layer", "norm")),
        ("triton_poi_fused__to_copy_5", ("to", "copy")),
        ("nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_bias_TNT", None),
    ],
)
def test_fused_op_names(name, ops):
    assert fused_ops(name) == ops


@pytest.mark.parametrize("gpu_side", ["A", "B"])
def test_a_side_without_gpu_work_is_said_not_divided_by(tmp_path, gpu_side):
    """A CPU-only capture (or an empty trace) against a GPU trace: a verdict, not a ZeroDivisionError."""
    empty = tmp_path / "empty.json"
    empty.write_text('{"traceEvents": []}')
    real = load_trace(PROJECT_TRACES / "add_relu_1M_eager.json.gz")
    a, b = (real, load_trace(empty)) if gpu_side == "A" else (load_trace(empty), real)
    d = diff_traces(a, b)
    other = "B" if gpu_side == "A" else "A"
    assert d.verdict.text == f"{other} ran no GPU work in its calls: no GPU time to compare."


def test_cuda_only_traces_have_unknown_cpu_time_not_zero():
    d = diff_traces(trace("add_relu_1M_eager_cudaonly"), trace("add_relu_1M_compiled_cudaonly"))
    assert d.a.cpu_ns != d.a.cpu_ns and d.b.cpu_ns != d.b.cpu_ns  # NaN: not recorded
    assert d.ratios["cpu_ns"] != d.ratios["cpu_ns"]


def test_unrelated_workloads_are_called_out():
    d = diff_traces(trace("mlp_bf16_eager"), trace("norm_chain_compiled"))
    assert d.notes[-1] == "no kernel, op or region in common, only guesses: A and B may be different workloads"
    for workload in ("add_relu_100", "norm_chain", "mlp_bf16"):
        assert not any("different workloads" in n for n in pair(workload).notes)
