"""`kerneltui open TRACE` (or `kerneltui TRACE`): the trace browser in the terminal."""

from __future__ import annotations

import argparse
import functools
import sys


HELP = "Browse a trace: kernels, every launch, details and a timeline, all by keyboard."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("trace", help="a torch.profiler trace (.json or .json.gz)")
    parser.add_argument("--no-cache", action="store_true", help="read the trace afresh: neither use nor write the column cache")


def run(args: argparse.Namespace) -> int:
    from kerneltui.tui.app import build_app  # textual loads only for this command
    from kerneltui.trace.model import load_trace, start_workers_for

    start_workers_for([args.trace], cache=False if args.no_cache else None)  # before Textual's threads
    # write_later: a new cache entry is written after the first screen, not before it
    app = build_app(args.trace, functools.partial(load_trace, cache=False if args.no_cache else None, write_later=True))
    app.run()
    # after the screen is gone, the lines the CLI prints (the error, or the trace's warnings), on stderr
    for line in app.after_exit_lines():
        print(line, file=sys.stderr)
    return app.return_code or 0
