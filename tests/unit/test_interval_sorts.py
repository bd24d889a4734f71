"""The faster sorts of trace/intervals.py give exactly the orders of the numpy calls they replace."""

from __future__ import annotations

import numpy as np
import pytest

from kerneltui.trace.intervals import (
    Nesting,
    depth_by_group,
    nesting_order,
    stable_argsort,
)


def test_nesting_order_is_lexsort_by_start_then_longest_first_then_input_order():
    rng = np.random.default_rng(7)
    for _ in range(500):
        n = int(rng.integers(0, 40))
        starts = rng.integers(0, 6, n)  # few values: runs of equal starts, and equal (start, end) pairs
        ends = starts + rng.integers(-1, 4, n)
        assert nesting_order(starts, ends).tolist() == np.lexsort((-ends, starts)).tolist(), (starts, ends)


def test_nesting_order_puts_the_parent_first_on_a_tied_start():
    # an op and its first child start on the same ns: the enclosing (longer) one comes first, and of two
    # identical intervals the earlier in the file
    starts = np.array([10, 10, 5, 10])
    ends = np.array([12, 20, 30, 20])
    assert nesting_order(starts, ends).tolist() == [2, 1, 3, 0]
    assert Nesting(starts, ends).depth.tolist() == [0, 1, 2, 3]


@pytest.mark.parametrize("values", [
    np.array([3, 1, 2, 1, 3, 0], np.int32),  # depths
    np.array([-5, 7, -5, 2**15 + 1, 0], np.int64),  # negative and past int16, within 2**16 of each other
    np.array([2**40 + 9, 2**40, 2**40 + 9, 2**40 + 1], np.int64),  # large, in a narrow range
    np.array([0, 2**16, 5, 5], np.int64),  # a range of 2**16 + 1: the merge sort's
    np.array([2**64 - 1, 0, 2**64 - 1], np.uint64),
    np.array([1.5, -1.0, 1.5]),
    np.array([], np.int64),
    np.array(7, np.int32),  # 0-d
    np.array([[3, 1], [2, 2]], np.int32),  # 2-D: along the last axis
])
def test_stable_argsort_is_numpys_stable_argsort(values):
    assert stable_argsort(values).tolist() == np.argsort(values, kind="stable").tolist()


def test_stable_argsort_keeps_input_order_among_equal_depths():
    rng = np.random.default_rng(3)
    depth = rng.integers(0, 40, 100_000).astype(np.int32)
    assert np.array_equal(stable_argsort(depth), np.argsort(depth, kind="stable"))


def test_depth_by_group_on_interleaved_threads_with_tied_starts():
    # two threads' ops interleaved in the file, parents and children starting together
    groups = np.array([0, 1, 0, 1, 0, 1, 0])
    starts = np.array([0, 0, 0, 0, 5, 1, 5])
    ends = np.array([10, 9, 4, 9, 6, 2, 9])
    # thread 0: [0,10] > [0,4]; [5,9] > [5,6]; thread 1: two [0,9] (the second nested in the first) > [1,2]
    assert depth_by_group(groups, starts, ends).tolist() == [0, 0, 1, 1, 2, 2, 1]
