"""analysis/memory.py and `summary --memory` on the shared GPT step, checked against counts made here from the
JSON alone (no kerneltui code), and the one line a trace without [memory] events gets."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from collections import defaultdict

import pytest

from kerneltui import memory_report
from kerneltui.analysis.compare.diff import diff_traces
from kerneltui.analysis.memory import CAPTURE_HINT, memory_dict, memory_table
from kerneltui.diff_report import as_json as diff_json
from kerneltui.diff_report import as_table as diff_table
from kerneltui.trace import load_trace
from kerneltui.trace.schema import MemoryColumns
from tests.conftest import PROJECT_TRACES, ROOT, cache_env, shared_trace

GPT = shared_trace("gpt_train_eager")
NO_MEMORY = PROJECT_TRACES / "add_relu_1M_eager.json.gz"

# What the independent count below finds, written out: each step peaks at the same 1.51 GB.
STEP_PEAKS = {2: 1_514_776_576, 3: 1_514_776_576, 4: 1_514_776_576}
TOP_OPS = [
    ("aten::empty_strided", 287_638_016),
    ("aten::addmm", 176_160_768),
    ("aten::nll_loss_backward", 134_217_728),
    ("aten::add", 113_246_208),
    ("aten::gelu", 100_663_296),
    ("aten::_log_softmax", 67_108_864),
    ("aten::mm", 67_108_864),
    ("aten::empty", 1_085_440),
    ("aten::resize_", 4_096),
    ("aten::nll_loss_forward", 1_024),
]


@pytest.fixture(scope="module")
def events() -> list[dict]:
    with gzip.open(GPT) as f:
        return json.load(f)["traceEvents"]


@pytest.fixture(scope="module")
def table():
    return memory_table(load_trace(GPT, cache=False))


def _memory(events: list[dict]) -> list[dict]:
    """CUDA [memory] events in time order (the file's order among equal times)."""
    mem = [e for e in events if e.get("name") == "[memory]" and e["args"].get("Device Type") == 1]
    return sorted(mem, key=lambda e: e["ts"])


def test_the_gpt_step_has_its_1992_memory_events_on_one_device(table, events):
    assert len(_memory(events)) == 1992
    assert table.events == 1992
    assert [d.device for d in table.devices] == [0]
    d = table.devices[0]
    assert (d.allocations, d.frees, d.never_freed, d.never_freed_bytes) == (996, 996, 0, 0)
    assert len(d.ts) == len(d.allocated) == len(d.reserved) == 1992


def test_peak_per_step_is_the_largest_total_allocated_inside_the_step(table, events):
    steps = [e for e in events if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#")]
    mem = _memory(events)
    expected = {}
    for s in steps:
        inside = [e["args"]["Total Allocated"] for e in mem if s["ts"] <= e["ts"] <= s["ts"] + s["dur"]]
        if inside:
            expected[int(s["name"].split("#")[1])] = max(inside)
    assert expected == STEP_PEAKS
    d = table.devices[0]
    assert dict(d.per_step) == expected
    assert d.peak_allocated_bytes == max(e["args"]["Total Allocated"] for e in mem) == 1_514_776_576
    assert d.peak_reserved_bytes == max(e["args"]["Total Reserved"] for e in mem) == 1_816_133_632


def _innermost_op(ops_by_thread: dict, e: dict) -> str:
    best = None
    for o in ops_by_thread[(e["pid"], e["tid"])]:
        if o["ts"] <= e["ts"] <= o["ts"] + o["dur"] and (best is None or o["dur"] < best["dur"]):
            best = o
    return best["name"] if best else "(outside any op)"


def test_top_ops_are_the_bytes_live_at_the_peak_by_innermost_op(table, events):
    mem = _memory(events)
    ops = defaultdict(list)
    for e in events:
        if e.get("cat") == "cpu_op" and e.get("ph") == "X":
            ops[(e["pid"], e["tid"])].append(e)
    totals = [e["args"]["Total Allocated"] for e in mem]
    peak = totals.index(max(totals))
    live: dict[int, dict] = {}  # Addr -> the allocation event holding it
    for e in mem[: peak + 1]:
        if e["args"]["Bytes"] > 0:
            live[e["args"]["Addr"]] = e
        else:
            live.pop(e["args"]["Addr"], None)
    by_op: dict[str, int] = defaultdict(int)
    for e in live.values():
        by_op[_innermost_op(ops, e)] += e["args"]["Bytes"]
    expected = sorted(by_op.items(), key=lambda kv: (-kv[1], kv[0]))[:10]
    assert expected == TOP_OPS
    d = table.devices[0]
    assert [(o.op, o.bytes) for o in d.top_ops] == TOP_OPS
    assert d.live_at_peak_bytes == sum(e["args"]["Bytes"] for e in live.values()) == 947_234_304
    addmm = next(o for o in d.top_ops if o.op == "aten::addmm")
    assert (addmm.allocations, addmm.module, addmm.source) == (
        8, "TinyGPT_0/Block_0/Sequential_0/Linear_2", "gpu_corpus.py(235): forward")


def kerneltui(*args: str) -> subprocess.CompletedProcess:
    env = {"COLUMNS": "80", "PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), **cache_env()}
    return subprocess.run([sys.executable, "-m", "kerneltui", *args], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=60, check=False)


def test_summary_memory_table_and_json():
    result = kerneltui("summary", str(GPT), "--memory")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert "cuda:0  peak allocated 1.5 GB (1,514,776,576 B) at 5.70ms" in lines
    assert "       3  1.5 GB (1,514,776,576 B)" in lines
    assert "   287.6 MB     34  aten::empty_strided · gpu_corpus.py(268): one" in lines
    assert max(map(len, lines)) <= 80
    doc = json.loads(kerneltui("summary", str(GPT), "--format", "json").stdout)
    device = doc["memory"]["devices"][0]
    assert device["per_step"] == [{"step": n, "peak_allocated_bytes": p} for n, p in STEP_PEAKS.items()]
    assert [(o["op"], o["bytes"]) for o in device["top_ops"]] == TOP_OPS
    assert json.loads(kerneltui("summary", str(GPT), "--memory", "--format", "json").stdout)["memory"] == doc["memory"]
    csv_lines = kerneltui("summary", str(GPT), "--memory", "--format", "csv").stdout.splitlines()
    assert csv_lines[:2] == ["device,row,step,op,module,source,bytes,allocations", "0,peak_allocated,,,,,1514776576,"]
    markdown = kerneltui("summary", str(GPT), "--memory", "--format", "markdown").stdout
    assert "| 2 | 1,514,776,576 |" in markdown


def test_a_trace_without_memory_events_says_how_to_capture_them():
    result = kerneltui("summary", str(NO_MEMORY), "--memory")
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"{NO_MEMORY}\n{CAPTURE_HINT}\n"
    assert "kerneltui capture --profile-memory" in CAPTURE_HINT
    assert memory_table(load_trace(NO_MEMORY, cache=False)) is None
    assert memory_dict(None) == {"devices": [], "note": CAPTURE_HINT}
    doc = json.loads(kerneltui("summary", str(NO_MEMORY), "--format", "json").stdout)
    assert doc["memory"] == {"devices": [], "note": CAPTURE_HINT}


def _doubled(tmp_path):
    """The GPT step with every [memory] total doubled: B's peaks are twice A's, its counts the same."""
    with gzip.open(GPT) as f:
        doc = json.load(f)
    for e in doc["traceEvents"]:
        if e.get("name") == "[memory]":
            e["args"]["Total Allocated"] *= 2
            e["args"]["Total Reserved"] *= 2
    path = tmp_path / "gpt_doubled.json.gz"
    with gzip.open(path, "wt") as f:
        json.dump(doc, f)
    return path


def test_diff_shows_peak_memory_and_allocation_counts_a_to_b(tmp_path):
    a = load_trace(GPT, cache=False)
    b = load_trace(_doubled(tmp_path), cache=False)
    d = diff_traces(a, b)
    assert d.memory.to_dict() == {"devices": [{
        "device": 0, "a_peak_allocated_bytes": 1_514_776_576, "b_peak_allocated_bytes": 3_029_553_152,
        "a_peak_reserved_bytes": 1_816_133_632, "b_peak_reserved_bytes": 3_632_267_264,
        "a_allocations": 996, "b_allocations": 996, "a_allocations_per_step": 332.0, "b_allocations_per_step": 332.0,
    }]}
    assert json.loads(diff_json(d))["memory"] == d.memory.to_dict()
    lines = diff_table(d).splitlines()
    assert "cuda:0 peak alloc.    1.5 GB                3.0 GB                   2.00x" in lines
    assert "cuda:0 allocations    996                   996                      1.00x" in lines


def test_diff_with_memory_on_one_side_only_says_so():
    d = diff_traces(load_trace(GPT, cache=False), load_trace(NO_MEMORY, cache=False))
    assert d.memory is None
    assert any(n.startswith("memory: only A has [memory] events") for n in d.notes)


def _made_trace(tmp_path, extra=()):
    """One step on one thread: allocations in a nested op, in an op, outside any op, a free, a second device,
    a host event; Total Allocated starts at 1,000 B allocated before the trace."""
    def op(name, ts, dur, cat="cpu_op"):
        return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur, "args": {}}

    def mem(ts, nbytes, addr, total, device=0, device_type=1):
        return {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 1, "tid": 1, "ts": ts,
                "args": {"Total Reserved": 4096 + total, "Total Allocated": total, "Bytes": nbytes,
                         "Device Id": device, "Device Type": device_type, "Addr": addr}}

    events = [
        op("ProfilerStep#7", 0, 100, cat="user_annotation"),
        op("aten::empty", 10, 10), mem(15, 100, 1, 1100),
        op("aten::mul", 30, 10), op("aten::empty_like", 32, 6), mem(35, 200, 2, 1300),
        mem(50, -100, 1, 1200),
        mem(60, 50, 3, 1250),
        mem(61, 64, 9, 64, device=-1, device_type=0),
        mem(62, 10, 4, 10, device=1),
        *extra,
    ]
    path = tmp_path / "made.json"
    path.write_text(json.dumps({"traceEvents": events}))
    return path


def test_a_made_trace_live_at_peak_never_freed_and_devices(tmp_path):
    table = memory_table(load_trace(_made_trace(tmp_path), cache=False))
    assert table.events == 6
    assert [d.device for d in table.devices] == [0, 1]
    d = table.devices[0]
    assert (d.peak_allocated_bytes, d.peak_reserved_bytes, d.per_step) == (1300, 5396, ((7, 1300),))
    assert [(o.op, o.bytes) for o in d.top_ops] == [("aten::empty_like", 200), ("aten::empty", 100)]
    assert d.live_at_peak_bytes == 300
    assert (d.allocations, d.frees, d.never_freed, d.never_freed_bytes) == (3, 1, 2, 250)
    assert [(o.op, o.bytes) for o in d.never_freed_ops] == [("aten::empty_like", 200), ("(outside any op)", 50)]
    assert list(d.allocated) == [1100, 1300, 1200, 1250]
    assert table.devices[1].peak_allocated_bytes == 10


def test_a_memory_event_without_a_usable_ts_is_left_out_as_the_loader_leaves_it_out(tmp_path):
    bad = {"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": 1, "ts": "soon",
           "args": {"Bytes": 8, "Total Allocated": 8, "Device Type": 1, "Device Id": 0, "Addr": 5}}
    table = memory_table(load_trace(_made_trace(tmp_path, [bad]), cache=False))
    assert table.events == 6
    assert table.devices[0].peak_allocated_bytes == 1300


def test_memory_events_that_cannot_be_read_in_full_are_said_so(tmp_path, monkeypatch):
    other = {"ph": "i", "cat": "user_instant", "name": "[memory]", "pid": 1, "tid": 1, "ts": 70,
             "args": {"Bytes": 8, "Total Allocated": 8, "Device Type": 1, "Device Id": 0, "Addr": 5}}
    trace = load_trace(_made_trace(tmp_path, [other]), cache=False)
    assert memory_table(trace).events == 6  # not an allocator event: the loader does not keep it as one either
    # a side table that misses an event (no loader or cache makes one: the safeguard still says so)
    monkeypatch.setattr(trace, "memory", MemoryColumns({k: v[1:] for k, v in trace.memory.columns.items()}))
    table = memory_table(trace)
    assert (table.events, table.devices) == (6, ())
    assert table.note == ("the [memory] events could not be read in full: 6 [memory] events loaded, 5 read with"
                          " their totals, and they do not line up")
    assert memory_dict(table) == {"events": 6, "note": table.note, "devices": []}
    lines = memory_report.as_table("made.json", table).splitlines()
    assert lines[1] == "memory: 6 [memory] events, 0 CUDA devices"
    assert " ".join(lines[2:]) == table.note and max(map(len, lines)) <= 80


@pytest.mark.parametrize("distinct", [3, 163, 70_000])  # the last past 16 bits of address codes
def test_each_allocation_is_paired_with_the_free_that_next_follows_it_at_its_address(distinct):
    """_frees against a walk of the events in time order, address by address: an allocation's free is its
    address's next event when that is a free; either way of grouping the addresses gives the same."""
    import numpy as np

    from kerneltui.analysis.memory import _frees

    rng = np.random.default_rng(distinct)
    n = 200_000
    addr = rng.integers(0, distinct, n) * 512 + 0x7F0000000000
    delta = np.where(rng.random(n) < 0.5, 1024, -1024).astype(np.int64)
    expected, last = np.full(n, -1, np.int64), {}
    for i, (a, d) in enumerate(zip(addr.tolist(), delta.tolist())):
        j = last.get(a)
        if j is not None and delta[j] > 0 and d < 0:
            expected[j] = i
        last[a] = i
    got = _frees(addr, delta)
    assert np.array_equal(got, expected)
    assert (got >= 0).sum() > n // 10
