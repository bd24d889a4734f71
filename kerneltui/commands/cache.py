"""`kerneltui cache`: where the column cache is, what it holds; `--clear` empties it."""

from __future__ import annotations

import argparse
import sys

HELP = "Show the column cache (its directory, entries, kept summaries and first screens, size); --clear empties it."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--clear", action="store_true", help="remove every cached entry")


def run(args: argparse.Namespace) -> int:
    from kerneltui.errors import UserError
    from kerneltui.terminal_text import printable
    from kerneltui.trace import cache
    from kerneltui.units import fmt_bytes

    directory = cache.cache_dir()
    if args.clear:
        try:
            count, size = cache.clear(directory)
        except cache.UnsafeDir as exc:  # not ours to sweep: another user's files, or a link to elsewhere
            raise UserError(f"cache not cleared: {exc}") from None
        print(printable(f"removed {_entries(count)} ({fmt_bytes(size)}) from {directory}"))
        return 0
    s = cache.stats(directory)
    state = "" if cache.enabled() else "  (off: KERNELTUI_CACHE=0)"
    print(printable(f"directory  {s.directory}{state}"))
    print(f"entries    {s.entries:,}")
    if s.reports:
        print(f"reports    {s.reports:,} (summaries kept whole: a summary asked again is answered from them)")
    if s.screens:
        print(f"screens    {s.screens:,} (first screens of `open`: shown at once when the trace is opened again)")
    print(f"size       {fmt_bytes(s.total_bytes)} of at most {fmt_bytes(s.max_bytes)} (KERNELTUI_CACHE_MAX)")
    sys.stdout.flush()
    refused = _refused(cache, directory)
    if refused:
        print(printable(f"kerneltui: cache not used: {refused}"), file=sys.stderr)
    return 0


def _refused(cache, directory) -> str | None:
    """Why loads pass the directory over, if they do."""
    try:
        cache.private_dir(directory)
    except cache.UnsafeDir as exc:
        return str(exc)
    except OSError:
        pass  # not a directory: loads pass it over silently, and so does this
    return None


def _entries(n: int) -> str:
    return f"{n:,} {'entry' if n == 1 else 'entries'}"
