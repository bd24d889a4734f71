"""`kerneltui summary TRACE`: the kernels of one trace, for a terminal or a script."""

from __future__ import annotations

import argparse
import sys

HELP = "Print the GPU work of a trace: busy time, launches per step, kernels by total time."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("trace", help="a torch.profiler trace (.json or .json.gz)")
    parser.add_argument("--format", choices=("table", "json", "csv"), default="table")
    parser.add_argument(
        "--top", type=positive_int, metavar="N", help="only the N kernels (or launches) with most GPU time"
    )
    parser.add_argument(
        "--filter",
        metavar="TEXT",
        help="only kernels whose name contains TEXT (case-insensitive); '/REGEX' matches a regular expression",
    )
    parser.add_argument("--launches", action="store_true", help="list every launch in time order instead of grouping")
    parser.add_argument("--full-names", action="store_true", help="show full kernel names in the table")
    parser.add_argument("--no-cache", action="store_true", help="read the trace afresh: neither use nor write the column cache")


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be 1 or more, not {value}")
    return value


def run(args: argparse.Namespace) -> int:
    from kerneltui import report
    from kerneltui.terminal_text import printable
    from kerneltui.trace import load_trace
    from kerneltui.trace.filters import matching_rows
    from kerneltui.trace.summary import kernel_stats, summarize

    trace = load_trace(args.trace, cache=False if args.no_cache else None)
    s = summarize(trace)
    gpu = trace.gpu
    if args.filter:
        gpu = gpu[matching_rows(gpu, args.filter)]
    kernels = kernel_stats(trace, gpu)
    launches = None
    if args.launches:
        launches = report.launches_frame(trace, gpu)
        if args.top:
            launches = launches.nlargest(args.top, "dur_ns").sort_values("ts_ns")
    elif args.top:
        kernels = kernels.head(args.top)
    if args.format == "json":
        text = report.as_json(trace, s, kernels, launches)
    elif args.format == "csv":
        # exact for a file or a pipe; on a terminal, names are escaped like the table's
        text = report.as_csv(kernels, launches, for_terminal=sys.stdout.isatty())
    else:
        text = report.as_table(trace, s, kernels, launches, args.full_names)
    sys.stdout.write(text)
    sys.stdout.flush()
    for warning in trace.meta.warnings:
        print(printable(f"kerneltui: {trace.meta.path}: {warning}"), file=sys.stderr)
    return 2 if trace.meta.incomplete else 0
