"""Build and query times of the explorer's data layer (kerneltui/analysis/explore) on a big trace.

    python benchmarks/bench_explore.py [--kernels 1000000] [--repeat 20]

Generates (once, into benchmarks/data/, which git ignores) the trace of bench_tui.py, loads
it, builds the launch context, the search, the group index, its per-class sums and the range
index once (timed),
then times the per-keystroke queries: match() of three patterns, group_stats() per grouping
with a filter mask and the same table from per-class sums (stats_of_classes, what the browser
uses where a grouping allows), range_totals() of a 1% and a 50% window. Prints median and p90 ms.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.bench_tui import generate
from kerneltui.analysis.explore import (
    available_groupings,
    group_index,
    group_stats,
    launch_context,
    launch_search,
    match_totals,
    range_index,
    range_totals,
)
from kerneltui.trace.model import load_trace


def timed(fn, repeat: int) -> tuple[float, float]:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1e3)
    times.sort()
    return statistics.median(times), times[min(len(times) - 1, round(0.9 * (len(times) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernels", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    path = ROOT / "benchmarks" / "data" / f"tui_{args.kernels}.json"
    if not path.exists():
        print(f"generating {path} ...", flush=True)
        generate(path, args.kernels)
    t = time.perf_counter()
    trace = load_trace(path)
    g = trace.gpu
    for lane in trace.cpu_lanes():
        trace.op_stack(lane)  # the browser's worker builds these anyway (model.build_browse)
    print(f"{path.name}: {len(g):,} GPU launches, loaded in {time.perf_counter() - t:.1f} s")

    builds = []
    t = time.perf_counter()
    context = launch_context(trace)
    builds.append(("launch_context", time.perf_counter() - t))
    t = time.perf_counter()
    search = launch_search(trace, context)
    builds.append(("launch_search", time.perf_counter() - t))
    t = time.perf_counter()
    group_index(trace, context)
    builds.append(("group_index (all groupings)", time.perf_counter() - t))
    t = time.perf_counter()
    index = group_index(trace, context)
    sums = {by: index.class_sums(by, search.combo_code) for by in available_groupings(trace, context)}
    builds.append(("class_sums (all groupings)", time.perf_counter() - t))
    t = time.perf_counter()
    range_index(trace)
    builds.append(("range_index", time.perf_counter() - t))
    print(f"\n{'build':<40} {'s':>8}")
    for name, seconds in builds:
        print(f"{name:<40} {seconds:8.3f}")
    print(f"{'total':<40} {sum(s for _, s in builds):8.3f}")
    print(f"({len(context.stacks)} stacks, {len(search.combo_key)} distinct kernel/stack/source/module/step combinations;"
          f" per-class sums for {', '.join(by for by, made in sums.items() if made is not None) or 'no grouping'})")

    queries = []
    for pattern in ("aten::mm", "vector", "/nvjet.*"):
        queries.append((f"match({pattern!r})", lambda p=pattern: search.match(p)))
    mask = search.match("vector")
    queries.append(("match_totals(match('vector'))", lambda: match_totals(trace, mask)))
    for by in available_groupings(trace, context):
        queries.append((f"group_stats({by!r}, filter 'vector')", lambda b=by: group_stats(trace, context, b, mask)))
    queries.append(("group_stats('kernel', all)", lambda: group_stats(trace, context, "kernel")))
    hits = search.combination_hits("vector")  # what a search's table is summed from where a grouping allows
    for by, made in sums.items():
        if made is not None:
            queries.append((f"stats_of_classes({by!r}, filter 'vector')",
                            lambda b=by: index.stats_of_classes(b, search.combo_code, hits)))
    start, end = trace.window
    span = end - start
    mid = start + span // 2
    for share in (0.01, 0.5):
        a, b = mid - int(span * share / 2), mid + int(span * share / 2)
        queries.append((f"range_totals({share:.0%} window)", lambda a=a, b=b: range_totals(trace, a, b)))
        queries.append((f"range_totals({share:.0%} window, filter)", lambda a=a, b=b: range_totals(trace, a, b, mask)))
    print(f"\n{'query':<44} {'median ms':>10} {'p90 ms':>8}")
    for name, fn in queries:
        median, p90 = timed(fn, args.repeat)
        print(f"{name:<44} {median:10.2f} {p90:8.2f}")
    print(f"\n('vector' keeps {int(np.count_nonzero(mask)):,} launches)")


if __name__ == "__main__":
    main()
