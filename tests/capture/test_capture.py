"""`kerneltui capture` end to end, in process, on whatever torch finds (the CPU in CI).

Compiled captures cost seconds each, so each example is captured once per session (conftest.py).
"""

from __future__ import annotations

import subprocess
import sys
from collections import Counter

import orjson
import pytest

torch = pytest.importorskip("torch")

from tests.capture.support import (  # noqa: E402
    EXAMPLE_OPTIONS,
    EXAMPLES,
    ROOT,
    STEPS,
    capture,
    read,
    spans,
    write_workload,
)

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"

# example -> (its -p options, the file-name stem they give, the parameters stored)
STORED = {
    "add_relu": {"n": 1000, "device": DEVICE},
    "mlp": {"width": 32, "tokens": 16, "device": DEVICE},
    "train_step": {"batch": 8, "width": 16, "device": DEVICE},
}
CASES = {name: (*EXAMPLE_OPTIONS[name], STORED[name]) for name in EXAMPLE_OPTIONS}


@pytest.mark.parametrize("name", CASES)
def test_writes_one_file_per_mode_named_after_workload_params_and_mode(captured, name):
    rc, _, err, out_dir = captured[name]
    assert rc == 0, err
    stem = CASES[name][1]
    # Nothing else either: no temporary file left behind.
    assert sorted(p.name for p in out_dir.iterdir()) == [f"{stem}_compiled.json.gz", f"{stem}_eager.json.gz"]


@pytest.mark.parametrize("name", CASES)
@pytest.mark.parametrize("mode", ["eager", "compiled"])
def test_trace_marks_each_profiled_call_as_a_profiler_step(captured, name, mode):
    trace = read(captured[name][3] / f"{CASES[name][1]}_{mode}.json.gz")
    assert isinstance(trace["traceEvents"], list)
    steps = spans(trace, "user_annotation", "ProfilerStep#")
    # step 0 is the profiler's own warm-up call, traced and dropped
    assert sorted(e["name"] for e in steps) == [f"ProfilerStep#{i}" for i in range(1, STEPS + 1)]
    assert "schemaVersion" in trace and "baseTimeNanoseconds" in trace  # still Kineto's file


@pytest.mark.parametrize("name", CASES)
@pytest.mark.parametrize("mode", ["eager", "compiled"])
def test_capture_block_says_how_the_trace_was_taken(captured, name, mode):
    block = read(captured[name][3] / f"{CASES[name][1]}_{mode}.json.gz")["kerneltui"]["capture"]
    assert block["mode"] == mode
    assert block["name"] == name
    assert block["workload"] == str(EXAMPLES / f"{name}.py")
    assert block["params"] == CASES[name][2]
    assert (block["warmup_calls"], block["profiled_calls"]) == (1, STEPS)
    assert block["torch"] == torch.__version__
    assert block["cuda"] == torch.version.cuda
    assert block["record_shapes"] is True and block["with_stack"] is False
    if mode == "compiled":
        assert block["compile_mode"] == "default"
        assert block["compile_seconds"] > 0
        # Dynamo's own count: the training step breaks at backward() and around the optimizer
        assert block["graph_breaks"] == {"add_relu": 0, "mlp": 0, "train_step": 4}[name]
        assert (block["backend"], block["fullgraph"], block["dynamic"]) == ("inductor", False, None)
        assert (block["recompiles"], block["allow_recompile"], block["warmup_recompiles"]) == ([], False, [])
        assert block["eager_was_compiled"] is None
    else:
        assert block["compile_mode"] is None and block["compile_seconds"] is None
        assert block["graph_breaks"] is None
        assert (block["backend"], block["recompiles"], block["allow_recompile"]) == (None, None, None)
        assert block["eager_was_compiled"] is False
    assert (block["compiles_itself"], block["script_args"], block["rank"], block["world_size"]) == (False, [], None, None)
    assert block["threads"] == torch.get_num_threads()
    for key in ("device", "hostname", "time", "command", "python", "triton", "first_call_seconds"):
        assert key in block


