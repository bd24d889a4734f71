"""`kerneltui summary` as a user runs it: a real process, its stdout, stderr and exit status."""

from __future__ import annotations

import csv
import gzip
import io
import json
import subprocess
import sys
import time

import pytest

from tests.conftest import PROJECT_TRACES, ROOT, cache_env, shared_trace

EAGER = str(PROJECT_TRACES / "add_relu_1M_eager.json.gz")


def kerneltui(*args: str, columns: int = 80) -> subprocess.CompletedProcess:
    env = {"COLUMNS": str(columns), "PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), **cache_env()}
    return subprocess.run(
        [sys.executable, "-m", "kerneltui", *args], capture_output=True, text=True, env=env, cwd=ROOT, timeout=60
    )


def test_summary_table_of_the_example_trace_fits_80_columns():
    result = kerneltui("summary", "traces/add_relu_1M_eager.json.gz")
    assert result.returncode == 0, result.stderr
    assert result.stdout == (
        "traces/add_relu_1M_eager.json.gz\n"
        "device      NVIDIA H200\n"
        "window      2.49ms, GPU busy 4.26µs (0.2%), GPU time 4.26µs\n"
        "GPU work    2 launches: 2 kernels, 0 memcpy, 0 memset; 2 distinct; 1 stream\n"
        "per call    2 launches, 4.26µs GPU, 2.19ms CPU (median)\n"
        "calls       1 (whole trace)\n"
        "CPU ops     2.19ms in top-level ops\n"
        "health      healthy\n"
        "\n"
        "kernel                          count    total     mean      min      max  share\n"
        "  launched by\n"
        "vectorized_elementwise_kernel<CUDAFunctor_add>[f32]\n"
        "  aten::add                         1   2.27µs   2.27µs   2.27µs   2.27µs  53.4%\n"
        "vectorized_elementwise_kernel<launch_clamp_scalar>[f32]\n"
        "  aten::clamp_min                   1   1.98µs   1.98µs   1.98µs   1.98µs  46.6%\n"
    )
    assert max(len(line) for line in result.stdout.splitlines()) <= 80


def test_wide_terminals_get_one_line_per_kernel():
    result = kerneltui("summary", str(shared_trace("mlp_bf16_eager")), "--top", "2", columns=140)
    lines = result.stdout.splitlines()
    assert lines[-3].split() == ["kernel", "count", "total", "mean", "min", "max", "share", "op"]
    assert lines[-2].split() == [
        "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_bias_TNT", "6", "1.07ms", "178.9µs", "170.4µs", "191.2µs",
        "70.1%", "aten::addmm",
    ]
    assert lines[-1].split()[0] == "vectorized_elementwise_kernel<GeluCUDAKernelImpl>[bf16]"


def test_json_carries_the_same_numbers():
    result = kerneltui("summary", str(shared_trace("norm_chain_eager")), "--format", "json")
    doc = json.loads(result.stdout)
    s = doc["summary"]
    assert (s["iterations"], s["launches_per_iteration"], s["iteration_source"]) == (2, 10.0, "repeated op sequence")
    assert s["gpu_time_ns"] == sum(k["total_ns"] for k in doc["kernels"]) == 766_588
    assert doc["trace"]["device"] == "NVIDIA H200"
    # 10 launches per call from 9 kernels: one elementwise kernel serves two ops
    assert [k["count"] for k in doc["kernels"]] == [4] + [2] * 8


def test_filter_top_launches_and_csv():
    gpt = str(shared_trace("gpt_train_eager"))
    result = kerneltui("summary", gpt, "--format", "csv", "--filter", "nvjet", "--top", "3")
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    assert [r["short"] for r in rows] == [
        "nvjet_sm90_tst_192x128_64x5_1x2_h_bz_coopB_NNT",
        "nvjet_sm90_tst_192x128_64x5_1x2_h_bz_coopB_bias_TNT",
        "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_bias_TNT",
    ]
    result = kerneltui("summary", gpt, "--format", "json", "--filter", "/^Mem(cpy|set)", "--launches")
    launches = json.loads(result.stdout)["launches"]
    assert len(launches) == 6 + 129
    assert {row["kind"] for row in launches} == {"memcpy", "memset"}
    assert [row["ts_ns"] for row in launches] == sorted(row["ts_ns"] for row in launches)


def test_launch_list_as_table():
    result = kerneltui("summary", str(shared_trace("add_relu_100_eager")), "--launches")
    lines = result.stdout.splitlines()
    assert lines[-7].split() == ["start", "dur", "strm", "step", "kernel", "op"]
    assert [line.split()[-1] for line in lines[-6:]] == ["aten::add", "aten::clamp_min"] * 3
    assert [line.split()[3] for line in lines[-6:]] == ["1", "1", "2", "2", "3", "3"]
    # names are cut in the middle, where they differ at the end
    assert [line.split()[4] for line in lines[-2:]] == [
        "vectorized…<CUDAFunctor_add>[f32]", "vectorized…nch_clamp_scalar>[f32]"
    ]


def test_a_trace_without_gpu_work_says_so(tmp_path):
    doc = json.loads(gzip.decompress(open(EAGER, "rb").read()))
    doc["traceEvents"] = [e for e in doc["traceEvents"] if e.get("cat") != "kernel"]
    path = tmp_path / "cpu_only.json"
    path.write_text(json.dumps(doc, indent=2))
    result = kerneltui("summary", str(path))
    assert result.returncode == 0
    assert result.stdout.splitlines()[-1] == (
        "no GPU work in this trace (11 events, none a kernel, memcpy or memset):"
        " was it profiled with CUDA activity on a GPU?"
    )


@pytest.mark.parametrize(
    "content, message",
    [
        (None, "kerneltui: {path}: no such file"),
        (b"", "kerneltui: {path} is empty (0 bytes): not a trace"),
        (b"<html>not json</html>", "kerneltui: {path} is not JSON (it starts with b'<html>not js')"),
        (b'{"a": 1}', "kerneltui: {path} is JSON but not a Chrome trace (no traceEvents array)"),
        (b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03garbage", "kerneltui: {path}: corrupt gzip data"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, content, message):
    path = tmp_path / "bad.json.gz"
    if content is not None:
        path.write_bytes(content)
    result = kerneltui("summary", str(path))
    assert result.returncode == 2
    assert result.stdout == ""
    assert len(result.stderr.splitlines()) == 1
    assert result.stderr.startswith(message.format(path=path))
    assert "Traceback" not in result.stderr


def test_a_cut_off_trace_prints_what_it_has_warns_and_exits_2(tmp_path):
    text = gzip.decompress(shared_trace("gpt_train_eager").read_bytes())
    path = tmp_path / "cut.json"
    path.write_bytes(text[: int(len(text) * 0.97)])
    result = kerneltui("summary", str(path), "--format", "json")
    assert result.returncode == 2
    assert json.loads(result.stdout)["trace"]["truncated"] is True
    assert result.stderr.startswith(f"kerneltui: {path}: trace is cut off (a profiler stopped mid-write?): loaded the ")
    assert len(result.stderr.splitlines()) == 1


def test_help_and_python_dash_m():
    result = kerneltui("--help")
    assert result.returncode == 0
    for command in ("summary", "open", "diff", "capture"):
        assert f"    {command} " in result.stdout


def test_filtered_shares_stay_shares_of_the_whole_trace():
    doc = json.loads(kerneltui("summary", EAGER, "--filter", "clamp", "--format", "json").stdout)
    assert [(k["short"], k["kind"], round(k["share"], 3)) for k in doc["kernels"]] == [
        ("vectorized_elementwise_kernel<launch_clamp_scalar>[f32]", "kernel", 0.466)
    ]


@pytest.mark.parametrize("command", [["summary", EAGER], ["diff", EAGER, EAGER]])
@pytest.mark.parametrize("top", ["0", "-1", "x"])
def test_top_must_be_a_positive_number(command, top):
    result = kerneltui(*command, "--top", top, "--format", "json")
    assert result.returncode == 2
    assert result.stdout == ""
    assert "argument --top:" in result.stderr.splitlines()[-1]


def test_cuda_only_traces_say_cpu_time_was_not_recorded():
    lines = kerneltui("summary", str(shared_trace("add_relu_1M_eager_cudaonly"))).stdout.splitlines()
    assert lines[4] == "per call    2 launches, 4.58µs GPU, CPU not recorded"
    assert lines[6] == "CPU ops     not recorded (the profile has CUDA activity only)"


# -- summary --by module ----------------------------------------------------------------------------------

def test_by_module_table_is_the_tree_in_80_columns():
    result = kerneltui("summary", str(shared_trace("gpt_train_eager")), "--by", "module", "--top", "5")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80
    assert lines[1] == "GPU time 11.82ms, 99.8% placed on a module, the optimizer or the loss; times"
    head = lines.index("module                               forward  backward     total launches  share")
    assert lines[head + 1:head + 4] == [
        "TinyGPT_0                             2.92ms    6.70ms    9.63ms      903  81.4%",
        "  Block_1                            639.0µs    1.42ms    2.06ms      189  17.4%",
        "    Sequential_1                     279.1µs   614.8µs   893.9µs       72   7.6%",
    ]
    # what no rule placed, its total under the total column
    assert lines[-1] == "(outside any module)                                      20.4µs        9   0.2%"
    assert lines[-1].index("20.4µs") + 6 == lines[head].index("total") + 5


def test_by_module_json_csv_and_markdown():
    trace = str(shared_trace("resnet18_train_eager"))
    doc = json.loads(kerneltui("summary", trace, "--by", "module", "--format", "json").stdout)
    assert (doc["by"], doc["attributed_share"], doc["unattributed"]) == ("forward op", 1.0, [])
    assert doc["modules"][0]["path"] == "aten::conv2d #1" and doc["modules"][0]["parent"] is None
    rows = list(csv.DictReader(io.StringIO(kerneltui("summary", trace, "--by", "module", "--format", "csv").stdout)))
    assert rows[0]["path"] == "aten::conv2d #1" and rows[0]["total_ns"] == "753376"
    md = kerneltui("summary", trace, "--by", "module", "--format", "markdown").stdout
    assert md.startswith("### GPU time by forward op: `") and "| aten::conv2d #1 | 532.1µs | 221.3µs |" in md


def test_by_module_refuses_what_is_for_kernels_in_one_line():
    result = kerneltui("summary", EAGER, "--by", "module", "--filter", "add")
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == ["kerneltui: --filter, --launches and --full-names are for --by kernel"]


def test_the_summary_and_memory_table_are_computed_on_a_second_thread_to_the_same_document(monkeypatch, capsys):
    """`summary --format json` computes the step summary and the memory table on a second thread while
    the first does the rest; the document is the one computed on one thread."""
    import threading

    from kerneltui import report
    from kerneltui.analysis import memory
    from kerneltui.cli import main
    from kerneltui.trace import load_trace, summary

    path = str(shared_trace("gpt_train_eager"))
    trace = load_trace(path, cache=False)
    alone = report.as_json(trace, summary.summarize(trace), summary.kernel_stats(trace, trace.gpu), None, None)
    threads = []
    for module, name in ((summary, "summarize"), (memory, "memory_table")):
        real = getattr(module, name)
        monkeypatch.setattr(module, name, lambda *a, real=real, name=name: threads.append(
            (name, threading.current_thread().name)) or real(*a))
    assert main(["summary", path, "--format", "json", "--no-cache"]) == 0
    assert capsys.readouterr().out == alone
    assert sorted(name for name, thread in threads if thread.startswith("kerneltui-summary")) == [
        "memory_table", "summarize"]


def test_an_error_is_said_without_waiting_for_the_summary_computed_meanwhile(tmp_path):
    """The second thread's work does not hold the process: --launches on a CPU capture fails at once,
    while a summary that would take 20 s is still running."""
    events = ",\n  ".join(f'{{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": {10 * i}.0, '
                          f'"dur": 5.0, "args": {{}}}}' for i in range(20))
    trace = tmp_path / "cpu.json"
    trace.write_text('{"traceEvents": [\n  ' + events + "\n]}")
    code = ("import sys, time, kerneltui.trace.summary as s\n"
            "s.summarize = lambda trace: time.sleep(20)\n"
            "from kerneltui.cli import main\n"
            "sys.exit(main(sys.argv[1:]))\n")
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-c", code, "summary", str(trace), "--launches", "--no-cache"],
                          capture_output=True, text=True, timeout=60, cwd=ROOT, check=False)
    assert time.monotonic() - started < 10
    assert done.returncode == 2
    assert "a CPU capture has no GPU launches for --launches" in done.stderr


def test_numpys_blas_threads_are_one_for_the_viewer_and_left_to_the_user_and_to_capture():
    """OpenBLAS's threads spin after numpy's import, taking CPU from the loader; kerneltui does no linear
    algebra, but a workload under capture may. Each case in a fresh process: numpy reads the setting once."""
    import os

    trace = str(PROJECT_TRACES / "add_relu_1M_eager.json.gz")
    script = ("import os, sys; from kerneltui.cli import main; code = main(sys.argv[1:]); "
              "import numpy; print(code, os.environ.get('OPENBLAS_NUM_THREADS'))")

    def threads_after(*argv: str, **env: str) -> str:
        base = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
        done = subprocess.run([sys.executable, "-c", script, *argv], capture_output=True, text=True, cwd=ROOT,
                              env={**base, **env, "KERNELTUI_CACHE": "0"}, timeout=120, check=True)
        return done.stdout.splitlines()[-1]

    assert threads_after("summary", trace, "--format", "csv") == "0 1"
    assert threads_after("summary", trace, "--format", "csv", OPENBLAS_NUM_THREADS="4") == "0 4"
    assert threads_after("capture", "/nonexistent/model.py") == "2 None"


def test_open_hands_the_gil_over_sooner_and_leaves_the_interval_as_it_was(monkeypatch):
    """`open` of one trace runs with a 1 ms switch interval (the loader's thread waits less for the GIL);
    `summary` runs at Python's own; either way the caller's interval is back afterwards."""
    from kerneltui import cli
    from kerneltui.commands import load_ahead, summary
    from kerneltui.commands import open as open_command
    from kerneltui.tui import app as app_module

    seen = []
    monkeypatch.setenv("KERNELTUI_CACHE", "0")
    monkeypatch.setattr(open_command, "interactive", lambda: True)
    monkeypatch.setattr(app_module, "build_app", lambda *args, **kwargs: None)
    monkeypatch.setattr(load_ahead, "LoadAhead", lambda *args: None)  # no read on a thread of its own
    monkeypatch.setattr(open_command, "_run_app", lambda app, put_back: seen.append(sys.getswitchinterval()) or 0)
    monkeypatch.setattr(summary, "run", lambda args: seen.append(sys.getswitchinterval()) or 0)
    before = sys.getswitchinterval()
    assert before != pytest.approx(open_command.SWITCH_INTERVAL_S)
    assert cli.main(["open", str(PROJECT_TRACES / "add_relu_1M_eager.json.gz")]) == 0
    assert sys.getswitchinterval() == before
    assert cli.main(["summary", "no-such.json"]) == 0
    assert seen == [pytest.approx(open_command.SWITCH_INTERVAL_S), before]
    assert sys.getswitchinterval() == before


EXIT_PROBE = """
import atexit, gc, os, sys
from kerneltui.trace import heap
kept, keep = [], heap.keep_freed_memory
heap.keep_freed_memory = lambda: kept.append(keep() is None)
atexit.register(lambda: os.write(1, b"frozen at exit: %d, freed memory kept: %d\\n"
                                 % (gc.get_freeze_count() > 0, kept == [True])))  # runs last
from kerneltui.cli import main
sys.argv = ["kerneltui", *{args!r}]
code = main({argv})
sys.stdout.flush()
sys.exit(code)
"""
SUMMARY_CSV = ("summary", "traces/add_relu_1M_eager.json.gz", "--format", "csv")


@pytest.mark.parametrize(("argv", "args", "frozen", "rc"), [
    ("", SUMMARY_CSV, 1, 0),
    ("sys.argv[1:]", SUMMARY_CSV, 0, 0),  # a program that calls main(argv)
    ("", ("capture", "no/such/workload.py"), 0, 2),  # the user's code ran in this process
], ids=["the program", "a caller", "capture"])
def test_the_program_skips_the_exit_collections_but_a_caller_and_capture_keep_them(argv, args, frozen, rc):
    # the program's objects are frozen after its last exit handler, so the interpreter's exit does not
    # walk them; a program that calls main(argv) keeps its collector as it was, and capture, which runs
    # the user's workload, lets the exit finalize its objects (a file it left open is flushed). Likewise
    # malloc keeps freed memory (trace/heap.keep_freed_memory) for the program alone
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), **cache_env()}
    result = subprocess.run([sys.executable, "-c", EXIT_PROBE.format(argv=argv, args=args)], capture_output=True,
                            text=True, env=env, cwd=ROOT, timeout=120, check=False)
    assert result.returncode == rc, result.stderr
    if args == SUMMARY_CSV:
        assert result.stdout.startswith("key,short,full_name,kind,count,")  # the summary, written before the exit
    assert result.stdout.endswith(f"frozen at exit: {frozen}, freed memory kept: {frozen}\n")
