"""Bytes moved, FLOPs and achieved rates (doc sections 6 and 10) on the real traces."""

from __future__ import annotations

import math
from functools import cache

import numpy as np
import pytest

from kerneltui.trace import load_trace
from kerneltui.trace.devices import device_spec
from kerneltui.analysis.traffic import compute_traffic, copy_kind, op_traffic
from tests.conftest import shared_trace
from tests.kineto_builder import TraceBuilder


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
    # 0.91 when every op got a byte count, right or not; with the Concrete Inputs loaded (is_causal,
    # reduced dims, reduction) attention, sum and nll_loss_forward are known again, while
    # embedding_dense_backward stays unknown: the shapes do not say which rows it writes; the fused
    # AdamW (9.2% of GPU time) is known from the step's gradients, its lists being dropped from its record
    assert traffic.known_share == pytest.approx(0.958, abs=0.001)


# -- op_traffic rules ---------------------------------------------------------------
def test_inplace_op_reads_and_writes_self():
    shapes = {"dims": [[1000], [1000], []], "types": ["float", "float", "Scalar"]}
    assert op_traffic("aten::add_", shapes, inductor=False).bytes == 12000  # was 8000: self is written too
    assert op_traffic("aten::add", shapes, inductor=False).bytes == 12000
    clamp = {"dims": [[1000], []], "types": ["float", "Scalar"]}
    assert op_traffic("aten::clamp_min_", clamp, inductor=False).bytes == 8000


def test_broadcast_output_shape():
    shapes = {"dims": [[4096, 4096], [4096, 1]], "types": ["float", "float"]}
    assert op_traffic("aten::div", shapes, inductor=False).bytes == (4096 * 4096 + 4096 + 4096 * 4096) * 4


def test_reduction_writes_the_reduced_shape_when_its_dims_are_recorded():
    # norm_chain_eager's aten::mean: x.mean(-1, keepdim=True) over 4096 x 4096 float32
    shapes = {"dims": [[4096, 4096], [], [], []], "types": ["float", "ScalarList", "Scalar", ""]}
    assert math.isnan(op_traffic("aten::mean", shapes, inductor=False).bytes)  # the dims are Concrete Inputs
    mean = op_traffic("aten::mean", {**shapes, "concrete": ["", "[-1]", "True", ""]}, inductor=False)
    assert (mean.bytes, mean.basis) == (4096 * 4096 * 4 + 4096 * 4, "reduction")
    # no dim argument: the whole tensor, one value out
    assert op_traffic("aten::sum", {"dims": [[1000], []], "types": ["float", ""]}, False).bytes == 4004
    # max over a dim also writes int64 indices
    shapes = {"dims": [[64, 100], [], []], "types": ["float", "Scalar", "Scalar"], "concrete": ["", "1", "False"]}
    assert op_traffic("aten::max", shapes, False).bytes == 64 * 100 * 4 + 64 * (4 + 8)


def test_tensorlist_takes_the_dtype_of_the_other_tensors_else_unknown():
    shapes = {"dims": [[[8, 512, 768], [8, 512, 768]], []], "types": ["TensorList", "Scalar"]}
    cat = op_traffic("aten::cat", shapes, inductor=False)
    # was counted as f32 (the bf16 lists of autocast are common): now unknown, never guessed
    assert math.isnan(cat.bytes) and (cat.basis, cat.dtype) == ("no-dtype", "unknown")
    out = op_traffic("aten::cat", {"dims": [[[8, 512, 768], [8, 512, 768]], [], [8, 512, 1536]],
                                   "types": ["TensorList", "Scalar", "c10::BFloat16"]}, inductor=False)
    assert out.bytes == 2 * (2 * 8 * 512 * 768 * 2)  # reads both, writes them side by side (the out= tensor)


def test_no_broadcast_is_not_an_elementwise_op():
    # was "the output is the largest input", a guess
    shapes = {"dims": [[64, 64, 32, 32], [64]], "types": ["c10::BFloat16", "float"]}
    t = op_traffic("aten::some_op", shapes, inductor=False)
    assert math.isnan(t.bytes) and t.basis == "no-rule"
    # norms write the activation's shape: resnet's batch norm of [64, 64, 32, 32] bf16, C = 64
    bn = {"dims": [[64, 64, 32, 32], [64], [64], [64], [64], [], [], []],
          "types": ["c10::BFloat16"] + ["float"] * 4 + ["Scalar"] * 3}
    norm = op_traffic("aten::native_batch_norm", bn, inductor=False)
    assert (norm.bytes, norm.basis) == (2 * 64 * 64 * 32 * 32 * 2 + 4 * 64 * 4, "norm")


