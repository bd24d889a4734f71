"""The facts `kerneltui diff` states on the real traces: comparable, verdict, phases, what became what."""

from __future__ import annotations

import dataclasses
from functools import cache

import pytest

from kerneltui.analysis.compare.diff import diff_traces
from kerneltui.trace import load_trace
from kerneltui.trace.schema import Device
from tests.conftest import PROJECT_TRACES, shared_trace


@cache
def trace(name: str):
    return load_trace(shared_trace(name))


@cache
def pair(workload: str):
    return diff_traces(trace(f"{workload}_eager"), trace(f"{workload}_compiled"))


ADD_RELU = ["add_relu_1M", "add_relu_100", "add_relu_10000000"]


@pytest.mark.parametrize("workload", ADD_RELU)
def test_add_relu_two_kernels_become_one_and_five_transfers_three(workload):
    d = pair(workload)
    assert (d.a.launches, d.b.launches) == (2, 1)
    assert (d.a.transfers, d.b.transfers) == (5, 3)
    [row] = d.matches.itertuples()
    assert (row.kind, row.confidence, row.a_count, row.b_count) == ("fused", "high", 2, 1)
    assert row.name == "add + clamp_min → triton_poi_fused_add_relu_0"
    # the relu is shown as the clamp kernel it ran
    assert row.a_name == ("vectorized_elementwise_kernel<CUDAFunctor_add>[f32] + "
                          "vectorized_elementwise_kernel<launch_clamp_scalar>[f32]")
    assert d.comparable.ok is True


def test_example_pair_facts_and_verdict():
    d = diff_traces(load_trace(PROJECT_TRACES / "add_relu_1M_eager.json.gz"),
                    load_trace(PROJECT_TRACES / "add_relu_1M_compiled.json.gz"))
    assert d.facts[:3] == ("2 kernels → 1 per call", "5 array-sized transfers → 3", "GPU time 4.26 → 2.53 µs per call")
    assert (d.a.bytes, d.b.bytes) == (20_000_000, 12_000_000)
    assert d.verdict.kind == "faster" and d.verdict.quantity == "gpu"
    assert d.verdict.text.startswith("B is 1.68x faster (GPU time per call 4.26 → 2.53 µs).")
    assert d.ratios["cpu_ns"] != d.ratios["cpu_ns"]  # one call each, all start-up: not compared


def test_small_inputs_are_cpu_bound_and_b_is_slower_end_to_end():
    d = pair("add_relu_100")
    assert (d.a.bound, d.b.bound) == ("cpu", "cpu")
    assert d.verdict.kind == "slower" and d.verdict.quantity == "end to end"
    assert "B is slower end to end, at least 1.20x" in d.verdict.text


def test_1e7_is_undecided_not_a_wrong_story():
    """Timed with CUDA events compiled is faster (52.9 → 37.6 µs), while the profiled CPU says slower: unknown."""
    d = pair("add_relu_10000000")
    assert d.verdict.kind == "undecided" and d.verdict.ratio is None
    assert "this profile cannot tell which is faster end to end" in d.verdict.text


def test_norm_chain_ten_kernels_become_one_and_b_is_faster_end_to_end():
    d = pair("norm_chain")
    assert (d.a.launches, d.b.launches) == (10, 1)
    [row] = d.matches.itertuples()
    assert row.b_name == "triton_red_fused_add_div_mean_mul_sigmoid_std_sub_0"
    assert (row.a_count, row.b_count) == (10, 1) and len(row.a_keys) == 9  # add and sub share one kernel
    assert d.verdict.kind == "faster" and d.verdict.text.startswith("B is faster end to end, at least 1.47x")


def test_mlp_gemms_same_and_elementwise_fused():
    d = pair("mlp_bf16")
    assert (d.a.launches, d.b.launches) == (7, 7)
    m = d.matches.set_index("b_name")
    gemm = m.loc["Memset (Device) + nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_bias_TNT"]  # in launch order
    assert (gemm["kind"], gemm["a_count"], gemm["b_count"]) == ("same", 4, 4)
    for b_name, a_name in {
        "triton_per_fused_native_layer_norm_0": "vectorized_layer_norm_kernel[bf16]",
        "triton_poi_fused_gelu_view_1": "vectorized_elementwise_kernel<GeluCUDAKernelImpl>[bf16]",
        "triton_poi_fused_add_view_2": "vectorized_elementwise_kernel<CUDAFunctor_add>[bf16]",
    }.items():
        row = m.loc[b_name]
        assert (row["kind"], row["a_name"], row["a_count"], row["b_count"]) == ("fused", a_name, 1, 1)
    assert (d.a.bound, d.b.bound) == ("gpu", "gpu")
    assert d.verdict.text == "B is 1.03x faster (GPU time per call 510.5 → 495.0 µs)."


def test_resnet_phases_per_step():
    d = pair("resnet18_train")
    phases = {p.phase: (p.a_launches, p.b_launches, round(p.a_ns / 1e3, 2), round(p.b_ns / 1e3, 2)) for p in d.phases}
    assert phases == {
        "forward": (181, 142, 1276.12, 907.31),
        "backward": (181, 176, 1471.56, 1245.69),
        "optimizer": (3, 3, 104.27, 108.42),
    }
    # the loss and the optimizer run outside the compiled region
    outside = {p.phase: p.b_outside_launches for p in d.phases}
    assert outside == {"forward": 4, "backward": 4, "optimizer": 3}
    assert d.b.compile["regions"] == ["0/0"] and d.b.compile["graph_breaks"] == 0
    assert d.attribution["b_unmatched_share"] < 0.05
    assert d.verdict.kind == "undecided"


