"""The Python decoder's fast path: chunks decoded in cache-sized parts, workers reading their chunks from the file.

(The C scanner, which reads most chunks before this path is tried, has tests/unit/test_scan.py;
the parts tests here turn it off, or they would test it instead.)

Each must give exactly what decoding a chunk whole, in one process, gives: the same
columns, the same codes in the same order, the same metadata, shapes and losses.
"""

from __future__ import annotations

import gzip
import os

import numpy as np
import pytest

from kerneltui.errors import TraceError
from kerneltui.trace import blocks, decode, pool, worker
from kerneltui.trace.load import read_trace
from tests.conftest import shared_trace

GPT = "gpt_train_eager"


def same_raw(left, right) -> None:
    assert left.columns.keys() == right.columns.keys()
    for name, column in left.columns.items():
        other = right.columns[name]
        assert column.dtype == other.dtype, name
        assert np.array_equal(column, other, equal_nan=column.dtype.kind == "f"), name
    assert left.names == right.names
    assert left.lanes == right.lanes
    assert left.metadata == right.metadata
    assert left.shapes_blob == right.shapes_blob
    assert left.flow_events == right.flow_events
    assert left.losses.events == right.losses.events
    assert left.losses.fields == right.losses.fields
    assert left.memory == right.memory  # the [memory] events' side table
    assert left.kernel_fields == right.kernel_fields  # the kernels'


@pytest.fixture
def plain_gpt(tmp_path):
    path = tmp_path / "gpt.json"
    path.write_bytes(gzip.decompress(shared_trace(GPT).read_bytes()))
    return path


def whole_and_in_parts(path, monkeypatch):
    monkeypatch.setenv("KERNELTUI_WORKERS", "0")
    monkeypatch.setenv("KERNELTUI_DECODER", "python")
    monkeypatch.setattr(decode, "SUB_CHUNK", 1 << 40)  # never in parts
    whole, _ = read_trace(path)
    monkeypatch.setattr(decode, "SUB_CHUNK", 8 << 10)  # hundreds of parts per chunk
    parts, _ = read_trace(path)
    return whole, parts


def test_a_chunk_decoded_in_parts_is_the_chunk_decoded_whole(plain_gpt, monkeypatch):
    whole, parts = whole_and_in_parts(plain_gpt, monkeypatch)
    assert len(whole.columns["ts"]) > 10_000
    same_raw(whole, parts)


def test_a_damaged_part_leaves_the_chunk_to_the_repair_path_unchanged(tmp_path, monkeypatch):
    text = gzip.decompress(shared_trace(GPT).read_bytes())
    # an unusable value in one event (a string where the stream is an int), and bare NaN in another
    middle = text.index(b'"ph": "X"', len(text) // 2)
    text = text[:middle] + b'"ph": "X", "ts": "soon",' + text[middle + len(b'"ph": "X",') :]
    later = text.index(b'"dur": ', len(text) * 3 // 4)
    text = text[:later] + b'"dur": NaN, "was": ' + text[later + len(b'"dur": ') :]
    path = tmp_path / "damaged.json"
    path.write_bytes(text)
    restored = []
    restore = decode.ChunkDecoder._restore
    monkeypatch.setattr(decode.ChunkDecoder, "_restore", lambda self, state: restored.append(1) or restore(self, state))
    whole, parts = whole_and_in_parts(path, monkeypatch)
    assert restored  # the parts decoded before the damaged one were undone
    assert whole.losses.events or whole.losses.fields
    same_raw(whole, parts)


def test_codes_keep_their_order_of_first_appearance(plain_gpt, monkeypatch):
    _, parts = whole_and_in_parts(plain_gpt, monkeypatch)
    names = parts.columns["name"]
    first = np.unique(names, return_index=True)[1]
    assert (np.diff(names[np.sort(first)]) > 0).all()  # each new name takes the next code


def test_workers_reading_their_chunks_from_the_file_decode_what_one_process_does(plain_gpt, monkeypatch):
    monkeypatch.setenv("KERNELTUI_WORKERS", "0")
    sequential, _ = read_trace(plain_gpt)
    monkeypatch.setattr(pool, "PARALLEL_FROM_BYTES", 0)
    monkeypatch.setattr(blocks, "BLOCK", 256 << 10)
    monkeypatch.setattr(decode, "SUB_CHUNK", 32 << 10)
    monkeypatch.setenv("KERNELTUI_WORKERS", "2")
    calls = []
    submit_range = pool.ChunkPool.submit_range
    monkeypatch.setattr(pool.ChunkPool, "submit_range", lambda self, *a: calls.append(a) or submit_range(self, *a))
    parallel, _ = read_trace(plain_gpt)
    assert len(calls) > 4  # the chunks went by offset
    for name in ("kind", "ts", "dur", "external_id", "correlation", "bytes", "shapes_len"):
        assert np.array_equal(sequential.columns[name], parallel.columns[name]), name
    assert len(parallel.kernel_fields) > 0 and sequential.kernel_fields == parallel.kernel_fields
    assert [sequential.names[c] for c in sequential.columns["name"]] == [parallel.names[c] for c in parallel.columns["name"]]
    assert [sequential.lanes[c] for c in sequential.columns["lane"]] == [parallel.lanes[c] for c in parallel.columns["lane"]]
    assert sequential.metadata == parallel.metadata
    assert sequential.flow_events == parallel.flow_events


def test_a_worker_refuses_a_file_that_changed_under_it(plain_gpt):
    st = os.stat(plain_gpt)
    identity = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
    with pytest.raises(worker.FileChanged):
        worker.decode_range(str(plain_gpt), identity[:3] + (identity[3] + 1,), 0, 10, b"\n  {")
    with pytest.raises(worker.FileChanged):
        worker.decode_range(str(plain_gpt), identity, st.st_size - 5, 10, b"\n  {")  # past the end


def test_a_file_changed_while_read_by_workers_is_one_clear_error(plain_gpt, monkeypatch):
    monkeypatch.setattr(pool, "PARALLEL_FROM_BYTES", 0)
    monkeypatch.setattr(blocks, "BLOCK", 256 << 10)
    monkeypatch.setenv("KERNELTUI_WORKERS", "2")
    from kerneltui.trace import load

    real = load._EventReader._file_offset

    def stale(self, at):
        offset = real(self, at)
        if offset is not None:
            self.identity = self.identity[:3] + (self.identity[3] - 1,)
        return offset

    monkeypatch.setattr(load._EventReader, "_file_offset", stale)
    with pytest.raises(TraceError, match="changed while it was being read"):
        read_trace(plain_gpt)
