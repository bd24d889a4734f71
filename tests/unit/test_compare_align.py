"""What became what: kernel sequences aligned on library work, on the real pairs and on made cases."""

from __future__ import annotations

import pytest

from kerneltui.analysis.compare.matches import matched_kernels
from kerneltui.trace import load_trace
from kerneltui.analysis.traffic import compute_traffic
from tests.conftest import shared_trace
from tests.kineto_builder import TraceBuilder


def matched(a, b):
    return matched_kernels(a, b, compute_traffic(a), compute_traffic(b))[0]


def pair(workload):
    return load_trace(shared_trace(f"{workload}_eager")), load_trace(shared_trace(f"{workload}_compiled"))


@pytest.fixture(scope="module")
def resnet():
    a, b = pair("resnet18_train")
    return a, b, matched(a, b)


def test_resnet_every_microsecond_is_in_a_row(resnet):
    _, _, m = resnet
    assert m["a_ns"].sum() / 1e3 == pytest.approx(2851.95, abs=0.01)  # per step, both steps
    assert m["b_ns"].sum() / 1e3 == pytest.approx(2261.41, abs=0.01)
    assert m["a_count"].sum() == 365 and m["b_count"].sum() == 321


def test_resnet_at_most_5_percent_of_b_unmatched(resnet):
    _, _, m = resnet
    only_b = m.loc[m["kind"] == "only B", "b_ns"].sum() / m["b_ns"].sum()
    assert only_b < 0.001  # 1.7 µs of 2261: Inductor's one new sum kernel


def test_resnet_no_fused_row_claims_a_saving_it_cannot_have(resnet):
    _, _, m = resnet
    fused = m[(m["kind"] == "fused") & (m["a_ns"] > 50_000)]
    assert len(fused) and (fused["a_ns"] / fused["b_ns"]).max() < 20


def test_resnet_num_batches_tracked_adds_20_to_20(resnet):
    _, _, m = resnet
    row = m[m["b_keys"] == ("triton_poi_fused_add_copy__39",)].iloc[0]
    assert (row["kind"], row["a_count"], row["b_count"]) == ("replaced", 20, 20)
    assert row["a_name"] == "vectorized_elementwise_kernel<CUDAFunctorOnSelf_add>[i64]"
    assert row["reason"] == "the same 0-d tensor updates (long int,long int,Scalar)"


def test_resnet_convolutions_are_the_same_on_both_sides(resnet):
    _, _, m = resnet
    convs = m[m["reason"].str.startswith("same conv")]
    assert set(convs["kind"]) == {"same"}
    assert (convs["a_count"] == convs["b_count"]).all()
    # every cuDNN kernel of both sides is in those rows (convolutions forward and backward)
    assert convs["a_count"].sum() == convs["b_count"].sum()


def test_resnet_casts_stay_casts(resnet):
    _, _, m = resnet
    casts = m[m["kind"] == "cast"]
    assert casts["a_count"].sum() == 47 and casts["b_count"].sum() == 46  # 44 Triton _to_copy + 2 eager


def test_the_article_example_is_one_fused_row():
    a, b = load_trace(shared_trace("add_relu_1M_eager")), load_trace(shared_trace("add_relu_1M_compiled"))
    m = matched(a, b)
    assert len(m) == 1
    row = m.iloc[0]
    assert (row["kind"], row["a_count"], row["b_count"]) == ("fused", 2, 1)
    assert row["name"] == "add + clamp_min → triton_poi_fused_add_relu_0"
    assert row["a_name"] == ("vectorized_elementwise_kernel<CUDAFunctor_add>[f32] + "
                             "vectorized_elementwise_kernel<launch_clamp_scalar>[f32]")


def test_mlp_gemms_are_anchors_and_the_rest_fuses_between_them():
    m = matched(*pair("mlp_bf16"))
    # the largest change first: the layer norm gains 22.99 µs, the GELU loses 6.28
    assert m["kind"].tolist() == ["fused", "fused", "same", "fused"]
    assert m["name"].tolist() == [
        "native_layer_norm → triton_per_fused_native_layer_norm_0",
        "gelu → triton_poi_fused_gelu_view_1",
        "addmm: nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_bias_TNT ×2 + Memset (Device) ×2",
        "add → triton_poi_fused_add_view_2",
    ]


@pytest.mark.parametrize("name", ["gpt_train_eager", "resnet18_train_compiled", "mlp_bf16_eager"])
def test_a_trace_against_itself_is_all_same(name):
    t = load_trace(shared_trace(name))
    m = matched(t, t)
    assert set(m["kind"]) == {"same"}
    assert (m["delta_ns"] == 0).all()


def test_a_template_gemm_stands_in_for_the_gemm_and_its_epilogue(tmp_path):
    eager, compiled = TraceBuilder(), TraceBuilder()
    for _ in range(2):
        with eager.step():
            eager.op("aten::addmm", [[4096], [64, 1024], [1024, 4096]],
                     kernels=[("Memset (Device)", 1.0), ("nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_bias_TNT", 180.0)])
            eager.op("aten::relu", [[64, 4096]], kernels=[("void at::native::vectorized_elementwise_kernel<relu>()", 30.0)])
            eager.op("aten::pow", [[64, 4096], []], ["float", "Scalar"],
                     kernels=[("void at::native::vectorized_elementwise_kernel<pow_tensor_scalar>()", 28.7)])
        with compiled.step():
            with compiled.region("Torch-Compiled Region: 0/0"):
                compiled.op("triton_tem_fused_addmm_pow_relu_t_0", [[64, 1024], [1024, 4096], [4096], [64, 4096]],
                            kernels=[("triton_tem_fused_addmm_pow_relu_t_0", 206.2)])
    a, b = load_trace(eager.write(tmp_path / "a.json")), load_trace(compiled.write(tmp_path / "b.json"))
    m = matched(a, b)
    assert len(m) == 1
    row = m.iloc[0]
    assert (row["kind"], row["a_count"], row["b_count"]) == ("fused", 4, 1)
    assert row["a_ns"] / 1e3 == pytest.approx(239.7) and row["b_ns"] / 1e3 == pytest.approx(206.2)
    assert row["reason"].startswith("gemm (aten::addmm [64, 1024] [1024, 4096]): an autotuned Triton template")


def test_graph_replays_align_by_kernel_class(tmp_path):
    compiled, graphed = TraceBuilder(), TraceBuilder()
    for _ in range(3):
        with compiled.step():
            compiled.op("aten::mm", [[512, 1024], [1024, 1024]], kernels=[("nvjet_sm90_tst_128x128", 20.0)])
            compiled.op("triton_poi_fused_gelu_0", [[512, 1024]], kernels=[("triton_poi_fused_gelu_0", 5.0)])
        with graphed.step():
            graphed.op("aten::_foreach_copy_", [[[512, 1024]]], ["TensorList"], kernels=[("multi_tensor_apply_kernel<copy>", 1.0)])
            graphed.graph_replay([("nvjet_sm90_tst_128x128", 19.0), ("triton_poi_fused_gelu_0", 5.0)])
    m = matched(load_trace(compiled.write(tmp_path / "a.json")), load_trace(graphed.write(tmp_path / "b.json")))
    by_kind = {r.kind: (r.a_count, r.b_count, r.name) for r in m.itertuples()}
    assert by_kind["same"][:2] == (1, 1)  # the GEMM: one launch each, matched by position and class
    assert m.loc[m["kind"] == "same", "a_ns"].sum() == pytest.approx(20_000 + 5_000)
    assert by_kind["only B"] == (0, 1, "multi_tensor_apply_kernel<copy>")  # the input copy into static buffers
