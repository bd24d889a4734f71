"""The recorder on live compiles (torch on this machine, the CPU in CI): the provenance faults of issue 22
and the partitioned layout, on small models written here (Inductor's C++ kernels stand in for Triton's)."""

from __future__ import annotations

import inspect

import pytest

torch = pytest.importorskip("torch")

from kerneltui.capture import provenance


class Attention(torch.nn.Module):
    def __init__(self, d: int = 16, heads: int = 2):
        super().__init__()
        self.qkv = torch.nn.Linear(d, 3 * d)
        self.heads = heads

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        q = q.view(b, t, self.heads, d // self.heads).transpose(1, 2)
        k = k.view(b, t, self.heads, d // self.heads).transpose(1, 2)
        v = v.view(b, t, self.heads, d // self.heads).transpose(1, 2)
        scores = torch.matmul(q, k.transpose(-2, -1)) / (d // self.heads) ** 0.5
        weights = scores.softmax(dim=-1)
        out = torch.matmul(weights, v)
        return out.transpose(1, 2).reshape(b, t, d)


def line_of(cls, text: str) -> int:
    source, first = inspect.getsourcelines(cls.forward)
    return first + next(i for i, s in enumerate(source) if text in s)


def compile_and_record(fn, inputs, patches=None) -> list[dict]:
    torch._dynamo.reset()
    patched = torch._inductor.config.patch({"fx_graph_cache": False, **(patches or {})})
    with patched, provenance.recording() as recorder:
        torch.compile(fn, backend=recorder.backend(None))(*inputs)
    block = recorder.block()
    assert block["source"] == provenance.TRACKING, block
    return block["kernels"]


@pytest.mark.skipif(torch.cuda.is_available(), reason="the CPU's attention op")
def test_fused_attention_names_the_matmul_and_softmax_lines():
    torch.manual_seed(0)
    with torch.no_grad():
        records = compile_and_record(Attention(), (torch.randn(2, 8, 16),))
    [attention] = [k for k in records if "scaled_dot_product" in k["name"]]
    lines = [s["line"] for s in attention["source_lines"]]
    assert lines[:3] == [line_of(Attention, "scores = "), line_of(Attention, "weights = "),
                         line_of(Attention, "out = torch.matmul")]
    assert attention["aten_ops"] == ["aten._scaled_dot_product_flash_attention_for_cpu.default"]


@torch.library.custom_op("kerneltui_test::scale", mutates_args=())
def scale(x: torch.Tensor) -> torch.Tensor:
    return x * 2


@scale.register_fake
def _(x):
    return torch.empty_like(x)


class Part(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.up = torch.nn.Linear(8, 8)
        self.down = torch.nn.Linear(8, 8)

    def forward(self, x):
        h = torch.relu(self.up(x))
        h = scale(h)
        return torch.sigmoid(self.down(h)) + 1


def test_kernels_inside_graph_partitions_get_their_records(monkeypatch):
    """A CUDA-graph capture's partitions, made on the CPU: the scheduler is told CPU nodes are
    cudagraphable, and the custom op splits the graph as a cudagraph-unsafe op would."""
    from torch._inductor.scheduler import Scheduler

    original = Scheduler.should_partition

    def should_partition(self, node):
        reason = original(self, node)
        return reason if reason is None or reason.startswith("custom") else None

    monkeypatch.setattr(Scheduler, "should_partition", should_partition)
    torch.manual_seed(0)
    with torch.no_grad():
        records = compile_and_record(Part(), (torch.randn(4, 8),), {
            "triton.cudagraphs": True, "custom_should_partition_ops": ["kerneltui_test::scale"]})
    up, scaled, down = (line_of(Part, text) for text in ("self.up(x)", "scale(h)", "self.down(h)"))
    found = [(k["subgraph"], k["name"], [s["line"] for s in k["source_lines"]]) for k in records]
    assert [(s, n) for s, n, _ in found] == [
        ("partition_0", "extern_kernels.addmm"), ("partition_0", "cpp_fused_relu_scale_0"),
        (None, "torch.ops.kerneltui_test.scale.default"),
        ("partition_1", "extern_kernels.addmm"), ("partition_1", "cpp_fused_add_sigmoid_1")]
    # Inductor counts the custom op among the relu kernel's nodes (its name says so): its line too
    assert [lines for *_, lines in found] == [[up], [scaled, up], [scaled], [down], [down]]
    assert all(k["aten_ops"] for k in records)
