"""analysis/advice.py: each "try next" rule fires on a trace with its evidence and stays quiet on one without.

Real traces where they hold the case; small traces written here otherwise (low occupancy). Figures
that can be counted from the JSON alone (pageable copies, syncs inside steps) are counted here from
the JSON, not through kerneltui.
"""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from functools import cache
from pathlib import Path

import orjson
import pytest

from kerneltui.analysis.advice import advice
from kerneltui.analysis.overview import overview
from kerneltui.trace import load_trace

ROOT = Path(__file__).resolve().parents[2]
GPT = ROOT / "tests/data/traces/gpt_train_eager.json.gz"
RESNET18_EAGER = ROOT / "tests/data/traces/resnet18_train_eager.json.gz"
RESNET18_COMPILED = ROOT / "tests/data/traces/resnet18_train_compiled.json.gz"
RESNET50_2021 = ROOT / "tests/data/external/kineto__tb_resnet50_nw0_worker0_2021early.pt.trace.json.gz"
NCCL_RANK0 = ROOT / "tests/data/external/hta__trace_filter__sampled_rank-0.json.gz"
ITEM_PRINT_CPU = ROOT / "tests/data/cpu/item_print_batch32_width64_eager.json.gz"
H200 = [ROOT / "traces/add_relu_1M_eager.json.gz", ROOT / "traces/add_relu_1M_compiled.json.gz"]


@cache
def findings(path: Path) -> dict:
    t = load_trace(str(path), cache=False)
    return {f.rule: f for f in advice(t, overview(t))}


def raw_events(path: Path) -> list[dict]:
    return json.loads(gzip.open(path).read())["traceEvents"]


@pytest.mark.parametrize("path", H200, ids=lambda p: p.name)
def test_no_rule_fires_on_the_shipped_h200_add_relu_traces(path):
    assert findings(path) == {}


# 1. CPU-bound steps

def test_cpu_bound_fires_on_the_gpt_step():
    f = findings(GPT)["cpu_bound"]
    assert f.evidence == ("CPU-only 45.8% of the mean step (5.71ms of 12.45ms), GPU utilization 31.5%,"
                          " 270 kernel launches per step")
    assert f.action == 'capture the step in a CUDA graph: torch.compile(model, mode="reduce-overhead") or torch.cuda.graphs'
    assert f.confidence == "medium"  # 45.8 % < 50 %
    assert findings(RESNET18_EAGER)["cpu_bound"].confidence == "high"  # 64.7 %
    assert findings(RESNET18_EAGER)["cpu_bound"].evidence.startswith("CPU-only 64.7% of the mean step")


def test_cpu_bound_stays_quiet_where_the_gpu_is_busy():
    assert "cpu_bound" not in findings(RESNET50_2021)  # CPU-only 8.6 %, GPU busy 70.4 %


def test_gpt_kernel_launches_per_step_match_the_json():
    ev = raw_events(GPT)
    steps = [(e["ts"], e["ts"] + e["dur"]) for e in ev
             if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#")]
    launch_ts = {e["args"]["correlation"]: e["ts"] for e in ev
                 if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})}
    kernels = [e["args"]["correlation"] for e in ev if e.get("cat") == "kernel"]
    inside = sum(any(lo <= launch_ts[c] <= hi for lo, hi in steps) for c in kernels)
    assert (len(steps), inside) == (3, 810)  # 270 a step


# 2. DataLoader

def test_dataloader_fires_on_the_2021_resnet50_trace():
    f = findings(RESNET50_2021)["dataloader"]
    assert f.evidence == "DataLoader 20.3% of the mean step (31.42ms of 154.75ms)"
    assert f.action == "load in background processes: DataLoader(num_workers=N, pin_memory=True, persistent_workers=True)"
    assert f.confidence == "high"


def test_dataloader_stays_quiet_without_dataloader_time():
    assert "dataloader" not in findings(GPT)


# 3. Pageable host copies

def test_pageable_copies_fire_and_match_the_json():
    pageable = [e for e in raw_events(RESNET50_2021) if e.get("cat", "").lower() in ("gpu_memcpy", "memcpy") and "Pageable" in e["name"]]
    assert len(pageable) == 12
    f = findings(RESNET50_2021)["pageable_copies"]
    assert f.evidence == "12 pageable copies (H2D pageable), 12.73ms of copy time"
    assert f.confidence == "high"
    assert f.action.startswith("pin the host tensors: tensor.pin_memory()")


def test_pageable_copies_stay_quiet_on_pinned_copies():
    names = {e["name"] for e in raw_events(GPT) if e.get("cat", "").lower() in ("gpu_memcpy", "memcpy")}
    assert names == {"Memcpy HtoD (Pinned -> Device)"}
    assert "pageable_copies" not in findings(GPT)


# 4. Many tiny kernels in eager

def test_tiny_kernels_fire_on_eager_resnet18():
    f = findings(RESNET18_EAGER)["tiny_kernels"]
    assert f.evidence == "346 kernels per step, mean 8.17µs each; no compiled graph in the trace"
    assert f.action == "fuse them: model = torch.compile(model)"
    assert f.confidence == "medium"


def test_tiny_kernels_stay_quiet_when_compiled_or_kernels_are_long():
    assert "tiny_kernels" not in findings(RESNET18_COMPILED)  # compiled (Inductor kernels)
    assert "tiny_kernels" not in findings(GPT)  # eager, but mean kernel 14.4 µs


# 5. Synchronisations inside the step

