"""`kerneltui diff A B`: what changed on the GPU between two traces (eager vs compiled, or before vs after).

Opens the side-by-side screen; ``--format`` prints the same facts instead, and
``--fail-if-slower`` turns the diff into a CI check.
"""

from __future__ import annotations

import argparse
import functools
import re
import sys

from kerneltui.commands.summary import positive_int
from kerneltui.commands.terminal import check_trace_path, interactive
from kerneltui.errors import UserError

HELP = "Compare two traces: launches, GPU/CPU time, bytes moved, and which kernels replaced which."

NOT_COMPARABLE = 3  # --fail-if-slower on two different workloads
SHARE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*%?\s*$")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("a", metavar="A", help="the baseline trace, e.g. the eager run (.json or .json.gz);"
                        " a directory of rank traces: a job")
    parser.add_argument("b", metavar="B", help="the trace to compare, e.g. the torch.compile run; a directory: a job")
    parser.add_argument("--provenance", metavar="FILE",
                        help="what each compiled kernel computes, from `kerneltui capture SCRIPT --provenance-only`,"
                        " for traces profiled another way: matches fused kernels by it")
    parser.add_argument("--rank", type=int, metavar="N",
                        help="for two jobs (directories): diff rank N's traces (the screen, or --format)")
    parser.add_argument("--scheduler", metavar="ADDRESS",
                        help="for two jobs: summarise the ranks on a Dask cluster, or 'local' (needs the cluster extra)")
    parser.add_argument(
        "--format",
        choices=("table", "json", "markdown"),
        help="print the diff instead of opening the screen (table fits 80 columns); without a terminal on stdin"
        " and stdout the table is printed anyway",
    )
    parser.add_argument(
        "--fail-if-slower",
        metavar="PCT",
        type=parse_share,
        help="exit 1 when B's GPU time per step/call is more than PCT above A's (e.g. 5%%), exit 3 when the"
        " two traces are not comparable (other inputs); prints the table unless --format says otherwise",
    )
    parser.add_argument("--top", type=positive_int, metavar="N", help="only the first N rows of the matched table")
    parser.add_argument("--no-cache", action="store_true", help="read the trace afresh: neither use nor write the column cache")


def parse_share(text: str) -> float:
    """'5%' or '5' -> 0.05."""
    m = SHARE.match(text)
    if not m:
        raise argparse.ArgumentTypeError(f"expected a percentage such as 5%, not {text!r}")
    return float(m.group(1)) / 100


def run(args: argparse.Namespace) -> int:
    from kerneltui.analysis.ranks.discover import is_job

    jobs = [is_job([p]) for p in (args.a, args.b)]
    if any(jobs):
        if not all(jobs):
            raise UserError("diff compares a trace with a trace, or a job (directory) with a job: "
                            f"{args.a if jobs[0] else args.b} is a directory, the other is not")
        if args.rank is None:
            return run_jobs(args)
        args.a, args.b = _rank_files(args, args.rank)
    elif args.rank is not None or args.scheduler:
        raise UserError(f"--{'rank' if args.rank is not None else 'scheduler'} is for two jobs (directories of rank traces)")
    return run_traces(args)


def _rank_files(args: argparse.Namespace, rank: int) -> tuple[str, str]:
    """Rank N's trace in each job, found as the job summary numbers ranks."""
    from kerneltui.analysis.ranks.compare import rank_file
    from kerneltui.analysis.ranks.discover import peek_rank, rank_files
    from kerneltui.analysis.ranks.job import job_of
    from kerneltui.analysis.ranks.rank import RankSummary, rank_of_file

    out = []
    for directory in (args.a, args.b):
        stubs = []
        for f in rank_files([directory]):
            number = peek_rank(f)
            number = rank_of_file(f) if number is None else number
            stubs.append(RankSummary(path=f, rank=number, rank_from="", world_size=None, backend="", device=""))
        try:
            out.append(rank_file(job_of(stubs), rank))
        except KeyError:
            raise UserError(f"{directory}: no rank {rank} in this job") from None
    return out[0], out[1]


