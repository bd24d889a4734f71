"""The [memory] events' side table (schema.MEMORY_COLUMNS, ``RawTrace.memory`` / ``Trace.memory``).

Both decoders (the C scanner and the Python path, whole or in parts, in one process or in workers)
must give the same table, field for field; the cache must give back the table it was given; and
analysis/memory.py reads its figures from it alone (no second read of the file: a trace read from
a pipe gets them too).
"""

from __future__ import annotations

import gzip
import os
import threading

import numpy as np
import pytest

from kerneltui.analysis.memory import memory_dict, memory_events, memory_table
from kerneltui.trace import blocks, cache, decode, load_trace, pool, scanner
from kerneltui.trace.load import read_trace
from kerneltui.trace.schema import MEMORY_COLUMNS, Kind, MemoryColumns
from tests import fuzzing
from tests.conftest import shared_trace

I64_MAX, I64_MIN = 2**63 - 1, -(2**63)


def event(ts, name="[memory]", ph="i", cat="cpu_instant_event", args: str | None = "", tid=1) -> str:
    text = f'{{"ph": "{ph}", "cat": "{cat}", "s": "t", "name": "{name}", "pid": 1, "tid": {tid}, "ts": {ts}'
    return text + (f', "args": {{{args}}}}}' if args is not None else "}")


def op(ts, dur, name="aten::empty") -> str:
    return (f'{{"ph": "X", "cat": "cpu_op", "name": "{name}", "pid": 1, "tid": 1, "ts": {ts}, "dur": {dur}, '
            '"args": {"External id": 1}}')


def trace_text(events: list[str]) -> bytes:
    """Kineto's layout: one event a line, so the loader cuts chunks and the scanner reads them."""
    return ('{"schemaVersion": 1, "deviceProperties": [], "traceEvents": [\n  ' + ",\n  ".join(events)
            + '\n], "traceName": "t.json"}').encode()


def full(total, reserved, nbytes, device_type, device_id, addr) -> str:
    return (f'"Total Reserved": {reserved}, "Bytes": {nbytes}, "Total Allocated": {total}, '
            f'"Device Type": {device_type}, "Device Id": {device_id}, "Addr": {addr}')


# (text, the side-table entry it makes: allocated, reserved, device_type, device_id, addr; None: no row)
MADE = [
    (op(1.0, 20.0), None),
    (event(2.0, args=full(1100, 5000, 100, 1, 0, 140000000000000)), (1100, 5000, 1, 0, 140000000000000)),
    (event(3.5, args='"Bytes": 8, "Addr": 7'), (-1, -1, -1, -1, 7)),  # fields missing
    (event(4.0, args=None), (-1, -1, -1, -1, -1)),  # no args at all
    (event(4.5, args=""), (-1, -1, -1, -1, -1)),  # empty args
    (event(5.0, args=full(I64_MAX, I64_MIN, -100, 1, 3, I64_MAX)), (I64_MAX, I64_MIN, 1, 3, I64_MAX)),  # int64 bounds
    (event(6.0, args=full(64, 2048, 64, 0, -1, 9)), (64, 2048, 0, -1, 9)),  # the host
    (event("1e300", args=full(1, 1, 1, 1, 0, 1)), None),  # a ts past 2**52 us: dropped by the loader
    (event(7.0, ph="I", args=full(1300, 5000, 200, 1, 0, 2)), (1300, 5000, 1, 0, 2)),  # "I": an instant too
    (event(8.0, ph="X", args=full(9, 9, 9, 1, 0, 9)), None),  # not an instant: no allocator event
    (event(9.0, cat="user_instant", args=full(9, 9, 9, 1, 0, 9)), None),  # another category: not one either
    # the allocator's other instant events are kept in the table, and left out of the memory figures
    (event(10.0, name="[OutOfMemory]", args=full(7, 8, 9, 1, 0, -1)), (7, 8, 1, 0, -1)),
    (event(11.0, args='"Addr": 3, "Device Id": 0, "queued": {"a": [1]}, "Device Type": 1, "Bytes": -100, '
                      '"Total Allocated": 1200, "Total Reserved": 5000'), (1200, 5000, 1, 0, 3)),  # other key order
    (op(12.0, 1.0, "aten::mul"), None),
]


