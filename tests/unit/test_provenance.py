"""Provenance in the diff and the browser: a real compiled trace with the block `kerneltui capture` writes.

The block is added here to the shipped H200 traces (captured before capture recorded it), with the
values Inductor records for these kernels: tests/capture checks that capture writes them so.
"""

from __future__ import annotations

import gzip
import json

import orjson
import pytest

from kerneltui import cli
from kerneltui.analysis.compare.diff import diff_traces
from kerneltui.analysis.provenance.join import gpu_records, of_trace
from kerneltui.analysis.provenance.records import eager_op_name, frame_source, parse, read_file
from kerneltui.trace.model import load_trace
from tests.conftest import SHARED_TRACES

ADD_RELU = {"version": 1, "source": "inductor provenance tracking", "kernels": [{
    "name": "triton_poi_fused_add_relu_0", "trace_name": "triton_poi_fused_add_relu_0", "graph": "0_inference",
    "extern": False, "kernel_hash": "cyqo6qgngcleqcjm7nccqpqwmapn3gmvgbpsnnaser7sz3hxoxqi",
    "aten_ops": ["aten.add.Tensor", "aten.relu.default"], "post_grad_nodes": ["add", "relu"],
    "pre_grad_nodes": ["add", "relu"],
    "source_lines": [{"file": "/home/u/examples/add_relu.py", "line": 14, "function": "add_relu",
                      "code": "return (a + b).relu()"}], "module_paths": []}]}


def with_block(tmp_path, name: str, block: dict):
    doc = orjson.loads(gzip.decompress((SHARED_TRACES / f"{name}.json.gz").read_bytes()))
    doc.setdefault("kerneltui", {})["provenance"] = block
    out = tmp_path / f"{name}.json"
    out.write_bytes(orjson.dumps(doc))
    return out


def test_the_block_is_read_and_joined_by_kernel_name(tmp_path):
    trace = load_trace(with_block(tmp_path, "add_relu_1M_compiled", ADD_RELU))
    records = gpu_records(trace, of_trace(trace))
    assert [r.name if r else None for r in records] == ["triton_poi_fused_add_relu_0"] * len(records)
    assert records[0].op_names == {"aten::add", "aten::relu"}
    assert records[0].summary() == "aten::add, aten::relu at add_relu.py:14 in add_relu"


def test_a_kernel_the_records_do_not_name_keeps_no_record(tmp_path):
    trace = load_trace(with_block(tmp_path, "mlp_bf16_compiled", ADD_RELU))
    names = trace.names_of(trace.gpu["name"].to_numpy())
    assert all(r is None for r in gpu_records(trace, of_trace(trace)))  # none of its kernels is add_relu's
    assert "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_bias_TNT" in set(names)


def test_the_diff_matches_the_fused_kernel_to_the_eager_kernels_it_covers(tmp_path):
    a = load_trace(SHARED_TRACES / "add_relu_1M_eager.json.gz")
    b = load_trace(with_block(tmp_path, "add_relu_1M_compiled", ADD_RELU))
    rows = diff_traces(a, b).matches
    assert len(rows) == 1
    row = rows.iloc[0]
    assert row["kind"] == "fused" and row["a_count"] == 2 and row["b_count"] == 1
    assert row["reason"] == ("provenance: Inductor's record of triton_poi_fused_add_relu_0 covers aten::add, "
                             "aten::relu at add_relu.py:14 in add_relu; A's kernels by op (the eager trace has "
                             "no source lines)")


def test_a_record_covering_only_add_leaves_the_relu_kernel_unmatched(tmp_path):
    only_add = json.loads(json.dumps(ADD_RELU))
    kernel = only_add["kernels"][0]
    kernel["aten_ops"], kernel["pre_grad_nodes"] = ["aten.add.Tensor"], ["add"]
    kernel["source_lines"][0]["code"] = "return a + b"
    kernel["name"] = kernel["trace_name"] = "triton_poi_fused_add_0"  # joined by its hash
    a = load_trace(SHARED_TRACES / "add_relu_1M_eager.json.gz")
    b = load_trace(with_block(tmp_path, "add_relu_1M_compiled", only_add))
    rows = diff_traces(a, b).matches
    assert sorted(rows["kind"]) == ["only A", "replaced"]
    replaced = rows[rows["kind"] == "replaced"].iloc[0]
    assert replaced["a_name"].startswith("vectorized_elementwise_kernel<CUDAFunctor_add>")
    left = rows[rows["kind"] == "only A"].iloc[0]
    assert left["a_name"].startswith("vectorized_elementwise_kernel<launch_clamp_scalar>")


