"""Loading: layouts, exact times, cut-off files and every kind of bad input."""

from __future__ import annotations

import gzip
import operator
import zlib

import numpy as np
import orjson
import pytest

from kerneltui.errors import TraceError
from kerneltui.trace import Kind, load_trace
from tests.conftest import PROJECT_TRACES, shared_trace

GPT = "gpt_train_eager"


def kineto_text(name: str) -> bytes:
    return gzip.decompress(shared_trace(name).read_bytes())


def test_times_are_exact_integer_nanoseconds():
    trace = load_trace(PROJECT_TRACES / "add_relu_1M_compiled.json.gz")
    g = trace.gpu
    # "ts": 5178919812860.768, "dur": 2.528 in the file
    assert g["ts"].tolist() == [5178919812860768]
    assert g["dur"].tolist() == [2528]
    assert trace.meta.base_time_ns == 1790857026000000000


def test_every_gpu_event_of_a_real_trace_keeps_its_exact_time():
    text = kineto_text(GPT)
    doc = orjson.loads(text)
    expected = sorted(
        round(e["ts"] * 1000) for e in doc["traceEvents"] if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")
    )
    trace = load_trace(shared_trace(GPT))
    assert sorted(trace.gpu["ts"].tolist()) == expected
    assert len(expected) == 945


@pytest.mark.parametrize("compress", [False, True])
def test_plain_and_gzip_are_recognised_by_content_not_name(tmp_path, compress):
    text = kineto_text("mlp_bf16_eager")
    path = tmp_path / "trace.bin"
    path.write_bytes(gzip.compress(text) if compress else text)
    trace = load_trace(path)
    assert trace.meta.compressed is compress
    assert len(trace.gpu) == 21


def test_one_line_and_bare_array_layouts_load_the_same_gpu_work(tmp_path):
    doc = orjson.loads(kineto_text("norm_chain_eager"))
    one_line = tmp_path / "one_line.json"
    one_line.write_bytes(orjson.dumps(doc))
    bare = tmp_path / "bare.json"
    bare.write_bytes(orjson.dumps(doc["traceEvents"], option=orjson.OPT_INDENT_2))
    reference = load_trace(shared_trace("norm_chain_eager")).gpu
    for path in (one_line, bare):
        g = load_trace(path).gpu
        assert g["ts"].tolist() == reference["ts"].tolist()
        assert g["op"].astype(str).tolist() == reference["op"].astype(str).tolist()
    assert load_trace(one_line).meta.device_name == "NVIDIA H200"
    assert load_trace(bare).meta.device_name == "unknown device"


def test_a_foreign_chrome_trace_loads_its_gpu_work(tmp_path):
    """Older Kineto spelled categories 'Kernel'/'Runtime' and wrote integer µs; other tools add odd fields."""
    events = [
        {"ph": "X", "cat": "Runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 10, "dur": 5,
         "args": {"correlation": 7, "external id": 3}},
        {"ph": "X", "cat": "Operator", "name": "aten::mul", "pid": 1, "tid": 1, "ts": 8, "dur": 9,
         "args": {"external id": 3}},
        {"ph": "X", "cat": "Kernel", "name": "my_kernel", "pid": 0, "tid": "stream 7", "ts": 20, "dur": 3,
         "args": {"correlation": 7, "external id": 3, "stream": 7, "grid": [1, 1, 1]}},
        {"ph": "X", "cat": "Kernel", "name": "odd_kernel", "pid": 0, "tid": 7, "ts": "31.5", "dur": 2},
        {"ph": "B", "name": "a begin never ended", "pid": 1, "tid": 1, "ts": 1},
        {"ph": "X", "cat": "Kernel", "name": "bad", "pid": 0, "tid": 7, "ts": {"no": 1}, "dur": 1},
    ]
    path = tmp_path / "foreign.json"
    path.write_bytes(orjson.dumps({"traceEvents": events, "displayTimeUnit": "ns"}))
    trace = load_trace(path)
    g = trace.gpu
    assert g["full_name"].astype(str).tolist() == ["my_kernel", "odd_kernel"]
    assert g["ts"].tolist() == [20_000, 31_500]
    assert g["op"].astype(str).tolist() == ["aten::mul", ""]
    assert g["stream"].tolist() == [7, 7]
    assert trace.meta.skipped_events == 2
    assert trace.meta.warnings == ("skipped 2 events: 1 no usable ts, 1 'B' never ended",)
    assert trace.meta.producer == "chrome-trace"


