"""analysis/advice_gemm.py and advice_casts.py: ``gemm_below_peak`` and ``unfused_casts`` fire with their evidence and stay quiet without.

Made traces (tests/kineto_builder.py) hold each case with figures that can be worked out by hand: a
bf16 aten::mm of 1000x1000x1000 is 2e9 FLOP, so 20 µs is 100 TFLOP/s, 10.1 % of the H200's 989.
The shipped H200 traces in tests/data/traces show what the rules say on real steps.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest

from kerneltui.analysis.advice import advice
from kerneltui.analysis.advice_gemm import FP32_ACTION, MORE_WORK_ACTION, PAD_ACTION
from kerneltui.analysis.overview import overview
from kerneltui.trace import load_trace
from tests.kineto_builder import TraceBuilder

ROOT = Path(__file__).resolve().parents[2]
TRACES = ROOT / "tests/data/traces"
BF, F32 = "c10::BFloat16", "float"
GEMM = "nvjet_sm90_tst_128x128_64x4_h_bz_NNT"
RELU = "void at::native::vectorized_elementwise_kernel<4, relu>(int)"
CAST = ("void at::native::vectorized_elementwise_kernel<4, at::native::bfloat16_copy_kernel_cuda(at::TensorIteratorBase&)"
        "::{lambda(float)#1}, std::array<char*, 2ul> >(int, at::native::bfloat16_copy_kernel_cuda(at::TensorIteratorBase&)"
        "::{lambda(float)#1}, std::array<char*, 2ul>)")
UPCAST = ("void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)"
          "::{lambda()#3}::operator()() const::{lambda()#12}::operator()() const::{lambda(float)#1}>(int)")


def rules(path: Path) -> dict:
    t = load_trace(str(path), cache=False)
    return {f.rule: f for f in advice(t, overview(t))}


@cache
def shipped(name: str) -> dict:
    return rules(TRACES / name)


def gemm_trace(tmp_path: Path, dims, types, gemm_us: float, other_us: float = 80.0, device: str = "NVIDIA H200",
               steps: int = 2) -> Path:
    """Per step: one aten::mm (kernel GEMM, gemm_us) and one relu (other_us)."""
    b = TraceBuilder(device=device)
    for _ in range(steps):
        with b.step():
            b.op("aten::mm", dims, types, kernels=[(GEMM, gemm_us)])
            b.op("aten::relu", [[1000, 1000]], [BF], kernels=[(RELU, other_us)])
    return b.write(tmp_path / "gemm.json")


SQUARE = [[1000, 1000], [1000, 1000]]  # 2 * 1000^3 = 2e9 FLOP


# gemm_below_peak: fires

def test_gemm_below_peak_fires_on_a_slow_aligned_bf16_gemm(tmp_path):
    f = rules(gemm_trace(tmp_path, SQUARE, [BF, BF], 20.0))["gemm_below_peak"]
    assert f.evidence == ("1 kernel of GEMM/convolution ops below half of peak holds 20.0% of kernel time (40.0µs),"
                          " together bf16 100 TFLOP/s, 10.1% of the H200's bf16 peak 989 TFLOP/s"
                          " (a rate is its ops': their FLOPs over all their kernels' time);"
                          f" {GEMM}: its ops at 100.0 TFLOP/s (10.1% of peak), 20.0% of kernel time, 2 launches")
    assert f.action == MORE_WORK_ACTION  # no cause in the record: more work per GEMM, or autotuning
    assert f.action.endswith("torch.compile(model, mode='max-autotune')")
    assert f.confidence == "medium"


def test_gemm_below_peak_on_fp32_says_tf32(tmp_path):
    # 2e9 FLOP in 100 µs = 20 TFLOP/s: 29.9 % of the H200's plain FP32 67 TFLOP/s (no TF32 in use)
    f = rules(gemm_trace(tmp_path, SQUARE, [F32, F32], 100.0))["gemm_below_peak"]
    assert f.evidence == ("1 kernel of GEMM/convolution ops below half of peak holds 55.6% of kernel time (200.0µs),"
                          " together f32 20 TFLOP/s, 29.9% of the H200's f32 peak 67 TFLOP/s"
                          " (a rate is its ops': their FLOPs over all their kernels' time);"
                          f" {GEMM}: its ops at 20.0 TFLOP/s (29.9% of peak), 55.6% of kernel time, 2 launches;"
                          " fp32 in 100.0% of that time")
    assert f.action == FP32_ACTION
    assert "torch.set_float32_matmul_precision('high')" in f.action
    assert f.confidence == "high"


def test_gemm_below_peak_on_misaligned_dims_says_pad(tmp_path):
    # [1000, 1001] @ [1001, 1000]: K = 1001 is no multiple of 8; 2 * 1000 * 1000 * 1001 FLOP in 20 µs
    f = rules(gemm_trace(tmp_path, [[1000, 1001], [1001, 1000]], [BF, BF], 20.0))["gemm_below_peak"]
    assert f.evidence == ("1 kernel of GEMM/convolution ops below half of peak holds 20.0% of kernel time (40.0µs),"
                          " together bf16 100 TFLOP/s, 10.1% of the H200's bf16 peak 989 TFLOP/s"
                          " (a rate is its ops': their FLOPs over all their kernels' time);"
                          f" {GEMM}: its ops at 100.1 TFLOP/s (10.1% of peak), 20.0% of kernel time, 2 launches;"
                          " misaligned dims in 100.0% of that time, most in aten::mm [1000, 1001] and [1001, 1000]"
                          " (last two dims not multiples of 8)")
    assert f.action == PAD_ACTION
    assert f.confidence == "high"


def test_gemm_below_peak_on_resnet18_eager():
    """Its convolutions run at 2-33 % of bf16 peak (cuDNN, batch 64 at 128x128); the stem's 3 channels misalign."""
    f = shipped("resnet18_train_eager.json.gz")["gemm_below_peak"]
    assert f.evidence.startswith(
        "33 kernels of GEMM/convolution ops below half of peak hold 45.7% of kernel time (2.58ms), together bf16"
        " 172 TFLOP/s, 17.4% of the H200's bf16 peak 989 TFLOP/s"
        " (a rate is its ops': their FLOPs over all their kernels' time);"
        " cutlass_tensorop_bf16_s16816fprop_optimized_bf16_128x128_32x5_nhwc_align8: its ops at 19.5 TFLOP/s"
        " (2.0% of peak),"
        " 8.5% of kernel time, 2 launches;")
    assert f.evidence.endswith(
        "; 30 more; misaligned dims in 28.2% of that time, most in aten::cudnn_convolution C=3 in input"
        " [64, 3, 128, 128] (channels not multiples of 8)")
    assert f.action == f"{MORE_WORK_ACTION}; {PAD_ACTION}"  # the stem is under half of the slow time
    assert f.confidence == "medium"
    assert "gemm_below_peak" in shipped("resnet18_train_compiled.json.gz")  # Inductor left the cuDNN convs as they were


