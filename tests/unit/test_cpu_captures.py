"""CPU captures (tests/data/cpu, torch 2.13.0+cpu, `kerneltui capture` at f8d4b1d): graph breaks counted off
nested regions, the CPU work table, the diff's capture lines and what fused into what.

Truth: Dynamo's own count (``counters["graph_break"]``) that capture recorded in each trace's
``kerneltui.capture.graph_breaks``, and figures summed here from the JSON events."""

from __future__ import annotations

import csv
import gzip
import io
import json

import pytest

from kerneltui import diff_report, report
from kerneltui.analysis.compare.compile_facts import compile_facts
from kerneltui.analysis.compare.diff import diff_traces
from kerneltui.analysis.cpu_work import cpu_work, is_cpu_capture
from kerneltui.trace import load_trace
from kerneltui.trace.summary import summarize
from tests.conftest import DATA, shared_trace

CPU = DATA / "cpu"
ADD_RELU = "add_relu_n1000000"
ITEM_PRINT = "item_print_batch32_width64"  # forward: .item() then print: 2 breaks
CNN = "cnn_sgd_batch8"  # zero_grad, loss.backward(), and two torch._dynamo.graph_break() in SGD's step: 4 breaks


def doc(name: str) -> dict:
    return json.loads(gzip.decompress((CPU / f"{name}.json.gz").read_bytes()))


def without_dynamos_count(tmp_path, name: str):
    d = doc(name)
    dynamo = d["kerneltui"]["capture"].pop("graph_breaks")
    (tmp_path / "t.json").write_text(json.dumps(d))
    return dynamo, load_trace(tmp_path / "t.json", cache=False)


@pytest.mark.parametrize("name, dynamo", [(ADD_RELU, 0), (ITEM_PRINT, 2), (CNN, 4)])
def test_graph_breaks_read_off_the_trace_agree_with_dynamos_count(tmp_path, name, dynamo):
    recorded, trace = without_dynamos_count(tmp_path, f"{name}_compiled")
    assert recorded == dynamo
    f = compile_facts(trace)
    assert (f.graph_breaks, f.graph_breaks_source, f.graph_breaks_in_trace) == (dynamo, "at least", dynamo)


def test_the_cnn_steps_regions_nest_four_deep():
    # 0/0 (train_step) > 1/0 (resume after zero_grad) > 3/0 (resume after backward) > 4/0 (Optimizer
    # wrapper) > 5/1 (SGD.step, recompiled in warm-up): four regions hold another, one per break
    f = compile_facts(load_trace(CPU / f"{CNN}_compiled.json.gz", cache=False))
    assert f.regions == ("0/0", "1/0", "3/0", "4/0", "5/1")
    assert (f.graph_breaks, f.graph_breaks_source, f.graph_breaks_in_trace, f.region_calls_per_step) == \
        (4, "dynamo", 4, 1.0)


def test_a_recompile_counts_the_break_again_as_dynamo_does():
    # print in forward breaks frame 0 at each compile: 0/0 in two steps, 0/1 (batch 17) in the third; Dynamo: 2
    f = compile_facts(load_trace(DATA / "compile" / "recompile_in_step.json.gz"))
    assert f.graph_breaks == 2


def test_gpu_traces_keep_no_graph_break():
    for name in ("resnet18_train_compiled", "mlp_bf16_compiled", "norm_chain_compiled"):
        assert compile_facts(load_trace(shared_trace(name))).graph_breaks == 0


# -- the CPU work table -------------------------------------------------------------------------------

