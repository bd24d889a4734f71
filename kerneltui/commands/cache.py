"""`kerneltui cache`: where the column cache is, what it holds; `--clear` empties it."""

from __future__ import annotations

import argparse
import sys

HELP = "Show the column cache (its directory, entries and size); --clear empties it."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--clear", action="store_true", help="remove every cached entry")


def run(args: argparse.Namespace) -> int:
    from kerneltui.terminal_text import printable
    from kerneltui.trace import cache
    from kerneltui.units import fmt_bytes

    directory = cache.cache_dir()
    if args.clear:
        count, size = cache.clear(directory)
        print(printable(f"removed {_entries(count)} ({fmt_bytes(size)}) from {directory}"))
        return 0
    s = cache.stats(directory)
    state = "" if cache.enabled() else "  (off: KERNELTUI_CACHE=0)"
    print(printable(f"directory  {s.directory}{state}"))
    print(f"entries    {s.entries:,}")
    print(f"size       {fmt_bytes(s.total_bytes)} of at most {fmt_bytes(s.max_bytes)} (KERNELTUI_CACHE_MAX)")
    sys.stdout.flush()
    return 0


def _entries(n: int) -> str:
    return f"{n:,} {'entry' if n == 1 else 'entries'}"
