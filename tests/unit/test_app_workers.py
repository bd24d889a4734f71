"""An app's loading thread decodes with worker processes only when `open`/`diff` forked them first.

Textual runs threads and replaces stderr, so the workers must be forked from the main thread before
it starts (trace/pool.py); the thread then uses them and decodes exactly what one process does.
"""

from __future__ import annotations

import gzip
import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from kerneltui.trace import blocks, decode, pool
from kerneltui.trace.cache import start_workers_for
from kerneltui.trace.load import read_trace
from kerneltui.trace.model import load_trace
from tests.conftest import shared_trace


@pytest.fixture
def plain_gpt(tmp_path):
    path = tmp_path / "gpt_train_eager.json"
    path.write_bytes(gzip.decompress(shared_trace("gpt_train_eager").read_bytes()))
    return path


@pytest.fixture
def small_chunks(monkeypatch):
    """Workers for any size, chunks small enough that the 6 MB trace makes many; no executor yet."""
    monkeypatch.setattr(pool, "PARALLEL_FROM_BYTES", 0)
    monkeypatch.setattr(blocks, "BLOCK", 256 << 10)
    monkeypatch.setattr(decode, "SUB_CHUNK", 32 << 10)
    monkeypatch.setenv("KERNELTUI_WORKERS", "2")
    monkeypatch.setattr(pool, "_executor", None)
    calls = []
    submit_range = pool.ChunkPool.submit_range
    monkeypatch.setattr(pool.ChunkPool, "submit_range", lambda self, *a: calls.append(a) or submit_range(self, *a))
    yield calls
    if pool._executor is not None:
        pool._executor.shutdown()


def in_a_thread(path):
    out = {}
    thread = threading.Thread(target=lambda: out.update(raw=read_trace(path)[0]))
    thread.start()
    thread.join()
    return out["raw"]


def test_a_thread_without_started_workers_decodes_alone(plain_gpt, small_chunks):
    in_a_thread(plain_gpt)
    assert small_chunks == []


def test_workers_started_before_the_app_decode_its_loading_thread_s_trace_identically(plain_gpt, small_chunks,
                                                                                    monkeypatch):
    alone = in_a_thread(plain_gpt)
    assert start_workers_for([str(plain_gpt)], cache=False) is True
    parallel = in_a_thread(plain_gpt)
    assert len(small_chunks) > 4  # the loading thread sent its chunks to the workers
    for name in ("kind", "ts", "dur", "external_id", "correlation", "bytes", "shapes_len"):
        assert np.array_equal(alone.columns[name], parallel.columns[name]), name
    assert [alone.names[c] for c in alone.columns["name"]] == [parallel.names[c] for c in parallel.columns["name"]]


def test_no_workers_are_forked_for_a_cached_trace_or_a_small_one(plain_gpt, small_chunks, monkeypatch):
    monkeypatch.setenv("KERNELTUI_WORKERS", "0")
    load_trace(plain_gpt)  # writes the cache entry (the test's own cache directory)
    monkeypatch.setenv("KERNELTUI_WORKERS", "2")
    assert start_workers_for([str(plain_gpt)]) is False
    assert pool._executor is None
    monkeypatch.setattr(pool, "PARALLEL_FROM_BYTES", 96 << 20)
    assert start_workers_for([str(plain_gpt)], cache=False) is False  # 6 MB: one process is faster
    assert start_workers_for([str(plain_gpt) + ".missing"], cache=False) is False  # the load words that error
    assert pool._executor is None


def test_multiprocessing_is_not_imported_for_a_load_that_makes_no_worker():
    """With the C scanner no worker process is made: multiprocessing (~25 ms) is not imported before a read."""
    code = ("import sys; from kerneltui.trace.cache import load; from kerneltui.trace import pool; "
            "print(pool.worker_count(), 'multiprocessing' in sys.modules, 'concurrent.futures.process' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "KERNELTUI_WORKERS": ""}).stdout.split()
    if out[0] != "0":
        pytest.skip("no C scanner built here: worker processes are this machine's loader")
    assert out[1:] == ["False", "False"]


def test_a_process_that_used_workers_exits_without_a_traceback():
    """The pool, imported late, is let go before the interpreter clears modules: otherwise the executor's
    collection at exit printed 'Exception ignored in ... weakref_cb' (AttributeError in multiprocessing)."""
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/unit/test_load.py",
                          "-k", "worker_processes_decode_exactly"], capture_output=True, text=True, check=False,
                         cwd=Path(__file__).resolve().parents[2])
    assert run.returncode == 0, run.stdout[-2000:]
    assert "1 passed" in run.stdout
    assert "Exception ignored" not in run.stdout + run.stderr and "weakref_cb" not in run.stdout + run.stderr