def expected_side(made) -> dict[str, np.ndarray]:
    rows, values = [], []
    row = 0
    for text, entry in made:
        kept = '"ts": 1e300' not in text
        if entry is not None:
            rows.append(row)
            values.append(entry)
        row += kept
    table = np.array(values, np.int64).reshape(-1, 5)
    return {"row": np.array(rows, np.int64), **{name: table[:, i] for i, name in enumerate(list(MEMORY_COLUMNS)[1:])}}


def load_with(path, decoder: str, monkeypatch):
    monkeypatch.setenv("KERNELTUI_DECODER", decoder)
    raw, _ = read_trace(path)
    monkeypatch.delenv("KERNELTUI_DECODER")
    return raw


def scans_counted(monkeypatch) -> dict:
    counts = {"read": 0, "handed back": 0}
    real = scanner._scan.scan

    def counting(*args):
        out = real(*args)
        counts["read" if out is not None else "handed back"] += 1
        return out

    monkeypatch.setattr(scanner._scan, "scan", counting)
    return counts


def assert_same(a: MemoryColumns, b: MemoryColumns) -> None:
    assert list(a.columns) == list(b.columns) == list(MEMORY_COLUMNS)
    for name, dtype in MEMORY_COLUMNS.items():
        assert a[name].dtype == b[name].dtype == np.dtype(dtype), name
        np.testing.assert_array_equal(a[name], b[name], err_msg=name)
    assert a == b


def test_the_scanner_and_the_python_decoder_make_the_same_side_table(tmp_path, monkeypatch):
    path = tmp_path / "made.json"
    path.write_bytes(trace_text([text for text, _ in MADE]))
    counts = scans_counted(monkeypatch)
    scanned = load_with(path, "c", monkeypatch)
    assert counts == {"read": 1, "handed back": 0}  # the scanner read it all itself
    python = load_with(path, "python", monkeypatch)
    assert_same(python.memory, scanned.memory)
    expected = expected_side(MADE)
    for name in MEMORY_COLUMNS:
        np.testing.assert_array_equal(python.memory[name], expected[name], err_msg=name)
    kinds = python.columns["kind"]
    np.testing.assert_array_equal(python.memory["row"], np.flatnonzero(kinds == Kind.MEMORY))
    assert fuzzing.decoders_differ(str(path)) is None


HANDED_BACK = {  # what the scanner leaves to the Python path, which reads it as msgspec and repair do
    "a total written as text": '"Total Allocated": "1500", "Bytes": 1, "Device Type": 1, "Device Id": 0, "Addr": 1',
    "a float address": '"Addr": 1.5, "Bytes": 1, "Device Type": 1, "Device Id": 0, "Total Allocated": 5',
    "a device id past int64": f'"Device Id": {2**70}, "Bytes": 1, "Device Type": 1, "Addr": 1, "Total Allocated": 5',
    "a duplicate field": '"Addr": 1, "Addr": 2, "Bytes": 1, "Device Type": 1, "Device Id": 0, "Total Allocated": 5',
}


@pytest.mark.parametrize("case", HANDED_BACK)
def test_values_the_scanner_hands_back_give_the_same_side_table(tmp_path, monkeypatch, case):
    path = tmp_path / "odd.json"
    path.write_bytes(trace_text([op(1.0, 20.0), event(2.0, args=HANDED_BACK[case]),
                                 event(3.0, args=full(10, 20, 10, 1, 0, 4))]))
    counts = scans_counted(monkeypatch)
    scanned = load_with(path, "c", monkeypatch)
    assert counts == {"read": 0, "handed back": 1}
    python = load_with(path, "python", monkeypatch)
    assert_same(python.memory, scanned.memory)
    assert fuzzing.decoders_differ(str(path)) is None
    assert list(python.memory["row"]) == [1, 2]
    assert list(python.memory["addr"]) == [{"a float address": -1, "a duplicate field": 2}.get(case, 1), 4]
    assert python.memory["device_id"][0] == (-1 if case == "a device id past int64" else 0)
    assert python.memory["allocated"][0] == (1500 if case == "a total written as text" else 5)


