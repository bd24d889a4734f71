"""The faster sorts and queries of trace/intervals.py give exactly the answers of the code they replace."""

from __future__ import annotations

import numpy as np
import pytest

from kerneltui.trace import intervals
from kerneltui.trace.intervals import (
    Nesting,
    depth_by_group,
    innermost,
    nesting_order,
    search_ascending,
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


def _intervals(rng, n: int, shape: str) -> tuple[np.ndarray, np.ndarray]:
    if shape == "nested":  # start-sorted, short: a thread's op stack
        starts = np.sort(rng.integers(0, 10**6, n))
        return starts, starts + rng.integers(0, 5000, n)
    if shape == "ties":  # many equal starts and ends, some ending before they start
        starts = rng.integers(0, 50, n)
        return starts, starts + rng.integers(-3, 20, n)
    if shape == "deep":  # one long chain, ends jittered into partial overlaps
        return np.arange(n), 2 * n - np.arange(n) + rng.integers(-2, 3, n)
    starts = rng.integers(-10**4, 10**4, n)  # overlapping at random
    return starts, starts + rng.integers(0, 10**4, n)


@pytest.mark.parametrize("shape", ["nested", "ties", "deep", "random"])
def test_innermost_for_a_few_queries_is_the_nestings_answer(shape, monkeypatch):
    rng = np.random.default_rng(7)
    built = []
    real = intervals.Nesting
    monkeypatch.setattr(intervals, "Nesting", lambda *a: built.append(1) or real(*a))
    for _ in range(150):
        n = int(rng.integers(64 * 4, 4000))
        starts, ends = (a.astype(np.int64) for a in _intervals(rng, n, shape))
        t = rng.integers(int(starts.min()) - 5, int(ends.max()) + 5, int(rng.integers(1, n // 64)))
        third = len(t) // 3
        t[:third] = starts[rng.integers(0, n, third)]  # on an interval's start and end
        t[third : 2 * third] = ends[rng.integers(0, n, third)]
        few = innermost(starts, ends, t)
        assert np.array_equal(few, real(starts, ends).innermost(t)), (shape, n)
    # an op stack's few queries are answered without a Nesting; overlaps hundreds deep read far back
    # from a query, and past as many depths as there are intervals the whole Nesting is built instead
    if shape == "nested":
        assert len(built) < 15
    if shape == "deep":
        assert len(built) > 100


def test_innermost_finds_the_tightest_op_around_each_time():
    starts = np.array([0, 10, 12, 30, 0, 100], np.int64)  # op 4 ties op 0's start and is longer: op 0 is inside it
    ends = np.array([50, 20, 15, 40, 60, 400], np.int64)
    t = np.array([13, 11, 35, 55, 70, 100, 400, -1], np.int64)
    # 64 intervals a query at least: the path that reads depths around each query alone
    pad = np.arange(10**6, 10**6 + 64 * len(t), dtype=np.int64)
    found = innermost(np.concatenate([starts, pad]), np.concatenate([ends, pad]), t)
    assert found.tolist() == [2, 1, 3, 4, -1, 5, 5, -1]



def _union_by_hand(starts, ends) -> list[tuple[int, int]]:
    """The maximal runs the intervals cover, touching ones joined, walked one interval at a time."""
    runs: list[list[int]] = []
    for s, e in sorted(zip(starts.tolist(), ends.tolist()), key=lambda x: x[0]):
        if runs and s <= runs[-1][1]:
            runs[-1][1] = max(runs[-1][1], e)
        else:
            runs.append([s, e])
    return [tuple(r) for r in runs]


@pytest.mark.parametrize("in_time_order", [True, False])
def test_union_runs_in_or_out_of_time_order_are_the_runs_walked_by_hand(in_time_order):
    """Intervals already in time order are read where they are (no sort): the same runs either way."""
    rng = np.random.default_rng(11)
    for _ in range(400):
        n = int(rng.integers(1, 40))
        starts = rng.integers(0, 30, n)
        if in_time_order:
            starts = np.sort(starts)
        ends = starts + rng.integers(0, 6, n)
        run_s, run_e = intervals.union_runs(starts, ends)
        assert list(zip(run_s.tolist(), run_e.tolist())) == _union_by_hand(starts, ends), (starts, ends)


def test_union_runs_of_the_runs_is_the_union():
    """The overview joins each category's own runs to the union so far: the same runs as its intervals."""
    rng = np.random.default_rng(5)
    for _ in range(300):
        a_s = rng.integers(0, 50, 20)
        a_e = a_s + rng.integers(0, 8, 20)
        b_s = rng.integers(0, 50, 30)
        b_e = b_s + rng.integers(0, 8, 30)
        run_s, run_e = intervals.union_runs(a_s, a_e)
        own_s, own_e = intervals.union_runs(b_s, b_e)
        joined = intervals.union_runs(np.concatenate([run_s, own_s]), np.concatenate([run_e, own_e]))
        whole = intervals.union_runs(np.concatenate([run_s, b_s]), np.concatenate([run_e, b_e]))
        assert all(np.array_equal(x, y) for x, y in zip(joined, whole))


@pytest.mark.parametrize("side", ["left", "right"])
def test_search_ascending_is_numpys_searchsorted(side):
    """The merge pass (the C scanner's module) against np.searchsorted: ties within and between the arrays,
    keys before, between and past every value, empty arrays; and the cases it hands to numpy (keys out of
    order, other dtypes, far fewer keys than values), which must answer the same."""
    from kerneltui.trace.scanner import _scan

    assert hasattr(_scan, "search_ascending")  # the merge itself is what this test reads
    rng = np.random.default_rng(3)
    for _ in range(300):
        a = np.sort(rng.integers(-20, 20, int(rng.integers(0, 50))))
        v = np.sort(rng.integers(-25, 25, int(rng.integers(0, 50))))
        if rng.random() < 0.2 and len(v) > 1:
            v = v[::-1].copy()  # not ascending
        for array, keys in ((a, v), (a.astype(np.int32), v), (a, v.astype(np.float64))):
            found = search_ascending(array, keys, side)
            assert found.tolist() == np.searchsorted(array, keys, side=side).tolist(), (array, keys)
    values = np.arange(0, 3_000_000, 3)
    keys = np.array([-1, 0, 1, 2_999_997, 5_000_000])
    assert search_ascending(values, keys, side).tolist() == np.searchsorted(values, keys, side=side).tolist()
    # views at an odd offset (not 8-byte aligned) and 2-D keys: numpy's answers, and shapes
    odd = np.frombuffer(bytes(1) + np.arange(40, dtype=np.int64).tobytes(), np.int64, count=40, offset=1)
    assert search_ascending(odd, odd.copy(), side).tolist() == np.searchsorted(odd, odd, side=side).tolist()
    grid = np.arange(12).reshape(3, 4)
    assert search_ascending(values, grid, side).tolist() == np.searchsorted(values, grid, side=side).tolist()


def test_search_ascending_merges_in_c_and_hands_back_keys_out_of_order():
    from kerneltui.trace.scanner import _scan

    a = np.array([1, 3, 3, 7], np.int64)
    assert np.frombuffer(_scan.search_ascending(a, np.array([0, 3, 3, 8], np.int64), True), np.int64).tolist() == [0, 3, 3, 4]
    assert np.frombuffer(_scan.search_ascending(a, np.array([0, 3, 3, 8], np.int64), False), np.int64).tolist() == [0, 1, 1, 4]
    assert _scan.search_ascending(a, np.array([3, 2], np.int64), True) is None
    odd = np.frombuffer(bytes(1) + a.tobytes(), np.int64, count=4, offset=1)
    assert _scan.search_ascending(odd, a, True) is None  # not 8-byte aligned: numpy's to read
    with pytest.raises(ValueError):
        _scan.search_ascending(a, np.array([1, 2], np.int32), True)  # 8 bytes, but not one int64
    with pytest.raises(ValueError):
        _scan.search_ascending(a, np.array([1.0]), True)
