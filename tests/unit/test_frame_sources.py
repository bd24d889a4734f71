"""frames.sources: every frame's source line and module path at once (pointer doubling), equal to
climbing each frame's parents one at a time (the oracle below, the loop it replaced)."""

import numpy as np
import pytest

from kerneltui.trace import load_trace
from kerneltui.trace.frames import (
    MAX_DEPTH,
    MODULE_FRAME,
    innermost_frames,
    is_user_frame,
    sources,
)
from kerneltui.trace.schema import Kind

WITH_STACK = ["tests/data/traces/gpt_train_eager.json.gz", "tests/data/traces/mlp_bf16_compiled.json.gz",
              "tests/data/external/tracelens__b200__eager_trace.json.gz",
              "tests/data/external/tracelens__inference__vllm_decode_full__graph_execution.json.gz",
              "tests/data/compile/graph_break_stack.json.gz"]


def climbed(trace, frame_rows):
    """(source, module) of each frame row by climbing its parents, MAX_DEPTH frames at most."""
    ev = trace.events
    python = np.flatnonzero(ev["kind"].to_numpy() == Kind.PYTHON)
    ids = ev["python_id"].to_numpy()[python]
    order = np.argsort(ids, kind="stable")
    by_id, rows = ids[order], python[order]
    parents = ev["python_parent"].to_numpy()
    out = []
    for row in frame_rows.tolist():
        chain = []
        while row >= 0 and len(chain) < MAX_DEPTH:
            chain.append(row)
            parent = int(parents[row])
            at = int(np.searchsorted(by_id, parent))
            row = int(rows[at]) if parent >= 0 and at < len(by_id) and by_id[at] == parent else -1
        source, module = "", ""
        for row in reversed(chain):
            name = trace.name(int(ev["name"].iat[row]))
            if is_user_frame(name):
                source = name
            if name.startswith(MODULE_FRAME):
                module = f"{module}/{name[len(MODULE_FRAME):]}" if module else name[len(MODULE_FRAME):]
        out.append((source, module))
    return out


@pytest.mark.parametrize("path", WITH_STACK, ids=lambda p: p.rsplit("/", 1)[-1])
def test_sources_equal_climbing_each_frame(path):
    trace = load_trace(path, cache=False)
    g = trace.gpu
    frames = innermost_frames(trace, g["launch_lane"].to_numpy(), g["launch_ts"].to_numpy())
    python = np.flatnonzero(trace.events["kind"].to_numpy() == Kind.PYTHON)
    for rows in (frames, python, np.array([-1, python[0], -1], np.int64)):
        got = sources(trace, rows)
        assert list(zip(got["source"], got["module"])) == climbed(trace, rows)
    assert (sources(trace, python)["source"] != "").any()


def test_gpt_kernels_sources_and_modules():
    got = load_trace("tests/data/traces/gpt_train_eager.json.gz", cache=False).gpu_sources
    modules = set(got["module"])
    assert {"TinyGPT_0/Block_0/Linear_0", "TinyGPT_0/Block_0/Sequential_0/GELU_0"} <= modules
    assert got["source"].str.contains(r"\.py\(\d+\): ").any()


def frame(ts, dur, pid, parent, name):
    return {"ph": "X", "cat": "python_function", "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur,
            "args": {"Python id": pid, "Python parent id": parent}}


def test_cycles_and_self_parents_end(tmp_path):
    """A hostile trace's parent ids may loop: each frame's stack is cut at MAX_DEPTH frames, as climbing is."""
    import json

    events = [frame(0, 100, 1, 2, "nn.Module: A_0"), frame(1, 90, 2, 1, "nn.Module: B_0"),
              frame(2, 80, 3, 3, "a.py(3): f"), frame(3, 70, 4, -1, "nn.Module: C_0")]
    path = tmp_path / "loop.json"
    path.write_text(json.dumps({"traceEvents": events}))
    trace = load_trace(str(path), cache=False)
    python = np.flatnonzero(trace.events["kind"].to_numpy() == Kind.PYTHON)
    got = sources(trace, python)
    assert list(zip(got["source"], got["module"])) == climbed(trace, python)
    assert got["module"].iloc[3] == "C_0" and got["source"].iloc[2] == "a.py(3): f"


@pytest.mark.parametrize("path", WITH_STACK[:3], ids=lambda p: p.rsplit("/", 1)[-1])
def test_a_few_frames_are_named_alone_and_the_same(path):
    """Asked for a few frames (as the memory table asks), only their stacks are named, nothing is kept for
    the trace, and the answer is the climb's."""
    from kerneltui.trace import frames

    trace = load_trace(path, cache=False)
    python = np.flatnonzero(trace.events["kind"].to_numpy() == Kind.PYTHON)
    few = np.concatenate([python[:: max(1, 3 * frames.FEW_FRAMES)], [-1]])
    got = sources(trace, few)
    assert frames._named_frames.built(trace) is None  # the few-frames path ran: nothing kept
    assert list(zip(got["source"], got["module"])) == climbed(trace, few)
    assert (got["source"] != "").any()


def test_split_by_keeps_each_parts_order_keys_ascending():
    from kerneltui.trace.intervals import split_by

    keys = np.array([7, -1, 3, 7, 3, 7, 70_000])  # a key range past 2**16 too (no radix sort then)
    parts = split_by(keys, np.array([10, 11, 12, 13, 14, 15, 16]))
    assert list(parts) == [-1, 3, 7, 70_000]
    assert {k: v.tolist() for k, v in parts.items()} == {-1: [11], 3: [12, 14], 7: [10, 13, 15], 70_000: [16]}
    small = split_by(np.array([2, 1, 2, 1], np.int16), np.arange(4))
    assert {k: v.tolist() for k, v in small.items()} == {1: [1, 3], 2: [0, 2]}
    # int64 thread lanes within 2**16 of each other: the radix sort's path, ties kept in input order
    lanes = split_by(np.array([9, 4, -3, 9, 4, 9], np.int64), np.array([0, 1, 2, 3, 4, 5]))
    assert {k: v.tolist() for k, v in lanes.items()} == {-3: [2], 4: [1, 4], 9: [0, 3, 5]}
    assert list(lanes) == [-3, 4, 9] and all(type(k) is int for k in lanes)
    assert split_by(np.array([], np.int64), np.array([], np.int64)) == {}