def _provenance(args: argparse.Namespace):
    if not args.provenance:
        return None
    from kerneltui.analysis.provenance.records import read_file

    return read_file(args.provenance)


def run_jobs(args: argparse.Namespace) -> int:
    from kerneltui import ranks_report
    from kerneltui.analysis.ranks.compare import compare_jobs
    from kerneltui.analysis.ranks.job import summarize_job
    from kerneltui.terminal_text import printable

    if args.fail_if_slower is not None or args.top is not None:
        raise UserError("--fail-if-slower and --top are for two traces; for two jobs use --rank N to diff one rank")
    cache = False if args.no_cache else None
    a = summarize_job([args.a], cache=cache, scheduler=args.scheduler)
    b = summarize_job([args.b], cache=cache, scheduler=args.scheduler)
    d = compare_jobs(a, b)
    render = {"json": ranks_report.job_diff_json, "markdown": ranks_report.job_diff_markdown}.get(
        args.format, ranks_report.job_diff_table)
    sys.stdout.write(render(d))
    sys.stdout.flush()
    for side, job in (("A", a), ("B", b)):
        for warning in job.warnings:
            print(printable(f"kerneltui: {side}: {warning}"), file=sys.stderr)
    return 2 if any(r.error or r.incomplete for job in (a, b) for r in job.ranks) else 0


def run_traces(args: argparse.Namespace) -> int:
    # the table where the screen cannot run (stdout redirected, stdin a pipe) or a CI check is asked for
    fmt = args.format or ("table" if args.fail_if_slower is not None or not interactive() else None)
    if fmt is None:
        check_trace_path(args.a)
        check_trace_path(args.b)
        from kerneltui.trace.cache import start_workers_for
        from kerneltui.trace.model import load_trace
        from kerneltui.tui.diff.app import run_app

        start_workers_for([args.a, args.b], cache=False if args.no_cache else None)  # before Textual's threads
        return run_app(args.a, args.b, loader=functools.partial(load_trace, cache=False if args.no_cache else None,
                                                                 write_later=True), provenance=_provenance(args))

    # A's read starts now, on a thread, while pandas and the analyses are imported (as `summary` reads)
    from kerneltui.commands.load_ahead import LoadAhead, load_trace
    from kerneltui.trace.cache import start_workers_for

    cache = False if args.no_cache else None
    start_workers_for([args.a, args.b], cache)  # forked while this process has one thread
    reading_a = LoadAhead(functools.partial(load_trace, cache=cache), args.a)
    from kerneltui import diff_report
    from kerneltui.analysis.compare.diff import diff_traces
    from kerneltui.terminal_text import printable

    a = reading_a(args.a)
    b = load_trace(args.b, cache=cache)
    d = diff_traces(a, b, _provenance(args))
    if fmt == "json":
        text = diff_report.as_json(d)
    elif fmt == "markdown":
        text = diff_report.as_markdown(d, args.top)
    else:
        text = diff_report.as_table(d, args.top)
    sys.stdout.write(text)
    sys.stdout.flush()
    for trace in (a, b):
        for warning in trace.meta.warnings:
            print(printable(f"kerneltui: {trace.meta.path}: {warning}"), file=sys.stderr)
    if args.fail_if_slower is not None:
        if d.comparable.ok is False:
            # a speed-up across different inputs is no speed-up: never a silent pass
            print(printable(f"kerneltui: not comparable: {d.comparable.reasons[0]}"), file=sys.stderr)
            return NOT_COMPARABLE
        change = d.gpu_change
        if change != change:
            raise UserError("--fail-if-slower: no GPU time to compare in A or B")
        if change > args.fail_if_slower:
            print(
                f"kerneltui: B's GPU time per {d.b.unit} is {100 * change:.1f}% above A's"
                f" (limit {100 * args.fail_if_slower:g}%)",
                file=sys.stderr,
            )
            return 1
    return 2 if a.meta.incomplete or b.meta.incomplete else 0
