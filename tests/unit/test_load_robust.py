"""Damaged and foreign traces: a bad field costs that field, a bad event that event, never the file."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import orjson
import pytest

from kerneltui.errors import TraceError
from kerneltui.trace import load_trace

ROOT = Path(__file__).resolve().parents[2]
EAGER = ROOT / "traces" / "add_relu_1M_eager.json.gz"
KERNELS = [
    "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul> >"
    "(int, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul>)",
]


def kineto_text() -> str:
    """The real eager add+relu trace as Kineto wrote it: one event per line, 2 kernels, 13 events."""
    return gzip.decompress(EAGER.read_bytes()).decode()


def write(tmp_path, text: str | bytes, name="t.json", compress=False) -> Path:
    data = text.encode() if isinstance(text, str) else text
    path = tmp_path / (name + (".gz" if compress else ""))
    path.write_bytes(gzip.compress(data) if compress else data)
    return path


def replace_in_first_kernel(text: str, field: str, value: str) -> str:
    """Replace the value of ``field`` in the first kernel event (Kineto's ``"field": value,`` layout)."""
    at = text.index('"cat": "kernel"')
    start = text.index(f'"{field}": ', at) + len(field) + 4
    end = text.index(",", start)
    return text[:start] + value + text[end:]


def test_indent_2_with_device_properties_after_the_events(tmp_path):
    doc = json.loads(kineto_text())
    reordered = {"traceEvents": doc.pop("traceEvents"), **doc}  # deviceProperties after traceEvents
    trace = load_trace(write(tmp_path, json.dumps(reordered, indent=2)))
    assert len(trace.gpu) == 2
    assert trace.meta.device_name == "NVIDIA H200"
    assert trace.meta.warnings == () and not trace.meta.incomplete


@pytest.mark.parametrize("compress", [False, True])
def test_a_nan_duration_costs_that_field_only(tmp_path, compress):
    trace = load_trace(write(tmp_path, replace_in_first_kernel(kineto_text(), "dur", "NaN"), compress=compress))
    assert len(trace.events) == 13 and len(trace.gpu) == 2
    assert trace.gpu["dur"].tolist()[0] == 0  # the lost field reads as 0; the other kernel keeps its time
    assert trace.gpu["dur"].tolist()[1] == 1984
    assert trace.meta.warnings == ("ignored 1 fields with unusable values: 1 dur",)
    assert not trace.meta.incomplete  # Python's json.dump writes NaN: the file is whole


def test_a_nan_timestamp_costs_the_event(tmp_path):
    trace = load_trace(write(tmp_path, replace_in_first_kernel(kineto_text(), "ts", "NaN")))
    assert len(trace.events) == 12 and len(trace.gpu) == 1
    assert trace.meta.warnings == ("skipped 1 events: 1 no usable ts",)


@pytest.mark.parametrize("value", ["1e308", "-1e308", "Infinity", '"soon"', "null", "[1]"])
def test_unusable_timestamps_cost_the_event_without_overflow(tmp_path, value):
    trace = load_trace(write(tmp_path, replace_in_first_kernel(kineto_text(), "ts", value)))
    assert len(trace.gpu) == 1 and trace.meta.skipped_events == 1


@pytest.mark.parametrize("compress", [False, True])
def test_a_stray_byte_costs_one_event_and_says_the_file_is_damaged(tmp_path, compress):
    text = kineto_text()
    at = text.index('"cat": "kernel"')
    damaged = text[:at] + "\x07" + text[at:]
    trace = load_trace(write(tmp_path, damaged, compress=compress))
    assert len(trace.events) == 12 and len(trace.gpu) == 1
    assert trace.meta.corrupt_events == 1 and trace.meta.incomplete
    assert trace.meta.warnings == ("skipped 1 events: 1 not valid JSON",)


def test_one_nan_in_a_large_real_trace_keeps_every_event(tmp_path):
    text = gzip.decompress((ROOT / "tests/data/traces/gpt_train_eager.json.gz").read_bytes()).decode()
    whole = load_trace(write(tmp_path, text, name="whole.json"))
    damaged = load_trace(write(tmp_path, replace_in_first_kernel(text, "dur", "NaN"), compress=True))
    assert len(damaged.events) == len(whole.events) == 13594  # every X and instant event
    assert len(damaged.gpu) == len(whole.gpu) == 945


def test_a_missing_final_brace_is_reported(tmp_path):
    trace = load_trace(write(tmp_path, kineto_text().rstrip()[:-1]))
    assert len(trace.gpu) == 2 and trace.meta.end_damaged and trace.meta.incomplete
    assert "end of the trace" in trace.meta.warnings[0]


def test_cut_inside_the_last_event_keeps_those_before(tmp_path):
    text = kineto_text()
    cut = text.index('"name": "Record Window End"')
    trace = load_trace(write(tmp_path, text[:cut]))
    assert trace.meta.truncated and len(trace.events) == 12 and len(trace.gpu) == 2
    assert trace.meta.skipped_events == 0  # the cut event is the cut, not a corrupt one


def one_line(doc) -> str:
    return json.dumps(doc)


@pytest.mark.parametrize("damage", ["nan", "stray"])
def test_one_line_layout_recovers_around_a_damaged_event(tmp_path, damage):
    text = one_line(json.loads(kineto_text()))
    at = text.index('"cat": "kernel"')
    if damage == "nan":
        end = text.index('"dur": ', at) + 7
        text = text[:end] + "NaN" + text[text.index(",", end) :]
    else:
        text = text[:at] + "\x01" + text[at:]
    trace = load_trace(write(tmp_path, text))
    assert len(trace.gpu) == (2 if damage == "nan" else 1)
    assert trace.meta.incomplete == (damage == "stray")


def runtime_and_kernel(stream_value, grid_value='"grid(100,)"') -> dict:
    """A Triton op launching one kernel; stream and grid in the given JSON forms."""
    return {
        "traceEvents": [
            {"ph": "X", "cat": "cpu_op", "name": "triton_poi_fused_add_relu_0", "pid": 1, "tid": 1, "ts": 10, "dur": 20,
             "args": {"External id": 7, "kernel_hash": "abc", "grid": orjson.loads(grid_value), "stream": 0}},
            {"ph": "X", "cat": "cuda_runtime", "name": "hipLaunchKernel", "pid": 1, "tid": 1, "ts": 12, "dur": 5,
             "args": {"External id": 7, "correlation": 99, "stream": orjson.loads(stream_value)}},
            {"ph": "X", "cat": "kernel", "name": "triton_poi_fused_add_relu_0", "pid": 0, "tid": 7, "ts": 30, "dur": 4,
             "args": {"External id": 7, "correlation": 99, "stream": 7, "device": 0,
                      "grid": [100, 1, 1], "block": [128, 1, 1]}},
        ]
    }


@pytest.mark.parametrize("stream", ['"0x0"', '"0x7f3a"', '"12"', "3"])
@pytest.mark.parametrize("grid", ['"grid(100,)"', "[100]", "[100, 1, 1]", '"?"'])
def test_hex_streams_and_text_grids_keep_the_event(tmp_path, stream, grid):
    trace = load_trace(write(tmp_path, one_line(runtime_and_kernel(stream, grid))))
    g = trace.gpu
    assert g["launch"].astype(str).tolist() == ["hipLaunchKernel"]
    assert g["op"].astype(str).tolist() == ["triton_poi_fused_add_relu_0"]
    assert g["kernel_hash"].astype(str).tolist() == ["abc"]
    assert trace.meta.skipped_events == 0
    # an unreadable grid on the op is a field lost and said; a readable one is no loss at all
    assert trace.meta.warnings == (() if grid != '"?"' else ("ignored 1 fields with unusable values: 1 args.grid",))


def test_ids_beyond_int64_cost_the_field(tmp_path):
    doc = runtime_and_kernel("0")
    doc["traceEvents"][1]["args"]["correlation"] = 2**64 + 1
    doc["traceEvents"][2]["args"]["External id"] = 10**30
    text = one_line(doc).replace(str(10**30), "1" + "0" * 30)
    trace = load_trace(write(tmp_path, text))
    assert len(trace.gpu) == 1 and trace.gpu["launch"].astype(str).tolist() == [""]
    assert trace.meta.skipped_events == 0
    assert "1 args.correlation" in trace.meta.warnings[0] and "1 args.External id" in trace.meta.warnings[0]


@pytest.mark.parametrize(
    "top",
    [
        {"deviceProperties": "H200"},
        {"deviceProperties": [{"id": "zero", "name": 5, "totalGlobalMem": "lots", "numSms": None}]},
        {"deviceProperties": [1, None, []]},
        {"baseTimeNanoseconds": "yesterday", "schemaVersion": [1], "traceName": {"a": 1}},
        {"baseTimeNanoseconds": 2**70, "record_shapes": "yes", "with_stack": []},
        {"kerneltui": [1, 2]},
        {"kerneltui": {"capture": "eager"}},
        {"kerneltui": {"capture": {"device": ["x"], "torch": None, "mode": 3}}},
    ],
)
def test_top_level_keys_of_the_wrong_type_are_absent_ones(tmp_path, top):
    doc = {**runtime_and_kernel("0"), **top}
    trace = load_trace(write(tmp_path, one_line(doc)))
    assert len(trace.gpu) == 1
    assert isinstance(trace.meta.device_name, str) and isinstance(trace.meta.base_time_ns, int)


def test_device_properties_of_mixed_types_keep_what_is_readable(tmp_path):
    doc = {**runtime_and_kernel("0"), "deviceProperties": [{"id": 0, "name": "NVIDIA H200", "numSms": "132"}]}
    trace = load_trace(write(tmp_path, one_line(doc)))
    assert trace.meta.devices[0].name == "NVIDIA H200" and trace.meta.devices[0].sm_count == 132


@pytest.mark.parametrize("depth", [900, 3000])
@pytest.mark.parametrize("layout", ["one line", "one event per line"])
def test_deep_nesting_in_args(tmp_path, depth, layout):
    """Nesting orjson reads (< 1,024) loads whole; deeper, that event alone is skipped, counted by cause."""
    doc = runtime_and_kernel("0")
    doc["traceEvents"][1]["args"]["deep"] = "DEEP"
    text = one_line(doc) if layout == "one line" else "{\n  \"traceEvents\": [\n" + ",\n".join(
        "  " + json.dumps(e) for e in doc["traceEvents"]) + "\n  ]\n}"
    text = text.replace('"DEEP"', "[" * depth + "]" * depth)
    trace = load_trace(write(tmp_path, text))
    assert len(trace.gpu) == 1
    if depth < 1000:
        assert trace.meta.skipped_events == 0 and trace.gpu["launch"].astype(str).tolist() == ["hipLaunchKernel"]
    else:
        assert trace.meta.warnings == ("skipped 1 events: 1 nested deeper than 1,000 levels",)


@pytest.mark.parametrize(
    "content",
    [
        b"[[1.5, 0, 4096, 1], [2.5, 1, -4096, 1]]",  # torch's memory_timeline export_raw
        b"[[0.0, 1.0, 2.0], [[0, 4096], [0, 8192]]]",  # its plain export: times and sizes
        b'{"traceEvents": [1, "two", [3]]}',
    ],
)
def test_arrays_of_non_events_are_not_traces(tmp_path, content):
    with pytest.raises(TraceError, match="is JSON but not a Chrome trace"):
        load_trace(write(tmp_path, content))


def test_non_objects_among_events_are_skipped_and_counted(tmp_path):
    doc = runtime_and_kernel("0")
    doc["traceEvents"] += [1, "x", None]
    trace = load_trace(write(tmp_path, one_line(doc)))
    assert len(trace.gpu) == 1
    assert trace.meta.warnings == ("skipped 3 events: 3 not a JSON object",)


def test_pid_and_tid_of_any_type_are_opaque_keys(tmp_path):
    doc = runtime_and_kernel("0")
    for e in doc["traceEvents"]:
        e["pid"] = {1: 1.5, 0: True}.get(e["pid"], e["pid"])
    trace = load_trace(write(tmp_path, one_line(doc)))
    assert len(trace.gpu) == 1 and trace.meta.skipped_events == 0


def test_begin_end_pairs_become_complete_events(tmp_path):
    """Per thread an E closes the latest open B, in file order; unpaired halves are counted."""
    events = [
        {"ph": "B", "name": "outer", "pid": 1, "tid": 1, "ts": 10},
        {"ph": "B", "name": "inner", "pid": 1, "tid": 1, "ts": 12},
        {"ph": "B", "name": "other thread", "pid": 1, "tid": 2, "ts": 11},
        {"ph": "E", "name": "", "pid": 1, "tid": 1, "ts": 15},
        {"ph": "E", "pid": 1, "tid": 1, "ts": 30},
        {"ph": "E", "pid": 1, "tid": 1, "ts": 31},
        {"ph": "B", "name": "never ends", "pid": 1, "tid": 3, "ts": 40},
    ]
    trace = load_trace(write(tmp_path, one_line({"traceEvents": events})))
    spans = {trace.name(int(r.name)): (r.ts, r.dur) for r in trace.events.itertuples()}
    assert spans == {"inner": (12_000, 3_000), "outer": (10_000, 20_000)}
    assert trace.meta.warnings == ("skipped 3 events: 2 'B' never ended, 1 'E' without its 'B'",)


def test_the_tf_trace_viewer_demo_reads_its_begin_end_slices():
    trace = load_trace(ROOT / "tests/data/external/nonpytorch__tf_trace_viewer_demo_trace.json")
    names = [trace.name(int(c)) for c in trace.events["name"]]
    assert len(trace.events) == 18 and len(trace.gpu) == 0
    assert names.count("Asub") == 1 and "B/E over X" in names and "A" in names
    assert trace.meta.skipped_events == 0


@pytest.mark.parametrize(
    "damage, status, warning",
    [
        ("nan dur", 0, "ignored 1 fields with unusable values: 1 dur"),
        ("stray byte", 2, "skipped 1 events: 1 not valid JSON"),
        ("no final brace", 2, "the end of the trace (after its 13 events) is cut off or damaged"),
    ],
)
def test_summary_exits_2_when_the_file_is_not_whole(tmp_path, capsys, damage, status, warning):
    from kerneltui.cli import main

    text = kineto_text()
    if damage == "nan dur":
        text = replace_in_first_kernel(text, "dur", "NaN")
    elif damage == "stray byte":
        at = text.index('"cat": "kernel"')
        text = text[:at] + "\x07" + text[at:]
    else:
        text = text.rstrip()[:-1]
    path = write(tmp_path, text)
    assert main(["summary", str(path), "--format", "json"]) == status
    err = capsys.readouterr().err
    assert err.startswith(f"kerneltui: {path}: {warning}") and err.count("\n") == 1


def test_a_gzip_bomb_inside_an_event_is_refused_in_bounded_steps(tmp_path):
    """A megabyte of gzip can inflate to gigabytes of blanks: inflated 16 MB at a time, refused past 64 MB
    without an event boundary (70 MB of blanks followed by events is valid JSON, and loads)."""
    text = kineto_text()
    at = text.index('"cat": "kernel"')
    path = write(tmp_path, text[:at] + " " * (100 << 20) + text[at:], compress=True)
    with pytest.raises(TraceError, match="holds an event of over 64 MB: not a trace kerneltui can read"):
        load_trace(path)


def test_a_blank_file_is_refused_without_reading_all_of_it(tmp_path):
    path = write(tmp_path, " " * (70 << 20) + kineto_text(), compress=True)
    with pytest.raises(TraceError, match="starts with over 64 MB of blank space: not a trace"):
        load_trace(path)


def test_an_occupancy_out_of_range_is_unknown(tmp_path):
    text = kineto_text().replace('"est. achieved occupancy %": 46', '"est. achieved occupancy %": 1e308', 1)
    trace = load_trace(write(tmp_path, text))
    assert len(trace.gpu) == 2 and trace.gpu["occupancy"].isna().tolist()[0]
