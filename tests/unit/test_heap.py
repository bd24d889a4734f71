"""A cold load hands freed memory back once its columns are joined (trace/heap.py), output unchanged."""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kerneltui.trace import heap, load
from tests.conftest import shared_trace
from tests.unit.test_decode_fast import same_raw

GPT = shared_trace("gpt_train_eager")
ROOT = Path(__file__).resolve().parents[2]


def test_a_large_load_gives_memory_back_at_its_end_and_reads_the_same(monkeypatch):
    plain, _ = load.read_trace(GPT)
    calls = []
    monkeypatch.setattr(heap, "_trim", calls.append)  # malloc_trim(0), recorded
    monkeypatch.setattr(heap, "LARGE", 0)  # this trace counts as large
    trimmed, _ = load.read_trace(GPT)
    same_raw(trimmed, plain)
    assert len(calls) == 1


def test_a_small_load_does_not(monkeypatch):
    calls = []
    monkeypatch.setattr(heap, "_trim", calls.append)
    raw, _ = load.read_trace(GPT)
    assert len(raw.columns["ts"]) < heap.LARGE and calls == []


def test_give_back_is_safe_to_call_again():
    heap.give_back(heap.LARGE)
    heap.give_back(heap.LARGE)
    assert heap._trim is not None  # looked up once: glibc's malloc_trim here, False where there is none


async def test_the_browser_gives_memory_back_between_its_two_stages(monkeypatch):
    """Noted where each stage is built (in the load's worker, in order), not where the app reads its
    messages; the memory table is left to stage 2 here (its own hand-back: the next test)."""
    from kerneltui.tui import app as app_module
    from kerneltui.tui.app import build_app
    from tests.tui.helpers import settle

    order = []
    monkeypatch.setattr(heap, "LARGE", 0)
    monkeypatch.setattr(heap, "_trim", lambda pad: order.append("give back"))
    monkeypatch.setattr(app_module, "early_memory_table", lambda trace: None)
    for stage in ("build_kernels", "build_browse"):
        real = getattr(app_module, stage)

        def noted(*args, real=real, stage=stage):
            order.append(stage)
            return real(*args)

        monkeypatch.setattr(app_module, stage, noted)
    app = build_app(str(GPT))
    async with app.run_test() as pilot:
        await settle(app, pilot)
    # once at the load's end, then once between the stages (before stage 2 exists)
    assert order == ["give back", "build_kernels", "give back", "build_browse"]


def test_the_memory_table_made_beside_stage_1_gives_its_memory_back_on_its_thread(monkeypatch):
    import threading

    from kerneltui.trace.model import load_trace
    from kerneltui.tui.model import early_memory_table

    trace = load_trace(GPT, cache=False)
    given = []
    monkeypatch.setattr(heap, "LARGE", 0)
    monkeypatch.setattr(heap, "_trim", lambda pad: given.append(threading.current_thread().name))
    table = early_memory_table(trace).result(timeout=60)
    assert table is not None and table.devices and given == ["kerneltui-memory"]


def test_arrow_allocates_with_the_system_malloc_that_give_back_trims():
    import pyarrow

    import kerneltui.trace.model  # noqa: F401 - puts Arrow on the system allocator when imported

    assert pyarrow.default_memory_pool().backend_name == "system"


def test_the_op_stacks_keep_their_positions_as_int32_and_answer_as_before():
    """The browser keeps every thread's op stack: its positions are int32 (half the memory at 5 GB),
    and what it answers is the same as a stack of int64 positions answers, in int64."""
    import numpy as np

    from kerneltui.trace.intervals import Nesting
    from kerneltui.trace.model import load_trace
    from kerneltui.trace.schema import Kind

    trace = load_trace(GPT)
    ev = trace.events
    checked = 0
    for lane in trace.cpu_lanes():
        stack = trace.op_stack(lane)
        if stack is None:
            continue
        assert stack.rows.dtype == stack.op_rows.dtype == np.int32
        for nesting in (stack.nesting, stack.op_nesting):
            assert nesting.order.dtype == nesting.depth.dtype == np.int32
            assert all(part.dtype == np.int32 for part in nesting.by_depth.values())
        # the same stack from int64 rows: its answers, cast
        rows = stack.rows.astype(np.int64)
        ts = ev["ts"].to_numpy()[rows]
        ops = ev["kind"].to_numpy()[rows] == Kind.CPU_OP
        wide = Nesting(ts[ops], ts[ops] + ev["dur"].to_numpy()[rows][ops])
        t = np.sort(np.random.default_rng(lane).choice(ts, size=min(500, len(ts))))
        found = wide.innermost(t)
        expected = np.where(found >= 0, rows[ops][np.clip(found, 0, None)], -1)
        assert stack.innermost_op(t).dtype == np.int64
        assert np.array_equal(stack.innermost_op(t), expected)
        assert np.array_equal(stack.top_level_ops(), np.sort(rows[ops][wide.top_level()]))
        checked += 1
    assert checked >= 2  # the main thread and autograd's


