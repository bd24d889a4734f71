"""What Dynamo compiles around the profiled calls (issue 22): recompiles refused or recorded, a script that
compiles itself in eager mode, the compile options (backend, fullgraph, dynamic) and workload(compile=...).

The values asserted are those torch 2.13 gives on the CPU. Each compiled capture costs seconds: every
scenario is captured once per module and its tests read the result.
"""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from tests.capture.support import EXAMPLES, STEPS, capture, read, spans, write_workload

CPU = not torch.cuda.is_available()
DEVICE = "cpu" if CPU else "cuda"

RECOMPILES = """
    import torch

    calls = 0
    # batch length by call: warm-up 1, warm-up 2, the profiler's warm-up, profiled 1, profiled 2
    LENGTHS = [8, 16, 16, 16, 24]


    @torch.compiler.disable
    def next_batch(x):  # a data loader: not compiled; the length changes per call
        global calls
        calls += 1
        return x[: LENGTHS[min(calls, len(LENGTHS)) - 1]]


    def step(x):
        return (next_batch(x) * 2).relu()


    def workload(device: str = "cuda"):
        global calls
        calls = 0
        return step, (torch.ones(32, device=device),)
"""
# --dynamic false: each new length is a recompile (auto would make the second one dynamic)
RECOMPILE_ARGS = ("--warmup", "2", "--steps", "2", "--dynamic", "false")
WHERE = "step (after a graph break) at recompiles.py:17"  # the frame Dynamo resumes in after next_batch()
PROFILED = f"{WHERE} recompiled: tensor '___stack0' size mismatch at index 0. expected 16, actual 24"
WARM_UP = f"{WHERE} recompiled: tensor '___stack0' size mismatch at index 0. expected 8, actual 16"

COMPILES_ITSELF = """
    import torch

    def add_one(x):
        return (x + 1).relu()

    def workload(n: int = 8, device: str = "cuda"):
        return torch.compile(add_one), (torch.ones(n, device=device),)
"""

ONLY_THE_MODEL = """
    import torch

    modes = []


    class Scale(torch.nn.Module):
        def forward(self, x, scale):
            return (x * scale).relu()


    def workload(compile, mode, n: int = 8, device: str = "cuda"):
        modes.append(mode)
        return compile(Scale()), {"x": torch.ones(n, device=device), "scale": torch.full((n,), 2.0, device=device)}
"""

BREAKS = """
    import torch

    def step(x):
        x = (x * 2).relu()
        print("", end="")
        return x.sin()

    def workload(n: int = 64, device: str = "cuda"):
        return step, (torch.randn(n, device=device),)
"""


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, tuple[int, str, Path]]:
    """name -> (exit status, stderr, output directory) of each scenario, captured once."""
    base = tmp_path_factory.mktemp("compiles")
    scripts = {name: write_workload(base, name, source) for name, source in (
        ("recompiles", RECOMPILES), ("compiles_itself", COMPILES_ITSELF), ("only_the_model", ONLY_THE_MODEL),
        ("breaks", BREAKS))}
    quick = ("--steps", str(STEPS), "--warmup", "1")
    plan = {
        "refused": (scripts["recompiles"], *RECOMPILE_ARGS),
        "allowed": (scripts["recompiles"], *RECOMPILE_ARGS, "--modes", "compiled", "--allow-recompile"),
        "compiles_itself": (scripts["compiles_itself"], "--modes", "eager", *quick),
        "only_the_model": (scripts["only_the_model"], *quick),
        "aot_eager": (str(EXAMPLES / "add_relu.py"), "-p", "n=8", "--modes", "compiled", "--backend", "aot_eager",
                      "--fullgraph", "--dynamic", "true", *quick),
        "fullgraph": (scripts["breaks"], "--modes", "compiled", "--fullgraph", *quick),
    }
    results = {}
    for name, argv in plan.items():
        out = base / f"out_{name}"
        rc, _, err = capture(*map(str, argv), "-o", str(out))
        results[name] = (rc, err, out)
    return results


def _errors(err: str) -> list[str]:
    """kerneltui's own lines that speak of a recompile (the progress lines name the file recompiles.py)."""
    return [line for line in err.splitlines() if line.startswith("kerneltui:") and "recompile" in line]


def test_a_recompile_in_a_profiled_call_is_refused_and_the_eager_trace_kept(runs):
    rc, err, out = runs["refused"]
    assert rc == 2
    assert _errors(err) == [err.splitlines()[-1]]  # one line says it
    assert err.splitlines()[-1] == (
        f"kerneltui: recompiles compiled: a recompile in profiled compiled call 2: {PROFILED}; its time would be in "
        "the profile, so the compiled trace was not written (--allow-recompile writes it); "
        f"kept {out}/recompiles_eager.json.gz"
    )
    assert sorted(p.name for p in out.iterdir()) == ["recompiles_eager.json.gz"]  # no compiled file, no scratch


def test_allow_recompile_writes_the_trace_and_records_each_recompile(runs):
    rc, err, out = runs["allowed"]
    assert rc == 0, err
    block = read(out / "recompiles_compiled.json.gz")["kerneltui"]["capture"]
    assert block["allow_recompile"] is True
    assert block["recompiles"] == [{"call": "profiled compiled call 2", "reason": PROFILED, "compile_id": "1/2"}]
    assert block["warmup_recompiles"] == [{"call": "compiled warm-up call 2", "reason": WARM_UP, "compile_id": "1/1"}]
    assert (block["dynamic"], block["graph_breaks"]) == (False, 1)
    assert f"kerneltui: warning: recompiles compiled: a recompile in profiled compiled call 2: {PROFILED}; written " \
           "as --allow-recompile asks: that call's time holds the compile" in err.splitlines()
    assert "recompiles compiled: 2 calls profiled, compiled in " in err and ", 1 recompile profiled, " in err


