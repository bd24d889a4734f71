"""Gzip traces are inflated by ISA-L (a dependency) and read the same as with zlib, its fallback."""

from __future__ import annotations

import gzip
import zlib

import numpy as np
import pytest

from kerneltui.trace import blocks
from kerneltui.trace.load import read_trace
from tests.conftest import SHARED_TRACES


def test_isal_is_the_inflater():
    from isal import isal_zlib

    assert blocks._zlib is isal_zlib


@pytest.mark.parametrize("name", ["gpt_train_eager", "add_relu_1M_compiled"])
def test_isal_and_zlib_read_the_same_columns(monkeypatch, tmp_path, name):
    path = SHARED_TRACES / f"{name}.json.gz"
    fast, _ = read_trace(path)
    monkeypatch.setattr(blocks, "_zlib", zlib)
    slow, _ = read_trace(path)
    assert fast.columns.keys() == slow.columns.keys()
    for column in fast.columns:
        assert np.array_equal(fast.columns[column], slow.columns[column], equal_nan=fast.columns[column].dtype.kind == "f"), column
    assert fast.names == slow.names and fast.memory == slow.memory and fast.kernel_fields == slow.kernel_fields


def test_a_corrupt_stream_is_one_error_with_either_inflater(monkeypatch, tmp_path):
    data = bytearray(gzip.compress(b'{"traceEvents": [' + b'{"ph": "X", "ts": 1, "dur": 1, "name": "a"},' * 5000
                                   + b"{}]}"))
    data[len(data) // 2] ^= 0xFF
    bad = tmp_path / "bad.json.gz"
    bad.write_bytes(bytes(data))
    from kerneltui.errors import TraceError

    messages = []
    for inflater in (blocks._zlib, zlib):
        monkeypatch.setattr(blocks, "_zlib", inflater)
        with pytest.raises(TraceError) as caught:
            read_trace(bad)
        messages.append(str(caught.value).split(" (")[0])
    assert messages == [f"{bad}: corrupt gzip data"] * 2