def test_each_step_holds_exactly_one_call(captured):
    trace = read(captured["add_relu"][3] / "add_relu_n1000_eager.json.gz")
    adds = [e["ts"] for e in spans(trace, "cpu_op", "aten::add")]
    for step in spans(trace, "user_annotation", "ProfilerStep#"):
        inside = [ts for ts in adds if step["ts"] <= ts <= step["ts"] + step["dur"]]
        assert len(inside) == 1, step["name"]
    assert len(adds) == STEPS  # the warm-up call is not in the trace


def test_compiled_trace_runs_the_compiled_graph_and_eager_does_not(captured):
    out_dir = captured["add_relu"][3]
    compiled = read(out_dir / "add_relu_n1000_compiled.json.gz")
    eager = read(out_dir / "add_relu_n1000_eager.json.gz")
    assert len(spans(compiled, "cpu_op", "Torch-Compiled Region")) == STEPS
    assert len(spans(compiled, "user_annotation", "## Call CompiledFxGraph")) == STEPS
    assert spans(compiled, "cpu_op", "aten::add") == []
    assert spans(eager, "cpu_op", "Torch-Compiled Region") == []


def test_training_step_profiles_backward_and_optimizer(captured):
    out_dir = captured["train_step"][3]
    eager = read(out_dir / "train_step_batch8_width16_eager.json.gz")
    names = Counter(e["name"] for e in eager["traceEvents"] if e.get("ph") == "X")
    assert names["Optimizer.step#AdamW.step"] == STEPS
    assert names["autograd::engine::evaluate_function: AddmmBackward0"] == 2 * STEPS  # two Linear layers
    compiled = read(out_dir / "train_step_batch8_width16_compiled.json.gz")
    assert len(spans(compiled, "cpu_op", "CompiledFunctionBackward")) == STEPS


def test_report_gives_per_call_numbers_files_and_the_diff(captured):
    rc, out, err, out_dir = captured["add_relu"]
    eager, compiled = out_dir / "add_relu_n1000_eager.json.gz", out_dir / "add_relu_n1000_compiled.json.gz"
    assert f"kerneltui diff {eager} {compiled}" in out
    assert "launches/call" in out and "add_relu n=1000" in out
    if DEVICE == "cpu":
        assert "CUDA is not available" in err
        # No GPU: zero launches per call, in both modes.
        rows = [line.split() for line in out.splitlines() if line.strip().startswith(("eager", "compiled"))]
        assert [row[1] for row in rows] == ["0", "0"]


def test_sweep_writes_one_pair_per_value_and_opens_the_last(tmp_path, monkeypatch):
    opened = []
    monkeypatch.setattr("kerneltui.cli.main", lambda argv: opened.append(argv) or 0)
    rc, out, err = capture(str(EXAMPLES / "add_relu.py"), "--sweep", "n=8,1e1", "--steps", "1", "--warmup", "1",
                           "-o", str(tmp_path), "--open")
    assert rc == 0, err
    last_pair = [str(tmp_path / "add_relu_n10_eager.json.gz"), str(tmp_path / "add_relu_n10_compiled.json.gz")]
    assert opened == [["diff", *last_pair]]
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "add_relu_n10_compiled.json.gz", "add_relu_n10_eager.json.gz",
        "add_relu_n8_compiled.json.gz", "add_relu_n8_eager.json.gz",
    ]
    assert read(tmp_path / "add_relu_n10_compiled.json.gz")["kerneltui"]["capture"]["params"]["n"] == 10
    assert out.count("kerneltui diff ") == 2


def test_existing_trace_is_left_untouched_without_force(tmp_path):
    precious = tmp_path / "add_relu_n1000000_compiled.json.gz"
    precious.write_bytes(b"an earlier capture")
    rc, out, err = capture(str(EXAMPLES / "add_relu.py"), "-o", str(tmp_path))
    assert rc == 2
    assert err == f"kerneltui: {precious} exists: pass --force to overwrite\n"
    assert precious.read_bytes() == b"an earlier capture"
    assert [p.name for p in tmp_path.iterdir()] == [precious.name]  # checked before the eager capture ran


def test_force_overwrites(tmp_path):
    old = tmp_path / "add_relu_n16_eager.json.gz"
    old.write_bytes(b"old")
    rc, _, err = capture(str(EXAMPLES / "add_relu.py"), "-p", "n=16", "--modes", "eager", "--force",
                         "--steps", "1", "-o", str(tmp_path))
    assert rc == 0, err
    assert read(old)["kerneltui"]["capture"]["params"]["n"] == 16