def test_linear_weight_is_transposed():
    shapes = {"dims": [[32, 1024], [4096, 1024], [4096]], "types": ["c10::BFloat16"] * 3}
    lin = op_traffic("aten::linear", shapes, inductor=False)
    assert lin.flops == 2 * 32 * 4096 * 1024
    assert lin.bytes == (32 * 1024 + 4096 * 1024 + 4096 + 32 * 4096) * 2


def test_no_shapes_is_unknown_not_zero():
    assert math.isnan(op_traffic("aten::add", None, inductor=False).bytes)


# -- rules by op class, on the real traces (doc section 10) ------------------------------
def test_nll_loss_reads_the_gathered_values_not_the_whole_input():
    fwd = rows("gpt_train_eager", "aten::nll_loss_forward")
    bwd = rows("gpt_train_eager", "aten::nll_loss_backward")
    # both counted the [4096, 8192] float32 input: 268,468,224 B, 15-29 TB/s and "above peak".
    # The backward writes one value per target into a gradient that a separate fill_ zeroed:
    # grad_output 4 + target 4096 * 8 + total_weight 4 + 4096 * 4 written
    assert bwd["bytes"].tolist() == [49_160.0] * 3 and set(bwd["basis"]) == {"loss"}
    assert not bwd["above_peak"].any() and round(bwd["gbs"].iloc[0], 2) == 5.37
    # the forward writes one loss, or one per target: which, the reduction says (a Concrete Input)
    assert fwd["bytes"].tolist() == [49_160.0] * 3 and not fwd["above_peak"].any()
    record = {"dims": [[4096, 8192], [4096], [], [], []], "types": ["float", "long int", "", "Scalar", "Scalar"],
              "concrete": ["", "", "", "1", "-100"]}  # its record in the trace, reduction mean
    # target 4096 * 8 + the 4096 gathered float32 + the loss and total_weight
    assert op_traffic("aten::nll_loss_forward", record, False).bytes == 49_160
    none = {**record, "concrete": ["", "", "", "0", "-100"]}
    assert op_traffic("aten::nll_loss_forward", none, False).bytes == 32_768 + 16_384 + 16_384


def test_embedding_reads_the_indexed_rows_not_the_table():
    gather = rows("gpt_train_eager", "aten::gather")
    # aten::embedding -> index_select -> gather: the gather's own record lists the [8192, 768] table
    # and a [4096, 768] int64 index (the 4096 token ids expanded, stride 0): 88,080,384 B at
    # 10.6 TB/s, "above peak". Now the embedding's record: 4096 ids * 8 + 4096 rows * 768 * 4 read
    # and written
    tokens = gather.iloc[::2]  # token and position embeddings alternate
    assert tokens["bytes"].tolist() == [4096 * 8 + 2 * 4096 * 768 * 4] * 3 == [25_198_592.0] * 3
    assert round(tokens["gbs"].iloc[0]) == 3029 and not gather["above_peak"].any()
    assert gather.iloc[1]["bytes"] == 512 * 8 + 2 * 512 * 768 * 4  # the position table, 512 rows
    assert set(gather["basis"]) == {"gather"}
    # a bare gather's index may be expanded: its bytes need Input Strides
    record = {"dims": [[8192, 768], [], [4096, 768], [], [4096, 768]],
              "types": ["float", "Scalar", "long int", "Scalar", "float"]}
    assert math.isnan(op_traffic("aten::gather", record, False).bytes)
    strided = {**record, "strides": [[768, 1], [], [1, 0], [], [768, 1]]}  # as in the trace
    assert op_traffic("aten::gather", strided, False).bytes == 25_198_592


