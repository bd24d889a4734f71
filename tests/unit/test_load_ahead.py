"""`open` reads the trace on a thread while Textual starts (commands/load_ahead.py)."""

from __future__ import annotations

import threading

import pytest

from kerneltui.commands.load_ahead import LoadAhead
from kerneltui.errors import TraceError
from kerneltui.trace.model import load_trace
from tests.conftest import shared_trace


def test_the_read_starts_at_once_and_its_trace_and_progress_reach_the_first_caller():
    started, release, calls = threading.Event(), threading.Event(), []

    def loader(path, progress=None):
        calls.append((path, threading.current_thread().name))
        progress(0.25)
        started.set()
        release.wait(10)
        progress(0.75)
        return f"trace of {path}"

    ahead = LoadAhead(loader, "t.json")
    assert started.wait(10)  # reading before anyone asked
    seen = []
    threading.Timer(0.05, release.set).start()
    assert ahead("t.json", progress=seen.append) == "trace of t.json"
    assert calls == [("t.json", "kerneltui-load-ahead")]
    assert seen == [0.25, 0.75]  # where the read was when asked, then as it went on
    assert ahead("t.json", progress=seen.append) == "trace of t.json"  # asked again: read again
    assert len(calls) == 2 and calls[1][1] == threading.current_thread().name


def test_a_read_that_fails_fails_for_the_caller():
    def loader(path, progress=None):
        raise TraceError(f"{path} is empty (0 bytes): not a trace")

    with pytest.raises(TraceError, match=r"^t\.json is empty \(0 bytes\): not a trace$"):
        LoadAhead(loader, "t.json")("t.json")


def test_the_trace_read_ahead_is_the_trace_the_app_would_read():
    path = shared_trace("gpt_train_eager")
    ahead = LoadAhead(lambda p, progress=None: load_trace(p, progress=progress, cache=False), str(path))
    trace = ahead(str(path))
    assert len(trace.gpu) == len(load_trace(path, cache=False).gpu) == 945
    assert ahead._result == ()  # nothing held here once the app has it