def complete_event_count(text: bytes, cut: int) -> tuple[int, int]:
    """(X/i events, GPU events) among the events that end before byte `cut` of a Kineto file."""
    starts = []
    at = text.index(b"[", text.index(b'"traceEvents"'))
    while (at := text.find(b"\n  {\n", at + 1)) >= 0:
        starts.append(at)
    end_of_array = text.rindex(b"\n  ]")
    ends = [s - 1 for s in starts[1:]] + [end_of_array]
    events = orjson.loads(text)["traceEvents"]
    assert len(events) == len(starts)
    complete = [e for e, end in zip(events, ends) if end <= cut]
    kept = [e for e in complete if e.get("ph") in ("X", "i")]
    gpu = [e for e in kept if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    return len(kept), len(gpu)


@pytest.mark.parametrize("fraction", [0.3, 0.61, 0.97])
def test_a_cut_off_trace_loads_every_complete_event_before_the_cut(tmp_path, fraction):
    text = kineto_text(GPT)
    cut = int(len(text) * fraction)
    path = tmp_path / "cut.json"
    path.write_bytes(text[:cut])
    trace = load_trace(path)
    events, gpu = complete_event_count(text, cut)
    assert trace.meta.truncated
    assert len(trace.events) == events
    assert len(trace.gpu) == gpu
    assert trace.meta.warnings == (
        f"trace is cut off (a profiler stopped mid-write?): loaded the {events:,} complete events before the cut",
    )
    assert trace.meta.device_name == "NVIDIA H200"


def test_a_cut_off_gzip_stream_loads_what_it_holds(tmp_path):
    data = shared_trace(GPT).read_bytes()
    path = tmp_path / "cut.json.gz"
    path.write_bytes(data[: int(len(data) * 0.9)])
    trace = load_trace(path)
    assert trace.meta.truncated
    assert 0 < len(trace.gpu) < 945  # Kineto writes GPU events after the CPU ones


def test_a_cut_off_one_line_trace_is_repaired(tmp_path):
    doc = orjson.loads(kineto_text("norm_chain_eager"))
    text = orjson.dumps(doc)
    path = tmp_path / "cut.json"
    path.write_bytes(text[: int(len(text) * 0.5)])
    trace = load_trace(path)
    assert trace.meta.truncated
    assert len(trace.events) > 0


@pytest.mark.parametrize(
    "content, message",
    [
        (None, "{path}: no such file"),
        (b"", "{path} is empty (0 bytes): not a trace"),
        (b"   \n", "{path} holds only whitespace: not a trace"),
        (b"hello, world", "{path} is not JSON (it starts with b'hello, world')"),
        (b'{"name": "a config file", "values": [1, 2]}', "{path} is JSON but not a Chrome trace (no traceEvents array)"),
        (b"[1, 2, 3]", "{path} is JSON but not a Chrome trace (its events are not JSON objects)"),
        (b"[[1.5, 0, 4096, 1], [2.5, 1, -4096, 1]]", "{path} is JSON but not a Chrome trace (its events are not JSON objects)"),
        (b"\x1f\x8b\x08\x00garbage-not-deflate", "{path}: corrupt gzip data"),
        (b"{not json at all", "{path} is not valid JSON and no complete event could be recovered from it"),
    ],
)
def test_bad_input_is_one_clear_error(tmp_path, content, message):
    path = tmp_path / "input.json"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(TraceError) as info:
        load_trace(path)
    text = str(info.value)
    assert text.startswith(message.format(path=path))
    assert "\n" not in text


def test_a_directory_is_refused(tmp_path):
    with pytest.raises(TraceError, match="is a directory, not a trace file"):
        load_trace(tmp_path)


def test_trace_without_gpu_work_has_an_empty_gpu_table(tmp_path):
    doc = orjson.loads(kineto_text("add_relu_1M_eager"))
    doc["traceEvents"] = [e for e in doc["traceEvents"] if e.get("cat") != "kernel"]
    path = tmp_path / "cpu_only.json"
    path.write_bytes(orjson.dumps(doc, option=orjson.OPT_INDENT_2))
    trace = load_trace(path)
    assert len(trace.gpu) == 0
    assert (trace.events["kind"] == Kind.CPU_OP).sum() == 3


def test_events_are_columns_not_objects():
    trace = load_trace(shared_trace(GPT))
    dtypes = {name: str(dtype) for name, dtype in trace.events.dtypes.items()}
    assert "object" not in dtypes.values()
    assert dtypes["ts"] == "int64" and dtypes["kind"] == "int8"
    assert np.unique(trace.events["kind"]).tolist() == sorted(
        int(k) for k in (Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET, Kind.CPU_OP, Kind.ANNOTATION, Kind.PYTHON,
                         Kind.RUNTIME, Kind.DRIVER, Kind.GPU_ANNOTATION, Kind.MEMORY, Kind.INSTANT, Kind.SPAN)
    )


@pytest.mark.parametrize("name", [GPT, "resnet18_train_eager"])
def test_the_gpu_table_has_the_kernels_fields_a_decode_of_every_event_reads(name):
    """The event table leaves the kernels' fields aside; the GPU table has them back, where the event
    table had them, each row's own (memcpy and memset rows included), as one decode of all events reads them."""
    from kerneltui.trace.decode import ChunkDecoder
    from kerneltui.trace.schema import EVENT_COLUMNS, KERNEL_FIELDS

    trace = load_trace(shared_trace(name))
    every = ChunkDecoder().decode(orjson.dumps(orjson.loads(kineto_text(name))["traceEvents"]))
    assert np.array_equal(every["ts"], trace.events["ts"].to_numpy())  # the same rows, in the same order
    assert not set(KERNEL_FIELDS) & set(trace.events.columns)
    g = trace.gpu
    assert list(g.columns[: len(EVENT_COLUMNS) + 1]) == ["row", *EVENT_COLUMNS]
    rows = g["row"].to_numpy()
    for field in KERNEL_FIELDS:
        column = g[field].to_numpy()
        assert column.dtype == EVENT_COLUMNS[field], field
        assert np.array_equal(column, every[field][rows], equal_nan=column.dtype.kind == "f"), field
    kernel = (g["kind"] == Kind.KERNEL).to_numpy()
    assert (g["registers"].to_numpy()[kernel] > 0).mean() > 0.9 and (g["registers"].to_numpy()[~kernel] == -1).all()
    assert len(trace.kernel_fields) == int(kernel.sum()) and (~kernel).any()  # memcpy/memset rows are in the test


def assert_same_columns(a, b, skip=(), label=None) -> None:
    """Every event column of two loads of one trace equal, dtype and values (NaN equal to NaN), and the
    kernels' fields kept aside; ``skip``: columns of codes that may differ between them."""
    assert list(a.events.columns) == list(b.events.columns), label
    for column in a.events.columns:
        if column in skip:
            continue
        left, right = a.events[column].to_numpy(), b.events[column].to_numpy()
        assert left.dtype == right.dtype and np.array_equal(left, right, equal_nan=left.dtype.kind == "f"), (
            label, column)
    assert a.kernel_fields == b.kernel_fields, label


def test_worker_processes_decode_exactly_what_one_process_does(monkeypatch):
    """Big files are decoded by worker processes; force that path on a real trace and compare."""
    from kerneltui.trace import blocks, pool

    sequential = load_trace(shared_trace(GPT))
    monkeypatch.setattr(pool, "PARALLEL_FROM_BYTES", 0)
    monkeypatch.setattr(blocks, "BLOCK", 256 << 10)  # many chunks, so several go to each worker
    monkeypatch.setenv("KERNELTUI_WORKERS", "2")
    parallel = load_trace(shared_trace(GPT), cache=False)  # decoded again, not served from the column cache
    assert pool._executor is not None  # the workers did run
    # codes differ; what they point to must not
    assert_same_columns(sequential, parallel, skip=("name", "kernel_hash", "lane", "shapes_at"))
    assert list(sequential.names_of(sequential.events["name"].to_numpy())) == list(
        parallel.names_of(parallel.events["name"].to_numpy())
    )
    assert sequential.gpu["key"].astype(str).tolist() == parallel.gpu["key"].astype(str).tolist()
    assert sequential.gpu["op"].astype(str).tolist() == parallel.gpu["op"].astype(str).tolist()
    rows = sequential.gpu["op_row"].to_numpy()
    assert [sequential.shapes(int(r)) for r in rows[rows >= 0][:50]] == [parallel.shapes(int(r)) for r in rows[rows >= 0][:50]]
    assert [sequential.lanes.loc[i, ["pid", "tid"]].tolist() for i in sequential.events["lane"][:100]] == [
        parallel.lanes.loc[i, ["pid", "tid"]].tolist() for i in parallel.events["lane"][:100]
    ]


def test_a_file_cut_off_before_its_first_event_is_an_error(tmp_path):
    path = tmp_path / "cut.json.gz"
    path.write_bytes((PROJECT_TRACES / "add_relu_1M_eager.json.gz").read_bytes()[:500])
    with pytest.raises(TraceError) as info:
        load_trace(path)
    assert str(info.value) == f"{path} is cut off before its first complete event: nothing to load"


@pytest.mark.parametrize("suffix", ["", ".gz"])
def test_columns_joined_as_chunks_come_are_the_columns_of_one_chunk(monkeypatch, tmp_path, suffix):
    """A real trace cut into many chunks (scanned on threads, each written over an adopted chunk's
    columns, copied into the sink as it comes) loads every column as the same trace read in one chunk,
    plain and gzipped, where the sink's first guess of the rows is too small and has to grow."""
    from kerneltui.trace import blocks, scanner, sink

    text = gzip.decompress(shared_trace(GPT).read_bytes())
    path = tmp_path / f"t.json{suffix}"
    path.write_bytes(gzip.compress(text) if suffix else text)
    monkeypatch.setattr(blocks, "BLOCK", 64 << 20)
    whole = load_trace(path, cache=False)
    monkeypatch.setattr(blocks, "BLOCK", 256 << 10)
    monkeypatch.setattr(sink, "ROOM", 0.5)  # half the rows expected: the columns grow once or more
    written_over = []  # per scan: were its columns the ones it was handed (the same bytearrays)?
    real = scanner._scan.scan

    def scan(text, classify, bare=False, reuse=None):
        out = real(text, classify, bare, reuse)
        written_over.append(reuse is not None and out is not None and all(map(operator.is_, out[0], reuse)))
        return out

    monkeypatch.setattr(scanner._scan, "scan", scan)
    chunked = load_trace(path, cache=False)
    # all but the first few (in flight before any was adopted) wrote over earlier columns
    assert len(written_over) > 10 and sum(written_over) >= len(written_over) - 4, written_over
    assert len(whole.events) > 10_000
    assert_same_columns(whole, chunked)
    assert len(whole.memory) == text.count(b'"[memory]"') == 1992 and whole.memory == chunked.memory


def test_the_sink_joins_chunks_in_order_and_counts_side_table_rows_from_the_first():
    from kerneltui.trace.decode import MEMORY_PREFIX
    from kerneltui.trace.schema import (
        EVENT_COLUMNS,
        KERNEL_FIELDS,
        MEMORY_COLUMNS,
        ROW_COLUMNS,
    )
    from kerneltui.trace.sink import ColumnSink

    def chunk(first: int, n: int, memory_rows: list[int], kernel_rows: dict[int, str]) -> dict:
        """Every column counts the rows; the kernels' fields are absent but in ``kernel_rows``: there all
        of them ("all"), only the occupancy ("occupancy") or only the registers, at -2 ("registers")."""
        cols = {name: np.arange(first, first + n).astype(dtype) for name, dtype in EVENT_COLUMNS.items()}
        for name in KERNEL_FIELDS:
            absent = np.nan if name == "occupancy" else -1
            cols[name] = np.full(n, absent, EVENT_COLUMNS[name])
            for row, which in kernel_rows.items():
                if which == "all" or which == name:
                    cols[name][row] = first + row if which == "all" else (-2 if name == "registers" else 50.5)
        for name in MEMORY_COLUMNS:
            cols[MEMORY_PREFIX + name] = np.array(memory_rows, np.int64)
        return cols

    # the file's JSON unknown (the columns grow each chunk), too few rows guessed, room to spare; no
    # chunk's JSON known (kept, joined at the end)
    for json_bytes, text in ((0, 10), (100, 10), (10_000, 10), (10_000, 0)):
        sink = ColumnSink(json_bytes)
        sink.append(chunk(0, 3, [1], {0: "all", 2: "occupancy"}), 3 * text)
        sink.append(chunk(3, 4, [], {}), 4 * text)
        sink.append(chunk(7, 5, [0, 4], {1: "registers", 4: "all"}), 5 * text)
        assert (sink.kept is not None) == (text == 0)
        columns, memory, kernels = sink.joined()
        assert list(columns) == list(ROW_COLUMNS)
        for name, column in columns.items():
            assert column.dtype == EVENT_COLUMNS[name] and column.tolist() == list(range(12)), (json_bytes, name)
            assert column.base is None  # trimmed in place, not a view of the longer column
        assert memory["row"].tolist() == [1, 7, 11] and memory["addr"].tolist() == [1, 0, 4]
        assert kernels["row"].tolist() == [0, 2, 8, 11]  # each row that has any field, counted from the first
        assert kernels["grid_x"].tolist() == [0, -1, -1, 11] and kernels["registers"].tolist() == [0, -1, -2, 11]
        assert np.array_equal(kernels["occupancy"], [0, 50.5, np.nan, 11], equal_nan=True)
        assert all(kernels[name].dtype == EVENT_COLUMNS[name] for name in KERNEL_FIELDS)
        # as Trace.gpu asks: any rows, in any order; 10 and 1 have none, and the side table's next row has all
        # (11) or one (2)
        gathered = kernels.at_rows(np.array([11, 3, 0, 2, 10, 1]))
        for name in KERNEL_FIELDS:
            expected = {"occupancy": [11, np.nan, 0, 50.5, np.nan, np.nan]}.get(name, [11, -1, 0, -1, -1, -1])
            assert gathered[name].dtype == EVENT_COLUMNS[name], name
            assert np.array_equal(gathered[name], expected, equal_nan=True), (name, gathered[name])
    empty, memory, kernels = ColumnSink(1000).joined()
    assert all(len(column) == 0 and column.dtype == EVENT_COLUMNS[name] for name, column in empty.items())
    assert all(len(column) == 0 for column in memory.columns.values())
    assert len(kernels) == 0 and kernels.at_rows(np.array([0, 5]))["shared_memory"].tolist() == [-1, -1]


def test_a_gzip_of_several_members_and_one_cut_off_load_as_the_same_json_plain(tmp_path, monkeypatch):
    """gzip is inflated 16 KB of input at a time: a member that ends exactly where a 16 KB step ends, many
    members, and a file cut off mid-member load as the JSON they inflate to, written plain."""
    from kerneltui.trace import blocks

    text = gzip.decompress(shared_trace(GPT).read_bytes())
    monkeypatch.setattr(blocks, "BLOCK", 256 << 10)
    first = gzip.compress(text[:65513], compresslevel=0, mtime=0)
    assert len(first) == 4 * blocks.PIECE_IN  # its last byte is a step's last
    per_thousand = b"".join(gzip.compress(text[i : min(i + 1000, 400_000)], mtime=0) for i in range(65513, 400_000, 1000))
    whole = gzip.compress(text, mtime=0)
    cases = {
        "members": (first + per_thousand + gzip.compress(text[400_000:], mtime=0), text),  # 337 of them
        "cut off": (whole[: int(len(whole) * 0.77)], None),
    }
    for name, (data, plain_text) in cases.items():
        if plain_text is None:  # what gzip(1) recovers from the cut file
            plain_text = zlib.decompressobj(31).decompress(data)
        gz, plain = tmp_path / f"{name}.json.gz", tmp_path / f"{name}.json"
        gz.write_bytes(data)
        plain.write_bytes(plain_text)
        a, b = load_trace(plain, cache=False), load_trace(gz, cache=False)
        assert a.meta.truncated == b.meta.truncated == (name == "cut off"), name
        assert len(a.events) == len(b.events) > 1000 and a.names == b.names, name
        assert_same_columns(a, b, label=name)


def test_the_json_a_file_holds_is_its_size_or_a_gzip_files_own_count_where_believable(tmp_path):
    from kerneltui.trace.blocks import BlockStream

    text = gzip.decompress(shared_trace(GPT).read_bytes())
    plain, gz, cut = tmp_path / "t.json", tmp_path / "t.json.gz", tmp_path / "cut.json.gz"
    plain.write_bytes(text)
    data = gzip.compress(text, mtime=0)
    gz.write_bytes(data)
    cut.write_bytes(data[: len(data) // 2])  # ends in compressed bytes, not a size
    assert BlockStream(plain).json_bytes() == len(text)
    assert BlockStream(gz).json_bytes() == len(text)  # its last four bytes
    assert BlockStream(cut).json_bytes() == 12 * (len(data) // 2)  # whatever those read as: a guess instead
