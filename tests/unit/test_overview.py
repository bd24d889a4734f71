"""The overview's step split (analysis/overview.py) against an independent count from the trace JSON.

The count below reads the JSON itself (gzip + json, no kerneltui code) and splits each step a
different way: it cuts the step into elementary segments at every interval end, asks for each
segment which categories cover its midpoint, and gives it to the first in priority order.
"""

from __future__ import annotations

import gzip
import json
import re
import subprocess
import sys
from decimal import ROUND_HALF_EVEN, Decimal

import numpy as np
import pytest

from kerneltui.analysis.overview import overview, uses_tensor_cores
from kerneltui.trace import load_trace
from tests.conftest import EXTERNAL_TRACES, ROOT, SHARED_TRACES

PRIORITY = ("kernel", "memcpy", "memset", "comm", "dataloader", "cpu_only")
STEP_TRACES = [SHARED_TRACES / f"{n}.json.gz" for n in ("gpt_train_eager", "resnet18_train_eager", "resnet18_train_compiled")] + [
    EXTERNAL_TRACES / n for n in (
        "hta__amd_trace__mi250_minitoy_train_ROCm6_2_kineto.json.gz",
        "hta__nccl_parser_config__nccl_data.json.gz",
        "hta__trace_filter__sampled_rank-0.json.gz",
        "hta__trace_filter__sampled_rank-1.json.gz",
        "kineto__tb_resnet50_nw0_worker0_2021early.pt.trace.json.gz",
    )
]


def ns(us) -> int:
    """µs as written in the file (read as an exact Decimal) -> ns."""
    return int((Decimal(us) * 1000).to_integral_value(ROUND_HALF_EVEN))


def independent_split(path) -> dict[int, dict[str, int]]:
    """{step number: {part: ns}} computed straight from the JSON."""
    with gzip.open(path) as f:
        events = [e for e in json.load(f, parse_float=Decimal)["traceEvents"] if e.get("ph") == "X"]
    steps = []
    for e in events:
        m = re.fullmatch(r"ProfilerStep#(\d+)", str(e.get("name", "")))
        if m and str(e.get("cat", "")).lower() in ("user_annotation", "cpu_op", "operator"):
            steps.append((int(m.group(1)), ns(e["ts"]), ns(e["ts"]) + ns(e["dur"]), (e["pid"], e["tid"])))
    gpu_cats = {"kernel": "kernel", "gpu_memcpy": "memcpy", "memcpy": "memcpy", "gpu_memset": "memset", "memset": "memset"}
    intervals = {p: [] for p in PRIORITY}
    correlations = set()
    for e in events:
        cat = str(e.get("cat", "")).lower()
        if cat in gpu_cats:
            part = gpu_cats[cat]
            if part == "kernel" and re.search(r"nccl|rccl", e["name"], re.IGNORECASE):
                part = "comm"
            intervals[part].append((ns(e["ts"]), ns(e["ts"]) + ns(e["dur"])))
            correlations.add(e.get("args", {}).get("correlation"))
    threads = {s[3] for s in steps}
    for e in events:  # threads that launched GPU work
        if str(e.get("cat", "")).lower() in ("cuda_runtime", "cuda_driver", "runtime", "driver") \
                and e.get("args", {}).get("correlation") in correlations:
            threads.add((e["pid"], e["tid"]))
    for e in events:
        cat = str(e.get("cat", "")).lower()
        name = str(e.get("name", ""))
        span = (ns(e["ts"]), ns(e["ts"]) + ns(e["dur"]))
        if cat in ("cpu_op", "operator", "user_annotation") and name.startswith("enumerate(DataLoader)#"):
            intervals["dataloader"].append(span)
        if cat in ("cpu_op", "operator") and (e["pid"], e["tid"]) in threads and not re.fullmatch(r"ProfilerStep#\d+", name):
            intervals["cpu_only"].append(span)
    result = {}
    for number, lo, hi, _ in steps:
        clipped = {p: np.array([(max(a, lo), min(b, hi)) for a, b in iv if a < hi and b > lo], np.int64).reshape(-1, 2)
                   for p, iv in intervals.items()}
        cuts = np.unique(np.concatenate([[lo, hi], *(c.ravel() for c in clipped.values())]))
        seg_lo, seg_hi = cuts[:-1], cuts[1:]
        mid2 = seg_lo + seg_hi  # twice the midpoint: stays integral
        taken = np.zeros(len(seg_lo), bool)
        parts = {}
        for p in PRIORITY:
            c = clipped[p]
            # segments covered: count intervals with 2a <= mid2 <= 2b via sorted starts and ends
            covered = (np.searchsorted(np.sort(2 * c[:, 0]), mid2, side="right")
                       - np.searchsorted(np.sort(2 * c[:, 1]), mid2, side="left")) > 0
            mine = covered & ~taken
            parts[p] = int((seg_hi - seg_lo)[mine].sum())
            taken |= covered
        parts["other"] = int((seg_hi - seg_lo)[~taken].sum())
        parts["span"] = hi - lo
        result[number] = parts
    return result


@pytest.fixture(scope="module", params=STEP_TRACES, ids=lambda p: p.name.split(".")[0])
def both(request):
    return overview(load_trace(request.param, cache=False)), independent_split(request.param)


def test_parts_sum_to_span_and_are_non_negative(both):
    o, _ = both
    assert len(o.steps)
    parts = o.steps[[f"{p}_ns" for p in (*PRIORITY, "other")]].to_numpy()
    assert (parts >= 0).all()
    spans = o.steps["span_ns"].to_numpy()
    assert np.all(np.abs(parts.sum(axis=1) - spans) <= 0.001 * spans)
    assert np.array_equal(parts.sum(axis=1), spans)  # in fact exactly


