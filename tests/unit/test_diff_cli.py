"""`kerneltui diff A B --format ...` as a user runs it: a real process, its output and exit status."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import ROOT, cache_env, shared_trace

EAGER = "traces/add_relu_1M_eager.json.gz"
COMPILED = "traces/add_relu_1M_compiled.json.gz"


def kerneltui(*args: str) -> subprocess.CompletedProcess:
    env = {"COLUMNS": "80", "PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), **cache_env()}
    return subprocess.run(
        [sys.executable, "-m", "kerneltui", *args], capture_output=True, text=True, env=env, cwd=ROOT, timeout=60
    )


EXAMPLE_TABLE = """\
A  traces/add_relu_1M_eager.json.gz
B  traces/add_relu_1M_compiled.json.gz

                      A                     B                          B/A
device                NVIDIA H200           NVIDIA H200
calls                 1 (whole trace)       1 (whole trace)
trace health          healthy               healthy
launches/call         2                     1                        0.50x
span/call             unknown (start-up)    unknown (start-up)           –
GPU time/call         4.26µs                2.53µs                   0.59x
GPU busy in calls     unknown               unknown
CPU dispatch/call     185.8µs               664.4µs               profiled
CPU ops/call          155.4µs               661.1µs               profiled
bound by              unknown               unknown
bytes moved/call      20.0 MB               12.0 MB                  0.60x
array-sized transfers 5                     3                        0.60x
achieved bandwidth    4,699 GB/s 98%        4,747 GB/s 99%
span: a call as a timer sees it, from its start (or the end of the GPU work
  queued before it) to the end of its GPU work; unknown: every profiled call
  held the profiler's start-up (or a compile)
transfers: bytes in units of [1000000] f32 (4.0 MB), the largest tensor both
  traces recorded

2 kernels → 1 per call; 5 array-sized transfers → 3; GPU time 4.26 → 2.53 µs per
  call; B: 1 compiled region, 0 recompiles, 0 graph breaks; CPU launch calls 2 →
  1 per call
B is 1.68x faster (GPU time per call 4.26 → 2.53 µs). Every profiled call of A
  and B held the profiler's start-up, so whether the CPU decides is unknown.

kernels, A → B                                                             match
add + clamp_min → triton_poi_fused_add_relu_0                         fused·high
  2 → 1 launches/call, 4.26 → 2.53 GPU µs/call (-1.73)
  20.0 MB → 12.0 MB, 5 → 3 transfers, 4,699 GB/s 98%! → 4,747 GB/s 99%
  all of the forward's kernels on both sides (no library call to align on)
unmatched: 0.0% of A's GPU time, 0.0% of B's (rows with nothing on the other
  side)
