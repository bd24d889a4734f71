"""launch_search: a pattern matches a launch's kernel names, op stack, step, source line or module."""

from __future__ import annotations

import numpy as np
import pytest

from kerneltui.analysis.explore import launch_context, launch_search, match_totals
from kerneltui.errors import UserError
from kerneltui.trace import load_trace
from kerneltui.trace.filters import matching_rows
from tests.conftest import shared_trace
from tests.kineto_builder import TraceBuilder


@pytest.fixture(scope="module")
def gpt():
    trace = load_trace(shared_trace("gpt_train_eager"))
    ctx = launch_context(trace)
    return trace, ctx, launch_search(trace, ctx)


def stack_names(trace, launch: int) -> list[str]:
    names = trace.events["name"]
    return [trace.name(int(names.iat[r])) for r in trace.ancestors(int(trace.gpu["launch_row"].iat[launch]))]


def test_an_op_name_matches_what_it_launched(gpt):
    trace, _, search = gpt
    every_name = set(trace.names)
    assert {n for n in every_name if "aten::mm" in n.lower()} == {"aten::mm"}  # a substring of nothing else
    expected = np.array([any("aten::mm" in n.lower() for n in stack_names(trace, i)) for i in range(len(trace.gpu))])
    got = search.match("aten::mm")
    assert got.dtype == bool and np.array_equal(got, expected) and int(got.sum()) == 120
    assert search.fields("aten::mm", int(np.flatnonzero(got)[0])) == ("op",)
    # aten::mm launched nvjet GEMMs, and memsets
    assert {"nvjet" in s or s == "Memset (Device)" for s in trace.gpu["short"][got].astype(str)} == {True}


def test_a_step_matches_everything_launched_in_it_from_any_thread(gpt):
    trace, _, search = gpt
    got = search.match("ProfilerStep#3")
    step = trace.gpu["iteration"].to_numpy() == 1
    assert np.array_equal(got, step) and int(got.sum()) == 315
    # only a third of them have ProfilerStep#3 in their stack: autograd launches the backward pass
    assert sum("ProfilerStep#3" in stack_names(trace, i) for i in np.flatnonzero(step)) == 107
    assert search.fields("profilerstep#3", int(np.flatnonzero(step)[-1])) == ("annotation",)


def test_kernel_names_source_lines_and_modules(gpt):
    trace, _, search = gpt
    g = trace.gpu
    nvjet = search.match("/nvjet.*")
    assert np.array_equal(nvjet, matching_rows(g, "/nvjet.*")) and int(nvjet.sum()) == 153
    assert search.fields("/nvjet.*", int(np.flatnonzero(nvjet)[0])) == ("kernel",)
    src = trace.gpu_sources
    line = search.match("gpu_corpus.py(253)")
    assert np.array_equal(line, src["source"].str.contains("gpu_corpus.py(253)", regex=False).to_numpy())
    assert int(line.sum()) == 27
    module = search.match("Linear_16")
    assert np.array_equal(module, src["module"].str.contains("Linear_16", regex=False).to_numpy()) and module.any()
    first = int(np.flatnonzero(module)[0])
    assert "module" in search.fields("linear_16", first)
    assert search.fields("TinyGPT_0", 2) == ("module",) and search.fields("forward", 2) == ("source",)


def test_empty_bad_and_case(gpt):
    _, _, search = gpt
    assert search.match("") is None and search.fields("", 0) == ()
    with pytest.raises(UserError):
        search.match("/nvjet[")
    assert np.array_equal(search.match("ATEN::MM"), search.match("aten::mm"))
    assert not search.match("no such thing anywhere").any()


def test_match_totals(gpt):
    trace, _, search = gpt
    g = trace.gpu
    mask = search.match("aten::mm")
    assert match_totals(trace, mask) == (120, int(g["dur"].to_numpy()[mask].sum()))
    assert match_totals(trace, None) == (945, int(g["dur"].sum()))


def test_small_trace_counts_from_the_json(tmp_path):
    b = TraceBuilder()
    for _ in range(2):
        with b.step():
            with b.region("my_block", cat="user_annotation"):
                b.op("aten::addmm", kernels=[("nvjet_gemm", 5.0), ("bias_kernel", 1.0)])
                b.op("aten::relu", kernels=[("relu_kernel", 1.0)])
            b.op("aten::add", kernels=[("add_kernel", 1.0)])
    path = b.write(tmp_path / "t.json")
    trace = load_trace(path)
    ctx = launch_context(trace)
    search = launch_search(trace, ctx)
    # from the JSON: launches whose runtime call lies inside a my_block annotation
    blocks = [(e["ts"], e["ts"] + e["dur"]) for e in b.events if e["name"] == "my_block"]
    calls = sorted(e["ts"] for e in b.events if e["cat"] == "cuda_runtime")
    expected = sum(any(a <= t <= z for a, z in blocks) for t in calls)
    assert expected == 6 and int(search.match("my_block").sum()) == expected
    assert int(search.match("relu").sum()) == 2  # the op and its kernel: the same two launches
    assert int(search.match("ProfilerStep#2").sum()) == 4
    assert int(search.match("/^aten::add$").sum()) == 2
    assert int(search.match("aten::add").sum()) == 6  # aten::addmm too
