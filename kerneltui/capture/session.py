"""`kerneltui capture`: every parameter point in every mode, each into its own trace file.

Imports torch; the command module imports this only when a capture runs.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import torch

from kerneltui.capture import output, profiling, provenance, workload as contract
from kerneltui.capture.command import Request
from kerneltui.capture.params import Value, describe
from kerneltui.capture.progress import Progress
from kerneltui.capture.report import Written, pairs, render, render_provenance
from kerneltui.errors import UserError


def _points(request: Request, workload: contract.WorkloadFile, device: str) -> list[dict[str, Any]]:
    """One dict of workload() arguments per sweep value (one in all without --sweep)."""
    if request.sweep is None:
        return [contract.resolve(workload, request.params, device)]
    name, values = request.sweep
    return [contract.resolve(workload, {**request.params, name: value}, device) for value in values]


def _refuse_overwrites(paths: list[Path], force: bool) -> None:
    if len(set(paths)) < len(paths):
        clash = next(p for p in paths if paths.count(p) > 1)
        raise UserError(f"two captures would both write {clash}: give each sweep value once")
    existing = [path for path in paths if path.exists()]
    if existing and not force:
        more = f" (and {len(existing) - 1} more)" if len(existing) > 1 else ""
        raise UserError(f"{existing[0]} exists{more}: pass --force to overwrite")


def _trace_path(request: Request, workload: contract.WorkloadFile, params: dict[str, Any], mode: str) -> Path:
    if mode == "compiled" and request.compile_mode != "default":
        mode = f"compiled-{request.compile_mode}"  # so that two compile modes do not overwrite each other
    if request.provenance_only:
        return output.provenance_path(request.out_dir, workload.name, params, mode)
    return output.trace_path(request.out_dir, workload.name, params, mode, request.gzip)


def _jsonable(params: dict[str, Any]) -> dict[str, Value]:
    # A default such as `dtype=torch.bfloat16` is stored by name.
    return {k: v if isinstance(v, (bool, int, float, str)) or v is None else str(v) for k, v in params.items()}


def _describe(workload: contract.WorkloadFile, params: dict[str, Any], mode: str) -> str:
    return " ".join(part for part in (workload.name, describe(params), mode) if part)


def _block(request: Request, workload, params, mode: str, settings, run: profiling.ModeRun) -> dict[str, Any]:
    """The `kerneltui.capture` block of a trace: how it was taken, and on what."""
    return {
        "workload": str(workload.path),
        "name": workload.name,
        "mode": mode,
        "compile_mode": settings.compile_mode if mode == "compiled" else None,
        "params": _jsonable(params),
        "warmup_calls": settings.warmup,
        "profiled_calls": settings.steps,
        "compile_seconds": None if run.compile_seconds is None else round(run.compile_seconds, 3),
        "first_call_seconds": round(run.first_call_seconds, 6),
        "graph_breaks": run.graph_breaks,  # Dynamo's count (compiled mode), what the diff reports before its own
        "record_shapes": True,
        "with_stack": settings.with_stack,
        "profile_memory": settings.profile_memory,
        "command": request.command_line,
        **output.environment(),
    }


def _provenance_note(block: dict[str, Any] | None) -> str:
    if block is None:
        return ""
    if not block["kernels"]:
        return ", no kernel provenance" if block.get("reason") else ", no kernels"
    count = len(block["kernels"])
    return f", provenance of {count} kernel{'s' * (count > 1)}"


def _capture(request: Request, workload, params, mode, path: Path, settings, progress: Progress,
             announced: str | None = None) -> Written:
    """One mode of one point into its file; `announced`: the provenance warning already printed."""
    progress.begin(_describe(workload, params, mode))
    progress("building the inputs")
    fn, inputs = contract.build(workload, params)
    if request.provenance_only:
        _, run = profiling.warm_up(fn, inputs, mode, settings, progress)
        progress("writing the provenance")
        output.write_provenance(path, run.provenance, overwrite=request.force)
        calls = f"{settings.warmup} call{'s' if settings.warmup > 1 else ''}, nothing profiled"
    else:
        exported = output.scratch_path(path, ".export.json")
        try:
            run = profiling.run_mode(fn, inputs, mode, settings, exported, progress)
            progress("writing the trace")
            block = _block(request, workload, params, mode, settings, run)
            output.write_trace(exported, path, block, run.provenance, overwrite=request.force)
        finally:
            exported.unlink(missing_ok=True)
        calls = f"{settings.steps} call{'s' if settings.steps > 1 else ''} profiled"
    compiled = "" if run.compile_seconds is None else f", compiled in {run.compile_seconds:.1f} s"
    note = _provenance_note(run.provenance)
    progress.finish(f"{_describe(workload, params, mode)}: {calls}{compiled}{note} -> {path}")
    reason = (run.provenance or {}).get("reason")
    if reason and reason != announced:
        print(f"kerneltui: warning: no kernel provenance: {reason}", file=sys.stderr)
    return Written(params, mode, path, run)


def _kept(written: list[Written]) -> str:
    return "kept " + ", ".join(str(w.path) for w in written) if written else "no trace was written"


def run(request: Request) -> int:
    progress = Progress()
    written: list[Written] = []
    try:
        workload = contract.load(request.workload)
        cuda = torch.cuda.is_available()
        points = _points(request, workload, "cuda" if cuda else "cpu")
        plan = [
            (params, mode, _trace_path(request, workload, params, mode))
            for params in points
            for mode in request.modes
        ]
        found = provenance.support() if "compiled" in request.modes else None
        if request.provenance_only and found.source is None:
            raise UserError(f"--provenance-only: {found.warning}")
        _refuse_overwrites([path for _, _, path in plan], request.force)
        try:
            request.out_dir.mkdir(parents=True, exist_ok=True)
        except (FileExistsError, NotADirectoryError):
            raise UserError(f"-o {request.out_dir}: not a directory (traces are written into a directory)") from None
        except PermissionError:
            raise UserError(f"-o {request.out_dir}: permission denied") from None
        if not cuda:
            consequence = "its kernels are C++, not Triton" if request.provenance_only else \
                "the traces will have no GPU kernels"
            print(f"kerneltui: warning: CUDA is not available: capturing on the CPU, so {consequence}", file=sys.stderr)
        announced = found.warning if found else None
        if announced:
            print(f"kerneltui: warning: {announced}", file=sys.stderr)
        settings = profiling.Settings(
            request.warmup, request.steps, request.compile_mode, request.with_stack, request.profile_memory
        )
        for params, mode, path in plan:
            written.append(_capture(request, workload, params, mode, path, settings, progress, announced))
    except contract.UserCodeError as exc:
        progress.clear()
        sys.stderr.write(contract.user_traceback(exc.error))
        subject = f"{progress.subject}: " if progress.subject else ""
        print(
            f"kerneltui: {subject}{type(exc.error).__name__} {exc.where}; {_kept(written)}",
            file=sys.stderr,
        )
        return 1
    except KeyboardInterrupt:
        progress.clear()
        print(f"kerneltui: interrupted; {_kept(written)}", file=sys.stderr)
        return 130

    print(render_provenance(written) if request.provenance_only else render(workload.name, written))
    if request.open_diff:
        last = pairs(written)[-1]
        from kerneltui.cli import main

        return main(["diff", str(last[0].path), str(last[1].path)])
    return 0
