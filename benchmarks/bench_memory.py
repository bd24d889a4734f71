"""Peak memory of the browser's cold load: the trace read and every table the app computes, against the JSON's size.

A child process does what `kerneltui open` does behind the screen, without a terminal: a cold load
(cache off), the first stage (the kernel table: ``build_kernels``, the memory table made beside it),
the hand-back between the stages,
the second (timeline, launch list, search: ``build_browse``) and the third (the analyses:
``build_analyses``), with malloc set as the program sets it (``--malloc-defaults``: as glibc has it). The parent samples the child's
anonymous memory (``RssAnon``: what the load allocated; clean file pages do not count) every 10 ms
and prints its peak beside the JSON's bytes, with the peak of each stage.

    python benchmarks/bench_memory.py [--mb 1000] [--malloc-defaults] [PATH]

PATH defaults to benchmarks/data/replicated_<MB>mb.json (made as bench_load.py makes it). Linux only.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_load import DEFAULT_SOURCE, ensure  # noqa: E402

CHILD = """
import sys
from kerneltui.trace import heap
from kerneltui.trace.cache import start_workers_for
from kerneltui.trace.model import load_trace
from kerneltui.tui.model import build_analyses, build_browse, build_kernels, early_memory_table
if sys.argv[2:] != ["--malloc-defaults"]:
    heap.keep_freed_memory()  # as the kerneltui program does (cli.main)
start_workers_for([sys.argv[1]])  # as `open` does before its load: malloc's settings (trace/heap.py), workers if any
trace = load_trace(sys.argv[1])
print("loaded", flush=True)
memory = early_memory_table(trace)  # as tui/app.py's post_stages: beside the kernel table
kernels = build_kernels(trace)
print("kernel table", flush=True)
heap.give_back(len(trace.events))
browse = build_browse(kernels, memory)
print("browser", flush=True)
analyses = build_analyses(trace)
print("analyses", flush=True)
"""


def anonymous_bytes(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("RssAnon:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", nargs="?", type=Path)
    parser.add_argument("--mb", type=int, default=1000)
    parser.add_argument("--malloc-defaults", action="store_true",
                        help="leave malloc as a program importing kerneltui has it (the kerneltui program keeps "
                             "freed memory: trace/heap.keep_freed_memory)")
    args = parser.parse_args()
    path = args.path or ensure(DEFAULT_SOURCE, args.mb, gz=False)
    size = path.stat().st_size
    env = {**os.environ, "KERNELTUI_CACHE": "0", "KERNELTUI_MEMORY_CHECK": "0"}
    t0 = time.perf_counter()
    malloc = ["--malloc-defaults"] if args.malloc_defaults else []
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(path), *malloc], stdout=subprocess.PIPE, text=True, env=env)
    os.set_blocking(child.stdout.fileno(), False)
    stage, peaks = "load", {}
    while child.poll() is None:
        used = anonymous_bytes(child.pid)
        peaks[stage] = max(peaks.get(stage, 0), used)
        line = child.stdout.readline()
        if line:
            stage = {"loaded": "kernel table", "kernel table": "the browser", "browser": "the analyses"}.get(
                line.strip(), stage)
        time.sleep(0.01)
    if child.returncode:
        raise SystemExit(f"the child failed ({child.returncode})")
    print(f"{path.name}: {size / 1e9:.2f} GB of JSON, {time.perf_counter() - t0:.1f} s")
    for name, peak in peaks.items():
        print(f"  peak anonymous memory during {name:<16} {peak / 1e9:6.2f} GB ({peak / size:.2f}x the JSON)")
    top = max(peaks.values())
    print(f"  peak, whole run                            {top / 1e9:6.2f} GB ({top / size:.2f}x the JSON)")


if __name__ == "__main__":
    main()
