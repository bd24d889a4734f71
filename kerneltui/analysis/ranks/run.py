"""Summarise every rank: in worker processes bounded by memory, or on a Dask cluster.

Only the per-rank summaries come back (a few numbers and the collective kernels), never the
traces, so the parent's memory does not grow with the job. Locally, as many ranks are loaded at
once as there are cores and as the memory available holds (a rank takes about three times its
JSON while it loads); each worker decodes its rank in one process (no nested decode pool).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool

from kerneltui.analysis.ranks.rank import RankSummary, failed_rank, summarize_rank_file
from kerneltui.errors import UserError
from kerneltui.trace import pool
from kerneltui.trace.blocks import size_and_compression
from kerneltui.trace.fits import available_memory

LOAD_PEAK_PER_BYTE = 3  # peak memory while one rank loads, per byte of its JSON (measured ~1.3-2.5)
DASK_INSTALL = "--scheduler needs Dask: pip install 'kerneltui[cluster]' (or pip install 'dask[distributed]')"


def summarize_ranks(files: list[str], cache: bool | None = None, scheduler: str | None = None,
                    progress: Callable[[int, int], None] | None = None) -> list[RankSummary]:
    return map_ranks(summarize_rank_file, files, cache, scheduler, progress)


def map_ranks(task: Callable, files: list[str], cache: bool | None = None, scheduler: str | None = None,
              progress: Callable[[int, int], None] | None = None, missing: Callable = failed_rank) -> list:
    """``task(path, cache)`` for every file, in file order: here, in worker processes or on Dask.

    ``task`` and ``missing(path, why)`` (what a Dask worker that cannot see the file returns) must be
    module-level functions (or partials of them): they travel to the workers by pickle."""
    if scheduler:
        return _on_dask(task, files, cache, scheduler, missing)
    workers = local_workers(files)
    if workers <= 1 or len(files) == 1:
        out = []
        for i, f in enumerate(files):
            out.append(task(f, cache))
            if progress:
                progress(i + 1, len(files))
        return out
    import multiprocessing

    context = multiprocessing.get_context("forkserver" if _threads() > 1 else "fork")
    with ProcessPoolExecutor(max_workers=workers, mp_context=context, initializer=_one_process_decode) as pool:
        futures = {pool.submit(task, f, cache): i for i, f in enumerate(files)}
        out: list = [None] * len(files)
        for done, future in enumerate(as_completed(futures), 1):  # progress as ranks finish, not in file order
            try:
                out[futures[future]] = future.result()
            except BrokenProcessPool:
                raise UserError(f"a worker reading {files[futures[future]]} died (out of memory?): "
                                "KERNELTUI_RANK_WORKERS=1 loads one rank at a time") from None
            if progress:
                progress(done, len(files))
        return out


def local_workers(files: list[str]) -> int:
    """Cores, capped so that the largest ranks loading at once fit in the memory available."""
    configured = os.environ.get("KERNELTUI_RANK_WORKERS")
    if configured is not None:
        return max(1, int(configured))
    cores = os.cpu_count() or 1
    largest = max((_json_bytes(f) for f in files), default=0)
    available = available_memory()
    if not largest or available is None:
        return min(cores, len(files))
    fit = int(0.8 * available // (LOAD_PEAK_PER_BYTE * largest))
    return max(1, min(cores, len(files), fit))


def _json_bytes(path: str) -> int:
    try:
        return pool.json_bytes(*size_and_compression(path))
    except OSError:
        return 0


def _threads() -> int:
    import threading

    return threading.active_count()


def _one_process_decode() -> None:
    os.environ["KERNELTUI_WORKERS"] = "0"  # the ranks are the parallelism: no decode pool inside each


def _on_dask(task: Callable, files: list[str], cache: bool | None, scheduler: str, missing: Callable) -> list:
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise UserError(DASK_INSTALL) from None
    cluster = None
    try:
        if scheduler == "local":
            cluster = LocalCluster(n_workers=local_workers(files), threads_per_worker=1, processes=True,
                                   dashboard_address=None)
            client = Client(cluster)
        else:
            client = Client(scheduler, timeout="10s")
    except Exception as exc:  # noqa: BLE001 - a bad address, no scheduler there, or something else answering
        why = str(exc).strip().splitlines()[0][:160] if str(exc).strip() else type(exc).__name__
        raise UserError(f"--scheduler {scheduler}: cannot reach the Dask scheduler ({why})") from None
    try:
        # each worker opens the rank files itself: they must be on a file system it can reach
        futures = client.map(_dask_task, files, task=task, cache=cache, missing=missing, pure=False)
        return client.gather(futures)
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


def _dask_task(path: str, task: Callable, cache: bool | None, missing: Callable):
    _one_process_decode()
    if not os.path.exists(path):
        return missing(path, f"{path}: not found on the Dask worker (its file system must hold the traces)")
    return task(path, cache)


def start_rank_workers(paths: list[str], cache: bool | None = None) -> None:
    """From the main thread, before an app starts threads: the resource tracker that the rank
    workers' pool needs (started from a Textual thread it fails: Textual's stderr has no file
    descriptor to hand on), and a forkserver that has imported the summariser (each worker starts
    warm); with the cache off, the decode workers that opening a big rank will use (as `open FILE`)."""
    if threading.current_thread() is not threading.main_thread():
        return
    import multiprocessing
    from multiprocessing import forkserver, resource_tracker

    from kerneltui.analysis.ranks.discover import rank_files
    from kerneltui.trace.cache import enabled as cache_enabled
    from kerneltui.trace.cache import start_workers_for

    try:
        files = rank_files(paths)
    except UserError:
        return  # the command shows it
    if not cache_enabled(cache):
        start_workers_for(files, cache)  # first: they fork while the process has one thread
    if local_workers(files) <= 1 or len(files) <= 1:
        return  # summarised in the app's thread: no process to start
    resource_tracker.ensure_running()
    multiprocessing.get_context("forkserver").set_forkserver_preload(["kerneltui.analysis.ranks.rank"])
    forkserver.ensure_running()
