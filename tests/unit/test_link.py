"""Linking kernels to launches, ops, steps and source lines, on real and crafted traces."""

from __future__ import annotations

import numpy as np
import orjson
import pandas as pd
import pytest

from kerneltui.trace import load_trace
from tests.conftest import PROJECT_TRACES, shared_trace


def test_eager_kernels_link_to_the_innermost_op():
    g = load_trace(PROJECT_TRACES / "add_relu_1M_eager.json.gz").gpu
    # aten::relu -> aten::clamp_min -> kernel: the kernel belongs to clamp_min
    assert g["op"].astype(str).tolist() == ["aten::add", "aten::clamp_min"]
    assert g["launch"].astype(str).tolist() == ["cudaLaunchKernel", "cudaLaunchKernel"]
    assert g["short"].astype(str).tolist() == [
        "vectorized_elementwise_kernel<CUDAFunctor_add>[f32]",
        "vectorized_elementwise_kernel<launch_clamp_scalar>[f32]",
    ]


def test_compiled_kernel_links_to_its_triton_op_and_stack():
    trace = load_trace(PROJECT_TRACES / "add_relu_1M_compiled.json.gz")
    g = trace.gpu
    assert g["op"].astype(str).tolist() == ["triton_poi_fused_add_relu_0"]
    assert g["launch"].astype(str).tolist() == ["cuLaunchKernel"]
    assert g["kernel_hash"].astype(str).tolist() == ["cyqo6qgngcleqcjm7nccqpqwmapn3gmvgbpsnnaser7sz3hxoxqi"]
    # one Triton name, one hash: the key is the plain name
    assert g["key"].astype(str).tolist() == ["triton_poi_fused_add_relu_0"]
    stack = [trace.name(int(trace.events["name"].iat[r])) for r in trace.ancestors(int(g["launch_row"].iat[0]))]
    assert stack == [
        "Torch-Compiled Region: 0/0",
        "## Call CompiledFxGraph fiqb4u5xzpxcsoundjww3ityicpcg4vasdmorhxnawc7l6ihztun ##",
        "triton_poi_fused_add_relu_0",
    ]
    shapes = trace.shapes(int(g["op_row"].iat[0]))
    assert (shapes["dims"], shapes["types"]) == ([[1000000], [1000000], [1000000], []], ["float", "float", "float", "Scalar"])
    assert set(shapes) <= {"dims", "types", "concrete", "strides"}  # Concrete Inputs and strides too, when recorded


def test_cuda_only_traces_link_launches_but_have_no_ops():
    g = load_trace(shared_trace("add_relu_1M_eager_cudaonly")).gpu
    assert g["launch"].astype(str).tolist() == ["cudaLaunchKernel", "cudaLaunchKernel"]
    assert g["op"].astype(str).tolist() == ["", ""]


@pytest.mark.parametrize(
    "name, source, count, per_call",
    [
        ("gpt_train_eager", "ProfilerStep", 3, 315),
        ("mlp_bf16_eager", "record_function 'mlp_forward'", 3, 7),
        ("mlp_bf16_compiled", "record_function 'mlp_forward'", 3, 7),
        ("norm_chain_eager", "repeated op sequence", 2, 10),
        ("norm_chain_compiled", "repeated op sequence", 2, 1),
        ("add_relu_100_eager", "repeated op sequence", 3, 2),
        ("add_relu_100_compiled", "repeated op sequence", 3, 1),
        ("add_relu_1M_eager", "whole trace", 1, 2),
    ],
)
def test_iterations_are_found_and_kernels_counted_per_call(name, source, count, per_call):
    trace = load_trace(shared_trace(name))
    its = trace.iterations
    assert (its.source, its.count) == (source, count)
    assert trace.gpu.groupby("iteration").size().tolist() == [per_call] * count


def test_steps_assign_backward_and_optimizer_kernels_by_launch_time():
    """GPU ProfilerStep spans miss autograd-thread kernels; CPU launch times do not (doc 4.5)."""
    g = load_trace(shared_trace("gpt_train_eager")).gpu
    assert sorted(g["step"].unique().tolist()) == [2, 3, 4]
    assert (g["step"] >= 0).all()
    assert g.groupby("step").size().tolist() == [315, 315, 315]


def test_module_and_source_frames_from_with_stack_traces():
    trace = load_trace(shared_trace("mlp_bf16_eager"))
    frames = trace.gpu_sources
    assert frames["source"].unique().tolist() == ["gpu_corpus.py(197): forward"]
    assert frames.groupby("module").size().to_dict() == {
        "MLP_0": 6,
        "MLP_0/LayerNorm_0": 3,
        "MLP_0/Linear_0": 6,
        "MLP_0/Linear_1": 6,
    }


