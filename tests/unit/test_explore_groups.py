"""group_stats: the kernel table grouped by kernel, launching op, module, source line or step."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from kerneltui.analysis.attribution import attribute
from kerneltui.analysis.explore import (
    GROUP_LABEL,
    GROUPINGS,
    available_groupings,
    group_codes,
    group_index,
    group_stats,
    launch_context,
    launch_search,
    scope_mask,
)
from kerneltui.trace import load_trace
from kerneltui.trace.summary import kernel_stats, per_iteration
from tests.conftest import external_trace, shared_trace, shared_trace_names

EXACT = ["key", "count", "total_ns", "mean_ns", "min_ns", "max_ns", "share"]


@pytest.fixture(scope="module")
def gpt():
    trace = load_trace(shared_trace("gpt_train_eager"))
    return trace, launch_context(trace)


@pytest.mark.parametrize("name", shared_trace_names())
def test_by_kernel_is_kernel_stats(name):
    trace = load_trace(shared_trace(name))
    ctx = launch_context(trace)
    ours = group_stats(trace, ctx, "kernel")
    theirs = kernel_stats(trace)
    assert len(ours) == len(theirs)
    for column in EXACT:
        assert ours[column].tolist() == theirs[column].tolist(), column
    assert ours["top"].tolist() == theirs["op"].tolist()
    assert ours["label"].tolist() == theirs["short"].tolist()
    assert (ours["kernels"] == 1).all()
    for by in available_groupings(trace, ctx):
        table = group_stats(trace, ctx, by)
        assert table["key"].is_unique
        assert int(table["count"].sum()) == len(trace.gpu) and int(table["total_ns"].sum()) == int(trace.gpu["dur"].sum())
        assert table["share"].sum() == pytest.approx(1.0)


def test_by_op_is_a_groupby_of_the_innermost_op(gpt):
    trace, ctx = gpt
    g = trace.gpu
    table = group_stats(trace, ctx, "op").set_index("key")
    expected = g.groupby(g["op"].astype(str))["dur"].agg(["count", "sum", "min", "max"])
    assert set(table.index) == set(expected.index)
    for op, row in expected.iterrows():
        assert (table.loc[op, "count"], table.loc[op, "total_ns"]) == (row["count"], row["sum"])
        assert (table.loc[op, "min_ns"], table.loc[op, "max_ns"]) == (row["min"], row["max"])
    distinct = g.groupby(g["op"].astype(str))["key"].nunique()
    assert table["kernels"].to_dict() == distinct.to_dict()
    mm = table.loc["aten::mm"]
    assert mm["label"] == "aten::mm" and mm["count"] == 120 and mm["top"].startswith("nvjet")
    ordered = group_stats(trace, ctx, "op")
    assert ordered["total_ns"].is_monotonic_decreasing


def test_by_step_module_and_source(gpt):
    trace, ctx = gpt
    steps = group_stats(trace, ctx, "step")
    assert sorted(steps["label"]) == ["ProfilerStep#2", "ProfilerStep#3", "ProfilerStep#4"]
    assert steps["count"].tolist() == [315, 315, 315]
    per_it = per_iteration(trace).set_index("label")
    for label, total in zip(steps["label"], steps["total_ns"]):
        assert total == per_it.loc[label, "gpu_ns"]
    # by module: where the time belongs (attribution), forward and backward on the forward op's module
    modules = group_stats(trace, ctx, "module").set_index("key")
    a = attribute(trace)
    assert modules.loc["(outside any module)", "count"] == 9 and modules.loc["optimizer", "label"] == "optimizer (AdamW)"
    assert modules["count"].to_dict() == pd.Series(np.where(a.unit != "", a.unit, "(" + a.unplaced.astype(str) + ")"))\
        .value_counts().to_dict()
    linear = modules.loc["TinyGPT_0.Block_1.Sequential_1.Linear_6"]
    assert (linear["count"], linear["total_ns"]) == (36, 415677)  # its forward and its backward
    src = trace.gpu_sources
    sources = group_stats(trace, ctx, "source").set_index("key")
    assert sources.loc["", "label"] == "(no source line)"
    assert sources["count"].to_dict() == src["source"].value_counts().to_dict()
    assert sources.loc["gpu_corpus.py(253): forward", "count"] == 27


def test_masked_groups_are_kernel_stats_of_the_masked_rows(gpt):
    trace, ctx = gpt
    mask = scope_mask(trace, 1) & launch_search(trace, ctx).match("aten::")
    ours = group_stats(trace, ctx, "kernel", mask)
    theirs = kernel_stats(trace, trace.gpu[mask])
    for column in ["key", "count", "total_ns", "min_ns", "max_ns"]:
        assert ours[column].tolist() == theirs[column].tolist(), column
    # shares are of the masked GPU time
    assert ours["share"].sum() == pytest.approx(1.0)
    assert ours["share"].iloc[0] == ours["total_ns"].iloc[0] / trace.gpu["dur"][mask].sum()


def test_empty_mask_and_unknown_grouping(gpt):
    trace, ctx = gpt
    empty = group_stats(trace, ctx, "op", np.zeros(len(trace.gpu), bool))
    assert len(empty) == 0 and list(empty.columns) == ["key", "label", "count", "total_ns", "mean_ns", "min_ns",
                                                        "max_ns", "share", "kernels", "top"]
    with pytest.raises(ValueError):
        group_stats(trace, ctx, "colour")


def test_available_groupings_and_scope():
    gpt = load_trace(shared_trace("gpt_train_eager"))
    assert available_groupings(gpt, launch_context(gpt)) == GROUPINGS
    resnet = load_trace(shared_trace("resnet18_train_eager"))
    # without stacks the module grouping places launches by forward op
    assert available_groupings(resnet, launch_context(resnet)) == ("kernel", "op", "module", "step")
    single = load_trace(shared_trace("add_relu_1M_eager"))
    assert available_groupings(single, launch_context(single)) == ("kernel", "op", "module")
    assert set(GROUP_LABEL) == set(GROUPINGS)
    assert scope_mask(gpt, None) is None
    assert int(scope_mask(gpt, 2).sum()) == 315


def test_group_index_is_built_once_per_context(gpt):
    trace, ctx = gpt
    assert group_index(trace, ctx) is group_index(trace, ctx, build=False)
    assert isinstance(group_stats(trace, ctx, "step"), pd.DataFrame)


def test_group_codes_name_the_rows_of_group_stats(gpt):
    trace, ctx = gpt
    for by in GROUPINGS:
        codes, keys = group_codes(trace, ctx, by)
        assert len(codes) == len(trace.gpu) and not codes.flags.writeable
        table = group_stats(trace, ctx, by).set_index("key")
        counts = pd.Series(np.asarray(keys, dtype=object)[codes]).value_counts()
        assert counts.to_dict() == table["count"].to_dict()


EXTERNAL = ["hta__amd_trace__mi250_minitoy_train_ROCm6_2_kineto.json.gz", "hta__trace_filter__sampled_rank-0.json.gz",
            "kineto__tb_resnet50_nw0_worker0_2021early.pt.trace.json.gz",
            "tracelens__inference__vllm_decode_full__graph_execution.json.gz"]


@pytest.mark.parametrize("path", [shared_trace(n) for n in shared_trace_names()] + [external_trace(n) for n in EXTERNAL],
                         ids=lambda p: p.name)
def test_the_table_from_per_class_sums_is_the_table_of_the_launches_kept(path):
    """A search and a step keep whole classes of launches (alike in all the search looks at): the table
    summed per class is the one summed launch by launch, frame for frame."""
    trace = load_trace(path)
    ctx = launch_context(trace)
    classes = launch_search(trace, ctx).combo_code
    index = group_index(trace, ctx)
    n_classes = int(classes.max()) + 1 if len(classes) else 0
    rng = np.random.default_rng(7)
    for by in available_groupings(trace, ctx):
        if index.class_sums(by, classes) is None:
            continue
        for kept in (np.ones(n_classes, bool), np.zeros(n_classes, bool), rng.random(n_classes) < 0.5,
                     rng.random(n_classes) < 0.1):
            ours = index.stats_of_classes(by, classes, kept)
            theirs = index.stats(by, kept[classes])
            pd.testing.assert_frame_equal(ours, theirs)


def test_per_class_sums_are_made_once_and_only_where_a_class_is_one_row(gpt):
    trace, ctx = gpt
    classes = launch_search(trace, ctx).combo_code
    index = group_index(trace, ctx)
    made = {by: index.class_sums(by, classes) for by in available_groupings(trace, ctx)}
    # a forward op's launches are placed on modules one by one: a class may span two modules
    assert [by for by, sums in made.items() if sums is None] == ["module"]
    assert index.stats_of_classes("module", classes, np.ones(354, bool)) is None
    kernel = made["kernel"]
    assert len(kernel.count) == 354 and int(kernel.count.sum()) == 945
    assert int(kernel.total.sum()) == int(trace.gpu["dur"].sum())
    assert index.class_sums("kernel", classes) is kernel  # made once for these classes
    assert index.class_sums("kernel", classes.copy()) is not kernel  # other classes: made for them
