"""Decode big traces on every core: chunks go to worker processes, results come back in order.

msgspec holds the GIL, so threads would not help. Only the main thread of a
process uses workers (the CLI's summary and capture); the apps load in a
worker thread of a Textual process and decode there. Workers are forked when
the process has one thread, and come from a forkserver otherwise. Small traces
stay in-process, where start-up would cost more than it saves.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ProcessPoolExecutor

from kerneltui.trace.decode import Partial, decode_alone, decode_range

PARALLEL_FROM_BYTES = 96 << 20  # below this (uncompressed) one process is faster
GZIP_RATIO_GUESS = 12  # Kineto JSON inflates about 15x; guess low
_executor: ProcessPoolExecutor | None = None


def worker_count() -> int:
    configured = os.environ.get("KERNELTUI_WORKERS")
    if configured is not None:
        return max(0, int(configured))
    return min(4, os.cpu_count() or 1)


def _shared_executor(workers: int) -> ProcessPoolExecutor:
    global _executor
    if _executor is None:
        if threading.active_count() == 1:
            # fork: instant, and the main module is not re-imported; all workers start now
            context = multiprocessing.get_context("fork")
        else:
            context = multiprocessing.get_context("forkserver")
            context.set_forkserver_preload(["kerneltui.trace.decode"])
        _executor = ProcessPoolExecutor(max_workers=workers, mp_context=context)
    return _executor


class ChunkPool:
    def __init__(self, executor: ProcessPoolExecutor, in_flight: int):
        self.executor = executor
        self.in_flight = in_flight
        self.pending: deque[Future] = deque()
        self.done: list[Partial] = []

    @classmethod
    def for_stream(cls, stream) -> ChunkPool | None:
        workers = worker_count()
        size = stream.file_bytes * (GZIP_RATIO_GUESS if stream.compressed else 1)
        if workers < 2 or size < PARALLEL_FROM_BYTES:
            return None
        if threading.current_thread() is not threading.main_thread():
            # An app's loading thread: its process may have replaced stderr (no fd for the
            # resource tracker) and holds other threads; decode in this thread instead.
            return None
        return cls(_shared_executor(workers), in_flight=2 * workers)

    def submit(self, array_json: bytes, separator: bytes | None = None) -> None:
        if len(self.pending) >= self.in_flight:  # bound memory: wait for the oldest
            self.done.append(self.pending.popleft().result())
        self.pending.append(self.executor.submit(decode_alone, array_json, separator))

    def submit_range(self, path: str, identity: tuple, offset: int, length: int, separator: bytes) -> None:
        """The chunk ``[`` + the file's ``length`` bytes at ``offset`` + ``]``, read by the worker."""
        if len(self.pending) >= self.in_flight:
            self.done.append(self.pending.popleft().result())
        self.pending.append(self.executor.submit(decode_range, path, identity, offset, length, separator))

    def results(self) -> Iterator[Partial]:
        yield from self.done
        self.done = []
        while self.pending:
            yield self.pending.popleft().result()

    def close(self) -> None:
        for future in self.pending:
            future.cancel()
        self.pending.clear()
