"""trace/one_of.py: np.isin's answer for a few wanted codes, by equalities."""

from __future__ import annotations

import numpy as np
import pytest

from kerneltui.trace.one_of import FEW, one_of
from kerneltui.trace.schema import GPU_WORK, Kind


@pytest.mark.parametrize("wanted", [(), (Kind.CPU_OP,), GPU_WORK, (Kind.RUNTIME, Kind.DRIVER), (3, 300, -129),
                                    np.array([1, 5, 9]), list(range(FEW + 3)), [-1, 0]])
@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int32, np.int64])
def test_one_of_is_isin(wanted, dtype):
    values = np.random.default_rng(0).integers(-1, 15, 5000).astype(dtype)
    got = one_of(values, wanted)
    assert got.dtype == bool and got.shape == values.shape
    assert np.array_equal(got, np.isin(values, list(wanted)))
    assert one_of(values[:0], wanted).shape == (0,)


def test_one_of_takes_what_isin_takes_for_a_list_of_values_a_set_or_a_table_of_wanted_ones():
    values = [0, 3, 4, 7, -1]
    assert one_of(values, (3, 4)).tolist() == [False, True, True, False, False]  # a list of values
    assert one_of(np.array(values), {7, -1}).tolist() == [False, False, False, True, True]
    assert one_of(np.array(values), np.array([[3], [7]])).tolist() == np.isin(values, [[3], [7]]).tolist()
