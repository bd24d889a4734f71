"""`kerneltui capture model.py`: eager and compiled traces of a workload, warm-up excluded.

Argument checks only: torch is imported in `run`, so that `kerneltui --help` works without it.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path

from kerneltui.capture.params import Value, parse_assignments, parse_sweep
from kerneltui.errors import UserError

HELP = "Profile a workload file, eager and compiled, into trace files (warm-up and compile excluded)."
MODES = ("eager", "compiled")
COMPILE_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")


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
    parser.add_argument("--steps", type=int, metavar="N", help="profiled calls per mode (default: 3)")
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


@dataclass(frozen=True)
class Request:
    workload: str
    params: dict[str, Value]
    sweep: tuple[str, tuple[Value, ...]] | None
    modes: tuple[str, ...]
    compile_mode: str
    steps: int
    warmup: int
    out_dir: Path
    gzip: bool
    force: bool
    with_stack: bool
    profile_memory: bool
    open_diff: bool
    command_line: str
    provenance_only: bool = False


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
    steps = 3 if args.steps is None else args.steps
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