def test_embedding_backward_rows_are_unknown_and_its_zero_fill_writes_once():
    t = rows("gpt_train_eager", "aten::embedding_dense_backward")
    kernels = t[(t["basis"] == "gather").to_numpy()]
    # was grad + ids + "output = largest input" (25.2 MB): the rows it writes are the distinct ids
    assert len(kernels) == 60 and kernels["bytes"].isna().all()
    # the zero fill of the [8192, 768] float32 table is its own aten::fill_, written once
    fill = rows("gpt_train_eager", "aten::fill_")
    assert 8192 * 768 * 4 in set(fill["bytes"])
    # Inductor's zero fill of the table: one buffer, written once (was doubled as if in_out_ptr)
    zero = op_traffic("triton_poi_fused_embedding_dense_backward_0",
                      {"dims": [[8192, 768], []], "types": ["float", "Scalar"]}, inductor=True)
    assert zero.bytes == 8192 * 768 * 4


def test_cat_of_a_bf16_list_is_not_guessed_as_f32():
    cat = rows("gpt_train_eager", "aten::cat")
    # SplitBackward0's cat of three [8, 512, 768] bf16 tensors: counted as f32, 50.3 MB at
    # 5.3 TB/s, 12 flags "above peak"; the list's dtype is not recorded and nothing else says it
    assert len(cat) == 12 and cat["bytes"].isna().all() and not cat["above_peak"].any()
    assert set(cat["dtype"]) == {"unknown"} and set(cat["basis"]) == {"no-dtype"}


def test_no_false_above_peak_flags_left_on_the_training_traces():
    # gpt_train_eager: 29 flags, 21 of them counting errors (gather, nll_loss, cat). The 8 left
    # are exact: f32<->bf16 copy_ of [8, 512, 768] at 4.8-5.3 TB/s, just-written data in L2
    trace, traffic = traffic_of("gpt_train_eager")
    flagged = trace.gpu["op"].astype(str).to_numpy()[traffic.table["above_peak"].to_numpy()]
    assert flagged.tolist() == ["aten::copy_"] * 8
    trace, traffic = traffic_of("resnet18_train_eager")
    flagged = trace.gpu["op"].astype(str).to_numpy()[traffic.table["above_peak"].to_numpy()]
    assert flagged.tolist() == ["aten::threshold_backward"] * 14  # exact: 2 reads + 1 write, in L2


def test_eager_inplace_ops_read_and_write_their_buffer():
    # relu_ on [64, 64, 64, 64] bf16: counted once (33,554,432 B); it reads and writes it
    relu = rows("resnet18_train_eager", "aten::clamp_min_")
    assert relu["bytes"].max() == 2 * 64 * 64 * 64 * 64 * 2
    assert round(relu.loc[relu["bytes"].idxmax(), "gbs"]) == 4539
    # the residual x += identity: reads both, writes x (was 2 reads only, 16,777,216 B)
    add = rows("resnet18_train_eager", "aten::add_")
    assert add["bytes"].max() == 3 * 64 * 64 * 32 * 32 * 2
    # fill_ and copy_ write self once and read only their other argument
    fill = op_traffic("aten::fill_", {"dims": [[4096, 8192], []], "types": ["float", "Scalar"]}, False)
    copy = op_traffic("aten::copy_", {"dims": [[8, 512], [8, 512], []], "types": ["c10::BFloat16", "float", "Scalar"]},
                      False)
    assert (fill.bytes, copy.bytes) == (4096 * 8192 * 4, 8 * 512 * (2 + 4))


def test_pooling_backward_writes_the_gradient_once():
    pool = rows("resnet18_train_eager", "aten::max_pool2d_with_indices_backward")
    # grad_output [64, 64, 32, 32] bf16 + int64 indices read, a [64, 64, 64, 64] bf16 gradient
    # written (was 109,051,904 B: self read and an output on top)
    assert pool["bytes"].tolist() == [64 * 64 * 32 * 32 * (2 + 8) + 64 * 64 * 64 * 64 * 2] * 2 == [75_497_472.0] * 2
    # the forward's output size needs kernel, stride and padding (Concrete Inputs)
    record = {"dims": [[64, 64, 64, 64], [], [], [], [], []],
              "types": ["c10::BFloat16", "ScalarList", "ScalarList", "ScalarList", "ScalarList", "Scalar"],
              "concrete": ["", "[3, 3]", "[2, 2]", "[1, 1]", "[1, 1]", "False"]}
    assert op_traffic("aten::max_pool2d_with_indices", record, False).bytes == 75_497_472


