"""The workload contract on users' own scripts (issue 22): their command line, their exits, batch dicts,
output folders that cannot be written, the options that shape the profile. Eager captures only: cheap.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

from tests.capture.support import EXAMPLES, ROOT, capture, read, spans, write_workload

CPU = not torch.cuda.is_available()
CUDA_WARNING = "kerneltui: warning: CUDA is not available: capturing on the CPU, so the traces will have no GPU kernels"

PARSES_ITS_COMMAND_LINE = """
    import argparse
    import sys

    import torch

    ARGV_AT_IMPORT = list(sys.argv)
    parser = argparse.ArgumentParser()
    parser.add_argument("--hidden", type=int, required=True)
    ARGS = parser.parse_args()
    ARGV_IN_WORKLOAD = []


    def workload(device: str = "cpu"):
        ARGV_IN_WORKLOAD.append(list(sys.argv))
        return torch.relu, (torch.ones(ARGS.hidden, device=device),)
"""


def _lines(err: str) -> list[str]:
    """stderr without the CPU warning every capture here gives."""
    return [line for line in err.splitlines() if line != CUDA_WARNING]


def test_script_gets_its_own_arguments_after_double_dash_and_its_own_argv(tmp_path):
    script = write_workload(tmp_path, "cli_script", PARSES_ITS_COMMAND_LINE)
    argv_before = list(sys.argv)
    rc, _, err = capture(str(script), "--modes", "eager", "--steps", "1", "--warmup", "1", "-o", str(tmp_path / "out"),
                         "--", "--hidden", "32")
    assert rc == 0, err
    module = sys.modules["kerneltui_workload_cli_script"]
    assert module.ARGV_AT_IMPORT == [str(script), "--hidden", "32"]
    assert module.ARGV_IN_WORKLOAD == [[str(script), "--hidden", "32"]]
    assert sys.argv == argv_before  # restored
    block = read(tmp_path / "out" / "cli_script_eager.json.gz")["kerneltui"]["capture"]
    assert block["script_args"] == ["--hidden", "32"]
    assert block["command"].endswith(" -- --hidden 32")
    assert spans(read(tmp_path / "out" / "cli_script_eager.json.gz"), "cpu_op", "aten::relu")


def test_script_refusing_its_command_line_is_its_usage_and_one_line_of_ours(tmp_path):
    script = write_workload(tmp_path, "cli_script", PARSES_ITS_COMMAND_LINE)
    rc, _, err = capture(str(script), "--modes", "eager", "-o", str(tmp_path / "out"))
    assert rc == 2
    assert "usage: kerneltui" not in err  # argparse names the script, not kerneltui
    assert "usage: cli_script.py [-h] --hidden HIDDEN" in err
    assert "cli_script.py: error: the following arguments are required: --hidden" in err
    assert err.splitlines()[-1] == (
        f"kerneltui: the script exited with status 2 while loading {script} (its own arguments go after --: "
        f"kerneltui capture {script} -- ARGS); no trace was written"
    )
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").iterdir())


@pytest.mark.parametrize(
    ("call", "status"),
    [("sys.exit(3)", "status 3"), ("sys.exit('bad config')", "'bad config' (status 1)"), ("sys.exit()", "status 0")],
)
def test_sys_exit_in_workload_is_one_line_exit_2(tmp_path, call, status):
    script = write_workload(tmp_path, "exits", f"""
        import sys

        def workload(n: int = 8):
            {call}
    """)
    rc, _, err = capture(str(script), "--modes", "eager", "-o", str(tmp_path / "out"))
    assert rc == 2
    assert _lines(err) == [f"kerneltui: exits n=8 eager: the script exited with {status} in workload(); no trace was written"]


def test_sys_exit_in_a_profiled_call_keeps_the_finished_traces(tmp_path):
    script = write_workload(tmp_path, "exits_late", """
        import sys
        import torch

        calls = 0

        def step(x):
            global calls
            calls += 1
            if calls == 3:  # warm-up, the profiler's warm-up, then the first profiled call
                sys.exit(4)
            return x + 1

        def workload(n: int = 8):
            return step, (torch.ones(n),)
    """)
    out = tmp_path / "out"
    rc, _, err = capture(str(script), "--modes", "eager", "--warmup", "1", "--steps", "2", "-o", str(out))
    assert rc == 2
    assert err.splitlines()[-1] == ("kerneltui: exits_late n=8 eager: the script exited with status 4 in profiled "
                                    "eager call 1; no trace was written")
    assert list(out.iterdir()) == []  # no export left behind


def test_arguments_for_the_script_without_double_dash_are_refused(tmp_path):
    rc, _, err = capture(str(EXAMPLES / "add_relu.py"), "extra", "-o", str(tmp_path / "out"))
    assert rc == 2
    assert err == (f"kerneltui: unexpected argument 'extra': the script's own arguments go after --, "
                   f"e.g. kerneltui capture {EXAMPLES / 'add_relu.py'} -- extra\n")


def test_double_dash_splits_after_our_options(tmp_path):
    """`-o` and friends before --, the script's after it, whatever they look like (argparse alone cannot)."""
    from kerneltui.cli import build_parser

    args = build_parser().parse_args(["capture", "s.py", "-p", "n=3", "-o", "d", "--", "--hidden", "32", "-o", "x"])
    assert (args.workload, args.params, str(args.output_dir)) == ("s.py", ["n=3"], "d")
    assert args.script_args == ["--hidden", "32", "-o", "x"]


