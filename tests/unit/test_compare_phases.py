"""Forward, backward, optimizer, and what ran outside compiled code: ResNet-18, GPT, and made steps."""

from __future__ import annotations

import numpy as np
import pytest

from kerneltui.analysis.compare.phases import PhaseRow, gpu_compiled, gpu_phases, phase_breakdown
from kerneltui.analysis.compare.workload import gpu_kernel_classes
from kerneltui.trace import Kind, load_trace
from tests.conftest import shared_trace
from tests.kineto_builder import TraceBuilder


@pytest.fixture(scope="module")
def resnet():
    return load_trace(shared_trace("resnet18_train_eager")), load_trace(shared_trace("resnet18_train_compiled"))


def per_step(trace, mask):
    """(launches, ns) per step of the GPU rows in mask."""
    steps = trace.iterations.count
    return mask.sum() / steps, trace.gpu["dur"].to_numpy()[mask].sum() / steps


def test_resnet_phases_match_an_independent_count(resnet):
    """Counted from the JSON alone (launch thread/time against ProfilerStep, evaluate_function, Optimizer.*)."""
    eager, compiled = resnet
    for trace in resnet:
        assert (gpu_phases(trace) != "").all()  # every launch is inside a step
    ph = gpu_phases(eager)
    kernel = eager.gpu["kind"].to_numpy() == Kind.KERNEL
    other = kernel & (gpu_kernel_classes(eager) == "")  # non-library kernels (memsets, memcpy apart)
    assert per_step(eager, other & (ph == "forward")) == (149, 704731.5)
    assert per_step(eager, other & (ph == "backward")) == (111, 726171.5)
    assert per_step(eager, ph == "optimizer") == (3, 104272.0)
    ph = gpu_phases(compiled)
    triton = compiled.gpu["full_name"].astype(str).str.startswith("triton_").to_numpy()
    assert per_step(compiled, triton & (ph == "forward")) == (106, 328687.0)
    assert per_step(compiled, triton & (ph == "backward")) == (103, 497995.0)
    assert per_step(compiled, ph == "optimizer") == (3, 108415.5)


def test_resnet_breakdown_shows_the_eager_loss_and_optimizer_outside_compiled_code(resnet):
    rows = phase_breakdown(*resnet)
    assert rows == [
        PhaseRow("forward", 181.0, 142.0, 1276120.5, 907312.0, None, None, 4.0, 7744.0),
        PhaseRow("backward", 181.0, 176.0, 1471561.0, 1245687.5, None, None, 4.0, 5536.5),
        PhaseRow("optimizer", 3.0, 3.0, 104272.0, 108415.5, None, None, 3.0, 108415.5),
    ]
    assert sum(r.a_launches for r in rows) == 365 and sum(r.b_launches for r in rows) == 321
    assert sum(r.a_ns for r in rows) == pytest.approx(2851953.5) and sum(r.b_ns for r in rows) == 2261415.0


def test_resnet_autograd_thread_is_unnamed_so_evaluate_function_decides(resnet):
    eager, _ = resnet
    assert "pt_autograd" not in " ".join(eager.lanes["thread"])
    assert (gpu_phases(eager) == "backward").sum() == 2 * 181