def test_default_output_is_traces_in_the_working_directory_and_json_on_request(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rc, _, err = capture(str(EXAMPLES / "add_relu.py"), "-p", "n=16", "--modes", "eager", "--json", "--steps", "1")
    assert rc == 0, err
    trace = orjson.loads((tmp_path / "traces" / "add_relu_n16_eager.json").read_bytes())
    assert len(spans(trace, "user_annotation", "ProfilerStep#")) == 1


FAILS_IN_COMPILED_MODE = """
    import torch

    built = 0

    def explode(x):
        raise ValueError("no compiled mode today")

    def workload(n: int = 8, device: str = "cuda"):
        global built
        built += 1
        return (torch.relu if built == 1 else explode), (torch.ones(n, device=device),)
"""


def test_workload_error_shows_user_frames_and_keeps_the_finished_mode(tmp_path):
    source = write_workload(tmp_path, "fragile", FAILS_IN_COMPILED_MODE)
    out_dir = tmp_path / "out"
    rc, _, err = capture(str(source), "--steps", "1", "--warmup", "1", "-o", str(out_dir))
    assert rc == 1
    assert 'raise ValueError("no compiled mode today")' in err
    assert f'File "{source}", line 7, in explode' in err
    assert "kerneltui/capture" not in err  # our frames are trimmed
    assert err.rstrip().splitlines()[-1] == (
        "kerneltui: fragile n=8 compiled: ValueError in the first compiled call; "
        f"kept {out_dir}/fragile_n8_eager.json.gz"
    )
    assert sorted(p.name for p in out_dir.iterdir()) == ["fragile_n8_eager.json.gz"]
    assert len(spans(read(out_dir / "fragile_n8_eager.json.gz"), "user_annotation", "ProfilerStep#")) == 1


def test_traceback_starts_at_the_users_first_frame(tmp_path):
    source = write_workload(tmp_path, "broken", """
        import torch

        def inner(x):
            return x @ x.T.T  # wrong shapes

        def step(x):
            return inner(x)

        def workload(device: str = "cuda"):
            return step, (torch.ones(2, 3, device=device),)
    """)
    rc, _, err = capture(str(source), "--modes", "eager", "-o", str(tmp_path / "out"))
    assert rc == 1
    frames = [line for line in err.splitlines() if line.strip().startswith("File ")]
    assert frames[:2] == [f'  File "{source}", line 8, in step', f'  File "{source}", line 5, in inner']
    assert "RuntimeError" in err


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("import torch\n", "defines no workload(): add `def workload(n: int = 1_000_000"),
        ("workload = 3\n", "workload is a int, not a function"),
        ("def workload(device='cpu'):\n    return 42\n", "workload() returned int; it must return `fn, (inputs...)`"),
        ("import torch\ndef workload(device='cpu'):\n    return torch.relu, torch.ones(2)\n",
         "workload() returned inputs of type Tensor; make them a tuple"),
        ("def workload(n, device='cpu'):\n    pass\n", "workload() parameter 'n' has no default: pass -p n=VALUE"),
    ],
)
def test_file_not_meeting_the_contract_gets_one_line(tmp_path, source, message):
    path = tmp_path / "model.py"
    path.write_text(source)
    rc, out, err = capture(str(path), "--modes", "eager", "-o", str(tmp_path / "out"))
    assert rc == 2
    assert err.count("\n") == 1 or (err.count("\n") == 2 and "CUDA is not available" in err)
    assert message in err.splitlines()[-1]


def test_unknown_parameter_names_the_known_ones(tmp_path):
    rc, _, err = capture(str(EXAMPLES / "add_relu.py"), "-p", "size=3", "-o", str(tmp_path))
    assert rc == 2
    assert err.endswith("workload() has no parameter 'size' (its parameters: n, device)\n")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--modes", "eager,jit"], "--modes 'eager,jit': choose from eager, compiled"),
        (["--steps", "0"], "--steps 0: profile at least 1 call"),
        (["--warmup", "0"], "--warmup 0: at least 1"),
        (["--open", "--modes", "eager"], "--open needs two modes"),
        (["-p", "n=1", "--sweep", "n=1,2"], "n is given by both -p and --sweep"),
    ],
)
def test_bad_options_fail_before_anything_runs(tmp_path, argv, message):
    rc, _, err = capture(str(EXAMPLES / "add_relu.py"), *argv, "-o", str(tmp_path / "out"))
    assert rc == 2 and message in err and err.count("\n") == 1
    assert not (tmp_path / "out").exists()


