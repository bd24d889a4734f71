"""The `kerneltui` command: one subcommand per module, each imported only when it runs.

Every subcommand module exposes ``HELP``, ``add_arguments(parser)`` and
``run(args) -> int``; heavy imports (pandas, textual, torch) live inside ``run``
so that ``kerneltui --help`` and a bad path answer at once.
"""

from __future__ import annotations

import argparse
import atexit
import gc
import importlib
import os
import sys

from kerneltui import __version__
from kerneltui.errors import UserError
from kerneltui.terminal_text import printable
from kerneltui.trace import heap

SUBCOMMANDS = {
    "summary": "kerneltui.commands.summary",
    "open": "kerneltui.commands.open",
    "diff": "kerneltui.commands.diff",
    "capture": "kerneltui.capture.command",
    "cache": "kerneltui.commands.cache",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kerneltui",
        description="Which GPU kernels a PyTorch workload ran, and what torch.compile changed.",
    )
    parser.add_argument("--version", action="version", version=f"kerneltui {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, module_name in SUBCOMMANDS.items():
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name != module_name:
                raise
            continue  # a subcommand not built into this copy
        sub = subparsers.add_parser(name, help=module.HELP, description=module.HELP)
        module.add_arguments(sub)
        sub.set_defaults(_module=module)
    return parser


def main(argv: list[str] | None = None) -> int:
    program = argv is None  # the program itself, not a program that calls main(argv)
    argv = list(sys.argv[1:] if argv is None else argv)
    # `kerneltui TRACE` is short for `kerneltui open TRACE`.
    if argv and not argv[0].startswith("-") and argv[0] not in SUBCOMMANDS:
        argv.insert(0, "open")
    parser = build_parser()
    args = parser.parse_args(argv)
    args.argv = argv  # what was asked, for captures to record
    if args.command is None:
        parser.print_help()
        return 2
    if program and args.command != "capture":
        # The interpreter's exit runs full collections over every object the run made: 0.05-0.06 s after
        # a 1 GB summary (0.085 -> 0.034 s from the command's end to the process's). Frozen by the exit
        # handler that runs after those registered from here on, they are skipped, and the process's
        # memory goes back whole. Not for capture: it runs the user's code, whose objects in cycles (a file
        # left open, a __del__) would then never be finalized; nor where a program calls main(argv).
        atexit.register(gc.freeze)
        # the program's freed memory kept for its next tables, not handed back and faulted in again
        # (trace/heap.py); not for capture either, whose workload has the allocator as it expects it
        heap.keep_freed_memory()
    if args.command != "capture" and "numpy" not in sys.modules:
        # numpy's OpenBLAS starts a thread per core that spins after import (~0.13 CPU-s a process, taken
        # from the loader's threads on a small machine); kerneltui does no linear algebra. capture runs
        # the user's workload, whose CPU math keeps its threads. Read once, at numpy's import: where numpy
        # is in already (main() called in a program), it would only reach child processes, so it is not set
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    try:
        return int(args._module.run(args) or 0)
    except UserError as exc:
        # the message may quote a path or a name from a trace: never let it drive the terminal
        print(f"kerneltui: {printable(str(exc))}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("kerneltui: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # `kerneltui summary ... | head` closes the pipe early; that is not an error.
        sys.stderr.close()
        return 0