def test_gpt_phases_per_step():
    t = load_trace(shared_trace("gpt_train_eager"))
    ph = gpu_phases(t)
    counts = {p: int((ph == p).sum()) // 3 for p in ("forward", "backward", "optimizer")}
    assert counts == {"forward": 103, "backward": 208, "optimizer": 4}  # 315 per step, as counted from the JSON


def test_forward_only_calls_are_all_forward_and_compiled():
    a, b = load_trace(shared_trace("mlp_bf16_eager")), load_trace(shared_trace("mlp_bf16_compiled"))
    assert gpu_compiled(b).all() and not gpu_compiled(a).any()
    rows = phase_breakdown(a, b)
    assert [(r.phase, r.a_launches, r.b_launches, r.a_outside_launches, r.b_outside_launches) for r in rows] == [
        ("forward", 7.0, 7.0, None, 0.0)
    ]


def test_made_step_each_rule(tmp_path):
    b = TraceBuilder()
    b.events.append({"ph": "M", "name": "thread_name", "pid": 1, "tid": 2,
                     "args": {"name": "thread 2 (pt_autograd_0)"}})
    b.op("aten::fill_", kernels=[("fill_before", 1.0)])  # before any step
    b.op("aten::mul", kernels=[("autograd_thread_before", 1.0)], tid=2)  # no phase outside a step, whatever thread
    with b.step():
        with b.region("Torch-Compiled Region: 0/0"):
            with b.region("CompiledFunction"):
                b.op("triton_poi_fused_relu_0", kernels=[("triton_poi_fused_relu_0", 2.0)])
        b.op("aten::nll_loss_forward", kernels=[("nll_loss_forward", 3.0)])  # the eager loss
        with b.region("CompiledFunctionBackward", tid=2):
            b.op("triton_poi_fused_threshold_backward_0", kernels=[("triton_bwd", 4.0)], tid=2)
        b.op("aten::mul", kernels=[("mul_on_autograd_thread", 5.0)], tid=2)  # unnamed node, named thread
        with b.region("autograd::engine::evaluate_function: NllLossBackward0"):
            b.op("aten::nll_loss_backward", kernels=[("nll_loss_backward", 6.0)])
        with b.region("Optimizer.zero_grad#SGD.zero_grad", cat="user_annotation"):
            b.op("aten::zero_", kernels=[("zero", 7.0)])
        with b.region("Optimizer.step#SGD.step", cat="user_annotation"):
            b.op("aten::_foreach_add_", kernels=[("foreach_add", 8.0)])
    trace = load_trace(b.write(tmp_path / "t.json"))
    g = trace.gpu
    got = dict(zip(g["full_name"].astype(str), zip(gpu_phases(trace), gpu_compiled(trace))))
    assert got == {
        "fill_before": ("", False),
        "autograd_thread_before": ("", False),
        "triton_poi_fused_relu_0": ("forward", True),
        "nll_loss_forward": ("forward", False),
        "triton_bwd": ("backward", True),
        "mul_on_autograd_thread": ("backward", False),
        "nll_loss_backward": ("backward", False),
        "zero": ("optimizer", False),
        "foreach_add": ("optimizer", False),
    }
    assert isinstance(gpu_phases(trace), np.ndarray)
    rows = {r.phase: r for r in phase_breakdown(trace, trace)}
    assert (rows["backward"].a_launches, rows["backward"].a_ns, rows["backward"].a_outside_launches,
            rows["backward"].a_outside_ns) == (3.0, 15000.0, 2.0, 11000.0)
    assert (rows["optimizer"].b_launches, rows["optimizer"].b_outside_ns) == (2.0, 15000.0)


@pytest.mark.parametrize(("kind", "test", "count"), [
    (Kind.CPU_OP, lambda n: n == "aten::convolution", 40),  # one name
    (Kind.CPU_OP, lambda n: n.startswith("aten::conv"), 160),  # several: conv2d (80), convolution, convolution_backward
    (Kind.ANNOTATION, lambda n: n.startswith("aten::conv"), 0),  # names that pass, none of this kind
    (Kind.CPU_OP, lambda n: False, 0),
])
def test_named_rows_are_the_events_of_the_kind_whose_name_passes(resnet, kind, test, count):
    from kerneltui.analysis.compare.phases import named_rows

    trace = resnet[0]
    ev = trace.events
    expected = [row for row, (k, code) in enumerate(zip(ev["kind"], ev["name"]))
                if k == kind and code >= 0 and test(trace.names[code])]
    assert named_rows(trace, kind, test).tolist() == expected
    assert len(expected) == count
