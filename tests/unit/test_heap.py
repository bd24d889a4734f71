"""A cold load hands freed memory back as it joins its columns (trace/heap.py), output unchanged."""

from __future__ import annotations

from kerneltui.trace import heap, load
from tests.conftest import shared_trace
from tests.unit.test_decode_fast import same_raw

GPT = shared_trace("gpt_train_eager")


def test_a_large_load_gives_memory_back_every_four_columns_and_reads_the_same(monkeypatch):
    plain, _ = load.read_trace(GPT)
    calls = []
    monkeypatch.setattr(heap, "_trim", calls.append)  # malloc_trim(0), recorded
    monkeypatch.setattr(heap, "LARGE", 0)  # this trace counts as large
    trimmed, _ = load.read_trace(GPT)
    same_raw(trimmed, plain)
    assert len(calls) == len(load.EVENT_COLUMNS) // 4 + 1


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
    from kerneltui.tui.app import build_app
    from kerneltui.tui.messages import BrowseReady, KernelsReady
    from tests.tui.helpers import settle

    order = []
    monkeypatch.setattr(heap, "LARGE", 0)
    monkeypatch.setattr(heap, "_trim", lambda pad: order.append("give back"))
    app = build_app(str(GPT))

    def seen(message):
        if isinstance(message, (KernelsReady, BrowseReady)):
            order.append(type(message).__name__)

    async with app.run_test(message_hook=seen) as pilot:
        await settle(app, pilot)
    # the load's every four columns and once at its end, then once between the stages (before stage 2 exists)
    assert order.count("give back") == len(load.EVENT_COLUMNS) // 4 + 2 and order[-1] == "BrowseReady"