HEAP_PROBE = """
import ctypes, sys
from kerneltui.trace import heap

class Mallinfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
                                                     "fsmblks", "uordblks", "fordblks", "keepcost")]

libc = ctypes.CDLL(None)
libc.mallinfo2.restype, libc.malloc.restype = Mallinfo2, ctypes.c_void_p
libc.malloc.argtypes, libc.free.argtypes = [ctypes.c_size_t], [ctypes.c_void_p]
kept = heap.keep_in_heap() if sys.argv[1] == "keep" else None
MB = 1 << 20
before = libc.mallinfo2()
block = libc.malloc(20 * MB)
mapped = round((libc.mallinfo2().hblkhd - before.hblkhd) / MB)  # MB in blocks mmapped apart from the heap
libc.free(block)
# the heap's free bytes as a whole, not what they grew by: that is 20 MB and the top pad (128 KB) less
# whatever lay free at the heap's top already (a little under 20 MB on CI), while a freed 20 MB block
# kept in the heap makes at least 20 MB free there whatever lay free before
held = libc.mallinfo2().fordblks >= 20 * MB
heap.give_back(heap.LARGE)  # malloc_trim(0): what the loader and the browser call
print(kept, mapped, held, libc.mallinfo2().fordblks >= 20 * MB)
"""


@pytest.mark.skipif(not hasattr(ctypes.CDLL(None), "mallinfo2"), reason="glibc's malloc only (2.33 on)")
def test_kept_in_the_heap_freed_memory_stays_where_glibc_would_map_it_and_hand_it_back():
    """Each in a fresh interpreter (no numpy there to have raised glibc's thresholds): a 20 MB block is
    mmapped by default and unmapped when freed; once kept, it comes from the heap and stays there, free."""
    # glibc as it is by default: no tunables, no other allocator preloaded
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("MALLOC_") and k not in ("GLIBC_TUNABLES", "LD_PRELOAD")}

    def probe(mode: str) -> str:
        done = subprocess.run([sys.executable, "-c", HEAP_PROBE, mode], capture_output=True, text=True,
                              cwd=ROOT, env=env, timeout=60, check=True)
        return done.stdout.strip()

    # (MB mmapped for the block, 20 MB or more free in the heap after it, and after give_back)
    assert probe("default") == "None 20 False False"
    assert probe("keep") == "True 0 True False"  # kept until give_back trims it


@pytest.mark.parametrize(("asked", "sizes", "kept"), [(True, [heap.LARGE_FILE], 1), (True, [1, heap.LARGE_FILE], 1),
                                                     (True, [heap.LARGE_FILE - 1], 0), (False, [heap.LARGE_FILE], 0)])
def test_the_program_keeps_freed_memory_from_its_first_large_load_on(monkeypatch, tmp_path, asked, sizes, kept):
    """keep_freed_memory (the program's wish, cli.main) acts where the commands start their loads
    (start_workers_for, on the main thread) when a file is of LARGE_FILE bytes or more, once; smaller files,
    or a program that did not ask, leave malloc as it is."""
    from kerneltui.trace import cache

    calls = []
    monkeypatch.setattr(heap, "keep_in_heap", lambda: calls.append(True))
    monkeypatch.setattr(heap, "_wanted", False)
    paths = []
    for i, size in enumerate(sizes):
        paths.append(tmp_path / f"trace{i}.json")
        with open(paths[-1], "wb") as f:
            f.truncate(size)  # (sparse: no bytes written)
    if asked:
        heap.keep_freed_memory()
    cache.start_workers_for([str(tmp_path / "missing.json"), *map(str, paths)], cache=False)
    cache.start_workers_for(list(map(str, paths)), cache=False)
    assert len(calls) == kept
