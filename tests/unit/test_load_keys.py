"""Which keys the loader reads: the top-level traceEvents only, the last of a repeated key, and
strings JSON readers refuse (a lone surrogate escape) kept as text, never the event dropped.

The reference is what ``json.load`` (and Perfetto, and chrome://tracing) make of the same file.
"""

from __future__ import annotations

import gzip
import json

import pytest

from kerneltui.errors import TraceError
from kerneltui.terminal_text import printable
from kerneltui.trace import load_trace
from kerneltui.trace.load import read_trace
from kerneltui.trace.top_level import TopLevel, top_level_members
from tests import fuzzing

TOP = {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA H200", "numSms": 132}],
       "baseTimeNanoseconds": 1790857026000000000}
WARNING = "the trace repeats its top-level traceEvents key: the last of each is used, as JSON readers do"


def kernel(name: str, ts: float, dur: float, correlation: int) -> dict:
    return {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": ts, "dur": dur,
            "args": {"External id": correlation, "correlation": correlation, "device": 0, "stream": 7}}


def launch(ts: float, correlation: int) -> dict:
    return {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": ts, "dur": 1.0,
            "args": {"correlation": correlation, "cbid": 211}}


REAL = [launch(9.0, 1), kernel("real_kernel", 10.0, 5.0, 1), launch(19.0, 2), kernel("other_kernel", 20.0, 5.0, 2)]
DECOY = [launch(9.0, 1), kernel("decoy_kernel", 10.0, 999.0, 1)]


def array_text(events: list, layout: str, indent: int = 2) -> str:
    """An events array: one event a line at ``indent`` (Kineto), json.dumps(indent=2)'s, or one line."""
    if layout == "lines":
        pad = " " * indent
        return "[\n" + ",\n".join(pad + json.dumps(e) for e in events) + "\n" + pad[:-2] + "]"
    if layout == "indent2":
        return json.dumps(events, indent=2).replace("\n", "\n" + " " * (indent - 2))
    return json.dumps(events, separators=(",", ":"))


def object_text(members: list[tuple[str, str]], layout: str) -> str:
    """A top-level object of already-written member values, in order (keys may repeat; a key already
    quoted is written as it is)."""
    joiner, opener, closer = (",", "{", "}") if layout == "compact" else (",\n  ", "{\n  ", "\n}\n")
    keys = [k if k.startswith('"') else json.dumps(k) for k, _ in members]
    return opener + joiner.join(f"{k}: {v}" for k, (_, v) in zip(keys, members)) + closer


def top_members() -> list[tuple[str, str]]:
    return [(k, json.dumps(v)) for k, v in TOP.items()]


def write(tmp_path, text: str, compress: bool, name: str = "t.json"):
    data = text.encode()
    path = tmp_path / (name + (".gz" if compress else ""))
    path.write_bytes(gzip.compress(data) if compress else data)
    return path


def json_readers_kernels(path) -> list[tuple]:
    """(name, ts ns, dur ns) of each kernel, as json.load reads the file."""
    data = path.read_bytes()
    doc = json.loads(gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data)
    return sorted((e["name"], round(e["ts"] * 1000), round(e["dur"] * 1000))
                  for e in doc["traceEvents"] if e.get("cat") == "kernel")


def kerneltui_kernels(trace) -> list[tuple]:
    g = trace.gpu
    return sorted(zip(trace.names_of(g["name"].to_numpy()).tolist(), g["ts"].tolist(), g["dur"].tolist()))


# -- a traceEvents key nested in another value is not the trace's ------------------------------------


@pytest.mark.parametrize("compress", [False, True], ids=["plain", "gzip"])
@pytest.mark.parametrize("layout", ["lines", "indent2", "compact"])
@pytest.mark.parametrize("where", ["before", "after"])
def test_a_nested_traceEvents_is_ignored(tmp_path, where, layout, compress):
    decoy = ("extra", object_text([("traceEvents", array_text(DECOY, layout, 4))], "compact"))
    real = ("traceEvents", array_text(REAL, layout))
    members = top_members() + ([decoy, real] if where == "before" else [real, decoy])
    path = write(tmp_path, object_text(members, layout), compress)
    trace = load_trace(path)
    assert kerneltui_kernels(trace) == json_readers_kernels(path) == [("other_kernel", 20000, 5000),
                                                                      ("real_kernel", 10000, 5000)]
    assert trace.meta.warnings == ()
    assert trace.meta.device_name == "NVIDIA H200"


