"""Decode big traces on every core: chunks go to worker processes, results come back in order.

Used only where the C scanner is not built, or where KERNELTUI_WORKERS asks for workers: with
the scanner, threads in one process (ahead.py) are faster, as no columns come back through pipes.
msgspec holds the GIL, so threads would not help. The CLI's summary and
capture decode from their main thread. The apps load in a thread of a Textual
process, which has replaced stderr and runs other threads: they call
``start_workers`` from the main thread before Textual starts, so the workers
are forked while the process is still single-threaded, and their loading
thread then uses them. Workers are forked when the process has one thread, and
come from a forkserver otherwise. Small traces stay in-process, where start-up
would cost more than it saves.
"""

from __future__ import annotations

import atexit
import os
import threading
from collections import deque
from collections.abc import Iterator
from typing import TYPE_CHECKING

from kerneltui.errors import TraceError
from kerneltui.trace.blocks import GZIP_RATIO_GUESS
from kerneltui.trace.scanner import scanner_in_use
from kerneltui.trace.worker import Partial, decode_alone, decode_range

if TYPE_CHECKING:
    from concurrent.futures import Future, ProcessPoolExecutor

PARALLEL_FROM_BYTES = 96 << 20  # below this (uncompressed) one process is faster
_executor: ProcessPoolExecutor | None = None


def worker_count() -> int:
    """KERNELTUI_WORKERS if set; else none where the C scanner decodes (one process is faster:
    on 2 cores a 1 GB trace loads in 2.7 s alone, 2.9-3.2 s with workers, whose columns must come
    back through pipes), else one per core, up to 4."""
    configured = configured_workers()
    if configured is not None:
        return configured
    if scanner_in_use():
        return 0
    return min(4, os.cpu_count() or 1)


def configured_workers() -> int | None:
    """KERNELTUI_WORKERS as a count (0: decode in one thread), None when unset or empty."""
    configured = os.environ.get("KERNELTUI_WORKERS", "").strip()
    if not configured:
        return None
    try:
        return max(0, int(configured))
    except ValueError:
        raise TraceError(f"KERNELTUI_WORKERS must be a whole number, not {configured!r}") from None


def json_bytes(file_bytes: int, compressed: bool) -> int:
    """About how much JSON a file of this size holds (gzip: inflated, guessed low)."""
    return file_bytes * (GZIP_RATIO_GUESS if compressed else 1)


def wants_workers(file_bytes: int, compressed: bool) -> bool:
    """Whether a file this size is decoded faster by worker processes than in one."""
    return worker_count() >= 2 and json_bytes(file_bytes, compressed) >= PARALLEL_FROM_BYTES


def start_workers(file_sizes: list[tuple[int, bool]]) -> bool:
    """From the main thread, before an app starts threads: fork the workers now when a
    file of ``(bytes, compressed)`` needs them, so the app's loading thread can use them."""
    if threading.current_thread() is not threading.main_thread():
        return False
    if not any(wants_workers(size, compressed) for size, compressed in file_sizes):
        return False
    executor = _shared_executor(worker_count())
    executor.submit(os.getpid).result()  # the first submit forks every worker (fork context)
    return True


def _shared_executor(workers: int) -> ProcessPoolExecutor:
    # imported here: with the C scanner no worker is made, and these imports were ~25 ms before a read
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    global _executor
    if _executor is None:
        if threading.active_count() == 1:
            # fork: instant, and the main module is not re-imported; all workers start now
            context = multiprocessing.get_context("fork")
        else:
            context = multiprocessing.get_context("forkserver")
            context.set_forkserver_preload(["kerneltui.trace.worker"])
        _executor = ProcessPoolExecutor(max_workers=workers, mp_context=context)
        # let go of it before the interpreter clears modules: imported late, concurrent.futures.process
        # is cleared before this one, and the executor's collection then failed in its weakref callback
        atexit.register(_let_go)
    return _executor


def _let_go() -> None:
    global _executor
    executor, _executor = _executor, None
    if executor is not None:
        executor.shutdown(wait=True, cancel_futures=True)


class ChunkPool:
    def __init__(self, executor: ProcessPoolExecutor, in_flight: int):
        self.executor = executor
        self.in_flight = in_flight
        self.pending: deque[Future] = deque()
        self.done: list[Partial] = []

    @classmethod
    def for_stream(cls, stream) -> ChunkPool | None:
        workers = worker_count()
        if not wants_workers(stream.file_bytes, stream.compressed):
            return None
        if threading.current_thread() is not threading.main_thread() and _executor is None:
            # A thread of an app that did not start_workers: its process may have replaced
            # stderr (no fd for the resource tracker) and holds other threads; decode here.
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
