"""Pairs `kerneltui capture` wrote on an H200 (torch 2.11, benchmarks/gpu_check.py): a training step
(AdamW, foreach) compiled whole, optimizer included, default and reduce-overhead, and a small GPT's.

Dynamo drops the ``Optimizer.step#`` annotation of a compiled step and Inductor records nothing for
its foreach kernels (tests/capture/test_provenance_layouts.py); addmm copies its bias into its
output before its GEMM; cuBLAS runs a GEMM as several kernels, with no op inside a CUDA-graph replay.
The counts below are taken from the JSON by name, independently of the loader.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from kerneltui.analysis.attribution import attribute
from kerneltui.analysis.compare.diff import diff_traces
from kerneltui.analysis.compare.phases import gpu_phases
from kerneltui.analysis.compare.workload import workload_signature
from kerneltui.trace import load_trace

DATA = Path(__file__).parent.parent / "data" / "capture_h200"
TRAIN = "train_step_batch64_width128"
GPT = "gpt_step_batch8_context64_width128_layers2_heads4_vocab512"


def trace(name: str):
    return load_trace(DATA / f"{name}.json.gz")


def kernels_in_steps(name: str, test) -> list[tuple[str, float]]:
    """(name, dur) of the kernels whose name passes `test`, launched (by their correlation's runtime or
    driver call) inside a ProfilerStep on the CPU."""
    events = json.loads(gzip.decompress((DATA / f"{name}.json.gz").read_bytes()))["traceEvents"]
    steps = [(e["ts"], e["ts"] + e["dur"]) for e in events
             if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#")]
    launched = {e["args"]["correlation"]: e["ts"] for e in events
                if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})}
    return [(e["name"], e["dur"]) for e in events if e.get("cat") == "kernel" and test(e["name"])
            and any(s <= launched.get(e["args"]["correlation"], -1) <= end for s, end in steps)]


@pytest.mark.parametrize(("name", "per_step"), [(f"{TRAIN}_compiled", 2), (f"{TRAIN}_compiled-reduce-overhead", 2),
                                                (f"{GPT}_compiled", 3)])
def test_a_compiled_optimizer_step_is_the_optimizer_phase(name, per_step):
    t = trace(name)
    foreach = kernels_in_steps(name, lambda n: n.startswith("triton_for_fused_"))
    assert len(foreach) == 3 * per_step
    phase = gpu_phases(t)
    mine = phase == "optimizer"
    assert sorted(t.names_of(t.gpu["name"].to_numpy()[mine]).tolist()) == sorted(n for n, _ in foreach)
    assert t.gpu["dur"].to_numpy()[mine].sum() / 1000 == pytest.approx(sum(d for _, d in foreach))
    attribution = attribute(t)
    assert set(attribution.unit[mine].tolist()) == {"optimizer"}


def test_the_eager_optimizer_stays_the_annotated_one():
    t = trace(f"{TRAIN}_eager")
    foreach = kernels_in_steps(f"{TRAIN}_eager", lambda n: "multi_tensor_apply_kernel" in n)
    assert len(foreach) == 3 * 8
    assert (gpu_phases(t) == "optimizer").sum() == len(foreach)


def test_the_training_steps_optimizer_fuses_into_two_foreach_kernels():
    diff = diff_traces(trace(f"{TRAIN}_eager"), trace(f"{TRAIN}_compiled"))
    assert diff.comparable.ok
    phases = {p.phase: (p.a_launches, p.b_launches) for p in diff.phases}
    assert phases["optimizer"] == (8, 2)
    m = diff.matches[diff.matches["phase"] == "optimizer"]
    rows = sorted(zip(m["kind"], m["a_count"], m["b_count"], m["b_name"], m["reason"]))
    # the eager step count `+= 1` is on CPU tensors (no kernel); compiled, it is triton_for_fused_0
    assert [row[:4] for row in rows] == [("fused", 8, 1, "triton_for_fused_1"), ("only B", 0, 1, "triton_for_fused_0")]
    assert rows[1][4] == "new in B: A has no kernel left here that their records' ops cover"
    # the two eager bias-gradient sums: one in each compiled reduction, the ReLU's backward with the second
    m = diff.matches
    sums = m[m["b_name"].str.contains("_sum_", na=False)]
    assert sorted(zip(sums["b_name"], sums["a_count"], sums["b_count"], sums["a_ns"].round(), sums["b_ns"])) == [
        ("triton_per_fused_nll_loss_forward_sum_threshold_backward_2", 2, 1, 4416, 1536),  # sum[64, 512] + ReLU's
        ("triton_per_fused_sum_1", 1, 1, 4565, 960)]  # sum[64, 10]
    assert diff.attribution["a_unmatched_share"] == 0
    assert diff.attribution["b_unmatched_share"] == pytest.approx(0.86 / 43.46, abs=0.001)  # triton_for_fused_0


def test_addmm_copying_its_bias_first_is_a_gemm_not_a_collective():
    # the compiled GPT's addmm launches a DtoD memcpy, then its GEMM: one GEMM call, as in the eager run
    a, b = trace(f"{GPT}_eager"), trace(f"{GPT}_compiled")
    sa, sb = workload_signature(a), workload_signature(b)
    assert "collective" not in sb.library_counts
    assert sb.library_counts["gemm"] == sa.library_counts["gemm"]
    diff = diff_traces(a, b)
    assert diff.comparable.ok
    m = diff.matches[diff.matches["phase"] == "optimizer"]
    fused = m[m["kind"] == "fused"].iloc[0]
    assert (fused["a_count"], fused["b_count"]) == (8, 2)  # per step: both foreach kernels of the update
    # the tied lm-head weight's gradient: eager mm then add, compiled one addmm into the gradient
    # (its bias copy first), at the end of the backward graph: the same GEMM, moved
    moved = diff.matches[diff.matches["reason"].str.endswith("at another place in the sequence")]
    assert moved[["phase", "a_count", "b_count", "reason"]].values.tolist() == [
        ["backward", 2, 3, ("same gemm (aten::mm [512, 512] [512, 128]), other kernels; at another place in the "
                            "sequence")]]


def test_gemms_split_over_cublas_kernels_in_a_graph_replay_are_one_call_each():
    a, b = trace(f"{TRAIN}_eager"), trace(f"{TRAIN}_compiled-reduce-overhead")
    # the replay's GEMM kernels: 8 a step, of which scal_kernel, globalKernel and splitKreduce serve others
    gemm_kernels = kernels_in_steps(f"{TRAIN}_compiled-reduce-overhead",
                                    lambda n: "gemm" in n or "scal_kernel" in n or "globalKernel" in n
                                    or "splitKreduce" in n)
    assert len(gemm_kernels) == 3 * 8
    assert workload_signature(b).library_counts["gemm"] == workload_signature(a).library_counts["gemm"] == 5
    diff = diff_traces(a, b)
    assert diff.comparable.ok
    # the replay's input copies (two DtoD memcpys and a memset a step) have no record and nothing in A
    alone = diff.matches[diff.matches["kind"] == "only B"]
    copies = alone[alone["b_name"].str.startswith("Memcpy DtoD")].iloc[0]
    assert (copies["b_count"], copies["reason"]) == (3, ("new in B: no provenance record, and nothing of the other "
                                                         "side left here"))


def test_bytes_known_for_part_of_one_sides_time_get_no_ratio():
    # the eager foreach optimizer records no shapes: A's bytes are 39% of its GPU time, B's all of it
    diff = diff_traces(trace(f"{TRAIN}_eager"), trace(f"{TRAIN}_compiled"))
    assert (round(diff.a.bytes_known_share, 2), diff.b.bytes_known_share) == (0.39, 1.0)
    assert diff.ratios["bytes"] != diff.ratios["bytes"] and diff.ratios["transfers"] != diff.ratios["transfers"]
    assert "A: bytes known for 39% of GPU time only: bytes and transfers get no ratio" in diff.notes


def test_a_gemm_whose_bias_add_inductor_took_says_both_ops():
    diff = diff_traces(trace(f"{TRAIN}_eager"), trace(f"{TRAIN}_compiled"))
    m = diff.matches
    row = m[m["reason"].str.contains("→ aten::mm", regex=False, na=False)]
    assert row[["kind", "a_count", "b_count", "reason"]].values.tolist() == [
        ["same", 1, 1, "same gemm (aten::addmm [64, 128] [128, 512] → aten::mm [64, 128] [128, 512]), same kernels"]]


def kernels_inside_op(name: str, op: str) -> list[str]:
    """Kernels of step 2 launched (their runtime call) inside a CPU op named `op`, on its thread."""
    events = json.loads(gzip.decompress((DATA / f"{name}.json.gz").read_bytes()))["traceEvents"]
    step = next(e for e in events if e.get("cat") == "user_annotation" and e["name"] == "ProfilerStep#2")
    spans = [(e["tid"], e["ts"], e["ts"] + e["dur"]) for e in events if e.get("cat") == "cpu_op" and e["name"] == op
             and step["ts"] <= e["ts"] <= step["ts"] + step["dur"]]
    calls = {e["args"]["correlation"]: (e["tid"], e["ts"]) for e in events
             if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})}
    return [e["name"] for e in events if e.get("cat") == "kernel" and (call := calls.get(e["args"]["correlation"]))
            and any(tid == call[0] and s <= call[1] <= end for tid, s, end in spans)]


def test_the_kernels_an_attention_backward_runs_inside_it_are_its_call():
    # the efficient-attention backward runs its mul, sum and copy_ as ops inside it, eager and compiled
    a, b = f"{GPT}_eager", f"{GPT}_compiled"
    inside_a = kernels_inside_op(a, "aten::_efficient_attention_backward")
    inside_b = kernels_inside_op(b, "aten::_efficient_attention_backward")
    assert len(inside_a) == len(inside_b) == 8  # 2 layers x (fmha backward, mul, sum, copy_)
    diff = diff_traces(trace(a), trace(b))
    row = diff.matches[diff.matches["reason"].str.startswith("same attention (aten::_efficient_attention_backward")]
    assert row[["kind", "a_count", "b_count"]].values.tolist() == [["same", 8, 8]]