def many_events(n: int = 20_000) -> bytes:
    """A step of ``n`` [memory] events among ops, some on a second thread."""
    events = []
    for i in range(n):
        ts = 10.0 + i
        if i % 7 == 0:
            events.append(op(ts - 0.5, 1.0))
        events.append(event(ts, tid=1 + i % 3, args=full(1000 + i, 5000 + i, (-1) ** i * 64, 1 - (i % 11 == 0),
                                                        i % 2, 4096 * (i // 2))))
    return trace_text(events)


def test_the_side_table_survives_chunks_parts_threads_and_workers(tmp_path, monkeypatch):
    path = tmp_path / "many.json"
    path.write_bytes(many_events())
    monkeypatch.setenv("KERNELTUI_WORKERS", "0")
    monkeypatch.setattr(decode, "SUB_CHUNK", 1 << 40)
    whole = load_with(path, "python", monkeypatch)  # one chunk, decoded whole in Python
    assert len(whole.memory) == 20_000
    monkeypatch.setattr(blocks, "BLOCK", 256 << 10)  # a dozen chunks
    loads = {"python, chunks": load_with(path, "python", monkeypatch),
             "c, chunks": load_with(path, "c", monkeypatch)}
    monkeypatch.setattr(decode, "SUB_CHUNK", 16 << 10)
    loads["python, chunks in parts"] = load_with(path, "python", monkeypatch)
    monkeypatch.delenv("KERNELTUI_WORKERS")
    loads["c, chunks on threads"] = load_with(path, "c", monkeypatch)
    monkeypatch.setattr(pool, "PARALLEL_FROM_BYTES", 0)
    monkeypatch.setenv("KERNELTUI_WORKERS", "2")
    calls = []
    submit_range = pool.ChunkPool.submit_range
    monkeypatch.setattr(pool.ChunkPool, "submit_range", lambda self, *a: calls.append(a) or submit_range(self, *a))
    loads["python, workers"] = load_with(path, "python", monkeypatch)
    assert len(calls) > 4  # the chunks went to worker processes
    gz = tmp_path / "many.json.gz"
    gz.write_bytes(gzip.compress(path.read_bytes(), 1))
    monkeypatch.setenv("KERNELTUI_WORKERS", "0")
    loads["c, gzip"] = load_with(gz, "c", monkeypatch)
    for how, raw in loads.items():
        assert len(raw.columns["ts"]) == len(whole.columns["ts"]), how
        assert raw.memory == whole.memory, how


def test_a_cached_load_gives_the_side_table_and_memory_table_of_an_uncached_one(tmp_path, monkeypatch):
    path = tmp_path / "gpt.json.gz"
    path.write_bytes(shared_trace("gpt_train_eager").read_bytes())
    cold = load_trace(path, cache=False)
    load_trace(path, cache=True)  # writes the entry
    monkeypatch.setattr(cache, "read_trace", lambda *a, **k: pytest.fail("read the trace again"))
    warm = load_trace(path, cache=True)
    assert len(cold.memory) >= 1992
    assert_same(warm.memory, cold.memory)
    cold_table, warm_table = memory_table(cold), memory_table(warm)
    assert memory_dict(warm_table) == memory_dict(cold_table)
    assert memory_dict(cold_table)["devices"][0]["peak_allocated_bytes"] == 1_514_776_576
    for a, b in zip(cold_table.devices, warm_table.devices):
        for name in ("ts", "allocated", "reserved"):
            np.testing.assert_array_equal(getattr(a, name), getattr(b, name))


def test_an_entry_of_the_old_schema_is_a_miss():
    assert cache.SCHEMA_VERSION >= 2
    assert "memory" in cache.RAW_FIELDS


def test_a_trace_read_from_a_pipe_gets_its_memory_figures(tmp_path):
    text = gzip.compress(trace_text([text for text, _ in MADE]))
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    writer = threading.Thread(target=lambda: fifo.write_bytes(text))
    writer.start()
    try:
        trace = load_trace(fifo)
    finally:
        writer.join(timeout=30)
    table = memory_table(trace)
    assert table.note == "" and table.events == 8  # the [memory] instants, "i" and "I"
    assert [d.device for d in table.devices] == [0, 3]
    assert table.devices[0].peak_allocated_bytes == 1300
    m = memory_events(trace)
    assert list(m.ts) == [2000, 3500, 4000, 4500, 5000, 6000, 7000, 11000]


def test_a_trace_without_memory_events_has_an_empty_side_table(tmp_path):
    path = tmp_path / "ops.json"
    path.write_bytes(trace_text([op(1.0, 2.0), op(3.0, 1.0)]))
    trace = load_trace(path, cache=False)
    assert len(trace.memory) == 0 and trace.memory == MemoryColumns()
    assert memory_table(trace) is None
