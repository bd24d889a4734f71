"""How instant kerneltui feels: issue 24's goals, each beside the baseline it is measured against, in one run.

Whole processes, interpreter start and imports included, median of ``--repeat`` runs (a cold open of the
large trace: of three; orjson.loads, tens of seconds: once). One cold run alone is not a figure on a
machine whose speed varies: a cold summary of 1 GB took 1.91-2.24 s in five runs in a row.

  baseline  `python -c pass`, and `orjson.loads` of the large trace's bytes (read and parse, whole process)
  small     `summary --format json` of the shipped example, cache warm (goal 0.25 s, checked at 0.30)
            `open` to its first table at 120x40, cache warm (goal 0.4 s, checked at 0.5; needs tmux):
            the first open keeps its first screen, later ones show it at once; the row after it
            is when the app itself answers a key (`?`), pressed as soon as the table is up
  large     `summary --format json`, cache warm (checked at 0.02 x orjson), cold plain (0.075 x) and
            cold gzipped (0.10 x); `open` to the first table, cache warm (0.5 s) and cold (2.0 s), and
            cold to everything (3.0 s: the timeline drawn, with the launch list and search, which come with it),
            and cold to its analyses (no goal: the header's busy time, with health, o and H, come after)

The large trace is benchmarks/data/replicated_<MB>mb.json (made by make_large_trace.py from a shipped
trace the first time, as bench_load.py makes it; git ignores benchmarks/data). Each row prints the
figure, the goal, and whether it holds. The caches live in a temporary XDG_CACHE_HOME.

    python benchmarks/bench_instant.py [--mb 1000] [--repeat 5] [--no-screen]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from bench_first_screen import first_screen  # noqa: E402
from bench_load import DEFAULT_SOURCE, ensure  # noqa: E402

SMALL = ROOT / "traces" / "add_relu_1M_eager.json.gz"
ORJSON = "import sys, orjson; orjson.loads(open(sys.argv[1], 'rb').read())"
COLD_OPENS = 3  # cold opens of the large trace (each ~4 s to its analyses): their medians


def seconds(argv: list[str], env: dict[str, str], repeat: int) -> float:
    """Median whole-process seconds of ``argv`` (stdout discarded)."""
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT, env=env, check=False)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def row(label: str, value: float, goal: str, holds: bool | None) -> None:
    verdict = "" if holds is None else ("holds" if holds else "MISSED")
    print(f"{label:<44} {value:>8.3f} s  {goal:<28} {verdict}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=1000, help="the large trace's size")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--no-screen", action="store_true", help="skip the `open` rows (they need tmux)")
    args = parser.parse_args()
    # kerneltui's modules compiled, as an installed package's are (pip compiles on install): from a
    # checkout, a process run with PYTHONDONTWRITEBYTECODE=1 (as on these machines) compiles every
    # module it imports again (0.3 s of a small trace's `summary --no-cache`), which no user of an install pays
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "kerneltui")], check=True)
    plain = ensure(DEFAULT_SOURCE, args.mb, gz=False)
    gzipped = ensure(DEFAULT_SOURCE, args.mb, gz=True)
    home = tempfile.mkdtemp(prefix="kerneltui-instant-")
    env = {**os.environ, "XDG_CACHE_HOME": home, "KERNELTUI_CACHE": "1"}
    cold = {**os.environ, "KERNELTUI_CACHE": "0"}
    py, kt = [sys.executable], [sys.executable, "-m", "kerneltui"]
    screens = not args.no_screen and shutil.which("tmux") is not None
    print(f"{'':<44} {'median':>10}  {'goal':<28}")
    try:
        base = seconds([*py, "-c", "pass"], env, args.repeat)
        row("baseline: python -c pass", base, "", None)
        parse = seconds([*py, "-c", ORJSON, str(plain)], env, 1)  # tens of seconds at 1 GB: once
        row(f"baseline: orjson.loads of {plain.name}", parse, "", None)

        small = [*kt, "summary", str(SMALL), "--format", "json"]
        seconds(small, env, 1)  # fills the caches
        value = seconds(small, env, args.repeat)
        row("small: summary --format json, warm", value, "0.25 s (checked <= 0.30)", value <= 0.30)
        value = seconds([*kt, "summary", str(SMALL), "--format", "json", "--no-cache"], env, args.repeat)
        row("small: summary --format json, no cache", value, "", None)
        if screens:
            warm = {"KERNELTUI_CACHE": "1", "XDG_CACHE_HOME": home}
            value = first_screen(SMALL, warm, entry_in=Path(home, "kerneltui"))  # keeps its first screen
            row("small: open to its first table, first time", value, "", None)
            live: list[float] = []
            value = statistics.median(first_screen(SMALL, warm, live=live) for _ in range(args.repeat))
            row("small: open to its first table, warm", value, "0.4 s (checked <= 0.5)", value <= 0.5)
            row("small: open to its first answered key, warm", statistics.median(live), "", None)

        large = [*kt, "summary", str(plain), "--format", "json"]
        value = seconds(large, cold, args.repeat)
        row(f"large: summary, cold ({value / parse:.3f} x orjson)", value, "<= 0.075 x orjson", value <= 0.075 * parse)
        value = seconds([*kt, "summary", str(gzipped), "--format", "json"], cold, args.repeat)
        row(f"large: summary gzipped, cold ({value / parse:.3f} x)", value, "<= 0.10 x orjson", value <= 0.10 * parse)
        seconds(large, env, 1)  # fills the caches
        value = seconds(large, env, args.repeat)
        row(f"large: summary, warm ({value / parse:.3f} x orjson)", value, "<= 0.02 x orjson", value <= 0.02 * parse)
        if screens:
            warm = {"KERNELTUI_CACHE": "1", "XDG_CACHE_HOME": home}
            value = first_screen(plain, warm, entry_in=Path(home, "kerneltui"))  # keeps its first screen
            row("large: open to its first table, cached columns", value, "", None)
            live = []
            value = statistics.median(first_screen(plain, warm, live=live) for _ in range(3))
            row("large: open to its first table, warm", value, "<= 0.5 s", value <= 0.5)
            row("large: open to its first answered key, warm", statistics.median(live), "", None)
            done: list[float] = []
            analysed: list[float] = []
            value = statistics.median(first_screen(plain, {"KERNELTUI_CACHE": "0"}, everything=done, analysed=analysed)
                                      for _ in range(COLD_OPENS))
            row("large: open to its first table, cold", value, "<= 2.0 s", value <= 2.0)
            value = statistics.median(done)
            row("large: open to everything (the timeline drawn), cold", value, "<= 3.0 s", value <= 3.0)
            row("large: open to its analyses (header figures, o, H), cold", statistics.median(analysed), "", None)
    finally:
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()
