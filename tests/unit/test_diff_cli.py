"""`kerneltui diff A B --format ...` as a user runs it: a real process, its output and exit status."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import ROOT, shared_trace

EAGER = "traces/add_relu_1M_eager.json.gz"
COMPILED = "traces/add_relu_1M_compiled.json.gz"


def kerneltui(*args: str) -> subprocess.CompletedProcess:
    env = {"COLUMNS": "80", "PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "kerneltui", *args], capture_output=True, text=True, env=env, cwd=ROOT, timeout=60
    )


EXAMPLE_TABLE = """\
A  traces/add_relu_1M_eager.json.gz
B  traces/add_relu_1M_compiled.json.gz

                      A                     B                          B/A
device                NVIDIA H200           NVIDIA H200
calls                 1 (whole trace)       1 (whole trace)
launches/call         2                     1                        0.50x
GPU time/call         4.26µs                2.53µs                   0.59x
GPU busy              0.2%                  0.1%
CPU time/call         2.19ms                2.36ms                not compared
bytes moved/call      20.0 MB               12.0 MB                  0.60x
array-sized transfers 5                     3                        0.60x
achieved bandwidth    4,699 GB/s 98%        4,747 GB/s 99%

2 kernels → 1 per call; 5 array-sized transfers → 3; GPU time 4.26 → 2.53 µs per
  call; triton_poi_fused_add_relu_0 ← add + relu: 2 launches → 1
B is 1.68x faster on the GPU (2.53 vs 4.26 GPU µs/call).

kernels, A → B                                                             match
triton_poi_fused_add_relu_0 ← add + relu                              fused·high
  2 → 1 launches/call, 4.26 → 2.53 GPU µs/call (-1.73)
  20.0 MB → 12.0 MB, 5 → 3 transfers, 4,699 GB/s 98%! → 4,747 GB/s 99%
  Inductor named it for add_relu; A's kernels were launched by add, relu
! above the device's peak bandwidth (the row, or a kernel in it): data sat in L2

not compared:
  CPU time: only 1 call, and the first absorbs profiler start-up
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
    assert "CPU time/call         42.4µs                190.0µs                  4.48x\n" in out
    assert (
        "Launch-bound: B has less GPU time (0.72 vs 1.89 GPU µs/call) but more CPU time\n"
        "  (190.02 vs 42.42 CPU µs/call); its GPU is idle most of the call waiting for\n"
        "  launches, so end to end B is likely slower.\n"
    ) in out


def test_markdown_of_the_example_pair():
    result = kerneltui("diff", EAGER, COMPILED, "--format", "markdown")
    assert result.returncode == 0, result.stderr
    assert result.stdout == (
        "### kerneltui diff: `add_relu_1M_eager.json.gz` → `add_relu_1M_compiled.json.gz`\n"
        "\n"
        "**2 kernels → 1 per call; 5 array-sized transfers → 3; GPU time 4.26 → 2.53 µs per call;"
        " triton_poi_fused_add_relu_0 ← add + relu: 2 launches → 1**\n"
        "\n"
        "B is 1.68x faster on the GPU (2.53 vs 4.26 GPU µs/call).\n"
        "\n"
        "| | A | B | B/A |\n"
        "|---|---|---|---|\n"
        "| device | NVIDIA H200 | NVIDIA H200 |  |\n"
        "| calls | 1 (whole trace) | 1 (whole trace) |  |\n"
        "| launches/call | 2 | 1 | 0.50x |\n"
        "| GPU time/call | 4.26µs | 2.53µs | 0.59x |\n"
        "| GPU busy | 0.2% | 0.1% |  |\n"
        "| CPU time/call | 2.19ms | 2.36ms | not compared |\n"
        "| bytes moved/call | 20.0 MB | 12.0 MB | 0.60x |\n"
        "| array-sized transfers | 5 | 3 | 0.60x |\n"
        "| achieved bandwidth | 4,699 GB/s 98% | 4,747 GB/s 99% |  |\n"
        "\n"
        "| kernel | match | launches/call | GPU µs/call | Δ µs | bytes/call | achieved | reason |\n"
        "|---|---|---|---|---:|---|---|---|\n"
        "| `triton_poi_fused_add_relu_0 ← add + relu` | fused·high | 2 → 1 | 4.26 → 2.53 | -1.73"
        " | 20.0 MB → 12.0 MB | 4,699 GB/s 98%! → 4,747 GB/s 99%"
        " | Inductor named it for add_relu; A's kernels were launched by add, relu |\n"
        "\n"
        "Not compared:\n"
        "\n"
        "- CPU time: only 1 call, and the first absorbs profiler start-up\n"
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
    assert doc["verdict"] == {"kind": "faster", "text": "B is 1.68x faster on the GPU (2.53 vs 4.26 GPU µs/call)."}
    [match] = doc["matches"]
    assert match["name"] == "triton_poi_fused_add_relu_0 ← add + relu"
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
