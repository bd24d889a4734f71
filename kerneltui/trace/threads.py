"""Thread pools kept for the process: made on first use, made again in a forked child (a fork copies
a pool but not its threads, so a submit there would wait forever); and work run on one daemon thread."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor

_pools: dict[str, ThreadPoolExecutor] = {}
_lock = threading.Lock()


def per_core() -> int:
    """One thread per core, up to 4."""
    return max(1, min(4, os.cpu_count() or 1))


def shared_pool(name: str) -> ThreadPoolExecutor:
    """The process's pool called ``name`` (its threads are named so), ``per_core()`` threads."""
    with _lock:
        pool = _pools.get(name)
        if pool is None:
            pool = _pools[name] = ThreadPoolExecutor(max_workers=per_core(), thread_name_prefix=name)
        return pool


def in_background(calls: Sequence[Callable], *args, name: str = "kerneltui-background") -> list[Future]:
    """Each ``call(*args)`` in turn on one daemon thread, as futures (a call's error is raised where its
    result is asked for). A daemon: a process that ends (an error on the caller's thread, ctrl+c) does not
    wait for them, as it would for a ThreadPoolExecutor's threads."""
    futures = [Future() for _ in calls]

    def run() -> None:
        for call, future in zip(calls, futures):
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(call(*args))
                except BaseException as exc:  # noqa: BLE001 - raised where the result is asked for
                    future.set_exception(exc)

    if calls:
        threading.Thread(target=run, name=name, daemon=True).start()
    return futures


def _forget_pools() -> None:
    global _lock
    _pools.clear()
    _lock = threading.Lock()


os.register_at_fork(after_in_child=_forget_pools)
