"""`kerneltui open TRACE` (or `kerneltui TRACE`): the trace browser in the terminal."""

from __future__ import annotations

import argparse

HELP = "Browse a trace: kernels, every launch, details and a timeline, all by keyboard."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("trace", help="a torch.profiler trace (.json or .json.gz)")


def run(args: argparse.Namespace) -> int:
    from kerneltui.tui.app import build_app  # textual loads only for this command

    app = build_app(args.trace)
    app.run()
    if app.error:
        print(f"kerneltui: {app.error}")  # after the screen is gone, the same line the CLI prints
    return app.return_code or 0