# gemm_below_peak: quiet

def test_gemm_below_peak_stays_quiet_at_half_of_peak_or_below_the_share(tmp_path):
    assert "gemm_below_peak" not in rules(gemm_trace(tmp_path, SQUARE, [BF, BF], 4.0))  # 500 TFLOP/s, 50.6 %
    assert "gemm_below_peak" not in rules(gemm_trace(tmp_path, SQUARE, [BF, BF], 20.0, other_us=200.0))  # 9.1 %


def test_gemm_below_peak_does_not_know_without_device_shapes_or_peak(tmp_path):
    assert rules(gemm_trace(tmp_path, SQUARE, [BF, BF], 20.0, device="Some GPU")) == {}  # not in the peak table
    assert rules(gemm_trace(tmp_path, None, None, 20.0)) == {}  # no record_shapes: no FLOPs
    # the V100 table row has no bf16 figure: a bf16 GEMM there is not rated
    assert rules(gemm_trace(tmp_path, SQUARE, [BF, BF], 20.0, device="Tesla V100-SXM2-16GB")) == {}
    # ... while its fp16 one is (125 TFLOP/s peak: 100 TFLOP/s is 80 %, above half: quiet too)
    assert rules(gemm_trace(tmp_path, SQUARE, ["c10::Half"] * 2, 20.0, device="Tesla V100-SXM2-16GB")) == {}
    assert "gemm_below_peak" in rules(gemm_trace(tmp_path, SQUARE, ["c10::Half"] * 2, 40.0,
                                                 device="Tesla V100-SXM2-16GB"))  # 50 TFLOP/s, 40 %


