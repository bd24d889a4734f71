"""`kerneltui capture model.py`: eager and compiled traces of a workload, warm-up excluded.

Argument checks only: torch is imported in `run`, so that `kerneltui --help` works without it.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from pathlib import Path

from kerneltui.capture.outdir import check_writable
from kerneltui.capture.params import parse_assignments, parse_sweep
from kerneltui.capture.ranks import launch_from_env
from kerneltui.capture.request import CPU_STEPS, GPU_STEPS, Request
from kerneltui.errors import UserError

HELP = "Profile a workload file, eager and compiled, into trace files (warm-up and compile excluded)."
MODES = ("eager", "compiled")
COMPILE_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
DYNAMIC = {"true": True, "false": False, "auto": None}  # --dynamic -> torch.compile(dynamic=...)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.epilog = "The workload file defines workload(**params) returning (fn, inputs): see docs/capture.md."
    parser.add_argument("workload", help="a Python file defining workload(), e.g. examples/add_relu.py")
    parser.add_argument("-p", "--param", action="append", metavar="NAME=VALUE", dest="params",
                        help="a workload() parameter, e.g. -p n=1e8 (integral numbers become ints); repeatable")
    parser.add_argument("--sweep", metavar="NAME=V1,V2,...",
                        help="capture once per value, e.g. --sweep n=100,1e6,1e8")
    parser.add_argument("--modes", help="comma-separated, from: eager, compiled (default: eager,compiled)")
    parser.add_argument("--compile-mode", default="default", choices=COMPILE_MODES, metavar="MODE",
                        help=f"torch.compile mode: {', '.join(COMPILE_MODES)} (default: default)")
    parser.add_argument("--steps", type=int, metavar="N",
                        help=f"profiled calls per mode (default: {GPU_STEPS} on a GPU, {CPU_STEPS} on the CPU)")
    parser.add_argument("--warmup", type=int, default=3, metavar="N",
                        help="unprofiled calls before them; the first compiles (default: 3)")
    parser.add_argument("-o", "--output-dir", default="traces", type=Path, metavar="DIR",
                        help="where the traces go (default: ./traces)")
    parser.add_argument("--json", action="store_true", help="write plain .json instead of .json.gz")
    parser.add_argument("--force", action="store_true", help="overwrite traces that exist")
    parser.add_argument("--with-stack", action="store_true", help="record Python stacks (larger traces)")
    parser.add_argument("--profile-memory", action="store_true", help="record allocations")
    parser.add_argument("--open", action="store_true", help="open the eager-vs-compiled diff when done")
    parser.add_argument("--provenance-only", action="store_true",
                        help="compile and warm up, profile nothing: write what each compiled kernel came from "
                             "to DIR/NAME_compiled.provenance.json, for traces profiled another way")
    parser.add_argument("--backend", default="inductor", metavar="NAME",
                        help="torch.compile backend (default: inductor; kernel provenance only with inductor)")
    parser.add_argument("--fullgraph", action="store_true",
                        help="torch.compile(fullgraph=True): a graph break is an error")
    parser.add_argument("--dynamic", choices=tuple(DYNAMIC), default="auto",
                        help="torch.compile(dynamic=...): true, false, or auto (Dynamo decides; the default)")
    parser.add_argument("--no-record-shapes", dest="record_shapes", action="store_false",
                        help="profile without input shapes (smaller traces, less overhead per op)")
    parser.add_argument("--allow-recompile", action="store_true",
                        help="write a compiled trace even if a profiled call recompiled (recorded in the trace)")
    parser.add_argument("script_args", nargs="*", metavar="-- SCRIPT_ARGS",
                        help="after --: the workload script's own command line (its sys.argv[1:])")
    _split_at_double_dash(parser)


def _split_at_double_dash(parser: argparse.ArgumentParser) -> None:
    """Everything after the first `--` is the script's, whatever it looks like (`-- --hidden 32`).

    argparse alone cannot do it: a `nargs="*"` positional after `workload` is filled (empty) as soon
    as `workload` is, and a later `-- --hidden 32` is then "unrecognized arguments".
    """
    parse_known_args = parser.parse_known_args

    def split(args=None, namespace=None):
        args = list(sys.argv[1:] if args is None else args)
        script = []
        if "--" in args:
            at = args.index("--")
            args, script = args[:at], args[at + 1:]
        namespace, rest = parse_known_args(args, namespace)
        namespace.script_args = [*namespace.script_args, *script]
        return namespace, rest

    parser.parse_known_args = split


def _modes(text: str) -> tuple[str, ...]:
    modes = tuple(m.strip() for m in text.split(",") if m.strip())
    unknown = [m for m in modes if m not in MODES]
    if unknown or not modes:
        raise UserError(f"--modes {text!r}: choose from {', '.join(MODES)}, e.g. --modes eager,compiled")
    if len(set(modes)) < len(modes):
        raise UserError(f"--modes {text!r}: give each mode once")
    return modes


# Options that shape a profile: with --provenance-only there is none for them to shape.
_PROFILE_OPTIONS = (("modes", "--modes"), ("steps", "--steps"), ("with_stack", "--with-stack"),
                    ("profile_memory", "--profile-memory"), ("open", "--open"))


def request_from(args: argparse.Namespace) -> Request:
    """Every check that needs no torch and no workload, so that a typo fails at once."""
    provenance_only = getattr(args, "provenance_only", False)
    if provenance_only:
        given = [flag for name, flag in _PROFILE_OPTIONS if getattr(args, name, None) not in (None, False)]
        if given:
            raise UserError(f"--provenance-only profiles nothing: drop {given[0]}")
    modes = ("compiled",) if provenance_only else _modes(args.modes or "eager,compiled")
    steps = GPU_STEPS if args.steps is None else args.steps
    if steps < 1:
        raise UserError(f"--steps {steps}: profile at least 1 call")
    if args.warmup < 1:
        raise UserError(f"--warmup {args.warmup}: at least 1, the first call compiles and must not be profiled")
    if args.open and len(modes) != 2:
        raise UserError("--open needs two modes to compare: --modes eager,compiled")
    params = parse_assignments(args.params)
    sweep = parse_sweep(args.sweep)
    if sweep and sweep[0] in params:
        raise UserError(f"{sweep[0]} is given by both -p and --sweep: keep one")
    backend = getattr(args, "backend", "inductor")
    if backend != "inductor" and args.compile_mode != "default":
        raise UserError(f"--compile-mode {args.compile_mode} is Inductor's: drop it, or --backend {backend}")
    if backend != "inductor" and provenance_only:
        raise UserError(f"--provenance-only records what Inductor generates: --backend {backend} generates no kernels")
    script_args = tuple(getattr(args, "script_args", None) or ())
    argv = getattr(args, "argv", None)  # the command line as given (cli.main sets it)
    if script_args and argv is not None and "--" not in argv:
        raise UserError(f"unexpected argument {script_args[0]!r}: the script's own arguments go after --, "
                        f"e.g. kerneltui capture {args.workload} -- {shlex.join(script_args)}")
    launch = launch_from_env(os.environ)
    if launch.world_size > 1 and args.open:
        raise UserError("--open under torchrun: each rank would open a viewer; open the traces when the job is done")
    check_writable(args.output_dir)  # before any import of torch: it takes seconds, the profile longer
    return Request(
        workload=args.workload,
        params=params,
        sweep=sweep,
        modes=modes,
        compile_mode=args.compile_mode,
        steps=steps,
        warmup=args.warmup,
        out_dir=args.output_dir,
        gzip=not args.json,
        force=args.force,
        with_stack=args.with_stack,
        profile_memory=args.profile_memory,
        open_diff=args.open,
        command_line=shlex.join(["kerneltui", *getattr(args, "argv", sys.argv[1:])]),
        provenance_only=provenance_only,
        script_args=script_args,
        backend=backend,
        fullgraph=getattr(args, "fullgraph", False),
        dynamic=DYNAMIC[getattr(args, "dynamic", "auto")],
        record_shapes=getattr(args, "record_shapes", True),
        allow_recompile=getattr(args, "allow_recompile", False),
        steps_given=args.steps is not None,
        launch=launch,
    )


def run(args: argparse.Namespace) -> int:
    request = request_from(args)
    # Kineto prints its stages (profiler_start, Completed Stage: ...) on stderr at every
    # profile; level 6 silences them. Read when torch loads, so set before importing it.
    os.environ.setdefault("KINETO_LOG_LEVEL", "6")
    try:
        from kerneltui.capture import session
    except ModuleNotFoundError as exc:
        if exc.name != "torch":
            raise
        raise UserError("capture needs PyTorch: pip install torch (or pip install 'kerneltui[capture]')") from None
    return session.run(request)
