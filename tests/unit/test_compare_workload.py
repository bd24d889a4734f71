"""Are two traces the same workload? Real eager/compiled pairs, foreign ranks, and made cases."""

from __future__ import annotations

import pytest

from kerneltui.analysis.compare.workload import compare_workloads, kernel_class, workload_signature
from kerneltui.trace import load_trace
from tests.conftest import external_trace, shared_trace
from tests.kineto_builder import TraceBuilder

PAIRS = ["add_relu_100", "add_relu_1M", "add_relu_10000000", "norm_chain", "mlp_bf16", "resnet18_train"]
BF16 = "c10::BFloat16"


@pytest.fixture(scope="module")
def traces():
    names = [f"{w}_{side}" for w in PAIRS for side in ("eager", "compiled")] + ["gpt_train_eager"]
    names += ["add_relu_1M_eager_cudaonly", "add_relu_1M_compiled_cudaonly"]
    return {n: load_trace(shared_trace(n)) for n in names}


@pytest.mark.parametrize("workload", PAIRS)
def test_every_real_eager_compiled_pair_is_comparable(traces, workload):
    c = compare_workloads(traces[f"{workload}_eager"], traces[f"{workload}_compiled"])
    assert (c.ok, c.reasons) == (True, ())


def test_every_trace_is_comparable_with_itself(traces):
    for name, trace in traces.items():
        if "cudaonly" not in name:
            assert compare_workloads(trace, trace).ok is True, name


@pytest.mark.parametrize("workload, shape", [
    ("add_relu_100", [100]), ("norm_chain", [4096, 4096]), ("mlp_bf16", [64, 256, 4096]),
    ("resnet18_train", [64, 64, 64, 64]),
])
def test_the_largest_tensor_ties_eager_to_compiled(traces, workload, shape):
    c = compare_workloads(traces[f"{workload}_eager"], traces[f"{workload}_compiled"])
    assert c.evidence["matched"] == str(shape)


def test_resnet_runs_the_same_library_kernels_both_sides(traces):
    # 83 cuDNN/cutlass launches per step on both sides (80 convolution, 3 GEMM: the fc layer)
    for side in ("eager", "compiled"):
        sig = workload_signature(traces[f"resnet18_train_{side}"])
        assert sig.library_kernels == {"conv": 80.0, "gemm": 3.0}
        assert sig.largest == ((64, 64, 64, 64),)


def test_different_sizes_are_not_comparable(traces):
    c = compare_workloads(traces["add_relu_100_eager"], traces["add_relu_10000000_compiled"])
    assert (c.ok, c.reasons) == (False, ("inputs differ: largest tensor [100] vs [10000000]",))


def test_different_models_are_not_comparable(traces):
    c = compare_workloads(traces["mlp_bf16_eager"], traces["resnet18_train_eager"])
    assert c.ok is False
    assert c.reasons == (
        "inputs differ: largest tensor [64, 256, 4096] vs [64, 64, 64, 64]",
        "library op inputs differ: aten::addmm [4096] x [16384, 1024] vs "
        "aten::convolution_backward [64, 64, 32, 32] x [64, 64, 32, 32]",
        "library kernels differ: conv 0 vs 80 per step/call",
    )


def test_no_shapes_on_either_side_cannot_tell(traces):
    c = compare_workloads(traces["add_relu_1M_eager_cudaonly"], traces["add_relu_1M_compiled_cudaonly"])
    assert c.ok is None
    assert c.reasons == ("cannot tell: no input shapes recorded in A and B (profile with record_shapes=True)",)


def test_two_ranks_of_one_job_are_comparable_though_their_flat_buffers_differ():
    # the largest 1-D tensors are per-rank flat buffers (7,722,480,160 vs 4,149,570,952 f16 elements)
    a = load_trace(external_trace("hta__trace_filter__sampled_rank-0.json.gz"))
    b = load_trace(external_trace("hta__trace_filter__sampled_rank-1.json.gz"))
    c = compare_workloads(a, b)
    assert (c.ok, c.reasons) == (True, ())
    assert c.evidence["matched"] == "[2048, 186588]"