@pytest.mark.parametrize("compress", [False, True], ids=["plain", "gzip"])
def test_a_traceEvents_written_as_a_value_or_inside_a_string_is_ignored(tmp_path, compress):
    members = [("note", json.dumps('"traceEvents": [')), ("kind", json.dumps("traceEvents")),
               ("events", array_text(DECOY, "lines")), ("traceEvents", array_text(REAL, "lines"))]
    path = write(tmp_path, object_text(members, "lines"), compress)
    assert kerneltui_kernels(load_trace(path)) == json_readers_kernels(path)


def test_a_file_whose_only_traceEvents_is_nested_has_no_events_array(tmp_path):
    members = [("extra", object_text([("traceEvents", array_text(DECOY, "lines", 4))], "compact"))]
    with pytest.raises(TraceError, match="no traceEvents array"):
        load_trace(write(tmp_path, object_text(members, "lines"), False))


def test_top_level_members_reads_structure_alone():
    text = b'{"a": {"traceEvents": [1]}, "s": "\\"traceEvents\\": [", "trace\\u0045vents": [2], "t": ['
    members = top_level_members(text)
    assert [key for key, _ in members] == ["a", "s", "traceEvents", "t"]
    assert text[members[2][1]:].startswith(b"[2]")


def test_the_top_level_is_walked_once_as_the_text_grows():
    text = b'{"a": {"traceEvents": [1]}, "s": "x\\"y", "b": [2], "traceEvents": [3]}'
    walk, seen = TopLevel(), []
    for cut in range(len(text) + 1):
        seen += walk.members(text[:cut])
    assert seen == top_level_members(text) == [(k, text.index(v)) for k, v in
                                                (("a", b'{"traceEvents": [1]'), ("s", b'"x'), ("b", b"[2"), ("traceEvents", b"[3"))]
    assert walk.closed


# -- a repeated top-level key: the last wins, with a warning -----------------------------------------


@pytest.mark.parametrize("compress", [False, True], ids=["plain", "gzip"])
@pytest.mark.parametrize("first,last", [("lines", "lines"), ("lines", "compact"), ("compact", "lines"),
                                        ("indent2", "indent2")])
def test_a_repeated_traceEvents_reads_the_last_with_a_warning(tmp_path, first, last, compress):
    layout = "compact" if first == last == "compact" else "lines"
    members = top_members() + [("traceEvents", array_text(DECOY, first)), ("traceEvents", array_text(REAL, last))]
    path = write(tmp_path, object_text(members, layout), compress)
    trace = load_trace(path)
    assert kerneltui_kernels(trace) == json_readers_kernels(path)
    assert "real_kernel" in {k[0] for k in kerneltui_kernels(trace)}
    assert trace.meta.warnings == (WARNING,)
    assert trace.meta.device_name == "NVIDIA H200" and trace.meta.base_time_ns == TOP["baseTimeNanoseconds"]


def test_a_repeated_traceEvents_spelled_with_an_escape_is_the_same_key(tmp_path):
    members = [("traceEvents", array_text(DECOY, "lines")), ('"trace\\u0045vents"', array_text(REAL, "lines"))]
    path = write(tmp_path, object_text(members, "lines"), False)
    trace = load_trace(path)
    assert kerneltui_kernels(trace) == json_readers_kernels(path)
    assert trace.meta.warnings == (WARNING,)


def test_a_traceEvents_that_is_no_array_before_the_events_is_overridden_by_them(tmp_path):
    members = [("traceEvents", "null"), *top_members(), ("traceEvents", array_text(REAL, "lines"))]
    path = write(tmp_path, object_text(members, "lines"), False)
    trace = load_trace(path)
    assert kerneltui_kernels(trace) == json_readers_kernels(path)
    assert trace.meta.warnings == (WARNING,)


def test_a_traceEvents_that_is_no_array_after_the_events_overrides_them(tmp_path):
    members = [("traceEvents", array_text(REAL, "lines")), ("traceEvents", "null")]
    with pytest.raises(TraceError, match="no traceEvents array"):  # json.load: traceEvents is None
        load_trace(write(tmp_path, object_text(members, "lines"), False))


