"""LaneCuts: the timeline's lanes cut to a search's keep mask, at once when small or cut before, else on a thread."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from kerneltui.trace import load_trace
from kerneltui.tui import lane_cuts
from kerneltui.tui.lane_cuts import BACKGROUND_FROM, LaneCuts
from kerneltui.tui.lanes import filter_lanes, lanes_from_trace
from tests.conftest import shared_trace


@pytest.fixture(scope="module")
def gpt_lanes():
    trace = load_trace(shared_trace("gpt_train_eager"))
    return len(trace.gpu), lanes_from_trace(trace)


def fields(lanes) -> list[tuple]:
    return [(lane.key, lane.starts.tolist(), lane.ends.tolist(), lane.ids.tolist()) for lane in lanes]


def test_small_lanes_are_cut_at_once_and_no_mask_gives_them_whole(gpt_lanes):
    n, lanes = gpt_lanes
    assert sum(map(len, lanes)) < BACKGROUND_FROM  # a shipped trace's lanes are small
    cuts = LaneCuts(lanes)
    keep = np.random.default_rng(0).random(n) < 0.3
    made = cuts.ready(keep)
    assert fields(made) == fields(filter_lanes(lanes, keep))
    assert sum(len(lane) for lane in made if lane.key.startswith("gpu")) == int(keep.sum())
    assert cuts.ready(keep) is made  # cut once
    assert [id(lane) for lane in cuts.ready(None)] == [id(lane) for lane in lanes]


async def test_big_lanes_are_cut_on_a_thread_and_the_last_two_masks_kept(gpt_lanes, monkeypatch):
    n, lanes = gpt_lanes
    monkeypatch.setattr(lane_cuts, "BACKGROUND_FROM", 0)  # these lanes as if they were a million launches'
    threads = []
    real = lane_cuts.filter_lanes

    def recorded(lanes, keep):
        threads.append(threading.current_thread().name)
        return real(lanes, keep)

    monkeypatch.setattr(lane_cuts, "filter_lanes", recorded)
    cuts = LaneCuts(lanes)
    rng = np.random.default_rng(1)
    first, second, third = (rng.random(n) < share for share in (0.2, 0.5, 0.8))
    assert cuts.ready(first) is None and threads == []  # not cut before the repaint
    made = await cuts.cut(first)
    assert threads == ["kerneltui-lane-cut"]
    assert fields(made) == fields(real(lanes, first))
    assert cuts.ready(first) is made and await cuts.cut(first) is made and len(threads) == 1
    made_second, made_third = await cuts.cut(second), await cuts.cut(third)
    assert cuts.ready(second) is made_second and cuts.ready(third) is made_third
    assert cuts.ready(first) is None  # three masks: the oldest cut is let go
    assert cuts.ready(third.copy()) is None  # by the very mask: the query's cache hands the same one back
    assert len(threads) == 3
    codes = rng.integers(0, 5, n)  # the underline's group codes: gathered on the thread with the cut
    made = await cuts.cut(rng.random(n) < 0.5, codes)
    assert all(lane._index["codes"][0] is codes for lane in made if lane.key.startswith("gpu"))
    assert [lane.codes_of(codes).tolist() for lane in made if lane.key.startswith("gpu")] == [
        codes[lane.ids].tolist() for lane in made if lane.key.startswith("gpu")]


async def test_a_cut_that_fails_raises_where_it_is_awaited(gpt_lanes, monkeypatch):
    n, lanes = gpt_lanes
    monkeypatch.setattr(lane_cuts, "BACKGROUND_FROM", 0)

    def broken(lanes, keep):
        raise MemoryError("no room for the cut")

    monkeypatch.setattr(lane_cuts, "filter_lanes", broken)
    cuts = LaneCuts(lanes)
    keep = np.ones(n, bool)
    with pytest.raises(MemoryError, match="no room for the cut"):
        await cuts.cut(keep)
    assert cuts.ready(keep) is None  # nothing kept for it


def test_a_mask_that_keeps_nothing_is_cut_at_once_even_on_big_lanes(gpt_lanes, monkeypatch):
    n, lanes = gpt_lanes
    monkeypatch.setattr(lane_cuts, "BACKGROUND_FROM", 0)
    made = LaneCuts(lanes).ready(np.zeros(n, bool))
    assert made is not None and sum(len(lane) for lane in made if lane.key.startswith("gpu")) == 0
    assert LaneCuts(lanes).ready(np.ones(n, bool)) is None


async def test_a_cut_lane_takes_its_marks_group_codes_with_it(gpt_lanes, monkeypatch):
    """The codes the timeline underlines by are gathered with the cut (on its thread), not at the repaint."""
    n, lanes = gpt_lanes
    monkeypatch.setattr(lane_cuts, "BACKGROUND_FROM", 0)
    codes = np.random.default_rng(2).integers(0, 9, n)
    keep = np.random.default_rng(3).random(n) < 0.4
    gpu = next(lane for lane in lanes if lane.key.startswith("gpu"))
    whole = gpu.codes_of(codes)
    part = next(lane for lane in await LaneCuts(lanes).cut(keep, codes) if lane.key == gpu.key)
    carried = part._index["codes"]
    assert carried[0] is codes and carried[1].tolist() == codes[part.ids].tolist() == whole[keep[gpu.ids]].tolist()
    assert part.codes_of(codes) is carried[1]  # the repaint gathers nothing
    other = codes + 1
    assert part.codes_of(other).tolist() == other[part.ids].tolist()  # other codes: gathered afresh
