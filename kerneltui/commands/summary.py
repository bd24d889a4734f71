"""`kerneltui summary TRACE`: the kernels of one trace, for a terminal or a script.

`kerneltui summary DIR` (or several rank files): one job, a row per rank (analysis/ranks).
"""

from __future__ import annotations

import argparse
import functools
import sys
import threading

HELP = "Print the GPU work of a trace: busy time, launches per step, kernels by total time."
NOT_HEALTHY = 4  # `--health`: the trace is damaged in a way that changes figures


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("trace", nargs="+",
                        help="a torch.profiler trace (.json or .json.gz); a directory or several files: one job's ranks")
    parser.add_argument("--format", choices=("table", "json", "csv", "markdown"), default="table",
                        help="markdown: for a job (a directory or several rank files)")
    parser.add_argument("--scheduler", metavar="ADDRESS",
                        help="a job's ranks on a Dask cluster (tcp://host:8786), or 'local' for a LocalCluster"
                             " (needs the cluster extra)")
    parser.add_argument(
        "--top", type=positive_int, metavar="N",
        help="only the N kernels (or launches) with most GPU time; a CPU capture: the N CPU work rows with most"
             " CPU self time"
    )
    parser.add_argument(
        "--filter",
        metavar="TEXT",
        help="only kernels (a CPU capture: CPU work rows) whose name contains TEXT (case-insensitive); '/REGEX'"
             " matches a regular expression",
    )
    parser.add_argument("--launches", action="store_true", help="list every launch in time order instead of grouping")
    parser.add_argument("--by", choices=("kernel", "module"), default="kernel",
                        help="module: GPU time per nn.Module (or forward op), forward and backward, "
                             "with the optimizer and the loss (docs/modules.md)")
    parser.add_argument("--full-names", action="store_true", help="show full kernel names in the table")
    parser.add_argument("--health", action="store_true",
                        help="print only the health report (what the trace cannot be trusted for, docs/health.md);"
                             f" exit {NOT_HEALTHY} when something that changes a figure was found")
    parser.add_argument("--overview", action="store_true",
                        help="each step's span split into kernel, memcpy, memset, communication, DataLoader, CPU-only"
                             " and other time, with GPU utilization, SM efficiency, occupancy, Tensor Core use and a"
                             " step-time chart (docs/overview.md)")
    parser.add_argument("--memory", action="store_true",
                        help="where the GPU memory goes: allocated and reserved peaks per device and per step, the ops"
                             " holding the most at the peak, allocations never freed (needs [memory] events:"
                             " kerneltui capture --profile-memory; docs/memory.md)")
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
    from kerneltui.commands.report_cache import answered

    return answered(args, _run)  # a summary of this very file, asked the same way, is kept whole


def _run(args: argparse.Namespace) -> int:
    from kerneltui.analysis.ranks.discover import is_job
    from kerneltui.errors import UserError

    if args.health and (args.top or args.filter or args.launches or args.full_names or args.by != "kernel"):
        raise UserError("--health prints only the health report: --top, --filter, --launches, --full-names and "
                        "--by do not apply")
    if is_job(args.trace):
        return run_job(args)
    if getattr(args, "overview", False):
        args.trace = args.trace[0]
        return run_overview(args)
    if getattr(args, "memory", False):
        args.trace = args.trace[0]
        return run_memory(args)
    if args.scheduler or (args.format == "markdown" and args.by != "module"):
        raise UserError(f"--{'format markdown' if args.format == 'markdown' else 'scheduler'} is for a job: "
                        "a directory of rank traces, or several rank files (or for --by module)")
    args.trace = args.trace[0]
    if args.health:
        return run_health(args)
    return run_modules(args) if args.by == "module" else run_trace(args)