INTERRUPTED_ON_THE_SECOND_POINT = """
    import torch

    calls = 0

    def add(x):
        global calls
        calls += 1
        if calls == 4:  # point 1: warm-up, profiler warm-up, 1 profiled call; point 2: its first call
            raise KeyboardInterrupt
        return x + 1

    def workload(n: int = 8, device: str = "cuda"):
        return add, (torch.ones(n, device=device),)
"""


def test_ctrl_c_exits_130_keeping_finished_traces_and_no_partial_file(tmp_path):
    source = write_workload(tmp_path, "slow", INTERRUPTED_ON_THE_SECOND_POINT)
    out_dir = tmp_path / "out"
    rc, _, err = capture(str(source), "--modes", "eager", "--sweep", "n=4,8", "--steps", "1", "--warmup", "1",
                         "-o", str(out_dir))
    assert rc == 130
    assert err.rstrip().splitlines()[-1] == f"kerneltui: interrupted; kept {out_dir}/slow_n4_eager.json.gz"
    assert sorted(p.name for p in out_dir.iterdir()) == ["slow_n4_eager.json.gz"]


def test_help_and_argument_checks_need_no_torch():
    code = "import sys; import kerneltui.capture.command, kerneltui.cli; assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_on_a_gpu_compiled_add_relu_runs_one_kernel_per_call_instead_of_two(tmp_path):
    from kerneltui.trace import load_trace
    from kerneltui.trace.summary import summarize

    rc, _, err = capture(str(EXAMPLES / "add_relu.py"), "-o", str(tmp_path))
    assert rc == 0, err
    eager = summarize(load_trace(tmp_path / "add_relu_n1000000_eager.json.gz"))
    compiled = summarize(load_trace(tmp_path / "add_relu_n1000000_compiled.json.gz"))
    assert (eager.launches_per_iteration, compiled.launches_per_iteration) == (2, 1)
    assert eager.iterations == compiled.iterations == 3
    assert compiled.gpu_ns_per_iteration < eager.gpu_ns_per_iteration


def test_an_output_path_that_is_a_file_is_one_line_and_exit_2(tmp_path):
    not_a_dir = tmp_path / "trace.json.gz"
    not_a_dir.write_bytes(b"precious")
    rc, _, err = capture(str(EXAMPLES / "add_relu.py"), "--modes", "eager", "-o", str(not_a_dir))
    assert rc == 2
    assert err == f"kerneltui: -o {not_a_dir}: not a directory (traces are written into a directory)\n"
    assert not_a_dir.read_bytes() == b"precious"


def test_dynamos_graph_break_count_is_recorded_and_the_diff_reports_it(tmp_path):
    """A forward that calls print: Dynamo breaks the frame in two, counts 1 break, and capture records it."""
    script = write_workload(tmp_path, "breaks", """
        import torch

        def step(x):
            x = (x * 2).relu()
            print("", end="")
            return x.sin()

        def workload(n: int = 64):
            return step, (torch.randn(n),)
    """)
    rc, _, err = capture(str(script), "-o", str(tmp_path / "out"), "--steps", "2", "--warmup", "1")
    assert rc == 0, err
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["breaks_n64_compiled.json.gz",
                                                                    "breaks_n64_eager.json.gz"]
    block = read(tmp_path / "out" / "breaks_n64_compiled.json.gz")["kerneltui"]["capture"]
    assert block["graph_breaks"] == 1
    from kerneltui.analysis.compare.compile_facts import compile_facts
    from kerneltui.trace import load_trace
    facts = compile_facts(load_trace(tmp_path / "out" / "breaks_n64_compiled.json.gz", cache=False))
    assert (facts.graph_breaks, facts.graph_breaks_source) == (1, "dynamo")