def _event(ph, cat, name, ts, dur=None, tid=1, pid=1, **args):
    e = {"ph": ph, "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "args": args}
    if dur is not None:
        e["dur"] = dur
    return e


def test_cuda_graph_replays_are_attributed_to_their_graph_launch(tmp_path):
    events = [
        _event("X", "cpu_op", "Torch-Compiled Region: 0/0", 0, 100, **{"External id": 1}),
        _event("X", "cuda_runtime", "cudaGraphLaunch", 10, 5, correlation=50, **{"External id": 1}),
        *[
            _event("X", "kernel", f"triton_poi_fused_{i}", 20 + i * 3, 2, tid=7, pid=0, correlation=50, stream=7,
                   **{"External id": 1})
            for i in range(3)
        ],
    ]
    path = tmp_path / "graphs.json"
    path.write_bytes(orjson.dumps({"traceEvents": events}, option=orjson.OPT_INDENT_2))
    g = load_trace(path).gpu
    assert g["graph"].tolist() == [True, True, True]
    assert g["op"].astype(str).tolist() == ["cudaGraphLaunch"] * 3


def test_same_triton_name_with_two_hashes_stays_two_kernels(tmp_path):
    def op(ts, ext, kernel_hash):
        return _event("X", "cpu_op", "triton_poi_fused__to_copy_5", ts, 10, kernel_hash=kernel_hash,
                      **{"External id": ext})

    events = [
        op(0, 1, "aaaaaaa111"),
        _event("X", "cuda_driver", "cuLaunchKernel", 2, 5, correlation=10, **{"External id": 1}),
        _event("X", "kernel", "triton_poi_fused__to_copy_5", 20, 4, tid=7, pid=0, correlation=10,
               **{"External id": 1}),
        op(100, 2, "bbbbbbb222"),
        _event("X", "cuda_driver", "cuLaunchKernel", 102, 5, correlation=11, **{"External id": 2}),
        _event("X", "kernel", "triton_poi_fused__to_copy_5", 120, 6, tid=7, pid=0, correlation=11,
               **{"External id": 2}),
    ]
    path = tmp_path / "hashes.json"
    path.write_bytes(orjson.dumps({"traceEvents": events}, option=orjson.OPT_INDENT_2))
    g = load_trace(path).gpu
    assert g["key"].astype(str).tolist() == [
        "triton_poi_fused__to_copy_5@aaaaaaa111",
        "triton_poi_fused__to_copy_5@bbbbbbb222",
    ]
    assert g["short"].astype(str).tolist() == [
        "triton_poi_fused__to_copy_5@aaaaaa",
        "triton_poi_fused__to_copy_5@bbbbbb",
    ]


@pytest.mark.parametrize("codes, categories", [
    ([2, -1, 0, 2, 5], list("abcdef")),  # unused at the start, middle and end; a missing value
    ([-1, -1], list("ab")),  # nothing used
    ([], list("ab")),  # no rows
    ([-1], []),  # no categories
    (list(range(300)) * 2 + [299], [f"k{i}" for i in range(400)]),  # int16 codes that fit int16 still
    ([0, 1, 129], [f"k{i}" for i in range(130)]),  # 130 categories (int16), 3 used: int8 after
])
def test_used_only_is_remove_unused_categories(codes, categories):
    from kerneltui.trace.link import used_only

    for ordered in (False, True):
        c = pd.Categorical.from_codes(np.asarray(codes, np.int64), categories=categories, ordered=ordered)
        expected, got = c.remove_unused_categories(), used_only(c)
        pd.testing.assert_extension_array_equal(got, expected)
        assert got.codes.dtype == expected.codes.dtype
        assert list(got.categories) == list(expected.categories)


@pytest.mark.parametrize("codes, n", [
    ([3, -1, 0, 3, 1, 0, -1], 5),  # code 2 and 4 absent; -1 (none) left out
    ([-1, -1], 2),
    ([], 0),
    ([0], 1),
])
def test_first_of_codes_is_each_codes_first_row(codes, n):
    from kerneltui.trace.link import first_of_codes

    codes = np.asarray(codes, np.int64)
    distinct, first = first_of_codes(codes, n)
    unique, at = np.unique(codes, return_index=True)
    assert distinct.tolist() == unique[unique >= 0].tolist()
    assert first.tolist() == at[unique >= 0].tolist()
    assert first_of_codes(np.array([3, -1, 0, 3, 1, 0, -1]), 5)[1].tolist() == [2, 4, 0]  # codes 0, 1, 3


def test_names_per_key_are_each_keys_first_launchs_names():
    from kerneltui.trace.link import names_per_key

    g = load_trace(shared_trace("gpt_train_eager")).gpu
    first = g.groupby("key", observed=True, sort=False).head(1)  # each key's first launch, in row order
    both = names_per_key(g, "short", "full_name")
    for column, together in zip(("short", "full_name"), both):
        (names,) = names_per_key(g, column)
        assert names == together  # asked together or alone, the same names
        assert len(names) == len(g["key"].cat.categories)
        assert [names[c] for c in first["key"].cat.codes] == first[column].astype(str).tolist()