def test_device_copy_reads_and_writes_hbm():
    t = rows("resnet18_train_eager", "aten::copy_")
    d2d = t[(t["copy_kind"] == "D2D").to_numpy()]
    assert d2d["bytes"].tolist() == [131_072.0] * 2  # a 65,536 B Memcpy DtoD: read and written
    assert set(d2d["basis"]) == {"memcpy"} and d2d["peak_share"].notna().all() and d2d["link_gbs"].isna().all()


def test_host_copies_are_rated_against_the_host_link():
    copies = rows("gpt_train_eager", "aten::copy_")
    h2d = copies[(copies["basis"] == "copy-h2d").to_numpy()]
    # the 32 KB token batches, Memcpy HtoD (Pinned -> Device): were "10.9 GB/s, 0.2% of H200 peak"
    assert len(h2d) == 6 and set(h2d["copy_kind"]) == {"H2D pinned"} and set(h2d["bytes"]) == {32_768.0}
    assert h2d["peak_share"].isna().all() and not h2d["above_peak"].any()
    assert set(h2d["link_gbs"]) == {64.0}  # the H200 SXM's PCIe Gen5 x16, per direction
    first = h2d.iloc[0]
    assert round(first["gbs"], 1) == 10.9 and first["link_share"] == pytest.approx(32_768 / 3007 / 64, rel=1e-9)
    assert set(copies.loc[(copies["basis"] == "eager").to_numpy(), "copy_kind"]) == {""}


def test_copy_kind_from_the_memcpy_name():
    assert copy_kind("Memcpy HtoD (Pinned -> Device)") == ("H2D pinned", "copy-h2d", 1)
    assert copy_kind("Memcpy HtoD (Pageable -> Device)") == ("H2D pageable", "copy-h2d", 1)
    assert copy_kind("Memcpy DtoH (Device -> Pageable)") == ("D2H pageable", "copy-d2h", 1)
    assert copy_kind("Memcpy DtoD (Device -> Device)") == ("D2D", "memcpy", 2)
    assert copy_kind("Memcpy PtoP (Device -> Device)") == ("P2P", "copy-p2p", 1)
    assert copy_kind("Memcpy HtoD") == ("H2D", "copy-h2d", 1)
    assert copy_kind("hipMemcpyWithStream") == ("copy", "copy-unknown", 1)


def test_pageable_copy_on_a_synthetic_trace(tmp_path):
    b = TraceBuilder()
    with b.step():
        b.op("aten::copy_", [[8, 512], [8, 512], []], ["float", "float", "Scalar"],
             kernels=[("Memcpy DtoH (Device -> Pageable)", 10.0)])
    for e in b.events:
        if e["name"].startswith("Memcpy"):
            e["cat"] = "gpu_memcpy"
            e["args"]["bytes"] = 16_384
    trace = load_trace(b.write(tmp_path / "copy.json"))
    row = compute_traffic(trace).table.iloc[0]
    assert (row["copy_kind"], row["basis"], row["bytes"]) == ("D2H pageable", "copy-d2h", 16_384.0)
    # 1.6 GB/s: what a pageable copy manages, 2.6% of the link (was "0.0% of H200 peak")
    assert round(row["gbs"], 2) == 1.64 and round(row["link_share"], 4) == 0.0256 and math.isnan(row["peak_share"])


