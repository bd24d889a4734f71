"""Bytes moved, GEMM FLOPs and achieved bandwidth (doc section 6) on the real traces."""

from __future__ import annotations

import math
from functools import cache

import numpy as np
import pytest

from kerneltui.trace import load_trace
from kerneltui.trace.devices import device_spec
from kerneltui.trace.traffic import compute_traffic, op_traffic
from tests.conftest import shared_trace


@cache
def traffic_of(name: str, device: str | None = None):
    trace = load_trace(shared_trace(name))
    return trace, compute_traffic(trace, device)


def rows(name: str, op: str):
    trace, traffic = traffic_of(name)
    return traffic.table[(trace.gpu["op"].astype(str) == op).to_numpy()]


# -- bytes per kernel -------------------------------------------------------------
def test_add_relu_1e7_eager_bytes_are_inputs_plus_output():
    add = rows("add_relu_10000000_eager", "aten::add")
    clamp = rows("add_relu_10000000_eager", "aten::clamp_min")
    assert len(add) == 3 and len(clamp) == 3
    assert add["bytes"].tolist() == [120_000_000.0] * 3  # 2 reads + 1 write of 1e7 float32
    assert clamp["bytes"].tolist() == [80_000_000.0] * 3  # 1 read + 1 write
    assert set(add["basis"]) == {"eager"}


def test_add_relu_1e7_compiled_counts_each_buffer_once():
    fused = rows("add_relu_10000000_compiled", "triton_poi_fused_add_relu_0")
    assert fused["bytes"].tolist() == [120_000_000.0] * 3
    assert set(fused["basis"]) == {"inductor"}


def test_add_relu_1M_bytes_and_largest_tensor():
    add = rows("add_relu_1M_eager", "aten::add")
    assert add["bytes"].tolist() == [12_000_000.0]
    assert add["largest"].tolist() == [4_000_000.0]


def test_measured_bandwidth_at_1e7_matches_the_doc():
    # doc section 6: add/clamp_min at 1e7 elements reach 3.99-4.27 TB/s on the H200
    _, traffic = traffic_of("add_relu_10000000_eager")
    gbs = traffic.table["gbs"].to_numpy()
    assert gbs.min() == pytest.approx(3985.1, abs=0.1)
    assert gbs.max() == pytest.approx(4273.5, abs=0.1)
    assert not traffic.table["above_peak"].any()
    assert traffic.table["peak_share"].max() == pytest.approx(4273.5 / 4800, abs=1e-4)


def test_above_peak_at_1e6_is_flagged():
    # 12 MB sits in the H200's L2: add reaches 5.28 TB/s, above the 4.8 TB/s of HBM
    add = rows("add_relu_1M_eager", "aten::add").iloc[0]
    clamp = rows("add_relu_1M_eager", "aten::clamp_min").iloc[0]
    assert add["gbs"] == pytest.approx(12_000_000 / 2272, rel=1e-9)
    assert round(add["gbs"]) == 5282
    assert bool(add["above_peak"]) and add["peak_share"] == pytest.approx(1.1004, abs=1e-4)
    assert not bool(clamp["above_peak"]) and round(clamp["gbs"]) == 4032


def test_gemm_reports_flops_not_bandwidth():
    trace, traffic = traffic_of("mlp_bf16_eager")
    t = traffic.table
    gemm = t[(t["basis"] == "gemm").to_numpy()]
    assert len(gemm) == 6  # two addmm per call, 3 calls
    # Linear(1024 -> 4096) on 64*256 tokens: 2*M*N*K
    assert sorted(set(gemm["flops"])) == [2 * 16384 * 1024 * 4096]
    assert gemm["gbs"].isna().all()
    first = gemm.iloc[0]
    assert first["tflops"] == pytest.approx(2 * 16384 * 1024 * 4096 / 191199 / 1e3, rel=1e-9)
    assert first["flops_share"] == pytest.approx(first["tflops"] / 989, rel=1e-9)
    # bias + mat1 + mat2 + output, bf16
    assert first["bytes"] == (4096 + 16384 * 1024 + 1024 * 4096 + 16384 * 4096) * 2


def test_addmm_memset_keeps_its_own_bytes():
    t = rows("mlp_bf16_eager", "aten::addmm")
    memsets = t[(t["basis"] == "memset").to_numpy()]
    assert memsets["bytes"].tolist() == [4.0] * 6


def test_compiled_addmm_out_buffer_is_not_counted_twice():
    eager = rows("mlp_bf16_eager", "aten::addmm")
    compiled = rows("mlp_bf16_compiled", "aten::addmm")
    assert sorted(set(eager["bytes"])) == sorted(set(compiled["bytes"]))


