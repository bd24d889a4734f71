"""`kerneltui open TRACE` (or `kerneltui TRACE`): the trace browser in the terminal.

`kerneltui open DIR` (or several rank files): one job, a row and a timeline lane per rank (tui/ranks).
Without a terminal on stdin and stdout, the `summary` report instead (commands/terminal.py).
"""

from __future__ import annotations

import argparse
import functools
import sys

from kerneltui.commands.terminal import check_trace_path, interactive

HELP = ("Browse a trace: kernels, every launch, details and a timeline, all by keyboard "
        "(without a terminal: the summary report).")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("trace", nargs="+",
                        help="a torch.profiler trace (.json or .json.gz); a directory or several files: one job's ranks")
    parser.add_argument("--no-cache", action="store_true", help="read the trace afresh: neither use nor write the column cache")

# How long a thread holding the GIL runs before it is asked to let a waiting one have it (Python's
# default: 5 ms). The loader's thread, which cuts the chunks the scanner's threads read without the GIL,
# waits on imports and Textual's start; handed the GIL sooner, it keeps both cores busy: a cold 1 GB
# `open` shows its first table 1.98 -> 1.94 s (this alone, medians of five alternating runs), and
# steadier. It stays for the session (once loaded, the app's keys have no thread to wait on). Here only:
# a cold `summary` was no faster with it (2.04 and 2.02 s, eight runs each)
SWITCH_INTERVAL_S = 0.001


def run(args: argparse.Namespace) -> int:
    from kerneltui.analysis.ranks.discover import is_job

    if not interactive():
        return _report(args)
    if is_job(args.trace):
        return run_job(args)
    check_trace_path(args.trace[0])  # a missing file is one line, not a screen that shows it
    interval = sys.getswitchinterval()
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    try:
        return _run_trace(args)
    finally:
        sys.setswitchinterval(interval)  # run() called from a program leaves its interpreter as it was


def _run_trace(args: argparse.Namespace) -> int:
    kept, put_back = _kept_screen(args)  # on screen now, before the imports below
    try:
        from kerneltui.commands.load_ahead import LoadAhead, load_trace
        from kerneltui.trace.cache import start_workers_for

        path = args.trace[0]
        start_workers_for([path], cache=False if args.no_cache else None)  # before any thread
        # write_later: a new cache entry is written after the first screen, not before it; the read
        # starts now, while Textual is imported and started
        loader = LoadAhead(functools.partial(load_trace, cache=False if args.no_cache else None, write_later=True), path)
        from kerneltui.tui.app import build_app  # textual loads only for this command

        app = build_app(path, loader, kept=kept)
    except BaseException:
        put_back(True)  # ctrl+c or an error before Textual took the terminal: ours to put back
        raise
    return _run_app(app, put_back)


def _report(args: argparse.Namespace) -> int:
    """What `kerneltui summary` prints (table), with its exit status: the screen cannot start here."""
    from kerneltui.commands import summary

    report = argparse.Namespace(trace=args.trace, no_cache=args.no_cache, format="table", scheduler=None, top=None,
                                filter=None, launches=False, by="kernel", full_names=False, health=False)
    return summary.run(report)


def run_job(args: argparse.Namespace) -> int:
    from kerneltui.tui.ranks.app import build_ranks_app

    # build_ranks_app starts what the rank workers need from this (main) thread, before Textual's
    return _run_app(build_ranks_app(args.trace, cache=False if args.no_cache else None))


def _kept_screen(args: argparse.Namespace):
    """(what the app keeps or shows of its first screen, the undo of showing it): commands/kept_screen.py."""
    from kerneltui.commands import kept_screen

    size = kept_screen.terminal_size()
    where = kept_screen.kept_for(args.trace[0], size, no_cache=args.no_cache)
    lines = kept_screen.read(where) if where is not None else None
    put_back = kept_screen.show(lines) if lines is not None else None
    if put_back is None:
        return kept_screen.FirstScreen(where, None, size), lambda leave_screen: None
    return kept_screen.FirstScreen(where, lines, size), put_back


def _run_app(app, put_back=lambda leave_screen: None) -> int:
    try:
        app.run()
    finally:
        # the terminal as it was before a kept screen was shown; Textual left the alternate screen
        # itself if it ever took the terminal (it had mounted)
        put_back(not getattr(app, "took_terminal", False))
    # after the screen is gone, the lines the CLI prints (the error, or the warnings), on stderr
    for line in app.after_exit_lines():
        print(line, file=sys.stderr)
    return app.return_code or 0