BATCH_DICT = """
    import torch

    class Scale(torch.nn.Module):
        def forward(self, x, scale):
            return (x * scale).relu()

    def workload(n: int = 8):
        return Scale(), {"x": torch.ones(n), "scale": torch.full((n,), 2.0)}
"""


def test_model_and_batch_dict_is_called_with_keywords(tmp_path):
    script = write_workload(tmp_path, "batch", BATCH_DICT)
    rc, _, err = capture(str(script), "--modes", "eager", "--steps", "2", "--warmup", "1", "-o", str(tmp_path))
    assert rc == 0, err
    trace = read(tmp_path / "batch_n8_eager.json.gz")
    assert len(spans(trace, "cpu_op", "aten::mul")) == 2  # one per profiled call: model(x=..., scale=...)
    assert len(spans(trace, "cpu_op", "aten::relu")) == 2


HINT = "for keyword inputs `return model, batch` (capture calls model(**batch)) or `return lambda: model(**batch)`"


@pytest.mark.parametrize(
    ("returned", "message"),
    [
        ("{'x': x}", f"workload() returned a dict; {HINT}"),
        ("{'x': x}, torch.relu", f"workload() returned a dict as item 1 of 2; {HINT}"),
        ("torch.relu, x, {'x': x}", f"workload() returned a dict as item 3 of 3; {HINT}"),
        ("torch.relu, {1: x}", "workload() returned a batch with the key 1; model(**batch) needs string keys"),
    ],
)
def test_a_mapping_elsewhere_says_how_to_pass_keyword_inputs(tmp_path, returned, message):
    script = write_workload(tmp_path, "model", f"""
        import torch

        def workload(device: str = "cpu"):
            x = torch.ones(2)
            return {returned}
    """)
    rc, _, err = capture(str(script), "--modes", "eager", "-o", str(tmp_path / "out"))
    assert rc == 2
    assert _lines(err) == [f"kerneltui: {script}: {message}"]


def test_reserved_parameters_are_not_given_with_p(tmp_path):
    script = write_workload(tmp_path, "model", """
        def workload(compile, n: int = 8):
            return print
    """)
    rc, _, err = capture(str(script), "-p", "compile=1", "-o", str(tmp_path / "out"))
    assert rc == 2
    assert err == "kerneltui: -p compile=...: kerneltui passes `compile` to workload() itself, per mode\n"


def _capture_in_subprocess(*argv: str) -> subprocess.CompletedProcess:
    """Through the CLI in a fresh interpreter, asserting that torch was never imported."""
    code = ("import sys; from kerneltui.cli import main; rc = main(sys.argv[1:]); "
            "assert 'torch' not in sys.modules, 'torch was imported'; sys.exit(rc)")
    return subprocess.run([sys.executable, "-c", code, "capture", *argv], cwd=ROOT, capture_output=True, text=True,
                          timeout=60, check=False)


