"""A cold load hands freed memory back as it joins its columns (trace/heap.py), output unchanged."""

from __future__ import annotations

from kerneltui.trace import heap, load
from tests.conftest import shared_trace
from tests.unit.test_decode_fast import same_raw

GPT = shared_trace("gpt_train_eager")


def test_a_large_load_gives_memory_back_every_four_columns_and_reads_the_same(monkeypatch):
    plain, _ = load.read_trace(GPT)
    calls = []
    real = heap.give_back
    monkeypatch.setattr(heap, "give_back", lambda: (calls.append(1), real()))
    monkeypatch.setattr(load, "_TRIM_FROM_EVENTS", 0)  # this trace counts as large
    trimmed, _ = load.read_trace(GPT)
    same_raw(trimmed, plain)
    assert len(calls) == len(load.EVENT_COLUMNS) // 4 + 1


def test_a_small_load_does_not(monkeypatch):
    calls = []
    monkeypatch.setattr(heap, "give_back", lambda: calls.append(1))
    raw, _ = load.read_trace(GPT)
    assert len(raw.columns["ts"]) < load._TRIM_FROM_EVENTS and calls == []


def test_give_back_is_safe_to_call_again():
    heap.give_back()
    heap.give_back()
    assert heap._trim is not None  # looked up once: glibc's malloc_trim here, False where there is none
