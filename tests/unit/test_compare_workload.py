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
    ("resnet18_train", [64, 3, 128, 128]),
])
def test_the_largest_input_ties_eager_to_compiled(traces, workload, shape):
    # ResNet: the batch itself, an argument of conv1 in eager and of the compiled graph's call
    c = compare_workloads(traces[f"{workload}_eager"], traces[f"{workload}_compiled"])
    assert c.evidence["matched"] == str(shape)


def test_resnet_runs_the_same_library_calls_both_sides(traces):
    # per step: 20 convolutions forward, 20 backward (80 cuDNN/cutlass kernels), 3 GEMMs (the fc layer's
    # forward addmm and its two gradients)
    calls = []
    for side in ("eager", "compiled"):
        sig = workload_signature(traces[f"resnet18_train_{side}"])
        assert sig.library_counts == {"conv": 40.0, "gemm": 3.0}
        calls.append(sig.library_calls)
    assert calls[0] == calls[1]
    # fc forward [64, 512] @ [512, 100]; grad input [64, 100] @ [100, 512]; grad weight [100, 64] @ [64, 512]
    assert [calls[0][k] for k in (("gemm", 1, 512, 64, 100), ("gemm", 1, 100, 64, 512), ("gemm", 1, 64, 100, 512))] \
        == [1.0, 1.0, 1.0]
    assert calls[0][("conv", (64, 3, 128, 128), (64, 3, 7, 7))] == 1.0


def test_different_sizes_are_not_comparable(traces):
    c = compare_workloads(traces["add_relu_100_eager"], traces["add_relu_10000000_compiled"])
    assert (c.ok, c.reasons) == (False, ("inputs differ: largest input [100] vs [10000000]",))


def test_different_models_are_not_comparable(traces):
    c = compare_workloads(traces["mlp_bf16_eager"], traces["resnet18_train_eager"])
    assert c.ok is False
    assert c.reasons == (
        "inputs differ: largest input [64, 256, 4096] vs [64, 64, 64, 64]",
        "library calls differ: B runs 40 convolutions per step/call, A 0",
        "library calls differ: B runs 3 GEMMs per step/call, A 2",
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
    assert c.reasons == ("inputs differ: largest input [8, 128, 1024] vs [64, 256, 4096]",)
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
    assert c.reasons == ("library calls differ: A runs GEMM 8×768×50000 that B does not",)


def layers(tmp_path, depth, name, batch=64, graphs=False, template=False):
    """``depth`` blocks of Linear(1024, 1024) + GELU on [batch, 1024]: eager, compiled with an extern
    addmm, with a max-autotune template in its place, or replayed from a CUDA graph."""
    b = TraceBuilder()
    x, w = [batch, 1024], [1024, 1024]
    for _ in range(2):
        with b.step():
            if graphs:
                with b.region("Torch-Compiled Region: 0/0"):
                    b.op("aten::_foreach_copy_", [[x], [x], []], ["TensorList", "TensorList", "Scalar"],
                         kernels=[("void at::native::multi_tensor_apply_kernel<copy>", 2.0)])
                    b.graph_replay([k for _ in range(depth) for k in (("nvjet_sm90_tst_bias_TNT", 30.0),
                                                                        ("triton_poi_fused_gelu_0", 6.0))])
                continue
            b.op("aten::embedding", [[8192, 1024], [batch]], [BF16, "long int"],
                 kernels=[("void at::native::indexSelectLargeIndex<bf16>", 2.0)])
            for _ in range(depth):
                if template:  # bias, A, B, output: the GEMM and its GELU in one kernel
                    b.op("triton_tem_fused_addmm_gelu_0", [[1024], x, [1024, 1024], x], [BF16] * 4,
                         kernels=[("triton_tem_fused_addmm_gelu_0", 33.0)])
                    continue
                b.op("aten::addmm", [[1024], x, w, [], []], [BF16, BF16, BF16, "Scalar", "Scalar"],
                     kernels=[("nvjet_sm90_tst_bias_TNT", 30.0)])
                b.op("aten::gelu", [x, []], [BF16, "Scalar"],
                     kernels=[("void at::native::vectorized_elementwise_kernel<GeluCUDAKernelImpl>", 6.0)])
    return load_trace(b.write(tmp_path / name))


def test_twice_the_layers_is_not_comparable(tmp_path):
    c = compare_workloads(layers(tmp_path, 8, "a.json"), layers(tmp_path, 4, "b.json"))
    assert c.ok is False  # the same inputs, but not the same model
    assert c.evidence["matched"] == "[8192, 1024]"  # the embedding table: the largest input, at any depth
    assert c.reasons == ("library calls differ: B runs 4 GEMMs per step, A 8",)


def test_another_batch_is_not_comparable(tmp_path):
    c = compare_workloads(layers(tmp_path, 4, "a.json"), layers(tmp_path, 4, "b.json", batch=32))
    assert c.ok is False
    # the embedding table is the largest input at either batch; the GEMMs' shapes say the rest
    assert c.reasons == ("library calls differ: A runs GEMM 64×1024×1024 that B does not",)
    # without the table, the inputs themselves differ
    c = compare_workloads(layers(tmp_path, 4, "g.json", graphs=True), layers(tmp_path, 4, "h.json", graphs=True,
                                                                            batch=32))
    assert c.reasons == ("inputs differ: largest input [64, 1024] vs [32, 1024]",)


def test_the_same_model_stays_comparable_as_template_or_graph(tmp_path):
    eager = layers(tmp_path, 4, "eager.json")
    template = layers(tmp_path, 4, "template.json", template=True)
    graphs = layers(tmp_path, 4, "graphs.json", graphs=True)
    # a template counts as the GEMM it replaced, by its operands' shapes
    assert workload_signature(template).library_calls == {("gemm", 1, 1024, 64, 1024): 4.0}
    assert workload_signature(graphs).library_calls == {("gemm", None): 4.0}  # replays: kernels, no shapes
    for other in (template, graphs):
        c = compare_workloads(eager, other)
        assert (c.ok, c.reasons) == (True, ()), c.reasons
    assert compare_workloads(layers(tmp_path, 8, "a8.json"), graphs).reasons == (
        "library calls differ: B runs 4 GEMMs per step, A 8",)