# -- FLOP/s: convolutions, attention, templates -------------------------------------------
def test_convolutions_are_judged_by_flops():
    t = rows("resnet18_train_eager", "aten::cudnn_convolution")
    conv = t[(t["basis"] == "conv").to_numpy()]
    # were "GB/s" (up to 1,468 GB/s, 31%): P x Q from stride and padding (Concrete Inputs), FLOP/s now
    assert len(conv) == 50 and conv["flops"].notna().all() and conv["gbs"].isna().all()
    assert round(conv["tflops"].max(), 1) == 308.8
    # the stem of the trace, with its record's Concrete Inputs (padding before stride in cudnn_convolution)
    stem = {"dims": [[64, 3, 128, 128], [64, 3, 7, 7], [], [], [], [], [], [], []],
            "types": ["c10::BFloat16", "c10::BFloat16", "ScalarList", "ScalarList", "ScalarList", "Scalar",
                      "Scalar", "Scalar", "Scalar"],
            "concrete": ["", "", "[3, 3]", "[2, 2]", "[1, 1]", "1", "False", "False", "True"]}
    fwd = op_traffic("aten::cudnn_convolution", stem, False)
    assert fwd.flops == 2 * 64 * 64 * 3 * 7 * 7 * 64 * 64  # output 64 x 64
    assert (fwd.basis, fwd.dtype) == ("conv", "bf16")
    assert fwd.bytes == (64 * 3 * 128 * 128 + 64 * 3 * 7 * 7 + 64 * 64 * 64 * 64) * 2
    same = op_traffic("aten::convolution", {"dims": [[64, 64, 32, 32], [64, 64, 3, 3], []] + [[]] * 6,
                                            "types": ["c10::BFloat16"] * 2 + [""] + ["ScalarList"] * 3 + ["Scalar",
                                                      "ScalarList", "Scalar"],
                                            "concrete": ["", "", "", "[1, 1]", "[1, 1]", "[1, 1]", "False", "[0, 0]",
                                                         "1"]}, False)
    assert same.flops == 2 * 64 * 64 * 64 * 9 * 32 * 32


def test_convolution_backward_counts_the_gradients_output_mask_asks_for():
    t = rows("resnet18_train_eager", "aten::convolution_backward")
    backward = t[(t["basis"] == "conv").to_numpy()]  # output_mask is a Concrete Input
    assert len(backward) == 110 and backward["flops"].notna().all() and round(backward["tflops"].max(), 1) == 334.4
    base = {"dims": [[64, 64, 64, 64], [64, 3, 128, 128], [64, 3, 7, 7]] + [[]] * 8,
            "types": ["c10::BFloat16"] * 3 + ["ScalarList"] * 4 + ["Scalar", "ScalarList", "Scalar", "ScalarList"]}
    args = ["", "", "", "[0]", "[2, 2]", "[3, 3]", "[1, 1]", "False", "[0, 0]", "1"]
    forward = 2 * 64 * 64 * 3 * 7 * 7 * 64 * 64
    # the stem: the image needs no gradient, so only grad-weight runs
    stem = op_traffic("aten::convolution_backward", {**base, "concrete": args + ["[False, True, False]"]}, False)
    both = op_traffic("aten::convolution_backward", {**base, "concrete": args + ["[True, True, False]"]}, False)
    assert (stem.flops, both.flops) == (forward, 2 * forward)


def test_attention_flops_follow_is_causal():
    t = rows("gpt_train_eager", "aten::_cudnn_attention_forward")
    att = t[(t["basis"] == "attention").to_numpy()]
    # were "1,415 GB/s, 29%"; is_causal is a Concrete Input: FLOP/s, causal (half the dense count)
    assert len(att) == 12 and att["flops"].tolist() == [4 * 8 * 12 * 512 * 512 * 64 / 2] * 12
    assert att["gbs"].isna().all() and round(att["tflops"].iloc[0], 1) == 170.3
    qkv = [[8, 12, 512, 64]] * 3
    fwd = {"dims": qkv + [[]] * 10, "types": ["c10::BFloat16"] * 3 + ["", "", "", "Scalar", "Scalar", "Scalar",
                                                                        "Scalar", "Scalar", "Scalar", ""],
           "concrete": ["", "", "", "", "", "", "512", "512", "True", "0.", "True", "False", ""]}  # causal
    full = 4 * 8 * 12 * 512 * 512 * 64
    f = op_traffic("aten::_cudnn_attention_forward", fwd, False)
    assert (f.flops, f.basis, f.bytes) == (full / 2, "attention", 4 * 8 * 12 * 512 * 64 * 2)
    dense = {**fwd, "concrete": fwd["concrete"][:10] + ["False", "False", ""]}
    assert op_traffic("aten::_cudnn_attention_forward", dense, False).flops == full
    bwd = {"dims": [[8, 12, 512, 64]] * 5 + [[8, 12, 512, 1]] + [[]] * 10,
           "types": ["c10::BFloat16"] * 5 + ["float", "long int", "long int", "", "", "", "Scalar", "Scalar", "Scalar",
                                              "Scalar", ""],
           "concrete": [""] * 11 + ["512", "512", "0.", "True", ""]}
    assert op_traffic("aten::_cudnn_attention_backward", bwd, False).flops == 2.5 * full / 2