def _read_ahead(args: argparse.Namespace) -> None:
    """Start reading the trace on a thread now, while the command imports its tables and analyses
    (pandas alone takes ~0.4 s, with a core to spare): ``_load`` takes what it read."""
    if getattr(args, "_reading", None) is not None:
        return
    # numpy and the loader, not pandas
    from kerneltui.commands.load_ahead import LoadAhead, load_trace
    from kerneltui.trace.cache import start_workers_for

    cache = False if args.no_cache else None
    start_workers_for([args.trace], cache)  # forked while this process has one thread
    args._reading = LoadAhead(functools.partial(load_trace, cache=cache), args.trace)


def _load(args: argparse.Namespace):
    _read_ahead(args)
    return args._reading(args.trace)


def _write(trace, text: str) -> None:
    """A one-trace report on stdout, then the trace's warnings on stderr, a line each."""
    from kerneltui.terminal_text import printable

    sys.stdout.write(text)
    sys.stdout.flush()
    for warning in trace.meta.warnings:
        print(printable(f"kerneltui: {trace.meta.path}: {warning}"), file=sys.stderr)


def _width() -> int:
    import shutil

    return max(80, shutil.get_terminal_size((80, 24)).columns)

def run_health(args: argparse.Namespace) -> int:
    """Only the health report; exit NOT_HEALTHY when it is not ok (2, as always, when the file is not whole)."""
    _read_ahead(args)
    from kerneltui import health_report
    from kerneltui.analysis.health import trace_health
    from kerneltui.terminal_text import csv_for

    trace = _load(args)
    health = trace_health(trace)
    path = trace.meta.path
    if args.format == "json":
        text = health_report.as_json(path, health)
    elif args.format == "csv":
        text = csv_for(health_report.as_csv(path, health), sys.stdout.isatty())
    else:
        text = health_report.as_text(path, health, _width())
    _write(trace, text)
    if trace.meta.incomplete:
        return 2
    return 0 if health.ok else NOT_HEALTHY


def run_overview(args: argparse.Namespace) -> int:
    """Only the overview (analysis/overview.py); JSON: the whole summary document, which holds it."""

    from kerneltui.errors import UserError

    if (args.health or getattr(args, "memory", False) or args.top or args.filter or args.launches or args.full_names
            or args.by != "kernel"):
        raise UserError("--overview prints the step split: --health, --memory, --top, --filter, --launches,"
                        " --full-names and --by do not apply")
    if args.format == "json":
        return run_trace(args)
    _read_ahead(args)
    from kerneltui import overview_report
    from kerneltui.analysis.advice import advice
    from kerneltui.analysis.overview import overview
    from kerneltui.terminal_text import csv_for

    trace = _load(args)
    o = overview(trace)
    path = trace.meta.path
    findings = advice(trace, o)
    if args.format == "csv":
        text = csv_for(overview_report.as_csv(o, findings), sys.stdout.isatty())
    elif args.format == "markdown":
        text = overview_report.as_markdown(path, o, findings)
    else:
        text = overview_report.as_table(path, o, _width(), findings)
    _write(trace, text)
    return 2 if trace.meta.incomplete else 0


def run_memory(args: argparse.Namespace) -> int:
    """Only the memory report (analysis/memory.py); JSON: the whole summary document, which holds it."""

    from kerneltui.errors import UserError

    if (args.health or getattr(args, "overview", False) or args.top or args.filter or args.launches or args.full_names
            or args.by != "kernel"):
        raise UserError("--memory prints the memory report: --health, --overview, --top, --filter, --launches,"
                        " --full-names and --by do not apply")
    if args.format == "json":
        return run_trace(args)
    _read_ahead(args)
    from kerneltui import memory_report
    from kerneltui.analysis.memory import memory_table
    from kerneltui.terminal_text import csv_for

    trace = _load(args)
    table = memory_table(trace)
    path = trace.meta.path
    if args.format == "csv":
        text = csv_for(memory_report.as_csv(table), sys.stdout.isatty())
    elif args.format == "markdown":
        text = memory_report.as_markdown(path, table)
    else:
        width = _width()
        text = memory_report.as_table(path, table, trace.window[0], width)
    _write(trace, text)
    return 2 if trace.meta.incomplete else 0