def test_a_capture_without_recompiles_says_so(captured):
    rc, _, err, out_dir = captured["add_relu"]
    assert rc == 0, err
    block = read(out_dir / "add_relu_n1000_compiled.json.gz")["kerneltui"]["capture"]
    assert (block["recompiles"], block["warmup_recompiles"], block["allow_recompile"]) == ([], [], False)
    assert "recompile" not in err


def test_warmup_recompile_is_a_warning(tmp_path):
    """Auto dynamic: the second length recompiles once, dynamic, in the warm-up; the profiled calls do not."""
    script = write_workload(tmp_path, "recompiles", RECOMPILES)
    rc, _, err = capture(str(script), "--warmup", "2", "--steps", "2", "--modes", "compiled", "-o", str(tmp_path))
    assert rc == 0, err
    block = read(tmp_path / "recompiles_compiled.json.gz")["kerneltui"]["capture"]
    assert block["recompiles"] == []
    assert [c["call"] for c in block["warmup_recompiles"]] == ["compiled warm-up call 2"]
    assert (f"kerneltui: warning: recompiles compiled: a recompile in compiled warm-up call 2: {WARM_UP}; the "
            "profiled calls did not recompile, but inputs that change per call may") in err.splitlines()


def test_a_script_that_compiles_itself_is_warned_about_in_eager_mode(runs, captured):
    rc, err, out = runs["compiles_itself"]
    assert rc == 0, err
    trace = read(out / "compiles_itself_n8_eager.json.gz")
    assert trace["kerneltui"]["capture"]["eager_was_compiled"] is True
    assert len(spans(trace, "cpu_op", "Torch-Compiled Region")) == STEPS  # what the warning is about
    assert ("kerneltui: warning: compiles_itself n=8 eager: the script compiles with torch.compile itself (add_one "
            "at compiles_itself.py:4, the first eager call): this \"eager\" trace runs compiled code; declare "
            "workload(compile=...) and compile through it so that eager mode stays eager") in err.splitlines()
    # and an eager capture of a plain script is not
    rc, _, err, out_dir = captured["mlp"]
    assert read(out_dir / "mlp_width32_tokens16_eager.json.gz")["kerneltui"]["capture"]["eager_was_compiled"] is False
    assert "compiles with torch.compile itself" not in err


def test_workload_given_compile_compiles_only_what_it_chooses(runs):
    rc, err, out = runs["only_the_model"]
    assert rc == 0, err
    import sys

    assert sys.modules["kerneltui_workload_only_the_model"].modes == ["eager", "compiled"]
    eager = read(out / "only_the_model_n8_eager.json.gz")
    compiled = read(out / "only_the_model_n8_compiled.json.gz")
    # model(**batch) in both modes; the model compiled in compiled mode only
    assert len(spans(eager, "cpu_op", "aten::mul")) == STEPS
    assert spans(eager, "cpu_op", "Torch-Compiled Region") == []
    assert len(spans(compiled, "cpu_op", "Torch-Compiled Region")) == STEPS
    assert spans(compiled, "cpu_op", "aten::mul") == []
    for trace in (eager, compiled):
        block = trace["kerneltui"]["capture"]
        assert block["compiles_itself"] is True
        assert block["params"] == {"n": 8, "device": DEVICE}  # compile and mode are not parameters
    # kerneltui's configured compile, with its provenance recorder: the kernel is traced back
    kernels = compiled["kerneltui"]["provenance"]["kernels"]
    assert [k["aten_ops"] for k in kernels] == [["aten.relu.default", "aten.mul.Tensor"]]
    assert "compiles with torch.compile itself" not in err


def test_another_backend_fullgraph_and_dynamic(runs):
    rc, err, out = runs["aot_eager"]
    assert rc == 0, err
    assert sorted(p.name for p in out.iterdir()) == ["add_relu_n8_compiled-aot_eager.json.gz"]
    trace = read(out / "add_relu_n8_compiled-aot_eager.json.gz")
    block = trace["kerneltui"]["capture"]
    assert (block["backend"], block["fullgraph"], block["dynamic"], block["compile_mode"]) == \
        ("aot_eager", True, True, "default")
    reason = "backend aot_eager is not Inductor: kernel provenance is recorded for Inductor's kernels only"
    assert trace["kerneltui"]["provenance"] == {"version": 1, "source": None, "torch": torch.__version__,
                                                "kernels": [], "reason": reason}
    assert f"kerneltui: warning: no kernel provenance: {reason}" in err.splitlines()
    assert len(spans(trace, "cpu_op", "Torch-Compiled Region")) == STEPS


def test_fullgraph_makes_a_graph_break_an_error(runs):
    rc, err, out = runs["fullgraph"]
    assert rc == 1
    assert err.splitlines()[-1] == "kerneltui: breaks n=64 compiled: Unsupported in the first compiled call; " \
                                   "no trace was written"
    assert list(out.iterdir()) == []
