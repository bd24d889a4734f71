"""Trace.name_codes and Trace.by_name: per distinct name, the same answers as np.unique and a test per row."""

import numpy as np
import pytest

from kerneltui.trace import load_trace
from kerneltui.trace.model import present_codes


@pytest.fixture(scope="module")
def trace():
    return load_trace("tests/data/traces/gpt_train_eager.json.gz", cache=False)


def test_name_codes_are_np_unique(trace):
    codes = trace.events["name"].to_numpy()
    assert trace.name_codes.tolist() == np.unique(codes).tolist()
    assert len(trace.name_codes) > 100


def test_by_name_is_f_of_each_rows_name(trace):
    codes = trace.events["name"].to_numpy()[::7]
    got = trace.by_name(codes, lambda n: n.startswith("aten::"), bool)
    assert got.tolist() == [trace.name(int(c)).startswith("aten::") for c in codes]
    assert 0 < got.sum() < len(codes)


def test_by_name_reads_missing_names_as_empty(trace):
    got = trace.by_name(np.array([-1, 0, -1], np.int32), len, np.int64)
    assert got.tolist() == [0, len(trace.name(0)), 0]


def test_present_codes():
    assert present_codes(np.array([3, -1, 3, 0], np.int32), 5).tolist() == [-1, 0, 3]
    assert present_codes(np.empty(0, np.int32), 5).tolist() == []