def test_the_functions_a_records_line_calls_cover_what_its_ops_do_not(tmp_path):
    # Inductor names the ops it ran after decompositions (lerp_ is sub, mul and add): the eager
    # kernel of an op the record's line calls (`.relu()`), that no record's ops cover, is its too
    only_add = json.loads(json.dumps(ADD_RELU))
    only_add["kernels"][0]["aten_ops"], only_add["kernels"][0]["pre_grad_nodes"] = ["aten.add.Tensor"], ["add"]
    a = load_trace(SHARED_TRACES / "add_relu_1M_eager.json.gz")
    b = load_trace(with_block(tmp_path, "add_relu_1M_compiled", only_add))
    rows = diff_traces(a, b).matches
    assert list(rows["kind"]) == ["fused"] and rows.iloc[0]["a_count"] == 2 and rows.iloc[0]["b_count"] == 1


def test_a_records_ops_cover_in_place_spellings_and_its_nodes_calls():
    record = parse(ADD_RELU).kernels[0]
    # its ops, in place too, and those its name was made of (add, relu, add_relu)
    assert record.eager_ops == {"aten::add", "aten::relu", "aten::add_", "aten::relu_", "aten::add_relu"}
    foreach = parse({**ADD_RELU, "kernels": [{**ADD_RELU["kernels"][0], "name": "triton_for_fused_1",
                                              "aten_ops": ["aten._foreach_mul.Scalar"],
                                              "pre_grad_nodes": ["_foreach_mul_", "_foreach_add__1"]}]}).kernels[0]
    assert foreach.eager_ops == {"aten::_foreach_mul", "aten::_foreach_mul_", "aten::_foreach_add_"}
    named = parse({**ADD_RELU, "kernels": [{**ADD_RELU["kernels"][0], "aten_ops": [], "pre_grad_nodes": [],
                   "name": "triton_per_fused_sum_threshold_backward_2"}]}).kernels[0]
    assert named.eager_ops == {"aten::sum", "aten::threshold", "aten::backward", "aten::sum_threshold",
                               "aten::threshold_backward", "aten::sum_threshold_backward"}
    assert record.called_ops == {"aten::relu"}


def test_source_lines_must_agree_when_both_sides_have_them(tmp_path):
    """mlp_bf16 was captured with stacks: every eager kernel's line is gpu_corpus.py:197."""
    block = {"version": 1, "source": "inductor provenance tracking", "kernels": [
        {"name": "triton_poi_fused_gelu_view_1", "aten_ops": ["aten.gelu.default", "aten.view.default"],
         "source_lines": [{"file": "/somewhere/gpu_corpus.py", "line": 197, "function": "forward"}]},
        {"name": "triton_poi_fused_add_view_2", "aten_ops": ["aten.add.Tensor"],
         "source_lines": [{"file": "/somewhere/gpu_corpus.py", "line": 999, "function": "forward"}]},
    ]}
    a = load_trace(SHARED_TRACES / "mlp_bf16_eager.json.gz")
    b = load_trace(with_block(tmp_path, "mlp_bf16_compiled", block))
    rows = diff_traces(a, b).matches
    by_b = {r["b_name"]: r for _, r in rows.iterrows()}
    gelu = by_b["triton_poi_fused_gelu_view_1"]
    assert gelu["reason"].startswith("provenance: Inductor's record of triton_poi_fused_gelu_view_1 covers")
    assert gelu["reason"].endswith("A's kernels by op and source line")
    add = by_b["triton_poi_fused_add_view_2"]  # its record says another line: not matched by provenance
    assert not add["reason"].startswith("provenance")