def self_times(name: str) -> dict[str, list[float]]:
    """Per cpu_op name: each event's duration less that of the cpu_ops directly inside it (µs), from the JSON."""
    ops = sorted((e for e in doc(name)["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "cpu_op"),
                 key=lambda e: (e["tid"], e["ts"], -e["dur"]))
    out: dict[str, list[float]] = {}
    stack: list[list] = []
    for e in ops + [None]:
        while stack and (e is None or e["tid"] != stack[-1][0]["tid"] or e["ts"] >= stack[-1][0]["ts"] + stack[-1][0]["dur"]):
            ev, inner = stack.pop()
            out.setdefault(ev["name"], []).append(ev["dur"] - inner)
        if e is None:
            break
        if stack:
            stack[-1][1] += e["dur"]
        stack.append([e, 0.0])
    return out


def test_an_eager_cpu_capture_lists_its_aten_ops_by_self_time():
    trace = load_trace(CPU / f"{ADD_RELU}_eager.json.gz", cache=False)
    assert is_cpu_capture(trace) and len(trace.gpu) == 0
    work = cpu_work(trace)
    truth = self_times(f"{ADD_RELU}_eager")
    assert list(work["key"]) == ["aten::clamp_min", "aten::add", "aten::relu"]
    for row in work.itertuples():
        assert row.count == len(truth[row.key]) == 3
        assert row.total_ns == pytest.approx(sum(truth[row.key]) * 1e3, abs=3)
    assert list(work["op"]) == ["aten::relu", "aten::add", "aten::relu"]  # clamp_min runs inside relu
    assert set(work["origin"]) == {"aten"}


def test_a_compiled_cpu_capture_lists_its_cpp_kernel_with_its_provenance():
    trace = load_trace(CPU / f"{ADD_RELU}_compiled.json.gz", cache=False)
    work = cpu_work(trace)
    assert list(work["key"]) == ["graph_0_cpp_fused_add_relu_0"]
    row = work.iloc[0]
    assert (row["origin"], row["count"], row["op"]) == ("compiled", 3, "aten::add + aten::relu at add_relu.py:14 in add_relu")
    assert row["total_ns"] == pytest.approx(sum(self_times(f"{ADD_RELU}_compiled")["graph_0_cpp_fused_add_relu_0"]) * 1e3, abs=3)
    assert summarize(trace).gpu_time_ns == 0  # GPU time stays 0


def test_summary_of_a_cpu_capture_says_so_and_shows_the_work(capsys):
    trace = load_trace(CPU / f"{ADD_RELU}_compiled.json.gz", cache=False)
    s = summarize(trace)
    text = report.as_table(trace, s, cpu_work(trace).iloc[0:0], None, False)
    assert report.CPU_CAPTURE_LINE in text.splitlines()
    assert "CPU work by self time: 1 row (compiled C++ kernels and ATen ops)" in text
    assert "graph_0_cpp_fused_add_relu_0" in text and "was it profiled with CUDA" not in text
    out = json.loads(report.as_json(trace, s, cpu_work(trace).iloc[0:0], None))
    assert out["cpu_capture"] is True and out["kernels"] == []
    assert [(r["key"], r["kind"], r["count"]) for r in out["cpu_work"]] == [("graph_0_cpp_fused_add_relu_0", "cpu_op", 3)]


def test_a_gpu_trace_is_no_cpu_capture():
    trace = load_trace(shared_trace("add_relu_1M_eager"))
    assert not is_cpu_capture(trace)
    assert "cpu_work" not in json.loads(report.as_json(trace, summarize(trace), cpu_work(trace).iloc[0:0], None))


def test_machine_line_from_the_capture_block():
    assert report.describe_machine({"threads": 2, "cpu_count": 16, "load_average": [1.15, 0.81, 0.67]}) == \
        "2 threads, 16 CPUs, load 1.15 0.81 0.67 (1, 5, 15 min)"
    assert report.describe_machine({"threads": "x", "load_average": [1, 2]}) == ""


# -- the diff ------------------------------------------------------------------------------------------

def pair(name: str):
    return (load_trace(CPU / f"{name}_eager.json.gz", cache=False),
            load_trace(CPU / f"{name}_compiled.json.gz", cache=False))


def test_the_cpu_pair_says_what_fused_into_what():
    a, b = pair(ADD_RELU)
    d = diff_traces(a, b)
    assert d.capture_notes == (("A and B are CPU captures: no GPU activity; the work is CPU time (self time of "
                                "compiled C++ kernels and ATen ops), GPU time stays 0"),)
    (f,) = d.cpu_fusions
    assert (f.eager_ops, f.kernel, f.source, f.eager_count, f.kernel_count) == \
        (("aten::add", "aten::relu"), "graph_0_cpp_fused_add_relu_0", "add_relu.py:14 in add_relu", 2.0, 1.0)
    eager, compiled = self_times(f"{ADD_RELU}_eager"), self_times(f"{ADD_RELU}_compiled")
    assert f.eager_ns == pytest.approx(sum(sum(eager[k]) for k in ("aten::add", "aten::relu", "aten::clamp_min")) * 1e3 / 3, abs=3)
    assert f.kernel_ns == pytest.approx(sum(compiled["graph_0_cpp_fused_add_relu_0"]) * 1e3 / 3, abs=3)
    table = diff_report.as_table(d)
    assert "fused on the CPU, A → B (CPU self time per step):" in table
    assert "  aten::add + aten::relu → graph_0_cpp_fused_add_relu_0 (add_relu.py:14 in" in table
    doc_ = json.loads(diff_report.as_json(d))
    assert doc_["cpu_fusions"][0]["kernel"] == "graph_0_cpp_fused_add_relu_0"
    assert doc_["capture_notes"] == list(d.capture_notes)
    assert "**A and B are CPU captures" in diff_report.as_markdown(d)


def test_a_gpu_pair_has_no_capture_line_nor_cpu_fusions():
    d = diff_traces(load_trace(shared_trace("add_relu_1M_eager")), load_trace(shared_trace("add_relu_1M_compiled")))
    assert (d.capture_notes, d.cpu_fusions) == ((), ())


def with_capture(tmp_path, name: str, **keys):
    d = doc(name)
    d["kerneltui"]["capture"].update(keys)
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(d))
    return load_trace(path, cache=False)


RECOMPILE = {"call": "profiled compiled call 2", "reason": "forward at item_print.py:13 recompiled: size of x changed"}


def test_allow_recompile_is_said_and_takes_the_speed_verdict_away(tmp_path):
    a = load_trace(CPU / f"{ITEM_PRINT}_eager.json.gz", cache=False)
    b = with_capture(tmp_path, f"{ITEM_PRINT}_compiled", allow_recompile=True, recompiles=[RECOMPILE])
    d = diff_traces(a, b)
    assert d.capture_notes[0] == ("B was written with --allow-recompile: 1 recompile inside its profiled calls "
                                  "(profiled compiled call 2: forward at item_print.py:13 recompiled: size of x "
                                  "changed); its time per call holds compiling, so no speed verdict")
    assert d.verdict.kind == "recompiled" and d.verdict.ratio is None
    assert d.verdict.short == "no speed verdict: B recompiled inside the profiled calls (--allow-recompile)"
    assert json.loads(diff_report.as_json(d))["verdict"]["kind"] == "recompiled"


def test_allow_recompile_without_a_recompile_and_a_compiled_eager_run(tmp_path):
    a = with_capture(tmp_path, f"{ITEM_PRINT}_eager", eager_was_compiled=True)
    b = with_capture(tmp_path, f"{ITEM_PRINT}_compiled", allow_recompile=True, recompiles=[])
    d = diff_traces(a, b)
    assert d.capture_notes[:2] == (
        "A's \"eager\" run ran code its script compiled itself (torch.compile): not plain eager",
        "B was written with --allow-recompile (no recompile was recorded in its profiled calls)")
    assert d.verdict.kind != "recompiled"


# -- `kerneltui summary` options on a CPU capture: --top, --filter, --format csv/json ------------------------

def work_truth(name: str) -> list[tuple[str, int, float]]:
    """(name, calls, total self µs) of every compiled C++ kernel and ATen op, most self time first, from the JSON."""
    rows = [(k, len(v), sum(v)) for k, v in self_times(name).items() if k.startswith("aten::") or "cpp_fused" in k]
    return sorted(rows, key=lambda r: (-r[2], r[0]))


def test_summary_top_takes_the_cpu_work_rows_with_most_self_time():
    from tests.unit.test_cli_summary import kerneltui

    truth = work_truth(f"{CNN}_compiled")
    result = kerneltui("summary", str(CPU / f"{CNN}_compiled.json.gz"), "--top", "2", "--format", "csv")
    assert result.returncode == 0, result.stderr
    got = list(csv.DictReader(io.StringIO(result.stdout)))
    assert [(r["key"], int(r["count"])) for r in got] == [(k, n) for k, n, _ in truth[:2]] == [
        ("aten::convolution_backward", 6),
        ("graph_0_cpp_fused_convolution_backward_native_batch_norm_backward_nll_loss_forward_threshold_backward_2", 3)]
    for r, (_, _, us) in zip(got, truth):
        assert int(r["total_ns"]) == pytest.approx(us * 1e3, abs=3)
        assert r["kind"] == "cpu_op"
    assert [r["origin"] for r in got] == ["aten", "compiled"]
    table = kerneltui("summary", str(CPU / f"{CNN}_compiled.json.gz"), "--top", "2").stdout.splitlines()
    assert table[table.index("CPU work by self time: 2 rows (compiled C++ kernels and ATen ops)") + 3:] == [
        "aten::convolution_backward",
        "  aten::convolution_backward        6  61.03ms  10.17ms   89.8µs  36.33ms  70.3%",
        "graph_0_cpp_fused_convolut…h_norm_backward_nll_loss_forward_threshold_backward_2",
        "  aten::convolution_backward…       3  23.93ms   7.98ms   99.5µs  23.73ms  27.6%",
    ]


def test_summary_filter_keeps_the_cpu_work_rows_whose_name_matches():
    from tests.unit.test_cli_summary import kerneltui

    truth = {k: (n, us) for k, n, us in work_truth(f"{CNN}_compiled")}
    path = str(CPU / f"{CNN}_compiled.json.gz")
    doc_ = json.loads(kerneltui("summary", path, "--filter", "/^aten::(empty|copy_)$", "--format", "json").stdout)
    assert [(r["key"], r["count"]) for r in doc_["cpu_work"]] == [("aten::copy_", 15), ("aten::empty", 27)]
    assert [r["count"] for r in doc_["cpu_work"]] == [truth["aten::copy_"][0], truth["aten::empty"][0]]
    all_us = sum(us for _, us in truth.values())
    for r in doc_["cpu_work"]:  # the share stays of all the CPU work, as the unfiltered table has it
        assert r["share"] == pytest.approx(truth[r["key"]][1] / all_us, abs=1e-6)
    relu = kerneltui("summary", path, "--filter", "RELU", "--format", "csv")
    assert [r["key"] for r in csv.DictReader(io.StringIO(relu.stdout))] == [
        "graph_0_cpp_fused_mean_relu_threshold_backward_2", "graph_0_cpp_fused__native_batch_norm_legit_functional_copy__relu_1"]
    none = kerneltui("summary", path, "--filter", "no-such-op")
    assert none.returncode == 0 and none.stdout.splitlines()[-1] == report.NO_CPU_WORK_MATCHES
    assert "was it profiled with CUDA" not in none.stdout


def test_summary_launches_on_a_cpu_capture_is_one_line():
    from tests.unit.test_cli_summary import kerneltui

    path = str(CPU / f"{ADD_RELU}_compiled.json.gz")
    result = kerneltui("summary", path, "--launches")
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr == (f"kerneltui: {path}: a CPU capture has no GPU launches for --launches: its work is "
                             "listed by CPU self time without it\n")


def test_summary_csv_of_an_eager_cpu_capture_is_its_aten_ops():
    from tests.unit.test_cli_summary import kerneltui

    result = kerneltui("summary", str(CPU / f"{ADD_RELU}_eager.json.gz"), "--format", "csv")
    got = [(r["key"], int(r["count"]), int(r["total_ns"]), r["op"]) for r in csv.DictReader(io.StringIO(result.stdout))]
    truth = work_truth(f"{ADD_RELU}_eager")
    assert [g[:2] for g in got] == [(k, n) for k, n, _ in truth] == [
        ("aten::clamp_min", 3), ("aten::add", 3), ("aten::relu", 3)]
    assert [g[2] for g in got] == pytest.approx([us * 1e3 for _, _, us in truth], abs=3)
    assert [g[3] for g in got] == ["aten::relu", "aten::add", "aten::relu"]


def test_a_gpu_trace_summary_csv_keeps_its_kernels():
    from tests.unit.test_cli_summary import kerneltui

    result = kerneltui("summary", str(shared_trace("add_relu_1M_eager")), "--format", "csv", "--top", "1")
    header = result.stdout.splitlines()[0]
    assert "origin" not in header and len(result.stdout.splitlines()) == 2


def test_a_kernel_name_two_graphs_share_is_two_rows_each_with_its_own_record(tmp_path):
    """A cache hit can give the forward and backward graphs one C++ event name: each call is told by the
    `## Call CompiledFxGraph <key> ##` region around it, so each row keeps its own graph's source line."""
    import orjson

    from kerneltui.analysis.cpu_work import records_by_name, work_events, work_table
    from kerneltui.trace import load_trace

    def record(key, graph, line):
        return {"name": "cpp_fused_add_0", "trace_name": "graph_0_cpp_fused_add_0", "graph": graph, "cache_key": key,
                "compile_id": "0/0", "extern": False, "kernel_hash": None, "aten_ops": ["aten.add.Tensor"],
                "post_grad_nodes": ["add"], "pre_grad_nodes": ["add"], "module_paths": [],
                "source_lines": [{"file": "/home/me/model.py", "line": line, "function": "forward", "code": "x + 1"}]}

    events = []
    for i, key in enumerate(["fa", "fb", "fa"]):
        events.append({"ph": "X", "cat": "user_annotation", "name": f"## Call CompiledFxGraph {key} ##", "pid": 1,
                       "tid": 1, "ts": 1000 * i, "dur": 100})
        events.append({"ph": "X", "cat": "cpu_op", "name": "graph_0_cpp_fused_add_0", "pid": 1, "tid": 1,
                       "ts": 1000 * i + 10, "dur": 50})
    block = {"version": 1, "source": "inductor provenance tracking",
             "kernels": [record("fa", "0_forward", 10), record("fb", "0_backward", 20)]}
    path = tmp_path / "shared_name.json"
    path.write_bytes(orjson.dumps({"traceEvents": events, "kerneltui": {"provenance": block}}))
    trace = load_trace(path, cache=False)
    table = work_table(work_events(trace))
    assert table[["key", "count", "total_ns"]].values.tolist() == [
        ["graph_0_cpp_fused_add_0 [0_forward]", 2, 100_000], ["graph_0_cpp_fused_add_0 [0_backward]", 1, 50_000]]
    assert {k: r.source_lines[0].line for k, r in records_by_name(trace).items()} == {
        "graph_0_cpp_fused_add_0 [0_forward]": 10, "graph_0_cpp_fused_add_0 [0_backward]": 20}


def test_ops_run_while_dynamo_compiles_are_not_the_runs_work():
    """Found by an independent recount: in recompile_in_step 23.42 of 24.02 ms of CPU-work rows were ops
    Dynamo and Inductor ran inside `_compile.compile_inner` (fake tensors, aten::empty_strided at 14 ms)."""
    import gzip
    import json

    from kerneltui.analysis.cpu_work import work_events
    from kerneltui.trace import load_trace

    path = DATA / "compile" / "recompile_in_step.json.gz"
    events = [e for e in json.loads(gzip.open(path).read())["traceEvents"] if e.get("ph") == "X"]
    spans = [(e["ts"], e["ts"] + e["dur"]) for e in events if e["name"].startswith("_compile.compile_inner")]
    ops = [e for e in events if e.get("cat") == "cpu_op" and e["name"].startswith("aten::")]
    outside = [e for e in ops if not any(a <= e["ts"] < b for a, b in spans)]
    assert spans and len(outside) < len(ops)
    work = work_events(load_trace(path, cache=False))
    assert len(work) == len(outside) == 41
    assert round(work["self_ns"].sum() / 1e6, 2) == 0.60


def test_cpu_fusion_matches_in_place_eager_ops_and_never_claims_an_extern_op_fused():
    """The CNN step: eager runs aten::add_ (SGD, the batch-norm counter), the records name aten::add; the
    compiled side still runs aten::convolution_backward (an extern kernel), so no row says it fused."""
    from kerneltui.analysis.compare.cpu_fusion import cpu_fusions
    from kerneltui.trace import load_trace

    rows = cpu_fusions(load_trace(CPU / "cnn_sgd_batch8_eager.json.gz"),
                       load_trace(CPU / "cnn_sgd_batch8_compiled.json.gz"))
    assert not any("aten::convolution_backward" in r.eager_ops for r in rows)
    copy = next(r for r in rows if r.kernel == "graph_0_cpp_fused_add_copy__0")
    assert (copy.eager_ops, copy.eager_count, copy.kernel_count) == (("aten::add", "aten::copy_"), 17, 1)


def test_break_lines_come_from_the_records_resume_functions_without_python_frames():
    """Found by an independent recount: the CPU traces have no with_stack, but their kernels' records name
    the resume functions Dynamo compiled them from (torch_dynamo_resume_in_forward_at_15)."""
    from kerneltui.analysis.compare.compile_facts import compile_facts
    from kerneltui.analysis.compare.diff import _breaks
    from kerneltui.trace import load_trace

    facts = compile_facts(load_trace(CPU / "item_print_batch32_width64_compiled.json.gz"))
    assert facts.graph_break_at == ("item_print.py:15 in forward", "item_print.py:17 in forward")
    cnn = compile_facts(load_trace(CPU / "cnn_sgd_batch8_compiled.json.gz"))
    assert _breaks({"graph_breaks": cnn.graph_breaks, "graph_breaks_source": "dynamo",
                    "graph_break_at": list(cnn.graph_break_at)}) == (
        "4 graph breaks (Dynamo's count) (one of them at cnn_sgd.py:17 in train_step)")


def test_a_side_profiled_with_record_shapes_is_not_told_to_turn_it_on():
    """Found by an independent recount: compiled add_relu on a CPU was captured with record_shapes, but its
    steps run one C++ kernel and no ATen op with a tensor: the advice to profile with shapes was wrong."""
    from kerneltui.analysis.compare.workload import compare_workloads
    from kerneltui.trace import load_trace

    c = compare_workloads(load_trace(CPU / "add_relu_n1000000_eager.json.gz"),
                          load_trace(CPU / "add_relu_n1000000_compiled.json.gz"))
    assert c.reasons[0] == ("cannot tell: no input shapes in B, though profiled with record_shapes: no op of its "
                            "steps took a tensor")