def test_each_part_equals_the_independent_count(both):
    o, expected = both
    assert sorted(expected) == sorted(o.steps["step"].tolist())
    for r in o.steps.itertuples(index=False):
        got = {p: int(getattr(r, f"{p}_ns")) for p in (*PRIORITY, "other")}
        got["span"] = int(r.span_ns)
        assert got == expected[r.step], r.step


def test_gpt_split_exact():
    o = overview(load_trace(SHARED_TRACES / "gpt_train_eager.json.gz"))
    rows = [tuple(int(x) for x in r) for r in o.steps[["step", "span_ns", "kernel_ns", "memcpy_ns", "memset_ns", "comm_ns",
                                                        "dataloader_ns", "cpu_only_ns", "other_ns"]].to_numpy()]
    assert rows == [
        (2, 12733536, 3900553, 6111, 35584, 0, 0, 5580916, 3210372),
        (3, 12006841, 3856750, 6110, 34688, 0, 0, 5893470, 2215823),
        (4, 12613539, 3897441, 6048, 34112, 0, 0, 5651559, 3024379),
    ]
    assert not o.steps["outlier"].any()
    assert o.gpu_utilization == pytest.approx(0.3152921637452951)
    assert o.occupancy_coverage == pytest.approx(0.5617543379760207)  # nvjet/cuDNN kernels report 0: left out
    assert o.achieved_occupancy == pytest.approx(72.11806382151006)
    assert o.sm_efficiency == pytest.approx(0.9090017985445032)
    assert o.tensor_core_share == pytest.approx(0.4017035466416079)


def test_dataloader_time_on_a_trace_that_has_it():
    path = EXTERNAL_TRACES / "kineto__tb_resnet50_nw0_worker0_2021early.pt.trace.json.gz"
    o = overview(load_trace(path))
    assert o.steps["dataloader_ns"].tolist() == [10482000, 37456000, 28987000, 49981000, 25411000, 36220000]
    assert o.steps["step"].tolist() == [5, 6, 7, 8, 9, 10]


def test_communication_on_an_nccl_trace():
    o = overview(load_trace(EXTERNAL_TRACES / "hta__nccl_parser_config__nccl_data.json.gz"))
    assert o.steps["comm_ns"].tolist() == [10046927, 10432089, 18711653]


def test_no_steps_no_rows():
    o = overview(load_trace(SHARED_TRACES / "add_relu_1M_eager.json.gz"))
    assert not len(o.steps) and o.gpu_utilization is None
    assert o.to_dict()["steps"] == []


@pytest.mark.parametrize("name, uses", [
    ("nvjet_sm90_tst_192x128_64x5_1x2_h_bz_coopB_NNT", True),
    ("cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x128x64_4x1x1_cga1x1x1_kernel0_0", True),
    ("ampere_sgemm_128x64_nn", False),
    ("sm80_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x32_stage4_warpsize2x2x1_tensor16x8x16_kernel", True),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::BFloat16> >", False),
    ("volta_h884gemm_64x64_ldg8_nn", True),
])
def test_tensor_core_rule(name, uses):
    assert uses_tensor_cores(name) is uses


def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "kerneltui", "summary", *args], capture_output=True, text=True,
                          cwd=ROOT, check=False)


def test_cli_json_has_overview_with_and_without_the_flag():
    path = str(SHARED_TRACES / "gpt_train_eager.json.gz")
    for extra in ((), ("--overview",)):
        out = run_cli(path, "--format", "json", "--no-cache", *extra)
        assert out.returncode == 0, out.stderr
        steps = json.loads(out.stdout)["overview"]["steps"]
        assert [(s["step"], s["span_ns"], s["cpu_only_ns"]) for s in steps] == [
            (2, 12733536, 5580916), (3, 12006841, 5893470), (4, 12613539, 5651559)]


def test_cli_table_csv_markdown():
    path = str(SHARED_TRACES / "gpt_train_eager.json.gz")
    table = run_cli(path, "--overview", "--no-cache")
    assert table.returncode == 0, table.stderr
    assert "step spans (! = outlier)" in table.stdout and "no outlier step" in table.stdout
    assert "     2  12.73ms   3.90ms" in table.stdout
    csv = run_cli(path, "--overview", "--format", "csv", "--no-cache").stdout.splitlines()
    assert csv[0] == ("record,step,span_ns,kernel_ns,memcpy_ns,memset_ns,comm_ns,dataloader_ns,cpu_only_ns,other_ns,"
                      "outlier,rule,finding,evidence,action,confidence")
    assert csv[1] == "step,2,12733536,3900553,6111,35584,0,0,5580916,3210372,False,,,,,"
    md = run_cli(path, "--overview", "--format", "markdown", "--no-cache").stdout
    assert "| 3 | 12.01ms | 3.86ms |" in md


def test_outlier_steps():
    """The first step of an eager CPU capture (warm-up) is flagged; the chart marks it."""
    from kerneltui.analysis.overview import outliers
    from tests.conftest import DATA

    assert outliers(np.array([100, 101, 99, 140])).tolist() == [False, False, False, True]
    assert outliers(np.array([100, 140])).tolist() == [False, False]  # fewer than 3 steps: none
    assert outliers(np.array([100, 102, 98, 104])).tolist() == [False] * 4  # within 10 % of the median
    path = DATA / "cpu" / "cnn_sgd_batch8_eager.json.gz"
    o = overview(load_trace(path))
    assert list(zip(o.steps["step"], o.steps["span_ns"], o.steps["outlier"])) == [
        (1, 50869126, True), (2, 10782052, False), (3, 2412448, False)]
    out = run_cli(str(path), "--overview", "--no-cache").stdout
    assert "     1!  50.87ms █" in out and "1 outlier step" in out
