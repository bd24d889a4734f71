"""Timeline lanes from real traces: their order, the op icicle, copy-stream labels, id lookups."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from kerneltui.trace import load_trace
from kerneltui.trace.schema import Kind
from kerneltui.tui.lanes import (
    Lane,
    _copy_direction,
    filter_lanes,
    lanes_from_trace,
    op_id,
    op_row,
)
from tests.conftest import external_trace, shared_trace


@pytest.fixture(scope="module")
def gpt():
    return load_trace(shared_trace("gpt_train_eager"))


@pytest.fixture(scope="module")
def resnet():
    return load_trace(shared_trace("resnet18_train_eager"))


def depths_by_containment(trace, lane: int) -> tuple[np.ndarray, np.ndarray]:
    """(rows, depth) of the cpu_op and user_annotation events of one thread, depth = how many of
    them contain it (computed pairwise, independently of intervals.Nesting)."""
    ev = trace.events
    kinds, lanes = ev["kind"].to_numpy(), ev["lane"].to_numpy()
    rows = np.flatnonzero(np.isin(kinds, (Kind.CPU_OP, Kind.ANNOTATION)) & (lanes == lane))
    s = ev["ts"].to_numpy()[rows]
    e = s + ev["dur"].to_numpy()[rows]
    outer_s, outer_e = s[:, None], e[:, None]
    same = (outer_s == s) & (outer_e == e)
    index = np.arange(len(rows))
    contains = (outer_s <= s) & (e <= outer_e) & (s < outer_e) & ~same
    contains |= same & (index[:, None] < index)  # identical spans: the first one is the parent
    return rows, contains.sum(axis=0)


def test_lane_order_gpu_then_launch_threads_main_first_then_icicle(gpt, resnet):
    assert [(lane.key, lane.label, len(lane)) for lane in lanes_from_trace(gpt)] == [
        ("gpu:0:7", "GPU0 s7", 945),
        ("cpu:1", "CPU t416", 321),  # the main thread: autograd launches more (624) but comes after
        ("cpu:0", "CPU autograd", 624),
        ("op:1:0", "ops d0", 3), ("op:1:1", "ops d1", 273), ("op:1:2", "ops d2", 345),
        ("op:1:3", "ops d3", 456), ("op:1:4", "ops d4", 525), ("op:1:5", "ops d5", 108),
        ("op:1:6", "ops d6", 21),
    ]
    # two python3 threads: the one with more launches (368 against 362) leads
    # 8 wgrad kernels start up to 1.25 µs before the one they follow ends (PDL): a row of their own
    assert [(lane.key, lane.label, len(lane)) for lane in lanes_from_trace(resnet, op_depths=0)] == [
        ("gpu:0:7", "GPU0 s7", 722), ("gpu:0:7:1", "GPU0 s7 +1", 8), ("cpu:1", "CPU t904", 368),
        ("cpu:0", "CPU t935", 362),
    ]


@pytest.mark.parametrize("name", ["gpt", "resnet"])
def test_icicle_counts_per_depth_are_the_containment_depths(name, request):
    trace = request.getfixturevalue(name)
    lanes = lanes_from_trace(trace, op_depths=64)
    main = int(next(lane for lane in lanes if lane.key.startswith("cpu:")).key.split(":")[1])
    rows, depth = depths_by_containment(trace, main)
    icicle = {int(lane.key.split(":")[2]): lane for lane in lanes if lane.key.startswith("op:")}
    assert sorted(icicle) == list(range(int(depth.max()) + 1))
    for d, lane in icicle.items():
        assert lane.key == f"op:{main}:{d}" and lane.label == f"ops d{d}"
        assert sorted(op_row(lane.ids).tolist()) == sorted(rows[depth == d].tolist())
        assert np.all(np.diff(lane.starts) >= 0) and np.all(lane.ends[:-1] <= lane.starts[1:])  # a row: no overlaps
        assert lane.min_id < -1
    # depth 0: the ProfilerSteps and the top-level ops outside them, each labelled by its own name
    top = icicle[0]
    names = [top.label_of(i) for i in range(len(top))]
    assert names == [trace.name(int(trace.events["name"].iat[op_row(int(i))])) for i in top.ids]
    assert sum(n.startswith("ProfilerStep#") for n in names) == int(
        (trace.events["name"].map(lambda c: trace.name(c).startswith("ProfilerStep#"))[rows[depth == 0]]).sum()
    )
    assert any(n.startswith("ProfilerStep#") for n in names)
    # op_depths caps the depths
    capped = [lane for lane in lanes_from_trace(trace, op_depths=3) if lane.key.startswith("op:")]
    assert [len(lane) for lane in capped] == [int((depth == d).sum()) for d in range(3)]


def test_depth_zero_is_the_profiler_steps(gpt, resnet):
    for trace, steps in ((gpt, ["ProfilerStep#2", "ProfilerStep#3", "ProfilerStep#4"]),
                         (resnet, ["ProfilerStep#1", "ProfilerStep#2"])):
        top = next(lane for lane in lanes_from_trace(trace) if lane.key == "op:1:0")
        assert [top.label_of(i) for i in range(len(top))] == steps
    assert [len(lane) for lane in lanes_from_trace(resnet) if lane.key.startswith("op:")] == [2, 186, 184, 176, 322, 146, 36]


def test_op_ids_are_found_and_filtered_lanes_keep_them(gpt):
    lanes = lanes_from_trace(gpt)
    lane = next(lane for lane in lanes if lane.key == "op:1:2")
    for position in (0, 17, len(lane) - 1):
        assert lane.position_of(int(lane.ids[position])) == position
    assert lane.position_of(op_id(10**9)) == -1 and lane.position_of(5) == -1
    keep = np.zeros(len(gpt.gpu), bool)
    keep[:10] = True
    filtered = filter_lanes(lanes, keep)
    assert [len(x) for x in filtered if x.key.startswith("op:")] == [len(x) for x in lanes if x.key.startswith("op:")]
    assert sum(len(x) for x in filtered if x.key.startswith("gpu")) == 10


def test_position_of_unsorted_ids():
    ids = np.array([7, -5, 3, -2, 100, 0], np.int64)
    n = len(ids)
    lane = Lane("x", "x", np.arange(n) * 10, np.arange(n) * 10 + 5, ids, np.zeros(n, np.int8), np.zeros(n, np.int32))
    assert [lane.position_of(int(i)) for i in ids] == list(range(n))
    assert lane.position_of(4) == -1 and lane.position_of(-3) == -1
    marked = np.zeros(101, bool)
    marked[[3, 100]] = True
    assert lane.mask_of(marked).tolist() == [False, False, True, False, True, False]


def test_copy_streams_say_their_direction():
    trace = load_trace(external_trace("hta__trace_filter__sampled_rank-0.json.gz"))
    labels = [lane.label for lane in lanes_from_trace(trace) if lane.key.startswith("gpu")]
    assert labels == ["GPU0 s7", "GPU0 s23", "s25 H2D", "GPU0 s84", "GPU0 s203"]  # its copies name no host memory
    memcpy = np.full(3, Kind.MEMCPY, np.int8)
    assert _copy_direction(memcpy, np.array(["Memcpy DtoH (Device -> Pinned)"] * 3)) == "D2H pin"
    assert _copy_direction(memcpy, np.array(["Memcpy HtoD (Pageable -> Device)"] * 3)) == "H2D page"
    assert _copy_direction(memcpy, np.array(["Memcpy HtoD (Pageable -> Device)", "Memcpy HtoD (Pinned -> Device)"])) == "H2D"
    assert _copy_direction(memcpy, np.array(["Memcpy DtoD (Device -> Device)"] * 3)) == "D2D"
    assert _copy_direction(memcpy, np.array(["Memcpy HtoD (Pinned -> Device)", "Memcpy DtoH (Device -> Pinned)"])) == "copy"
    assert _copy_direction(np.array([Kind.MEMCPY, Kind.KERNEL], np.int8), np.array(["Memcpy HtoD", "k"])) == ""


def test_a_filtered_lane_equals_one_built_from_its_kept_intervals():
    """subset() inherits sortedness and bounds instead of re-checking them: it must still be the same lane."""
    trace = load_trace(shared_trace("gpt_train_eager"))
    keep = np.random.default_rng(0).random(len(trace.gpu)) < 0.5
    for lane in lanes_from_trace(trace):
        part = lane.subset(keep)
        at = np.flatnonzero(lane.kept(keep))
        built = Lane(lane.key, lane.label, lane.starts.take(at), lane.ends.take(at), lane.ids.take(at),
                     lane.kinds.take(at), lane.names.take(at), lane.labels, lane.full_labels)
        for name in ("starts", "ends", "ids", "kinds", "names", "_cum", "_sorted_ends"):
            assert np.array_equal(getattr(part, name), getattr(built, name)), (lane.key, name)
        assert part.min_id == built.min_id and part.longest >= built.longest
        assert [part.position_of(int(i)) for i in part.ids[:50]] == list(range(min(50, len(part))))


def test_big_lanes_are_cut_on_threads_into_the_same_lanes(monkeypatch):
    """filter_lanes cuts big lanes on threads at once: field for field what one thread cuts."""
    from kerneltui.tui import lanes as lanes_module

    trace = load_trace(shared_trace("gpt_train_eager"))
    lanes = lanes_from_trace(trace)
    keep = np.random.default_rng(1).random(len(trace.gpu)) < 0.3
    alone = filter_lanes(lanes, keep)
    cut_on = []
    real = lanes_module.Lane.subset
    monkeypatch.setattr(lanes_module.Lane, "subset", lambda self, k: cut_on.append(threading.current_thread().name) or real(self, k))
    monkeypatch.setattr(lanes_module, "PARALLEL_FROM", 0)  # this small trace counts as big
    threaded = filter_lanes(lanes, keep)
    assert len(cut_on) == len(lanes) and all(name.startswith("kerneltui-lanes") for name in cut_on)
    assert [lane.key for lane in threaded] == [lane.key for lane in alone]
    for a, b in zip(alone, threaded):
        for name in ("starts", "ends", "ids", "kinds", "names", "_cum", "_sorted_ends"):
            assert np.array_equal(getattr(a, name), getattr(b, name)), (a.key, name)