@pytest.mark.parametrize("name, label", [
    ("nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_bias_TNT", "gemm"),
    ("sm90_xmma_fprop_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_tilesize128x128x64", "conv"),
    ("void cutlass__5x_cudnn::Kernel<cutlass_tensorop_bf16_s16816dgrad_optimized_bf16_128x128_32x3>", "conv"),
    ("cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x128x64", "attention"),
    ("void cudnn::fusion::compute_dot_do_o_specialized<true, 64>(void const*)", "attention"),
    ("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "collective"),
    ("Cijk_Alik_Bljk_HHS_BH_MT128x128x32", "gemm"),
    ("triton_tem_fused_addmm_relu_0", "gemm"),
    ("triton_poi_fused__native_batch_norm_legit_functional_convolution_backward_7", ""),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>", ""),
    ("Memset (Device)", ""),
])
def test_kernel_classes_by_name(name, label):
    assert kernel_class(name) == label


# -- made cases -------------------------------------------------------------------------------

def mlp_compiled(tmp_path, tokens, device="NVIDIA H200", dtype=BF16, name="compiled.json"):
    """The compiled MLP's ops as Inductor records them: fused LayerNorm, two extern addmm, GELU, residual add."""
    b = TraceBuilder(device=device)
    x, h = [64, tokens, 1024], [64, tokens, 4096]
    rows = 64 * tokens
    for _ in range(2):
        with b.step():
            b.op("triton_per_fused_native_layer_norm_0", [x, [1024], [1024], x, [], []],
                 [dtype] * 4 + ["Scalar"] * 2, kernels=[("triton_per_fused_native_layer_norm_0", 40.0)])
            b.op("aten::addmm", [[4096], [rows, 1024], [1024, 4096], [], [], [rows, 4096]],
                 [dtype] * 3 + ["Scalar"] * 2 + [dtype], kernels=[("nvjet_sm90_tst_bias_TNT", 180.0)])
            b.op("triton_poi_fused_gelu_view_1", [h, []], [dtype, "Scalar"],
                 kernels=[("triton_poi_fused_gelu_view_1", 90.0)])
            b.op("aten::addmm", [[1024], [rows, 4096], [4096, 1024], [], [], [rows, 1024]],
                 [dtype] * 3 + ["Scalar"] * 2 + [dtype], kernels=[("nvjet_sm90_tst_bias_TNT", 180.0)])
    return load_trace(b.write(tmp_path / name))


def mlp_cuda_graphs(tmp_path, batch, tokens):
    """reduce-overhead: the inputs copied into static buffers, then one graph replay per call."""
    b = TraceBuilder()
    x = [batch, tokens, 1024]
    for _ in range(2):
        with b.step():
            with b.region("Torch-Compiled Region: 0/0"):
                b.op("aten::_foreach_copy_", [[x], [x], []], ["TensorList", "TensorList", "Scalar"],
                     kernels=[("void at::native::multi_tensor_apply_kernel<copy>", 5.0)])
                b.graph_replay([("triton_per_fused_native_layer_norm_0", 8.0), ("nvjet_sm90_tst_bias_TNT", 30.0),
                                ("triton_poi_fused_gelu_view_1", 12.0), ("nvjet_sm90_tst_bias_TNT", 30.0),
                                ("triton_poi_fused_add_view_2", 6.0)])
    return load_trace(b.write(tmp_path / "graphs.json"))


def test_a_cuda_graph_run_at_another_size_is_not_comparable(tmp_path):
    c = compare_workloads(mlp_cuda_graphs(tmp_path, 8, 128), mlp_compiled(tmp_path, 256))
    assert c.ok is False
    assert c.reasons == ("inputs differ: largest tensor [8, 128, 1024] vs [64, 256, 4096]",)
    assert c.evidence["a"]["largest"] == ["[8, 128, 1024]"]  # a TensorList element: dtype not recorded


def test_a_cuda_graph_run_at_the_same_size_is_comparable(tmp_path):
    # the replay's only shapes are its inputs; the compiled run records them among its buffers
    c = compare_workloads(mlp_cuda_graphs(tmp_path, 64, 256), mlp_compiled(tmp_path, 256))
    assert (c.ok, c.reasons) == (True, ())
    assert c.evidence["matched"] == "[64, 256, 1024]"


def test_other_dtypes_are_not_comparable(tmp_path):
    c = compare_workloads(mlp_compiled(tmp_path, 256), mlp_compiled(tmp_path, 256, dtype="float", name="f32.json"))
    assert c.ok is False
    assert c.reasons == ("input dtypes differ: [64, 256, 4096] is bf16 vs f32",)


def test_other_devices_compare_as_measured(tmp_path):
    c = compare_workloads(mlp_compiled(tmp_path, 256),
                          mlp_compiled(tmp_path, 256, device="NVIDIA A100-SXM4-80GB", name="a100.json"))
    assert c.ok is True
    assert c.reasons == (
        "different devices (NVIDIA H200 vs NVIDIA A100-SXM4-80GB): times compare as measured, not per device",
    )


def test_a_batch_change_behind_a_larger_weight_shows_in_the_gemm_inputs(tmp_path):
    """A decode step: the vocabulary projection's weight is the largest tensor at any batch size."""
    def decode(batch, name):
        b = TraceBuilder()
        with b.step():
            b.op("aten::embedding", [[50000, 768], [batch]], [BF16, "long int"],
                 kernels=[("void at::native::indexSelectSmallIndex<bf16>", 2.0)])
            b.op("aten::mm", [[batch, 768], [768, 50000]], [BF16, BF16], kernels=[("nvjet_sm90_tst_NNT", 40.0)])
        return load_trace(b.write(tmp_path / name))

    c = compare_workloads(decode(8, "b8.json"), decode(16, "b16.json"))
    assert c.ok is False
    assert c.reasons == ("library op inputs differ: aten::mm [8, 768] x [768, 50000] vs "
                         "aten::mm [16, 768] x [768, 50000]",)