def run_modules(args: argparse.Namespace) -> int:
    from kerneltui.errors import UserError

    if args.filter or args.launches or args.full_names:
        raise UserError("--filter, --launches and --full-names are for --by kernel")
    _read_ahead(args)
    from kerneltui import module_report
    from kerneltui.analysis.modules import module_tree

    trace = _load(args)
    tree = module_tree(trace)
    path = trace.meta.path
    text = {"json": lambda: module_report.as_json(tree, path),
            "csv": lambda: module_report.as_csv(tree, for_terminal=sys.stdout.isatty()),
            "markdown": lambda: module_report.as_markdown(tree, path),
            "table": lambda: module_report.as_table(tree, path, top=args.top)}[args.format]()
    _write(trace, text)
    return 2 if trace.meta.incomplete else 0


def run_job(args: argparse.Namespace) -> int:
    from kerneltui import ranks_report
    from kerneltui.analysis.ranks.job import summarize_job
    from kerneltui.errors import UserError
    from kerneltui.terminal_text import printable

    if args.top or args.filter or args.launches or args.full_names or args.by != "kernel":
        raise UserError("--top, --filter, --launches, --full-names and --by are for one trace, not a job")
    if getattr(args, "overview", False) or getattr(args, "memory", False):
        return _job_view(args)
    job = summarize_job(args.trace, cache=False if args.no_cache else None, scheduler=args.scheduler)
    if args.health:
        return _job_health(job, args.format)
    text = {"json": ranks_report.as_json, "csv": lambda j: ranks_report.as_csv(j, for_terminal=sys.stdout.isatty()),
            "markdown": ranks_report.as_markdown,
            "table": ranks_report.as_table}[args.format](job)
    sys.stdout.write(text)
    sys.stdout.flush()
    for warning in job.warnings:
        print(printable(f"kerneltui: {warning}"), file=sys.stderr)
    return 2 if any(r.error or r.incomplete for r in job.ranks) else 0  # as for one trace: not whole, exit 2


def _job_view(args: argparse.Namespace) -> int:
    """`--overview` or `--memory` of a job: a row per rank (analysis/ranks/overview.py, memory.py); exit as run_job."""
    from kerneltui import ranks_memory_report, ranks_overview_report
    from kerneltui.analysis.ranks.memory import job_memory
    from kerneltui.analysis.ranks.overview import job_overview
    from kerneltui.errors import UserError
    from kerneltui.terminal_text import printable

    if args.health or (args.overview and args.memory):
        raise UserError("--overview, --memory and --health each print one report: give one of them")
    cache = False if args.no_cache else None
    view, report = ((job_overview(args.trace, cache, args.scheduler), ranks_overview_report) if args.overview
                    else (job_memory(args.trace, cache, args.scheduler), ranks_memory_report))
    text = (report.as_csv(view, for_terminal=sys.stdout.isatty()) if args.format == "csv"
            else {"json": report.as_json, "markdown": report.as_markdown, "table": report.as_table}[args.format](view))
    sys.stdout.write(text)
    sys.stdout.flush()
    for warning in view.job.warnings:
        print(printable(f"kerneltui: {warning}"), file=sys.stderr)
    return 2 if any(r.error or r.incomplete for r in view.job.ranks) else 0  # as run_job


