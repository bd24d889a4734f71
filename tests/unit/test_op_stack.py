"""OpStack.enclosing looks only at what starts within the longest interval before t: the same rows as a
test of every interval of the thread, including negative durations and times a difference would wrap."""

import numpy as np
import pytest

from kerneltui.trace.link import OpStack


@pytest.mark.parametrize("far", [0, -(2**62)], ids=["ordinary times", "one time near int64's end"])
def test_enclosing_is_every_interval_around_t(far):
    rng = np.random.default_rng(1)
    for _ in range(300):
        n = int(rng.integers(1, 40))
        starts = rng.integers(0, 100, n)
        ends = starts + rng.integers(-3, 30, n)  # some end before they start: they contain nothing
        starts[0] += far
        stack = OpStack(np.arange(n) + 5, starts, ends, np.zeros(n, np.int8))
        assert (stack.longest == -1) == (far != 0)
        for t in range(-5, 140, 3):
            inside = (stack.nesting.starts <= t) & (stack.nesting.ends >= t)
            assert stack.enclosing(t).tolist() == stack.rows[stack.nesting.order[inside]].tolist()


def test_a_long_interval_still_encloses():
    stack = OpStack(np.array([10, 11, 12]), np.array([0, 500, 900]), np.array([1000, 600, 950]), np.zeros(3, np.int8))
    assert stack.longest == 1000
    assert stack.enclosing(920).tolist() == [10, 12]
    assert stack.enclosing(1000).tolist() == [10]