! above the device's peak bandwidth (the row, or a kernel in it): data sat in L2
"""


def test_table_of_the_example_pair():
    result = kerneltui("diff", EAGER, COMPILED, "--format", "table")
    assert result.returncode == 0, result.stderr
    assert result.stdout == EXAMPLE_TABLE
    assert result.stderr == ""


def test_table_fits_80_columns_on_every_pair():
    for workload in ("add_relu_100", "norm_chain", "mlp_bf16"):
        a, b = shared_trace(f"{workload}_eager"), shared_trace(f"{workload}_compiled")
        result = kerneltui("diff", str(a), str(b), "--format", "table")
        assert result.returncode == 0, result.stderr
        assert max(len(line) for line in result.stdout.splitlines()) <= 80


def test_launch_bound_is_stated_in_the_table():
    a, b = shared_trace("add_relu_100_eager"), shared_trace("add_relu_100_compiled")
    out = kerneltui("diff", str(a), str(b), "--format", "table").stdout
    # the first call holds the profiler's start-up: the median of the other two
    assert "CPU ops/call          37.6µs                152.2µs               profiled\n" in out
    assert "CPU dispatch/call     40.5µs                153.6µs               profiled\n" in out
    # both sides paced by the profiled CPU: their spans are shown, marked, and get no ratio
    assert "span/call             40.1µs distorted      138.2µs distorted            –\n" in out
    assert "bound by              CPU                   CPU\n" in out
    assert (
        "CPU-bound: B's GPU time fell 1.89 → 0.72 µs per call, but launching takes 37.6 →\n"
        "  152.2 µs of CPU ops per call: B is slower end to end, at least 1.20x, even\n"
        "  allowing for the profiler's overhead.\n"
    ) in out


def test_markdown_of_the_example_pair():
    result = kerneltui("diff", EAGER, COMPILED, "--format", "markdown")
    assert result.returncode == 0, result.stderr
    assert result.stdout == (
        '### kerneltui diff: `add_relu_1M_eager.json.gz` → `add_relu_1M_compiled.json.gz`\n'
        '\n'
        '**2 kernels → 1 per call; 5 array-sized transfers → 3; GPU time 4.26 → 2.53 µs per call; B: 1 compiled region, 0 recompiles, 0 graph breaks; CPU launch calls 2 → 1 per call**\n'
        '\n'
        "B is 1.68x faster (GPU time per call 4.26 → 2.53 µs). Every profiled call of A and B held the profiler's start-up, so whether the CPU decides is unknown.\n"
        '\n'
        '| | A | B | B/A |\n'
        '|---|---|---|---|\n'
        '| device | NVIDIA H200 | NVIDIA H200 |  |\n'
        '| calls | 1 (whole trace) | 1 (whole trace) |  |\n'
        '| trace health | healthy | healthy |  |\n'
        '| launches/call | 2 | 1 | 0.50x |\n'
        '| span/call | unknown (start-up) | unknown (start-up) | – |\n'
        '| GPU time/call | 4.26µs | 2.53µs | 0.59x |\n'
        '| GPU busy in calls | unknown | unknown |  |\n'
        '| CPU dispatch/call | 185.8µs | 664.4µs | profiled |\n'
        '| CPU ops/call | 155.4µs | 661.1µs | profiled |\n'
        '| bound by | unknown | unknown |  |\n'
        '| bytes moved/call | 20.0 MB | 12.0 MB | 0.60x |\n'
        '| array-sized transfers | 5 | 3 | 0.60x |\n'
        '| achieved bandwidth | 4,699 GB/s 98% | 4,747 GB/s 99% |  |\n'
        '\n'
        "span: a call as a timer sees it, from its start (or the end of the GPU work queued before it) to the end of its GPU work; unknown: every profiled call held the profiler's start-up (or a compile)\n"
        'transfers: bytes in units of [1000000] f32 (4.0 MB), the largest tensor both traces recorded\n'
        '\n'
        '| kernel | match | launches/call | GPU µs/call | Δ µs | bytes/call | achieved | reason |\n'
        '|---|---|---|---|---:|---|---|---|\n'
        "| `add + clamp_min → triton_poi_fused_add_relu_0` | fused·high | 2 → 1 | 4.26 → 2.53 | -1.73 | 20.0 MB → 12.0 MB | 4,699 GB/s 98%! → 4,747 GB/s 99% | all of the forward's kernels on both sides (no library call to align on) |\n"
        '\n'
        "unmatched: 0.0% of A's GPU time, 0.0% of B's (rows with nothing on the other side)\n"
    )


def test_json_of_the_example_pair():
    result = kerneltui("diff", EAGER, COMPILED, "--format", "json")
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["kerneltui_diff"] == 1
    assert (doc["a"]["launches"], doc["b"]["launches"]) == (2, 1)
    assert (doc["a"]["transfers"], doc["b"]["transfers"]) == (5, 3)
    assert (doc["a"]["bytes"], doc["b"]["bytes"]) == (20_000_000, 12_000_000)
    assert (doc["a"]["gpu_ns"], doc["b"]["gpu_ns"]) == (4256, 2528)
    assert doc["ratios"]["cpu_ns"] is None  # not compared: one call each
    assert doc["facts"][:2] == ["2 kernels → 1 per call", "5 array-sized transfers → 3"]
    assert doc["verdict"] == {
        "kind": "faster", "ratio": pytest.approx(4256 / 2528), "quantity": "gpu",
        "short": "B is 1.68x faster (GPU time per call 4.26 → 2.53 µs)",
        "text": "B is 1.68x faster (GPU time per call 4.26 → 2.53 µs). Every profiled call of A and B held the"
                " profiler's start-up, so whether the CPU decides is unknown.",
    }
    assert doc["comparable"] == {"ok": True, "reasons": []}
    assert (doc["a"]["bound"], doc["b"]["bound"]) == ("unknown", "unknown")
    # the CPU dispatch span under its new name and its old one: the whole-trace call's ops, from the first's
    # start to the last's end, less the profiler's overhead (not its window, idle before the first op)
    assert (doc["a"]["dispatch_ns"], doc["b"]["dispatch_ns"]) == (185775, 664446)
    assert (doc["a"]["wall_ns"], doc["b"]["wall_ns"]) == (185775, 664446)
    # no step settled: neither the span nor the profiled CPU figures get a ratio
    assert [doc["ratios"][k] for k in ("span_ns", "dispatch_ns", "wall_ns", "cpu_ns")] == [None] * 4
    # one call each, and it held the profiler's start-up: no span, no busy share, no span ratio
    assert (doc["a"]["span_ns"], doc["a"]["busy_in_steps"], doc["ratios"]["span_ns"]) == (None, None, None)
    assert doc["a"]["span_note"] == "unknown: every profiled call held the profiler's start-up"
    assert doc["b"]["compile"] == {"regions": ["0/0"], "frames": 1, "recompiles": 0, "recompiles_in_profile": 0,
                                   "graph_breaks": 0, "graph_breaks_source": "at least", "graph_break_at": [],
                                   "graph_breaks_in_trace": 0, "graph_replays_per_step": 0.0, "kernels_per_replay": 0.0,
                                   "launch_calls_per_step": 1.0}
    assert doc["phases"] == [{"phase": "forward", "a_launches": 2.0, "b_launches": 1.0, "a_ns": 4256.0, "b_ns": 2528.0,
                              "a_outside_launches": None, "a_outside_ns": None, "b_outside_launches": 0.0,
                              "b_outside_ns": 0.0}]
    assert doc["attribution"] == {"a_unmatched_share": 0.0, "b_unmatched_share": 0.0}
    [match] = doc["matches"]
    assert match["name"] == "add + clamp_min → triton_poi_fused_add_relu_0"
    assert match["a_kernels"] == [
        "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul> >"
        "(int, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul>)",
        match["a_kernels"][1],
    ] and "launch_clamp_scalar" in match["a_kernels"][1]
    assert match["b_kernels"] == ["triton_poi_fused_add_relu_0"]
    assert (match["kind"], match["confidence"], match["a_count"], match["b_count"]) == ("fused", "high", 2, 1)
    assert (match["a_bytes"], match["b_bytes"]) == (20_000_000, 12_000_000)
    # eager add alone ran at 5.28 TB/s, above the H200's 4.8 (L2): the row is flagged though its mean is 98%
    assert match["a_above_peak"] is True and round(match["a_max_gbs"]) == 5282 and round(match["b_gbs"]) == 4747


@pytest.mark.parametrize(
    ("args", "code", "stderr"),
    [
        ((EAGER, COMPILED, "--fail-if-slower", "5%"), 0, ""),
        ((COMPILED, EAGER, "--fail-if-slower", "5%"), 1,
         "kerneltui: B's GPU time per call is 68.4% above A's (limit 5%)\n"),
        ((COMPILED, EAGER, "--fail-if-slower", "70"), 0, ""),
        ((COMPILED, EAGER, "--fail-if-slower", "68%", "--format", "json"), 1,
         "kerneltui: B's GPU time per call is 68.4% above A's (limit 68%)\n"),
        ((EAGER, EAGER, "--fail-if-slower", "0%"), 0, ""),
    ],
)
def test_fail_if_slower(args, code, stderr):
    result = kerneltui("diff", *args)
    assert (result.returncode, result.stderr) == (code, stderr)
    assert result.stdout  # the report is printed either way (table unless --format)


def test_fail_if_slower_on_different_inputs_exits_3_never_a_silent_pass():
    a, b = shared_trace("add_relu_100_eager"), shared_trace("add_relu_10000000_compiled")
    result = kerneltui("diff", str(a), str(b), "--fail-if-slower", "5%")
    assert result.returncode == 3
    assert result.stderr == "kerneltui: not comparable: inputs differ: largest input [100] vs [10000000]\n"
    assert "NOT COMPARABLE: inputs differ: largest input [100] vs [10000000]" in result.stdout
    doc = json.loads(kerneltui("diff", str(a), str(b), "--format", "json").stdout)
    assert doc["comparable"] == {"ok": False, "reasons": ["inputs differ: largest input [100] vs [10000000]"]}
    assert doc["verdict"]["kind"] == "not comparable" and doc["verdict"]["ratio"] is None


def test_fail_if_slower_needs_a_percentage():
    result = kerneltui("diff", EAGER, COMPILED, "--fail-if-slower", "lots")
    assert result.returncode == 2
    assert "expected a percentage such as 5%, not 'lots'" in result.stderr


@pytest.mark.parametrize("fmt", [("--format", "table"), ()], ids=["table", "app"])
def test_missing_file_is_one_line_and_exit_2(fmt):
    # the app checks the paths before it takes the terminal
    result = kerneltui("diff", EAGER, "traces/nope.json.gz", *fmt)
    assert result.returncode == 2
    assert result.stdout == ""
    assert len(result.stderr.splitlines()) == 1 and result.stderr.startswith("kerneltui: ")
    assert "nope.json.gz" in result.stderr


def test_not_a_trace_is_one_line_and_exit_2(tmp_path):
    # (the app shows the same line on its loading screen: tests/e2e/test_diff_e2e.py)
    bad = tmp_path / "bad.json"
    bad.write_text("this is not json")
    result = kerneltui("diff", str(bad), EAGER, "--format", "json")
    assert result.returncode == 2
    assert result.stdout == ""
    assert len(result.stderr.splitlines()) == 1 and result.stderr.startswith(f"kerneltui: {bad}")
    assert "Traceback" not in result.stderr


def test_json_of_a_training_pair_has_the_figures_named_for_what_they_measure():
    a, b = shared_trace("resnet18_train_eager"), shared_trace("resnet18_train_compiled")
    doc = json.loads(kerneltui("diff", str(a), str(b), "--format", "json").stdout)
    for side in ("a", "b"):
        s = doc[side]
        assert s["span_note"] == "profiler-distorted" and s["span_ns"] > 0
        assert s["dispatch_ns"] == s["wall_ns"]  # the old name, kept for scripts
        assert 0 < s["busy_in_steps"] < 1
        assert s["compile"]["recompiles_in_profile"] == 0
        assert s["reference_tensor"] == "[64, 64, 64, 64] bf16" and s["largest_tensor"] == 33_554_432
    assert (round(doc["a"]["busy_in_steps"], 3), round(doc["b"]["busy_in_steps"], 3)) == (0.160, 0.099)
    assert doc["ratios"]["span_ns"] is None  # both sides paced by the profiled CPU
    assert doc["ratios"]["bytes"] == pytest.approx(doc["ratios"]["transfers"])
    convs = [m for m in doc["matches"] if m["reason"].startswith("same conv")]
    # every convolution row has its FLOPs, whatever memset or layout kernel rides with it
    assert len(convs) == 20 and all(m["a_flops"] > 0 and m["b_flops"] > 0 and m["a_tflops"] > 5 for m in convs)
    assert not any(k.startswith("a_mem") or k.endswith("_rows") for k in doc["matches"][0])