def _job_health(job, fmt: str) -> int:
    """Each rank's health in a line (JSON: its report); NOT_HEALTHY when one is damaged, 2 when one failed."""
    import orjson

    from kerneltui.analysis.ranks.rank import damaged
    from kerneltui.terminal_text import csv_for, json_safe, printable

    if fmt == "csv":
        import csv
        import io

        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(("rank", "path", "ok", "cause", "events", "unit", "share", "gpu_ns", "changes_figures",
                         "affects"))
        for r in job.ranks:
            for c in r.health.get("causes", ()) if r.health else ():
                writer.writerow((r.rank, r.path, r.health["ok"], c["cause"], c["events"], c["unit"], c["share"],
                                 "" if c["gpu_ns"] is None else c["gpu_ns"], c["changes_figures"], c["affects"]))
        sys.stdout.write(csv_for(out.getvalue(), sys.stdout.isatty()))
    elif fmt == "json":
        doc = [{"rank": r.rank, "path": r.path, "error": r.error or None, **(r.health or {})} for r in job.ranks]
        sys.stdout.write(json_safe(orjson.dumps({"ranks": doc}, option=orjson.OPT_INDENT_2).decode()) + "\n")
    else:
        for r in job.ranks:
            state = f"failed: {r.error}" if r.error else r.health.get("line", "unknown")
            print(printable(f"rank {r.rank}  {r.path}: {state}"))
    sys.stdout.flush()
    if any(r.error or r.incomplete for r in job.ranks):
        return 2
    return NOT_HEALTHY if any(damaged(r) for r in job.ranks) else 0


def run_trace(args: argparse.Namespace) -> int:
    _read_ahead(args)
    from kerneltui import report
    from kerneltui.analysis.health import trace_health
    from kerneltui.analysis.memory import memory_table
    from kerneltui.trace.filters import matching_rows
    from kerneltui.trace.summary import kernel_stats, summarize
    from kerneltui.trace.threads import in_background

    trace = _load(args)
    # the summary and (for JSON) the memory table on a second thread while this one does the rest:
    # numpy lets go of the GIL in most of both (a cold 1 GB summary, 3.7 -> 3.1 s on two cores). What
    # both sides read is made on one of them, before the other reads it: from Python 3.12
    # cached_property no longer locks, and both threads would build it at once. The window and the
    # steps here; the GPU table (0.26 s at 1 GB) on this thread while the memory table (which does not
    # read it) starts on the other, whose summary and health wait for it
    trace.window, trace.iterations  # noqa: B018 - computed and cached now
    gpu_made, gpu_built = threading.Event(), []

    def after_gpu(call):
        def run(trace):
            gpu_made.wait()
            if not gpu_built:  # it raised on this thread, where the command ends: nothing to build again
                raise RuntimeError("the GPU table was not built")
            return call(trace)

        return run

    # JSON: the health too (as_json's overview and advice on this thread take longer than the summary and
    # the memory table there; health balances them)
    memory = s = None
    if args.format == "json":
        memory, s, _ = in_background((memory_table, after_gpu(summarize), after_gpu(trace_health)), trace,
                                     name="kerneltui-summary")
    elif args.format != "csv":
        (s,) = in_background((after_gpu(summarize),), trace, name="kerneltui-summary")
    try:
        gpu = trace.gpu
        gpu_built.append(True)
    finally:
        gpu_made.set()  # also after an error, raised here: the other thread's waiting calls end at once
    work = cpu_rows(trace, args)
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
        text = report.as_json(trace, s, kernels, launches, work, memory)
    elif args.format == "csv":
        # exact for a file or a pipe; on a terminal, names are escaped like the table's
        text = report.as_csv(kernels, launches, for_terminal=sys.stdout.isatty(), work=work)
    else:
        text = report.as_table(trace, s.result(), kernels, launches, args.full_names, work)
    _write(trace, text)
    return 2 if trace.meta.incomplete else 0


def cpu_rows(trace, args: argparse.Namespace):
    """A CPU capture's work rows (analysis/cpu_work) with --filter (on the name) and --top applied; None for a
    trace with GPU activity. --launches lists GPU launches, which a CPU capture has none of."""
    from kerneltui.analysis.cpu_work import cpu_work, is_cpu_capture, matching_work
    from kerneltui.errors import UserError

    if not is_cpu_capture(trace):
        return None
    if args.launches:
        raise UserError(f"{trace.meta.path}: a CPU capture has no GPU launches for --launches: its work is listed "
                        "by CPU self time without it")
    work = cpu_work(trace)
    if args.filter:
        work = work[matching_work(work, args.filter)]
    return work.head(args.top) if args.top else work