def test_single_buffer_inductor_kernel_is_read_and_written():
    # triton_poi_fused_gelu_view_1 updates its one bf16 [64,256,4096] buffer in place
    gelu = rows("mlp_bf16_compiled", "triton_poi_fused_gelu_view_1")
    assert gelu["bytes"].tolist() == [2 * 64 * 256 * 4096 * 2] * 3


def test_cuda_only_trace_has_no_byte_counts():
    _, traffic = traffic_of("add_relu_1M_eager_cudaonly")
    assert traffic.table["bytes"].isna().all()
    assert set(traffic.table["basis"]) == {"no-shapes"}
    assert traffic.known_share == 0.0


def test_unknown_device_gives_gbs_without_share():
    _, traffic = traffic_of("add_relu_1M_eager", "Mystery Accelerator 9000")
    assert traffic.device is None
    assert round(traffic.table["gbs"].iloc[0]) == 5282
    assert traffic.table["peak_share"].isna().all()
    assert not traffic.table["above_peak"].any()


def test_every_known_byte_count_is_positive_on_the_training_trace():
    _, traffic = traffic_of("gpt_train_eager")
    known = traffic.table["bytes"].dropna()
    assert (known > 0).all()
    assert traffic.known_share == pytest.approx(0.91, abs=0.01)


# -- op_traffic rules ---------------------------------------------------------------
def test_inplace_op_adds_no_output():
    shapes = {"dims": [[1000], [1000], []], "types": ["float", "float", "Scalar"]}
    assert op_traffic("aten::add_", shapes, inductor=False).bytes == 8000
    assert op_traffic("aten::add", shapes, inductor=False).bytes == 12000


def test_broadcast_output_shape():
    shapes = {"dims": [[4096, 4096], [4096, 1]], "types": ["float", "float"]}
    assert op_traffic("aten::div", shapes, inductor=False).bytes == (4096 * 4096 + 4096 + 4096 * 4096) * 4


def test_reduction_counts_inputs_only():
    shapes = {"dims": [[4096, 4096], [], [], []], "types": ["float", "ScalarList", "Scalar", ""]}
    assert op_traffic("aten::mean", shapes, inductor=False).bytes == 4096 * 4096 * 4


def test_tensorlist_is_nested_and_takes_the_ops_dtype():
    shapes = {"dims": [[[8, 512, 768], [8, 512, 768]], []], "types": ["TensorList", "Scalar"]}
    cat = op_traffic("aten::cat", shapes, inductor=False)
    assert cat.bytes == 2 * 8 * 512 * 768 * 4 + 8 * 512 * 768 * 4  # falls back to f32, output = largest input


def test_linear_weight_is_transposed():
    shapes = {"dims": [[32, 1024], [4096, 1024], [4096]], "types": ["c10::BFloat16"] * 3}
    lin = op_traffic("aten::linear", shapes, inductor=False)
    assert lin.flops == 2 * 32 * 4096 * 1024
    assert lin.bytes == (32 * 1024 + 4096 * 1024 + 4096 + 32 * 4096) * 2


def test_no_shapes_is_unknown_not_zero():
    assert math.isnan(op_traffic("aten::add", None, inductor=False).bytes)


# -- device table --------------------------------------------------------------------
@pytest.mark.parametrize(
    ("name", "gbs"),
    [
        ("NVIDIA H200", 4800),
        ("NVIDIA H100 80GB HBM3", 3350),
        ("NVIDIA H100 PCIe", 2000),
        ("NVIDIA A100-SXM4-40GB", 1555),
        ("NVIDIA A100-SXM4-80GB", 2039),
        ("NVIDIA A100 80GB PCIe", 1935),
        ("NVIDIA L4", 300),
        ("NVIDIA L40S", 864),
        ("NVIDIA A10", 600),
        ("NVIDIA A10G", 600),
        ("Tesla V100-SXM2-16GB", 900),
        ("Tesla T4", 320),
        ("NVIDIA GeForce RTX 4090", 1008),
        ("NVIDIA GeForce RTX 3090", 936),
        ("AMD Instinct MI300X", 5300),
    ],
)
def test_device_peaks(name, gbs):
    assert device_spec(name).bandwidth_gbs == gbs


def test_unknown_devices():
    assert device_spec("Mystery Accelerator 9000") is None
    assert device_spec("") is None
    assert device_spec("unknown device") is None


def test_flops_only_where_known():
    h200 = device_spec("NVIDIA H200")
    assert (h200.peak_tflops("bf16"), h200.peak_tflops("f32"), h200.peak_tflops("i8")) == (989, 67, None)
    assert device_spec("Tesla T4").peak_tflops("bf16") is None  # Turing has no bf16 tensor cores
    assert np.isnan(device_spec("NVIDIA A10G").peak_tflops("bf16") or np.nan)