@pytest.mark.parametrize("layout", ["lines", "compact"])
def test_other_repeated_top_level_keys_read_the_last(tmp_path, layout):
    device = [{"id": 0, "name": "NVIDIA A100", "numSms": 108}]
    members = [("deviceProperties", json.dumps(device)), ("baseTimeNanoseconds", "1"),
               ("traceEvents", array_text(REAL, layout)), *top_members(), ("traceName", '"t"')]
    path = write(tmp_path, object_text(members, layout), False)
    trace = load_trace(path)
    assert trace.meta.device_name == "NVIDIA H200" and trace.meta.devices[0].sm_count == 132  # json.load's: the last
    assert trace.meta.base_time_ns == TOP["baseTimeNanoseconds"]
    if layout == "lines":  # (a file decoded whole is walked for repeated keys only where traceEvents repeats)
        assert trace.meta.warnings == (("the trace repeats its top-level deviceProperties, baseTimeNanoseconds keys: "
                                        "the last of each is used, as JSON readers do"),)


# -- a lone surrogate escape costs nothing ------------------------------------------------------------


def events_with(text: str) -> list[dict]:
    """Kernels and launches, the first kernel's name holding ``text`` (json.dumps escapes a lone surrogate)."""
    return [launch(9.0, 1), kernel(f"a{text}b", 10.0, 5.0, 1), launch(19.0, 2), kernel("other_kernel", 20.0, 6.0, 2)]


@pytest.mark.parametrize("decoder", ["c", "python"])
@pytest.mark.parametrize("layout", ["lines", "compact"])
@pytest.mark.parametrize("surrogate", [chr(0xD83D), chr(0xDC00)], ids=["high", "low"])
def test_a_lone_surrogate_in_a_name_keeps_the_event_and_the_name(tmp_path, monkeypatch, surrogate, layout, decoder):
    monkeypatch.setenv("KERNELTUI_DECODER", decoder)
    members = top_members() + [("traceEvents", array_text(events_with(surrogate), layout))]
    text = object_text(members, layout)
    assert f"\\u{ord(surrogate):04x}" in text  # the file holds the escape, as json.dumps writes it
    trace = load_trace(write(tmp_path, text, False))
    escaped = f"a\\u{ord(surrogate):04x}b"  # the six characters, as terminal_text.printable writes a code point
    assert kerneltui_kernels(trace) == [(escaped, 10000, 5000), ("other_kernel", 20000, 6000)]
    assert printable(escaped) == escaped and escaped.encode("utf-8")
    assert len(trace.events) == 4 and trace.meta.warnings == () and trace.meta.skipped_events == 0


def test_lone_surrogates_in_any_string_field_keep_every_event(tmp_path):
    s = "\ud800"
    events = [
        {"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "args": {"name": f"main{s}"}},
        {**launch(9.0, 1), "pid": f"host{s}"},
        {**kernel("k", 10.0, 5.0, 1), "args": {**kernel("k", 0, 0, 1)["args"], "queued": f"{s}x", f"key{s}": 1}},
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 8.0, "dur": 4.0,
         "args": {"External id": 1, "Input Dims": [[2, 3]], "Input type": [f"float{s}"], "kernel_hash": f"h{s}"}},
        {"ph": "X", "cat": f"cpu_op{s}", "name": "odd category", "pid": 1, "tid": 1, "ts": 30.0, "dur": 1.0},
    ]
    members = [("traceName", json.dumps(f"t{s}")), ("traceEvents", array_text(events, "lines"))]
    path = write(tmp_path, object_text(members, "lines"), False)
    assert fuzzing.decoders_differ(str(path)) is None  # the C scanner hands the chunk back: the same result
    raw, meta = read_trace(path)
    assert len(raw.columns["ts"]) == 4 and meta.skipped_events == 0 and meta.warnings == ()
    assert meta.trace_name == "t\\ud800"
    assert [m[3] for m in raw.metadata] == ["main\\ud800"]
    assert ("host\\ud800", 1) in raw.lanes
    assert {"k", "aten::mm", "h\\ud800", "odd category"} <= set(raw.names)  # (kernel hashes are interned as names)
    trace = load_trace(path)
    assert len(trace.gpu) == 1 and trace.shapes(int(trace.gpu["op_row"].iloc[0]))["types"] == ["float\\ud800"]


def test_a_lone_surrogate_in_the_last_event_of_a_cut_off_file_keeps_it(tmp_path):
    events = events_with("\udc00")
    text = object_text([("traceEvents", array_text(events[2:] + events[:2], "lines"))], "lines")
    cut = text.rstrip()[:-1].rstrip().rstrip("]")  # the array's end and the object's lost
    trace = load_trace(write(tmp_path, cut, False))
    assert trace.meta.truncated
    assert kerneltui_kernels(trace) == [("a\\udc00b", 10000, 5000), ("other_kernel", 20000, 6000)]