def test_gemm_below_peak_stays_quiet_on_the_gpt_step():
    """Its nvjet GEMMs run at 580-790 TFLOP/s (about 60-80 % of bf16 peak); the one below half holds 1.2 %."""
    assert "gemm_below_peak" not in shipped("gpt_train_eager.json.gz")
    assert "gemm_below_peak" not in shipped("mlp_bf16_eager.json.gz")


# unfused_casts

def cast_trace(tmp_path: Path, casts: int, cast_us: float, other_us: float, compiled: bool = False,
               src: str = F32, dst: str = BF, steps: int = 2) -> Path:
    """Per step: ``casts`` casts aten::to > _to_copy > copy_(dst <- src) of cast_us each, then other_us of relu."""
    b = TraceBuilder()
    for _ in range(steps):
        with b.step():
            for _ in range(casts):
                with b.region("aten::to"), b.region("aten::_to_copy"):
                    b.op("aten::copy_", [[1000, 1000], [1000, 1000], []], [dst, src, "Scalar"],
                         kernels=[(CAST if dst == BF else UPCAST, cast_us)])
            if compiled:
                b.op("triton_poi_fused_relu_0", [[1000, 1000]], [BF], kernels=[("triton_poi_fused_relu_0", other_us)])
            else:
                b.op("aten::relu", [[1000, 1000]], [BF], kernels=[(RELU, other_us)])
    return b.write(tmp_path / "casts.json")


def test_unfused_casts_fire_by_share_of_kernel_time(tmp_path):
    f = rules(cast_trace(tmp_path, 2, 10.0, 60.0))["unfused_casts"]
    assert f.evidence == ("4 cast kernels (f32→bf16 x4, 40.0µs) launched by aten::copy_ with a dtype change:"
                          " 25.0% of kernel time (40.0µs), 2 per step;"
                          " vectorized_elementwise_kernel<bfloat16_copy_kernel_cuda>[f32]")
    assert f.action.startswith("fuse the casts into the ops that consume them: model = torch.compile(model);"
                               " or keep the weights in bf16 (model.to(torch.bfloat16)")
    assert f.confidence == "high"  # >= 10 %


def test_unfused_casts_fire_by_count_per_step(tmp_path):
    f = rules(cast_trace(tmp_path, 20, 1.0, 1000.0))["unfused_casts"]
    assert f.evidence.startswith("40 cast kernels (f32→bf16 x40, 40.0µs) launched by aten::copy_ with a dtype change:"
                                 " 2.0% of kernel time (40.0µs), 20 per step;")
    assert f.confidence == "medium"


@pytest.mark.parametrize("types", [5, True, {"dst": "c10::BFloat16"}])
def test_a_cast_whose_input_types_are_no_list_is_no_cast(tmp_path, types):
    """A damaged record ("Input type": 5, as a retyped field in a fuzzed trace) says no direction: the rule
    counts no cast from it, where it raised TypeError (len() of an int) and took the browser's second stage."""
    b = TraceBuilder()
    with b.step():
        for _ in range(4):
            with b.region("aten::to"), b.region("aten::_to_copy"):
                b.op("aten::copy_", [[1000, 1000], [1000, 1000]], types, kernels=[(CAST, 10.0)])
        b.op("aten::relu", [[1000, 1000]], [BF], kernels=[(RELU, 60.0)])
    assert "unfused_casts" not in rules(b.write(tmp_path / "casts.json"))