@pytest.mark.parametrize(
    ("out_dir", "message"),
    [
        ("/proc/x", "-o /proc/x: cannot create files in /proc, where it would be made (No such file or directory)"),
        ("/proc", "-o /proc: cannot create files in /proc (No such file or directory)"),
    ],
)
def test_output_folder_that_cannot_be_written_is_found_before_torch_is_imported(out_dir, message):
    if not os.path.isdir("/proc/self"):
        pytest.skip("needs Linux's /proc")
    done = _capture_in_subprocess(str(EXAMPLES / "add_relu.py"), "-o", out_dir)
    assert (done.returncode, done.stdout, done.stderr) == (2, "", f"kerneltui: {message}\n")


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root writes into read-only directories")
def test_output_folder_without_write_permission_is_one_line(tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    try:
        done = _capture_in_subprocess(str(EXAMPLES / "add_relu.py"), "-o", str(locked))
    finally:
        locked.chmod(0o755)
    message = f"kerneltui: -o {locked}: cannot create files in {locked} (Permission denied)\n"
    assert (done.returncode, done.stderr) == (2, message)
    assert list(locked.iterdir()) == []


def test_a_file_in_the_way_of_the_output_folder_is_found_before_torch(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_bytes(b"precious")
    done = _capture_in_subprocess(str(EXAMPLES / "add_relu.py"), "-o", str(blocker / "sub"))
    assert (done.returncode, done.stderr) == (
        2, f"kerneltui: -o {blocker / 'sub'}: {blocker} is not a directory (traces are written into a directory)\n")
    assert blocker.read_bytes() == b"precious"


@pytest.mark.skipif(not CPU, reason="the CPU default")
def test_cpu_capture_profiles_20_calls_and_records_threads_and_load(tmp_path):
    rc, _, err = capture(str(EXAMPLES / "add_relu.py"), "-p", "n=64", "--modes", "eager", "--warmup", "1",
                         "-o", str(tmp_path))
    assert rc == 0, err
    trace = read(tmp_path / "add_relu_n64_eager.json.gz")
    block = trace["kerneltui"]["capture"]
    assert block["profiled_calls"] == 20
    assert len(spans(trace, "user_annotation", "ProfilerStep#")) == 20
    assert block["threads"] == torch.get_num_threads()
    assert block["cpu_count"] == os.cpu_count()
    for key in ("load_average", "load_average_after"):
        assert len(block[key]) == 3 and all(isinstance(x, float) and x >= 0 for x in block[key])
    assert block["eager_was_compiled"] is False
    assert "add_relu n=64 eager: 20 calls profiled" in err


def test_no_record_shapes_profiles_without_input_shapes(tmp_path):
    argv = (str(EXAMPLES / "add_relu.py"), "-p", "n=64", "--modes", "eager", "--steps", "1", "--warmup", "1")
    rc, _, err = capture(*argv, "--no-record-shapes", "-o", str(tmp_path / "without"))
    assert rc == 0, err
    rc, _, err = capture(*argv, "-o", str(tmp_path / "with"))
    assert rc == 0, err
    without = read(tmp_path / "without" / "add_relu_n64_eager.json.gz")
    with_shapes = read(tmp_path / "with" / "add_relu_n64_eager.json.gz")
    assert without["kerneltui"]["capture"]["record_shapes"] is False
    assert with_shapes["kerneltui"]["capture"]["record_shapes"] is True
    assert [e["args"]["Input Dims"] for e in spans(with_shapes, "cpu_op", "aten::add")] == [[[64], [64], []]]
    assert ["Input Dims" in e["args"] for e in spans(without, "cpu_op", "aten::add")] == [False]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--backend", "aot_eager", "--compile-mode", "max-autotune"],
         "--compile-mode max-autotune is Inductor's: drop it, or --backend aot_eager"),
        (["--backend", "aot_eager", "--provenance-only"],
         "--provenance-only records what Inductor generates: --backend aot_eager generates no kernels"),
    ],
)
def test_build_options_are_checked_before_anything_runs(tmp_path, argv, message):
    rc, _, err = capture(str(EXAMPLES / "add_relu.py"), *argv, "-o", str(tmp_path / "out"))
    assert (rc, err) == (2, f"kerneltui: {message}\n")
    assert not (tmp_path / "out").exists()


def test_dynamic_takes_true_false_or_auto(capsys):
    from kerneltui.cli import main

    with pytest.raises(SystemExit) as exited:
        main(["capture", str(EXAMPLES / "add_relu.py"), "--dynamic", "maybe"])
    assert exited.value.code == 2
    assert "argument --dynamic: invalid choice: 'maybe' (choose from 'true', 'false', 'auto')" in capsys.readouterr().err


def test_unknown_backend_is_one_line_before_the_eager_capture(tmp_path):
    rc, _, err = capture(str(EXAMPLES / "add_relu.py"), "--backend", "nope", "-o", str(tmp_path / "out"))
    assert rc == 2
    assert err.startswith("kerneltui: --backend nope: not a torch.compile backend here (known: ")
    assert "aot_eager" in err and "inductor" in err and err.count("\n") == 1
    assert not (tmp_path / "out").exists()