def test_syncs_inside_steps_fire_and_match_the_json():
    ev = raw_events(RESNET50_2021)
    steps = [(e["ts"], e["ts"] + e["dur"]) for e in ev
             if e.get("cat") in ("user_annotation", "cpu_op", "Operator") and e["name"].startswith("ProfilerStep#")]
    syncs = [e for e in ev if e.get("name") == "cudaStreamSynchronize" and any(lo <= e["ts"] <= hi for lo, hi in steps)]
    assert len(syncs) == 12
    f = findings(RESNET50_2021)["sync_in_step"]
    assert f.evidence == "cudaStreamSynchronize x12 inside 6 steps, 603.0µs on the CPU"
    assert f.confidence == "high"


def test_syncs_stay_quiet_outside_steps_and_on_cpu_captures():
    assert "sync_in_step" not in findings(GPT)  # its cudaDeviceSynchronize is outside the steps
    assert "sync_in_step" not in findings(ITEM_PRINT_CPU)  # .item() in steps, but no GPU to wait for


# 6. Low-occupancy kernels (a made trace: no shipped one has such a kernel)

def write_trace(tmp_path: Path, kernels: list[tuple[str, float, float]]) -> Path:
    events, ts = [], 100.0
    for corr, (name, dur, occ) in enumerate(kernels, 1):
        events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": ts - 5,
                       "dur": 3, "args": {"correlation": corr, "External id": corr}})
        events.append({"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": ts, "dur": dur,
                       "args": {"External id": corr, "correlation": corr, "device": 0, "stream": 7,
                                "grid": [4, 1, 1], "block": [1024, 1, 1], "registers per thread": 128,
                                "shared memory": 0, "est. achieved occupancy %": occ}})
        ts += dur + 10
    path = tmp_path / "made.json"
    path.write_bytes(orjson.dumps({"traceEvents": events}))
    return path


def test_low_occupancy_fires_on_a_big_kernel_at_low_occupancy(tmp_path):
    path = write_trace(tmp_path, [("void big_kernel<float>(float*)", 80, 12.5),
                                  ("void small_kernel<float>(float*)", 20, 50)])
    assert list(findings(path)) == ["low_occupancy"]
    f = findings(path)["low_occupancy"]
    assert f.evidence == ("big_kernel[f32]: 80.0% of kernel time (1 launch), est. achieved occupancy 12.5%,"
                          " 128 registers/thread, 0 B shared memory, block 1024x1x1, grid 4x1x1")
    assert f.confidence == "medium"


def test_low_occupancy_stays_quiet_on_small_or_unknown_or_communication_kernels(tmp_path):
    assert findings(write_trace(tmp_path, [("void big_kernel<float>(float*)", 80, 25),  # at the threshold
                                           ("void tiny_kernel<float>(float*)", 8, 10),  # 7.4 % of the time
                                           ("void cublas_gemm<float>(float*)", 20, 0)])) == {}  # 0 = unknown
    assert "low_occupancy" not in findings(NCCL_RANK0)  # ncclKernel_SendRecv at 4.7 %: waiting by design


# The reports

def test_summary_json_and_overview_table_carry_try_next():
    out = subprocess.run([sys.executable, "-m", "kerneltui", "summary", str(RESNET50_2021), "--format", "json"],
                         capture_output=True, text=True, check=True).stdout
    doc = json.loads(out)
    assert [f["rule"] for f in doc["try_next"]] == ["dataloader", "pageable_copies", "sync_in_step"]
    assert set(doc["try_next"][0]) == {"rule", "finding", "evidence", "action", "confidence"}
    table = subprocess.run([sys.executable, "-m", "kerneltui", "summary", str(H200[0]), "--overview"],
                           capture_output=True, text=True, check=True).stdout
    assert table.endswith("try next\nno rule found evidence in this trace (rules and thresholds: docs/overview.md)\n")
    md = subprocess.run([sys.executable, "-m", "kerneltui", "summary", str(GPT), "--overview", "--format", "markdown"],
                        capture_output=True, text=True, check=True).stdout
    assert "## Try next" in md and "| cpu_bound | the steps are CPU-bound" in md


def test_overview_csv_carries_the_steps_and_the_try_next_findings():
    """One CSV: ``record`` says which; step rows leave the finding columns empty and finding rows the step columns."""
    import csv
    import io

    out = subprocess.run([sys.executable, "-m", "kerneltui", "summary", str(GPT), "--overview", "--format", "csv",
                          "--no-cache"], capture_output=True, text=True, check=True).stdout
    lines = out.splitlines()
    assert lines[0] == ("record,step,span_ns,kernel_ns,memcpy_ns,memset_ns,comm_ns,dataloader_ns,cpu_only_ns,other_ns,"
                        "outlier,rule,finding,evidence,action,confidence")
    assert lines[1] == "step,2,12733536,3900553,6111,35584,0,0,5580916,3210372,False,,,,,"
    rows = list(csv.DictReader(io.StringIO(out)))
    assert [r["record"] for r in rows] == ["step"] * 3 + ["try_next"] * 2
    assert [r["rule"] for r in rows[3:]] == ["cpu_bound", "unfused_casts"]
    cpu = rows[3]
    assert cpu["evidence"] == findings(GPT)["cpu_bound"].evidence
    assert cpu["action"] == 'capture the step in a CUDA graph: torch.compile(model, mode="reduce-overhead") or torch.cuda.graphs'
    assert cpu["confidence"] == "medium"
    assert all(cpu[k] == "" for k in ("step", "span_ns", "kernel_ns", "outlier"))
    assert rows[4]["confidence"] == "high" and rows[4]["evidence"].startswith("282 cast kernels")
    empty = subprocess.run([sys.executable, "-m", "kerneltui", "summary", str(H200[0]), "--overview", "--format", "csv",
                            "--no-cache"], capture_output=True, text=True, check=True).stdout
    assert empty.splitlines()[1:] == []  # no steps and no finding: the header alone