def test_unfused_casts_fire_on_the_gpt_step():
    """Autocast bf16: weights cast down in the forward, gradients cast back up (ToCopyBackward0)."""
    f = shipped("gpt_train_eager.json.gz")["unfused_casts"]
    assert f.evidence == ("282 cast kernels (bf16→f32 x129, 1.04ms; f32→bf16 x153, 663.5µs) launched by aten::copy_"
                          " with a dtype change: 14.6% of kernel time (1.70ms), 94 per step;"
                          " unrolled_elementwise_kernel<direct_copy_kernel_cuda>[f32],"
                          " vectorized_elementwise_kernel<bfloat16_copy_kernel_cuda>[f32]")
    assert f.confidence == "high"
    r = shipped("resnet18_train_eager.json.gz")["unfused_casts"]  # 4.8 % of kernel time, but 47 a step
    assert r.evidence.startswith("94 cast kernels (bf16→f32 x46, 161.6µs; f32→bf16 x48, 107.2µs) launched by"
                                 " aten::copy_ with a dtype change: 4.8% of kernel time (268.8µs), 47 per step;")
    assert r.confidence == "medium"


@pytest.mark.parametrize("case", ["compiled", "same dtype", "below both thresholds"])
def test_unfused_casts_stay_quiet(tmp_path, case):
    path = {"compiled": lambda: cast_trace(tmp_path, 2, 10.0, 60.0, compiled=True),
            "same dtype": lambda: cast_trace(tmp_path, 2, 10.0, 60.0, src=BF, dst=BF),  # a copy, not a cast
            "below both thresholds": lambda: cast_trace(tmp_path, 19, 0.2, 100.0)}[case]()  # 3.7 %, 19 a step
    assert "unfused_casts" not in rules(path)


def test_unfused_casts_stay_quiet_on_compiled_and_bf16_traces():
    assert "unfused_casts" not in shipped("resnet18_train_compiled.json.gz")  # Inductor fused them (triton_*_to_copy)
    assert "unfused_casts" not in shipped("mlp_bf16_eager.json.gz")  # bf16 weights: nothing to cast


def test_upcasts_are_named_by_direction(tmp_path):
    f = rules(cast_trace(tmp_path, 2, 10.0, 60.0, src=BF, dst=F32))["unfused_casts"]
    assert f.evidence.startswith("4 cast kernels (bf16→f32 x4, 40.0µs)")


@pytest.mark.parametrize("name", ["resnet18_train_eager.json.gz", "resnet18_train_compiled.json.gz",
                                  "gpt_train_eager.json.gz"])
def test_gemm_below_peak_reads_the_same_figures_from_its_own_arrays_as_from_a_traffic_table(name):
    """The summary's advice gives the rule no table (it computes ``traffic_arrays`` of the GEMM ops alone); the
    browser gives it ``compute_traffic``'s of every op. The table of the GEMM ops gives the same FLOPs, dtypes
    and GEMM bases, row for row; the whole table the same figures for the GEMMs; all three the same finding."""
    import numpy as np

    from kerneltui.analysis.advice_gemm import (
        _flops_known,
        _gemm_figures,
        gemm_below_peak,
    )
    from kerneltui.analysis.traffic import compute_traffic

    t = load_trace(str(TRACES / name), cache=False)
    flops, dtype, gemm = _gemm_figures(t, None)
    assert gemm.sum() > 10 and np.isfinite(flops[gemm]).sum() > 10  # GEMMs with FLOPs are compared
    same_ops = _gemm_figures(t, compute_traffic(t, ops=_flops_known))
    assert np.array_equal(flops, same_ops[0], equal_nan=True)
    assert dtype.tolist() == same_ops[1].tolist()
    assert np.array_equal(gemm, same_ops[2])
    every_op = _gemm_figures(t, compute_traffic(t))
    assert np.array_equal(gemm, every_op[2])
    assert np.array_equal(flops[gemm], every_op[0][gemm], equal_nan=True)
    assert dtype[gemm].tolist() == every_op[1][gemm].tolist()
    found = gemm_below_peak(t)
    for traffic in (compute_traffic(t, ops=_flops_known), compute_traffic(t)):
        again = gemm_below_peak(t, traffic)
        assert (again and again.to_dict()) == (found and found.to_dict())