def test_triton_template_is_a_gemm(tmp_path):
    # an autotuned addmm template: [M, K], [K, N], bias, output, M = N = K = 4096 bf16
    b = TraceBuilder()
    with b.step():
        b.op("triton_tem_fused_addmm_pow_relu_t_0", [[4096, 4096], [4096, 4096], [4096], [4096, 4096]],
             ["c10::BFloat16"] * 4, kernels=[("triton_tem_fused_addmm_pow_relu_t_0", 206.4)])
    row = compute_traffic(load_trace(b.write(tmp_path / "tem.json"))).table.iloc[0]
    # was judged by bandwidth: "488 GB/s, 10%" (its 100.7 MB, each buffer once)
    assert (row["basis"], row["flops"], row["bytes"]) == ("template", 2 * 4096**3, (3 * 4096 * 4096 + 4096) * 2)
    assert math.isnan(row["gbs"]) and round(row["tflops"]) == 666 and round(row["flops_share"], 3) == 0.673
    conv = op_traffic("triton_tem_fused_convolution_0", {"dims": [[64, 64, 32, 32], [128, 64, 3, 3], [64, 128, 16, 16]],
                                                         "types": ["c10::BFloat16"] * 3}, inductor=True)
    assert conv.flops == 2 * 64 * 128 * 64 * 9 * 16 * 16  # the output gives P x Q
    odd = op_traffic("triton_tem_fused_mm_1", {"dims": [[7, 3], [5, 2]], "types": ["float"] * 2}, inductor=True)
    assert math.isnan(odd.bytes) and math.isnan(odd.flops)  # no [M, K] @ [K, N] -> [M, N]: unknown, not GB/s


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


@pytest.mark.parametrize(
    ("name", "link", "gbs"),
    [
        ("NVIDIA H200", "PCIe Gen5 x16", 64),
        ("NVIDIA H100 80GB HBM3", "PCIe Gen5 x16", 64),
        ("NVIDIA A100-SXM4-80GB", "PCIe Gen4 x16", 32),
        ("NVIDIA L4", "PCIe Gen4 x16", 32),
        ("Tesla V100-SXM2-16GB", "PCIe Gen3 x16", 16),
        ("NVIDIA GH200 480GB", "NVLink-C2C", 450),
    ],
)
def test_host_link_per_device(name, link, gbs):
    spec = device_spec(name)
    assert (spec.host_link, spec.host_link_gbs) == (link, gbs)


def test_unknown_device_has_no_link_share():
    _, traffic = traffic_of("gpt_train_eager", "Mystery Accelerator 9000")
    h2d = traffic.table[(traffic.table["basis"] == "copy-h2d").to_numpy()]
    assert len(h2d) == 6 and h2d["link_share"].isna().all() and h2d["gbs"].notna().all()


def test_a_fused_optimizer_is_counted_from_the_steps_gradients():
    trace, traffic = traffic_of("gpt_train_eager")
    g = trace.gpu
    adamw = (g["op"].astype(str) == "aten::_fused_adamw_").to_numpy()
    # the record drops its lists (more than 30 tensors): 53 gradients of f32 per step, 165,316,608 bytes
    # (an independent sum of the AccumulateGrad records); AdamW reads p, g, m, v and writes p, m, v
    per_step = traffic.table.loc[adamw, "bytes"].sum() / 3
    assert per_step == pytest.approx(7 * 165_316_608, rel=1e-9)
    assert set(traffic.table.loc[adamw, "basis"].astype(str)) == {"optimizer"}
    rate = traffic.table.loc[adamw, "bytes"].sum() / traffic.table.loc[adamw, "dur"].sum()
    assert 3000 < rate < 3400  # GB/s: 68% of the H200's HBM