@pytest.mark.parametrize(
    "name", ["add_relu_1M_eager", "add_relu_100_compiled", "norm_chain_eager", "mlp_bf16_compiled", "gpt_train_eager",
             "resnet18_train_compiled"]
)
def test_trace_against_itself_is_unchanged(name):
    d = diff_traces(trace(name), trace(name))
    assert set(d.matches["kind"]) == {"same"}
    assert (d.matches["delta_ns"] == 0).all()
    assert (d.matches["a_count"] == d.matches["b_count"]).all()
    assert d.verdict.kind == "unchanged"
    assert d.comparable.ok is not False
    assert all(v == 1.0 for v in d.ratios.values() if v == v)


def test_reversed_pair_is_slower_and_still_one_row():
    d = diff_traces(trace("add_relu_1M_compiled"), trace("add_relu_1M_eager"))
    assert d.verdict.kind == "slower"
    row = d.matches.iloc[0]
    assert (row["kind"], row["a_count"], row["b_count"]) == ("fused", 1, 2)


def test_cuda_only_traces_still_diff_and_say_what_is_missing():
    d = diff_traces(trace("add_relu_1M_eager_cudaonly"), trace("add_relu_1M_compiled_cudaonly"))
    assert (d.a.launches, d.b.launches) == (2, 1)
    assert d.a.transfers != d.a.transfers  # unknown (NaN), not zero
    assert d.comparable.ok is None  # no shapes: cannot tell
    assert "A: no record_shapes: bytes moved and transfers unknown" in d.notes
    assert any(n.startswith("B: no CPU ops (CUDA activity only)") for n in d.notes)
    assert d.a.cpu_ns != d.a.cpu_ns and d.ratios["cpu_ns"] != d.ratios["cpu_ns"]
    assert "CPU time was not recorded" in d.verdict.text


def test_different_inputs_give_no_speed_up():
    d = diff_traces(trace("add_relu_1M_eager"), trace("add_relu_100_compiled"))
    assert d.comparable.ok is False
    assert d.verdict.kind == "not comparable" and d.verdict.ratio is None
    assert d.verdict.text == "not comparable: inputs differ: largest input [1000000] vs [100]."
    assert "1 call (whole trace) vs 3 calls (repeated op sequence): kernels aligned over the first 1 call of each" in d.notes


def test_unrelated_workloads_are_not_comparable():
    d = diff_traces(trace("mlp_bf16_eager"), trace("norm_chain_compiled"))
    assert d.comparable.reasons == ("inputs differ: largest input [64, 256, 4096] vs [4096, 4096]",
                                    "library calls differ: B runs 0 GEMMs per call, A 2")
    for workload in ("add_relu_100", "norm_chain", "mlp_bf16", "resnet18_train"):
        assert pair(workload).comparable.ok is True


def test_different_devices_and_torch_versions_are_noted():
    a, b = load_trace(shared_trace("add_relu_1M_eager")), load_trace(shared_trace("add_relu_1M_compiled"))
    a.meta = dataclasses.replace(a.meta, capture={"torch": "2.11.0"})
    b.meta = dataclasses.replace(b.meta, devices=(Device(0, "Mystery GPU"),), capture={"torch": "2.5.1"})
    d = diff_traces(a, b)
    assert d.notes[:3] == (
        "different devices (NVIDIA H200 vs Mystery GPU): times compare as measured, not per device",
        "different torch versions (2.11.0 vs 2.5.1)",
        "B: device 'Mystery GPU' is not in the peak table: GB/s without % of peak",
    )
    assert d.comparable.ok is True and d.verdict.text.endswith("different devices (NVIDIA H200 vs Mystery GPU).")
    assert d.b.gbs == pytest.approx(12_000_000 / 2528)


def test_gpu_change_for_ci():
    assert pair("add_relu_1M").gpu_change == pytest.approx(2528 / 4256 - 1)


def test_to_dict_is_the_documented_schema():
    doc = pair("resnet18_train").to_dict()
    assert doc["comparable"] == {"ok": True, "reasons": []}
    for side in ("a", "b"):
        assert {"wall_ns", "gpu_ns", "cpu_ns", "bound", "compile"} <= set(doc[side])
        assert {"regions", "recompiles", "graph_breaks"} <= set(doc[side]["compile"])
    assert [p["phase"] for p in doc["phases"]] == ["forward", "backward", "optimizer"]
    assert set(doc["attribution"]) == {"a_unmatched_share", "b_unmatched_share"}
    match = doc["matches"][0]
    assert {"kind", "a_kernels", "b_kernels", "a_count", "b_count", "a_ns", "b_ns", "delta_ns", "a_flops",
            "b_flops", "confidence", "reason"} <= set(match)
    assert "a_rows" not in match and "a_keys" not in match


@pytest.mark.parametrize("gpu_side", ["A", "B"])
def test_a_side_without_gpu_work_is_said_not_divided_by(tmp_path, gpu_side):
    """A CPU-only capture (or an empty trace) against a GPU trace: a verdict, not a ZeroDivisionError."""
    empty = tmp_path / "empty.json"
    empty.write_text('{"traceEvents": []}')
    real = load_trace(PROJECT_TRACES / "add_relu_1M_eager.json.gz")
    a, b = (real, load_trace(empty)) if gpu_side == "A" else (load_trace(empty), real)
    d = diff_traces(a, b)
    other = "B" if gpu_side == "A" else "A"
    assert d.verdict.kind == "no GPU work" and d.verdict.text == f"no GPU work in {other}: nothing to compare on the GPU"