def test_diff_provenance_file_attaches_to_the_side_it_names(tmp_path, capsys):
    path = tmp_path / "add_relu.provenance.json"
    path.write_bytes(orjson.dumps(ADD_RELU))
    code = cli.main(["diff", str(SHARED_TRACES / "add_relu_1M_eager.json.gz"),
                     str(SHARED_TRACES / "add_relu_1M_compiled.json.gz"), "--provenance", str(path),
                     "--format", "json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0 and doc["matches"][0]["reason"].startswith("provenance: ")
    code = cli.main(["diff", str(SHARED_TRACES / "add_relu_1M_eager.json.gz"),
                     str(SHARED_TRACES / "add_relu_1M_compiled.json.gz"), "--provenance", str(tmp_path / "none.json")])
    assert code == 2 and capsys.readouterr().err.startswith("kerneltui: ")


def test_a_provenance_file_that_names_none_of_the_kernels_is_said_not_used(tmp_path, capsys):
    cpu = json.loads(json.dumps(ADD_RELU))
    cpu["kernels"][0].update(name="cpp_fused_add_relu_0", trace_name="graph_0_cpp_fused_add_relu_0", kernel_hash=None)
    path = tmp_path / "cpu.provenance.json"  # a CPU compile's record: it names no kernel of an H200 trace
    path.write_bytes(orjson.dumps(cpu))
    code = cli.main(["diff", str(SHARED_TRACES / "add_relu_1M_eager.json.gz"),
                     str(SHARED_TRACES / "add_relu_1M_compiled.json.gz"), "--provenance", str(path), "--format", "json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0 and not doc["matches"][0]["reason"].startswith("provenance")
    assert ("the provenance file names none of A's or B's kernels (1 record, e.g. cpp_fused_add_relu_0): C++ kernels,"
            " a CPU compile's record (capture it where the traces were profiled): not used") in doc["notes"]


@pytest.mark.parametrize("text, expected", [
    ("aten.add.Tensor", "aten::add"), ("aten.relu.default", "aten::relu"), ("aten.mm", "aten::mm"),
    ("prims.convert_element_type.default", "prims::convert_element_type"), ("triton_kernel", "triton_kernel"),
])
def test_eager_op_names(text, expected):
    assert eager_op_name(text) == expected


def test_frame_names_and_places():
    s = frame_source("examples/add_relu.py(14): add_relu")
    assert (s.file, s.line, s.function) == ("examples/add_relu.py", 14, "add_relu")
    assert s.same_place(parse(ADD_RELU).kernels[0].source_lines[0])
    assert frame_source("<built-in method add>") is None


def test_a_block_that_is_not_one_is_skipped_not_trusted(tmp_path):
    assert parse({"kernels": "no"}) is None and parse(None) is None
    assert parse({"kernels": [{"name": ""}, 7, {"name": "k", "source_lines": [{"file": 3}]}]}).kernels[0].name == "k"
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2]")
    with pytest.raises(Exception, match="not a provenance file"):
        read_file(bad)


def test_search_finds_a_compiled_kernel_by_an_op_or_source_line_it_covers(tmp_path):
    from kerneltui.analysis.explore.context import launch_context
    from kerneltui.analysis.explore.search import launch_search

    trace = load_trace(with_block(tmp_path, "add_relu_1M_compiled", ADD_RELU))
    search = launch_search(trace, launch_context(trace))
    n = len(trace.gpu)
    for pattern in ("aten::relu", "aten.add", "add_relu.py:14", "(a + b)"):
        assert search.match(pattern).sum() == n, pattern
        assert search.fields(pattern, 0) == ("provenance",) or "provenance" in search.fields(pattern, 0)
    assert search.match("aten::mul").sum() == 0
    plain = load_trace(SHARED_TRACES / "add_relu_1M_compiled.json.gz")  # no block: no such hits
    assert launch_search(plain, launch_context(plain)).match("add_relu.py:14").sum() == 0


def test_details_show_what_the_compiled_kernel_computes_and_where_from(tmp_path):
    from kerneltui.tui.details import launch_details
    from kerneltui.tui.model import build_browse, build_kernels

    trace = load_trace(with_block(tmp_path, "add_relu_1M_compiled", ADD_RELU))
    kernels = build_kernels(trace)
    details = launch_details(kernels, build_browse(kernels), 0)
    assert details.value("computes") == "aten::add, aten::relu"
    assert details.value("from") == "add_relu.py:14 in add_relu"