def test_an_inductor_gather_reads_the_rows_it_indexes_not_the_table():
    bf16 = "c10::BFloat16"
    dims = [[8, 512], [8192, 768], [512, 768], [8, 512, 768], []]
    types = ["long int", bf16, bf16, bf16, "Scalar"]
    t = op_traffic("triton_poi_fused_add_embedding_0", {"dims": dims, "types": types}, inductor=True)
    # indices, 4,096 gathered rows of the [8192, 768] table, the positional table, the output
    assert t.bytes == 8 * 512 * 8 + 4096 * 768 * 2 + 512 * 768 * 2 + 8 * 512 * 768 * 2
    assert t.basis == "gather"


def test_a_gradient_record_outside_the_steps_is_never_read(tmp_path):
    """AdamW's bytes come from its step's AccumulateGrad records alone: a record outside every step that
    names no size (dims of strings) is not read, and stops nothing."""
    b = TraceBuilder()
    with b.step():
        b.op("torch::autograd::AccumulateGrad", dims=[[256, 256]], types=["float"])
        b.op("aten::_fused_adamw_", dims=[[], []], types=["TensorList", "TensorList"],
             kernels=[("multi_tensor_apply_kernel", 20)])
    b.idle(50)
    b.op("torch::autograd::AccumulateGrad", dims=[["a", 2]], types=["float"])
    table = compute_traffic(load_trace(b.write(tmp_path / "t.json"))).table
    # AdamW reads p, g, m, v and writes p, m, v: 7 x 256 x 256 f32
    assert table["bytes"].tolist() == [7 * 256 * 256 * 4]
    assert table["basis"].astype(str).tolist() == ["optimizer"] and table["dtype"].tolist() == ["f32"]


def test_kernels_of_absurd_length_share_their_ops_bytes_by_a_compensated_sum(tmp_path):
    """An op's bytes are shared among its kernels by duration; durations past 2**53 ns in all are summed
    as pandas' compensated sum adds them (the figures before this sum moved to numpy), not naively."""
    b = TraceBuilder()
    b.op("aten::add", dims=[[1000], [1000]], types=["float", "float"],
         kernels=[("k_long", 9007199254740.992), ("k_a", 0.001), ("k_b", 0.001)])
    table = compute_traffic(load_trace(b.write(tmp_path / "t.json"))).table
    assert table["bytes"].tolist() == [11999.999999999998, 1.3322676295501876e-12, 1.3322676295501876e-12]


def test_each_event_is_named_for_how_its_figure_was_had(tmp_path):
    """The basis of every row, in one made trace: an eager op's kernel, a memset, a memcpy (its copy kind),
    CUDA-graph replays (no op, no figure); the same trace without record_shapes says so for its kernels."""
    b = TraceBuilder()
    with b.step():
        b.op("aten::add", [[1024], [1024], []], ["float", "float", "Scalar"], kernels=[("add_kernel", 2.0)])
        b.op("aten::zero_", [[1024]], ["float"], kernels=[("Memset (Device)", 1.0)])
        b.op("aten::copy_", [[1024], [1024], []], ["float", "float", "Scalar"],
             kernels=[("Memcpy HtoD (Pageable -> Device)", 3.0)])
        b.graph_replay([("triton_poi_fused_add_0", 3.0), ("nvjet_sm90_tst_bias_TNT", 30.0)])
    for event in b.events:
        if event["name"].startswith("Memcpy"):
            event["cat"], event["args"]["bytes"] = "gpu_memcpy", 4096
    expected = {"add_kernel": "eager", "Memset (Device)": "memset", "Memcpy HtoD (Pageable -> Device)": "copy-h2d",
                "triton_poi_fused_add_0": "cuda-graph", "nvjet_sm90_tst_bias_TNT": "cuda-graph"}
    for shapes in (1, 0):
        t = load_trace(b.write(tmp_path / f"kinds{shapes}.json", record_shapes=shapes), cache=False)
        table = compute_traffic(t).table
        assert dict(zip(t.gpu["full_name"].astype(str), table["basis"].astype(str))) == (
            expected if shapes else {**expected, "add_kernel": "no-shapes"})
        assert dict(zip(t.gpu["full_name"].astype(str), table["copy_kind"].astype(str))) == {
            name: "H2D pageable" if name.startswith("Memcpy") else "" for name in expected}
        assert table["bytes"].tolist()[2] == 4096  # the copy's own size, crossing the host link once
