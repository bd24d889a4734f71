"""Kernel provenance in compiled captures and `--provenance-only`, on whatever torch finds (the CPU in CI).

The values asserted are those torch 2.13 gives for the examples; the captures are the session's
(conftest.py), so the only compiles added here are those of the degraded paths.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

import orjson
import pytest

torch = pytest.importorskip("torch")

from kerneltui.capture import profiling, provenance  # noqa: E402
from tests.capture.support import EXAMPLE_OPTIONS, EXAMPLES, STEPS, capture, read, spans  # noqa: E402

CPU = not torch.cuda.is_available()
ADD_RELU = EXAMPLES / "add_relu.py"
ADD_RELU_LINE = 14  # `return (a + b).relu()`
# as the session found them, before any capture patched them for its compiles
CONFIG_BEFORE = (torch._inductor.config.trace.provenance_tracking_level, torch._inductor.config.cpp.enable_kernel_profile)


def compiled(captured, name: str) -> dict:
    rc, _, err, out_dir = captured[name]
    assert rc == 0, err
    return read(out_dir / f"{EXAMPLE_OPTIONS[name][1]}_compiled.json.gz")


def kernels(trace: dict) -> list[dict]:
    return trace["kerneltui"]["provenance"]["kernels"]


def kind(graph: str) -> str:
    """"0_forward" -> "forward": the number counts Inductor's graphs in the process that compiled
    it first, which an FX-cache hit brings along from an earlier run."""
    return graph.split("_", 1)[1]


def cpp_event_name(kernel: dict) -> str:
    """What cpp.enable_kernel_profile calls a C++ kernel's event: graph_<its graph's number>_<name>."""
    return f"graph_{kernel['graph'].split('_', 1)[0]}_{kernel['name']}"


def line(file: str, number: int, function: str) -> dict:
    path = EXAMPLES / file
    return {"file": str(path), "line": number, "function": function,
            "code": path.read_text().splitlines()[number - 1].strip()}


def regions(trace: dict) -> dict[str, list[dict]]:
    """cache key -> its `## Call CompiledFxGraph <key> ##` spans: one per call of the graph."""
    found: dict[str, list[dict]] = {}
    for span in spans(trace, "user_annotation", "## Call CompiledFxGraph "):
        found.setdefault(span["name"].split()[3], []).append(span)
    return found


def test_add_relu_is_one_kernel_covering_add_and_relu_at_the_examples_line(captured):
    block = compiled(captured, "add_relu")["kerneltui"]["provenance"]
    assert (block["version"], block["source"], block["torch"]) == (1, provenance.TRACKING, torch.__version__)
    assert ADD_RELU.read_text().splitlines()[ADD_RELU_LINE - 1].strip() == "return (a + b).relu()"
    [kernel] = block["kernels"]
    assert kernel["name"] == ("cpp_fused_add_relu_0" if CPU else "triton_poi_fused_add_relu_0")
    assert sorted(kernel["aten_ops"]) == ["aten.add.Tensor", "aten.relu.default"]
    assert kernel["source_lines"] == [
        {"file": str(ADD_RELU), "line": ADD_RELU_LINE, "function": "add_relu", "code": "return (a + b).relu()"}
    ]
    assert (kind(kernel["graph"]), kernel["compile_id"], kernel["extern"]) == ("inference", "0/0", False)
    assert sorted(kernel["pre_grad_nodes"]) == ["add", "relu"] and kernel["module_paths"] == []
    if CPU:
        assert kernel["trace_name"] == cpp_event_name(kernel) and kernel["kernel_hash"] is None
    else:
        assert kernel["trace_name"] == kernel["name"] and kernel["kernel_hash"]


@pytest.mark.skipif(not CPU, reason="C++ kernels are CPU events")
def test_compiled_cpu_trace_holds_the_kernel_event_inside_its_graphs_region(captured):
    trace = compiled(captured, "add_relu")
    [kernel] = kernels(trace)
    events = [e for e in spans(trace, "cpu_op", "graph_") if e["name"].endswith("_cpp_fused_add_relu_0")]
    assert [e["name"] for e in events] == [kernel["trace_name"]] * STEPS
    calls = regions(trace)[kernel["cache_key"]]
    assert all(any(r["ts"] <= e["ts"] <= r["ts"] + r["dur"] for r in calls) for e in events)


def test_eager_trace_has_no_provenance(captured):
    _, _, _, out_dir = captured["add_relu"]
    assert set(read(out_dir / "add_relu_n1000_eager.json.gz")["kerneltui"]) == {"capture"}


@pytest.mark.skipif(not CPU, reason="kernel names of the CPU backend")
def test_mlp_kernels_name_their_modules_and_the_forward_line(captured):
    records = kernels(compiled(captured, "mlp"))
    found = [(kind(k["graph"]), k["name"], k["extern"], k["module_paths"]) for k in records]
    assert found == [  # forward only, under no_grad: one inference graph
        ("inference", "cpp_fused_native_layer_norm_0", False, ["MLP.norm (LayerNorm)"]),
        ("inference", "extern_kernels.addmm", True, ["MLP.up (Linear)"]),
        ("inference", "cpp_fused_gelu_1", False, ["MLP"]),
        ("inference", "extern_kernels.addmm", True, ["MLP.down (Linear)"]),
        ("inference", "cpp_fused_add_2", False, ["MLP"]),
    ]
    assert all(k["trace_name"] == cpp_event_name(k) for k in records if not k["extern"])
    forward = line("mlp.py", 21, "forward")
    assert all(k["source_lines"] == [forward] for k in records)
    addmm = records[1]
    assert (addmm["trace_name"], addmm["aten_ops"], addmm["pre_grad_nodes"]) == ("aten::addmm", ["aten.addmm.default"],
                                                                                 ["linear"])


@pytest.mark.skipif(not CPU, reason="kernel names of the CPU backend")
def test_train_step_kernels_cover_forward_backward_and_the_optimizer(captured):
    records = kernels(compiled(captured, "train_step"))
    by_graph: dict[str, list[str]] = {}
    for k in records:
        by_graph.setdefault(kind(k["graph"]), []).append(k["name"])
    assert by_graph == {
        "forward": ["extern_kernels.addmm", "cpp_fused_relu_0", "extern_kernels.addmm",
                      "cpp_fused__log_softmax_nll_loss_forward_1"],
        "backward": [
            ("cpp_fused__log_softmax__log_softmax_backward_data_arange_eq_expand_nll_loss_backward_"
             "nll_loss_forward_scalar_tensor_view_0"),
            "extern_kernels.mm", "extern_kernels.mm", "cpp_fused_nll_loss_forward_sum_threshold_backward_1",
            "extern_kernels.mm", "cpp_fused_sum_2",
        ],
        "inference": ["cpp_fused_add_addcdiv_copy__div_fma_lerp_mul_neg_pow_reciprocal_rsub_sqrt_0"],
    }
    loss_line = line("train_step.py", 25, "train_step")  # loss = cross_entropy(model(x), y)
    assert all(k["source_lines"] == [loss_line] for k in records if kind(k["graph"]) != "inference")
    forward, backward = ({k["graph"] for k in records if kind(k["graph"]) == side} for side in ("forward", "backward"))
    assert len(forward) == len(backward) == 1 and forward.pop().split("_")[0] == backward.pop().split("_")[0]
    relu = next(k for k in records if k["name"] == "cpp_fused_relu_0")
    assert (relu["aten_ops"], relu["module_paths"]) == (["aten.relu.default"], ["Sequential.1 (ReLU)"])
    backward_mm = next(k for k in records if kind(k["graph"]) == "backward" and k["extern"])
    assert (backward_mm["trace_name"], backward_mm["module_paths"]) == ("aten::mm", ["Sequential.2 (Linear)"])
    # optimizer.step() is a Dynamo frame of its own: its lines are torch's
    [adamw] = [k for k in records if kind(k["graph"]) == "inference"]
    assert {(Path(s["file"]).parent.name, s["function"]) for s in adamw["source_lines"]} == {
        ("optim", "_single_tensor_adam")}
    assert "aten.addcdiv.default" in adamw["aten_ops"]


@pytest.mark.parametrize("name", list(EXAMPLE_OPTIONS))
def test_every_kernel_is_found_in_its_graphs_region_of_the_compiled_trace(captured, name):
    """The join the viewers make: a graph's region by cache key, then the kernel by name
    (an extern kernel: the k-th op of its name in the region)."""
    trace = compiled(captured, name)
    by_key = regions(trace)
    ops = [e for e in trace["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "cpu_op"]
    for key in {k["cache_key"] for k in kernels(trace)}:
        assert len(by_key[key]) == STEPS, key
        region = by_key[key][0]
        inside = [e["name"] for e in sorted(ops, key=lambda e: e["ts"])
                  if region["ts"] <= e["ts"] <= region["ts"] + region["dur"]]
        wanted = [k["trace_name"] for k in kernels(trace) if k["cache_key"] == key]
        if CPU:
            assert [n for n in inside if n in set(wanted)] == wanted
        else:
            assert [n for n in inside if n in {w for w in wanted if w.startswith("aten::")}] == \
                [w for w in wanted if w.startswith("aten::")]


def test_provenance_only_writes_the_mapping_and_profiles_nothing(captured, tmp_path, monkeypatch):
    def no_profile(*args, **kwargs):
        raise AssertionError("--provenance-only profiled")

    monkeypatch.setattr(profiling, "profile", no_profile)
    rc, out, err = capture(str(ADD_RELU), "-p", "n=1e3", "--warmup", "1", "--provenance-only", "-o", str(tmp_path))
    assert rc == 0, err
    written = tmp_path / "add_relu_n1000_compiled.provenance.json"
    assert [p.name for p in tmp_path.iterdir()] == [written.name]  # no trace, no scratch file
    block = orjson.loads(written.read_bytes())
    in_trace = compiled(captured, "add_relu")["kerneltui"]["provenance"]
    assert block == in_trace  # the same object, key for key
    assert f"  {written}  (1 kernel in 1 graph, from inductor provenance tracking)" in out
    assert f"--provenance {written}" in out
    assert "nothing profiled" in err


def test_provenance_only_never_overwrites_and_rejects_profile_options(tmp_path):
    kept = tmp_path / "add_relu_n1000_compiled.provenance.json"
    kept.write_text("an earlier mapping")
    rc, _, err = capture(str(ADD_RELU), "-p", "n=1e3", "--provenance-only", "-o", str(tmp_path))
    assert (rc, err) == (2, f"kerneltui: {kept} exists: pass --force to overwrite\n")
    assert kept.read_text() == "an earlier mapping"
    for option in (["--steps", "2"], ["--modes", "eager"], ["--with-stack"], ["--open"]):
        rc, _, err = capture(str(ADD_RELU), "--provenance-only", *option, "-o", str(tmp_path))
        assert (rc, err) == (2, f"kerneltui: --provenance-only profiles nothing: drop {option[0]}\n")


def test_without_provenance_tracking_the_generated_code_comments_are_used(tmp_path, monkeypatch):
    monkeypatch.setattr(provenance, "TRACKING_OPTIONS", ())  # a torch from before pytorch#158399
    rc, _, err = capture(str(EXAMPLES / "train_step.py"), *EXAMPLE_OPTIONS["train_step"][0], "--modes", "compiled",
                         "--steps", "1", "--warmup", "1", "-o", str(tmp_path))
    assert rc == 0, err
    assert "kerneltui: warning: torch " in err and "has no Inductor provenance tracking" in err
    doc = read(tmp_path / "train_step_batch8_width16_compiled.json.gz")
    block = doc["kerneltui"]["provenance"]
    assert block["source"] == provenance.COMMENTS
    assert {kind(k["graph"]) for k in block["kernels"]} == {"forward", "backward", "inference"}
    first = block["kernels"][0]
    if CPU:  # an extern call's comment names its ATen ops and nodes; C++ kernels have no comments
        assert first["name"] == "extern_kernels.addmm"
        assert (first["aten_ops"], first["pre_grad_nodes"]) == (["aten.t", "aten.addmm"], ["input_1"])
        assert first["source_lines"] == [line("train_step.py", 25, "train_step")]
        assert first["module_paths"] == ["Sequential.0 (Linear)"]
        relu = block["kernels"][1]
        # the event name is read from the generated code: the graph number baked into it there, which is
        # the graph's own number on a cold Inductor cache and an earlier process's on a warm one
        assert relu["name"] == "cpp_fused_relu_0" and re.fullmatch(r"graph_\d+_cpp_fused_relu_0", relu["trace_name"])
        assert relu["trace_name"] in {e.get("name") for e in doc["traceEvents"]}  # what the trace calls it


def test_a_torch_without_either_records_the_reason_and_the_capture_succeeds(tmp_path, monkeypatch):
    monkeypatch.setattr(provenance, "TRACKING_OPTIONS", ())
    monkeypatch.setattr(provenance, "_publishes_generated_code", lambda: False)
    rc, _, err = capture(str(ADD_RELU), "-p", "n=1e3", "--modes", "compiled", "--steps", "1", "--warmup", "1",
                         "-o", str(tmp_path))
    assert rc == 0, err
    reason = f"torch {torch.__version__} publishes neither Inductor's provenance tracking nor its generated code: " \
             "kernel provenance cannot be recorded"
    assert [w for w in err.splitlines() if "warning" in w and "provenance" in w] == [f"kerneltui: warning: {reason}"]
    trace = read(tmp_path / "add_relu_n1000_compiled.json.gz")
    assert trace["kerneltui"]["provenance"] == {"version": 1, "source": None, "torch": torch.__version__,
                                                "kernels": [], "reason": reason}
    if CPU:  # C++ kernel events stay on: the trace still shows the kernel
        assert next(e["name"] for e in spans(trace, "cpu_op", "graph_")).endswith("_cpp_fused_add_relu_0")
    rc, _, err = capture(str(ADD_RELU), "--provenance-only", "-o", str(tmp_path / "only"))
    assert (rc, err.splitlines()[-1]) == (2, f"kerneltui: --provenance-only: {reason}")
    assert not (tmp_path / "only").exists()


def test_artefacts_that_never_arrive_are_one_warning(tmp_path, monkeypatch):
    monkeypatch.setattr(provenance, "TRACE_LOGGER", "kerneltui.tests.nothing_logs_here")
    rc, _, err = capture(str(ADD_RELU), "-p", "n=1e3", "--warmup", "1", "--provenance-only", "-o", str(tmp_path))
    assert rc == 0, err
    reason = "Inductor compiled 1 graph but published no generated code on kerneltui.tests.nothing_logs_here"
    assert f"kerneltui: warning: no kernel provenance: {reason}\n" in err
    block = orjson.loads((tmp_path / "add_relu_n1000_compiled.provenance.json").read_bytes())
    assert (block["source"], block["kernels"], block["reason"]) == (None, [], reason)


def test_nothing_stays_attached_after_the_warm_up(captured):
    assert not any(isinstance(h, provenance.Recorder) for h in logging.getLogger(provenance.TRACE_LOGGER).handlers)
    config = torch._inductor.config
    assert (config.trace.provenance_tracking_level, config.cpp.enable_kernel_profile) == CONFIG_BEFORE


def test_the_loader_joins_a_cpu_capture_s_kernels_to_their_records(captured):
    """The other half of the contract: kerneltui reads the block back and finds each C++ kernel's events."""
    from kerneltui.analysis.provenance.join import cpu_kernel_rows, of_trace
    from kerneltui.trace.model import load_trace

    _, _, _, out_dir = captured["add_relu"]
    trace = load_trace(out_dir / f"{EXAMPLE_OPTIONS['add_relu'][1]}_compiled.json.gz")
    provenance = of_trace(trace)
    assert provenance is not None and provenance.source == "inductor provenance tracking"
    rows = cpu_kernel_rows(trace, provenance)
    assert len(rows) == STEPS  # the kernel's event once per profiled step
    record = next(iter(rows.values()))
    assert record.name == "cpp_fused_add_relu_0" and record.op_names == {"aten::add", "aten::relu"}
    assert [(Path(s.file).name, s.line) for s in record.source_lines][:1] == [("add_relu.py", ADD_RELU_LINE)]
    names = {trace.name(int(trace.events["name"].iat[r])) for r in rows}
    assert len(names) == 1 and names.pop().endswith("_cpp_fused_add_relu_0")


def test_a_cached_compile_from_another_checkout_names_this_run_s_files(captured, tmp_path):
    """The session already compiled examples/add_relu.py; the same code from another directory is an
    FX-cache hit whose replayed artefacts carry the first path. The records must name the copy (CI's
    fresh clone met this: its lines pointed into the other checkout)."""
    copy = tmp_path / "elsewhere" / "add_relu.py"
    copy.parent.mkdir()
    copy.write_text(ADD_RELU.read_text())
    out_dir = tmp_path / "out"
    rc, _, err = capture(str(copy), *EXAMPLE_OPTIONS["add_relu"][0], "--modes", "compiled", "--steps", "1",
                         "--warmup", "1", "-o", str(out_dir))
    assert rc == 0, err
    [kernel] = read(out_dir / f"{EXAMPLE_OPTIONS['add_relu'][1]}_compiled.json.gz")["kerneltui"]["provenance"]["kernels"]
    assert [(s["file"], s["line"]) for s in kernel["source_lines"]] == [(str(copy), ADD_RELU_LINE)]
