"""Headline facts of a trace: busy time, per-call counts and times, the kernel table."""

from __future__ import annotations

import pytest

from kerneltui.trace import load_trace
from kerneltui.trace.intervals import union_length
from kerneltui.trace.summary import kernel_stats, launches_in, summarize
from tests.conftest import external_trace, shared_trace

import numpy as np


@pytest.mark.parametrize(
    "name, gpu_us_per_call, launches_per_call",
    [  # the doc's table (section 8): GPU µs per iteration
        ("add_relu_100_eager", 1.89, 2),
        ("add_relu_100_compiled", 0.725, 1),  # the doc rounds to 0.72
        ("add_relu_10000000_eager", 48.97, 2),
        ("add_relu_10000000_compiled", 29.64, 1),
        ("norm_chain_eager", 383.29, 10),
        ("norm_chain_compiled", 46.99, 1),
        ("mlp_bf16_eager", 510.48, 7),
        ("mlp_bf16_compiled", 494.97, 7),
    ],
)
def test_per_call_gpu_time_and_launches(name, gpu_us_per_call, launches_per_call):
    s = summarize(load_trace(shared_trace(name)))
    assert s.gpu_ns_per_iteration / 1e3 == pytest.approx(gpu_us_per_call, abs=0.005)
    assert s.launches_per_iteration == launches_per_call


def test_cpu_time_per_call_is_the_median_of_top_level_op_time():
    eager = summarize(load_trace(shared_trace("add_relu_100_eager")))
    compiled = summarize(load_trace(shared_trace("add_relu_100_compiled")))
    # calls: add+relu = 2386.7, 42.4, 32.8 µs; Cache Lookup+Region = 2646.4, 190.0, 114.3 µs
    assert eager.cpu_ns_per_iteration == 42_422
    assert compiled.cpu_ns_per_iteration == 190_017
    assert [r["cpu_ns"] for r in eager.per_iteration] == [2_387_074, 42_422, 32_775]


def test_busy_time_is_the_union_not_the_sum():
    assert union_length(np.array([0, 5, 20]), np.array([10, 8, 30])) == 20
    s = summarize(load_trace(shared_trace("gpt_train_eager")))
    assert s.busy_ns == 11_819_890  # one stream: union equals sum
    assert s.gpu_time_ns == 11_819_890
    assert s.window_ns == 38_221_560
    assert (s.kernels, s.memcpys, s.memsets, s.launches) == (810, 6, 129, 945)


def test_kernel_table_of_mlp_bf16_eager():
    table = kernel_stats(load_trace(shared_trace("mlp_bf16_eager")))
    assert table[["short", "count", "total_ns", "op"]].values.tolist() == [
        ["nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_bias_TNT", 6, 1_073_371, "aten::addmm"],
        ["vectorized_elementwise_kernel<GeluCUDAKernelImpl>[bf16]", 3, 261_599, "aten::gelu"],
        ["vectorized_layer_norm_kernel[bf16]", 3, 122_591, "aten::native_layer_norm"],
        ["vectorized_elementwise_kernel<CUDAFunctor_add>[bf16]", 3, 69_151, "aten::add"],
        ["Memset (Device)", 6, 4_737, "aten::addmm"],
    ]
    assert table["share"].sum() == pytest.approx(1.0)
    assert table.loc[0, "min_ns"] == 170_399 and table.loc[0, "max_ns"] == 191_199


def test_time_window_query_returns_overlapping_launches():
    trace = load_trace(shared_trace("norm_chain_eager"))
    g = trace.gpu
    a, b = int(g["ts"].iat[3]) + 1, int(g["ts"].iat[6])
    part = launches_in(trace, a, b)
    assert part["row"].tolist() == g["row"].iloc[3:7].tolist()


def test_name_filter_matches_short_or_full_names_substring_or_regex():
    from kerneltui.trace.filters import matching_rows

    g = load_trace(shared_trace("gpt_train_eager")).gpu
    assert matching_rows(g, "NVJET").sum() == int(g["short"].astype(str).str.startswith("nvjet").sum()) == 153
    assert matching_rows(g, "/^Mem(cpy|set)").sum() == 6 + 129
    assert matching_rows(g, "at::native::").sum() == int(g["full_name"].astype(str).str.contains("at::native::").sum())
    assert matching_rows(g, "").all()


def test_bad_regex_is_a_user_error():
    from kerneltui.errors import UserError
    from kerneltui.trace.filters import name_pattern

    with pytest.raises(UserError, match=r"bad filter regex '\['"):
        name_pattern("/[")


def test_the_kernel_table_counts_each_kernels_launches_without_a_launch_call():
    """The 2021 TensorBoard ResNet-50 trace lost the launch calls of 733 GPU events (health: no_launch);
    the kernel table's no_launch column holds them per kernel, as a count over the rows says."""
    trace = load_trace(external_trace("kineto__tb_resnet50_nw0_worker0_2021early.pt.trace.json.gz"))
    table = kernel_stats(trace)
    g = trace.gpu
    lost = g.loc[g["launch_row"].to_numpy() < 0, "key"].astype(str).value_counts()
    assert int(table["no_launch"].sum()) == 733
    assert dict(zip(table["key"], table["no_launch"].tolist())) == {k: int(lost.get(k, 0)) for k in table["key"]}
    assert (table["no_launch"] > 0).sum() == len(lost) > 1
