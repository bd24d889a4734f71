"""Joining a trace's kernels to provenance records when graphs generate same-named kernels.

Each Inductor graph numbers its kernels from 0, so two graphs of one trace both launch a
`triton_poi_fused_add_0` (on a CPU: a cache hit can bring two graphs the same `graph_<N>_` event
name). The traces here are written event by event in torch.profiler's shape: a kernel's launching
cpu_op carries `kernel_hash`, each graph's call is a `## Call CompiledFxGraph <key> ##` annotation.
"""

from __future__ import annotations

import orjson

from kerneltui.analysis.provenance.join import cpu_kernel_rows, gpu_records
from kerneltui.analysis.provenance.records import parse
from kerneltui.trace import load_trace

NAME = "triton_poi_fused_add_0"


def _event(ph, cat, name, ts, dur=None, tid=1, pid=1, **args):
    e = {"ph": ph, "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "args": args}
    if dur is not None:
        e["dur"] = dur
    return e


def record(key: str, graph: str, digest: str | None, line: int, name: str = NAME, trace_name: str = NAME) -> dict:
    return {"name": name, "trace_name": trace_name, "graph": graph, "cache_key": key, "compile_id": "0/0",
            "extern": False, "kernel_hash": digest, "aten_ops": ["aten.add.Tensor"], "post_grad_nodes": ["add"],
            "pre_grad_nodes": ["add"], "module_paths": [],
            "source_lines": [{"file": "/home/me/model.py", "line": line, "function": "forward", "code": "x + 1"}]}


BLOCK = {"version": 1, "source": "inductor provenance tracking", "kernels": [
    record("fa", "0_forward", "caaaa", 10), record("fb", "1_forward", "cbbbb", 20)]}


def gpu_trace(tmp_path, launches: list[tuple[str | None, str]]) -> object:
    """One launch of NAME per (graph region's cache key or None, kernel hash or "")."""
    events = []
    for i, (key, digest) in enumerate(launches):
        t, ext, corr = 1000 * i, 100 + i, 500 + i
        if key is not None:
            events.append(_event("X", "user_annotation", f"## Call CompiledFxGraph {key} ##", t, 100))
        hashed = {"kernel_hash": digest} if digest else {}
        events += [
            _event("X", "cpu_op", NAME, t + 10, 50, **hashed, **{"External id": ext}),
            _event("X", "cuda_driver", "cuLaunchKernel", t + 12, 5, correlation=corr, **{"External id": ext}),
            _event("X", "kernel", NAME, t + 200, 4, tid=7, pid=0, correlation=corr, **{"External id": ext}),
        ]
    path = tmp_path / "two_graphs.json"
    path.write_bytes(orjson.dumps({"traceEvents": events}))
    return load_trace(path)


def lines(records) -> list[int | None]:
    return [r.source_lines[0].line if r else None for r in records]


def test_same_named_kernels_of_two_graphs_join_by_their_hash(tmp_path):
    trace = gpu_trace(tmp_path, [(None, "cbbbb"), (None, "caaaa"), (None, "cbbbb")])
    assert lines(gpu_records(trace, parse(BLOCK))) == [20, 10, 20]


def test_without_a_hash_the_graph_region_around_the_launch_decides(tmp_path):
    trace = gpu_trace(tmp_path, [("fb", ""), ("fa", ""), (None, "")])
    # outside any graph region the name means two kernels: no record rather than a guess
    assert lines(gpu_records(trace, parse(BLOCK))) == [20, 10, None]


def test_a_name_that_means_one_kernel_still_joins_by_name(tmp_path):
    twice = {**BLOCK, "kernels": [record("fa", "0_forward", None, 10), record("fa", "0_forward", None, 11)]}
    trace = gpu_trace(tmp_path, [(None, ""), ("fa", "")])
    # one kernel called twice in its graph: its first record, wherever it was launched
    assert lines(gpu_records(trace, parse(twice))) == [10, 10]


def test_cpu_kernels_with_one_event_name_in_two_graphs_join_by_region(tmp_path):
    cpp = "cpp_fused_add_0"
    block = {**BLOCK, "kernels": [record("fa", "0_forward", None, 10, cpp, f"graph_0_{cpp}"),
                                  record("fb", "0_backward", None, 20, cpp, f"graph_0_{cpp}")]}
    events = []
    for i, key in enumerate(["fa", "fb", "fa"]):
        events.append(_event("X", "user_annotation", f"## Call CompiledFxGraph {key} ##", 1000 * i, 100))
        events.append(_event("X", "cpu_op", f"graph_0_{cpp}", 1000 * i + 10, 50))
    path = tmp_path / "cpu.json"
    path.write_bytes(orjson.dumps({"traceEvents": events}))
    trace = load_trace(path)
    rows = cpu_kernel_rows(trace, parse(block))
    assert [rows[r].source_lines[0].line for r in sorted(rows)] == [10, 20, 10]
