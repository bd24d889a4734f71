"""launch_context: per-launch op stack, source line and module codes equal the per-launch lookups."""

from __future__ import annotations

import numpy as np
import pytest

from kerneltui.analysis.explore import launch_context
from kerneltui.trace import load_trace
from kerneltui.trace.schema import Kind
from tests.conftest import shared_trace
from tests.kineto_builder import TraceBuilder


def stacks_by_ancestors(trace) -> list[tuple[str, ...]]:
    names = trace.events["name"]
    return [tuple(trace.name(int(names.iat[r])) for r in trace.ancestors(int(row)))
            for row in trace.gpu["launch_row"].to_numpy()]


@pytest.mark.parametrize("name", ["gpt_train_eager", "resnet18_train_eager", "resnet18_train_compiled",
                                  "mlp_bf16_compiled", "add_relu_1M_eager_cudaonly"])
def test_every_launch_has_the_stack_ancestors_gives(name):
    trace = load_trace(shared_trace(name))
    ctx = launch_context(trace)
    assert [ctx.stacks[c] for c in ctx.stack_code] == stacks_by_ancestors(trace)
    assert ctx.stacks[0] == () and len(set(ctx.stacks)) == len(ctx.stacks)
    kinds = trace.events["kind"].to_numpy()
    for row, code in zip(trace.gpu["launch_row"].to_numpy()[:50], ctx.stack_code[:50]):
        assert ctx.stack_kinds[code] == tuple(int(kinds[r]) for r in trace.ancestors(int(row)))


def test_gpt_stacks_sources_and_modules():
    trace = load_trace(shared_trace("gpt_train_eager"))
    ctx = launch_context(trace)
    assert ctx.has_stacks and len(ctx.stack_code) == len(trace.gpu) == 945
    assert ctx.stack_of(2) == ("ProfilerStep#2", "aten::embedding", "aten::index_select", "aten::gather")
    src = trace.gpu_sources
    assert [ctx.sources[c] for c in ctx.source_code] == src["source"].tolist()
    assert [ctx.modules[c] for c in ctx.module_code] == src["module"].tolist()
    assert ctx.sources[0] == "" and ctx.modules[0] == ""
    assert ctx.source_of(2) == "gpu_corpus.py(253): forward" and ctx.module_of(2) == "TinyGPT_0/Embedding_0"
    assert len(ctx.sources) == 4 and len(ctx.modules) == 38
    # the backward pass runs on autograd's thread: its stacks start there, not at ProfilerStep#N
    lanes = trace.gpu["launch_lane"].to_numpy()
    autograd = int(trace.lanes.index[trace.lanes["thread"].str.contains("pt_autograd")][0])
    assert all(ctx.stacks[c][0].startswith("autograd::engine::evaluate_function")
               for c in ctx.stack_code[lanes == autograd])


def test_codes_are_read_only_and_empty_without_stacks():
    trace = load_trace(shared_trace("resnet18_train_eager"))
    ctx = launch_context(trace)
    assert not ctx.has_stacks and ctx.sources == ("",) and ctx.modules == ("",)
    assert not ctx.source_code.any() and not ctx.module_code.any()
    for a in (ctx.stack_code, ctx.source_code, ctx.module_code):
        assert not a.flags.writeable
        with pytest.raises(ValueError):
            a[0] = 1


def test_cuda_only_trace_has_no_stacks():
    ctx = launch_context(load_trace(shared_trace("add_relu_1M_eager_cudaonly")))
    assert ctx.stacks == ((),) and not ctx.stack_code.any()


def test_nested_annotations_and_ops_and_an_op_ending_at_the_launch(tmp_path):
    b = TraceBuilder()
    with b.step():
        with b.region("my_block", cat="user_annotation"), b.region("aten::linear"):
            b.op("aten::addmm", kernels=[("gemm", 5.0)])
        b.op("aten::relu", kernels=[("relu_kernel", 1.0)])
    # an op that ends exactly where relu's launch starts: ancestors() counts it (start <= t <= end)
    launch = [e for e in b.events if e["cat"] == "cuda_runtime"][-1]
    b.events.append({"ph": "X", "cat": "cpu_op", "name": "aten::touching", "pid": 1, "tid": 1,
                     "ts": launch["ts"] - 0.5, "dur": 0.5, "args": {}})
    trace = load_trace(b.write(tmp_path / "t.json"))
    ctx = launch_context(trace)
    assert [ctx.stacks[c] for c in ctx.stack_code] == stacks_by_ancestors(trace)
    assert ctx.stack_of(0) == ("ProfilerStep#1", "my_block", "aten::linear", "aten::addmm")
    assert ctx.stack_kinds[ctx.stack_code[0]] == (Kind.ANNOTATION, Kind.ANNOTATION, Kind.CPU_OP, Kind.CPU_OP)
    assert ctx.stack_of(1) == ("ProfilerStep#1", "aten::relu", "aten::touching")


def test_empty_trace(tmp_path):
    b = TraceBuilder()
    trace = load_trace(b.write(tmp_path / "t.json"))
    ctx = launch_context(trace)
    assert len(ctx.stack_code) == 0 and ctx.stacks == ((),) and np.asarray(ctx.source_code).size == 0
