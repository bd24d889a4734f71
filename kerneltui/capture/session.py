"""`kerneltui capture`: every parameter point in every mode, each into its own trace file.

Imports torch; the command module imports this only when a capture runs.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import torch

from kerneltui.capture import distributed, output, profiling, provenance
from kerneltui.capture import workload as contract
from kerneltui.capture.params import Value, describe
from kerneltui.capture.progress import Progress
from kerneltui.capture.report import Written, pairs, render, render_provenance
from kerneltui.capture.request import CPU_STEPS, Request
from kerneltui.errors import UserError


class RecompileRefused(Exception):
    """A compiled call recompiled inside the profiled window: its trace would time the compile."""


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
    if mode == "compiled" and request.backend != "inductor":
        mode = f"compiled-{request.backend}"  # another backend's trace must not overwrite Inductor's
    if mode == "compiled" and request.compile_mode != "default":
        mode = f"compiled-{request.compile_mode}"  # so that two compile modes do not overwrite each other
    if request.provenance_only:
        return output.provenance_path(request.out_dir, workload.name, params, mode)
    if request.launch.distributed:  # a directory per mode, a file per rank: each directory reads as a rank job
        return output.rank_trace_path(request.out_dir, workload.name, params, mode, request.gzip,
                                      request.launch.rank)
    return output.trace_path(request.out_dir, workload.name, params, mode, request.gzip)


def _jsonable(params: dict[str, Any]) -> dict[str, Value]:
    # A default such as `dtype=torch.bfloat16` is stored by name.
    return {k: v if isinstance(v, (bool, int, float, str)) or v is None else str(v) for k, v in params.items()}


def _describe(workload: contract.WorkloadFile, params: dict[str, Any], mode: str, request: Request) -> str:
    rank = f"rank {request.launch.rank}" if request.launch.distributed else ""
    return " ".join(part for part in (workload.name, describe(params), mode, rank) if part)


def _block(request: Request, workload, params, mode: str, settings, run: profiling.ModeRun) -> dict[str, Any]:
    """The `kerneltui.capture` block of a trace: how it was taken, and on what."""
    compiled = mode == "compiled"
    return {
        "workload": str(workload.path),
        "name": workload.name,
        "mode": mode,
        "compile_mode": settings.compile_mode if compiled else None,
        "backend": settings.backend if compiled else None,
        "fullgraph": settings.fullgraph if compiled else None,
        "dynamic": settings.dynamic if compiled else None,
        "compiles_itself": settings.compiles_itself,  # workload(compile=...): it chose what to compile
        "params": _jsonable(params),
        "script_args": list(request.script_args),
        "warmup_calls": settings.warmup,
        "profiled_calls": settings.steps,
        "compile_seconds": None if run.compile_seconds is None else round(run.compile_seconds, 3),
        "first_call_seconds": round(run.first_call_seconds, 6),
        "graph_breaks": run.graph_breaks,  # Dynamo's count (compiled mode), what the diff reports before its own
        "recompiles": [c.to_json() for c in run.recompiles] if compiled else None,
        "allow_recompile": request.allow_recompile if compiled else None,
        "warmup_recompiles": [c.to_json() for c in run.warmup_compiles] if compiled else None,
        "eager_was_compiled": run.eager_was_compiled,
        "record_shapes": settings.record_shapes,
        "with_stack": settings.with_stack,
        "profile_memory": settings.profile_memory,
        **run.machine,
        "rank": request.launch.rank if request.launch.distributed else None,
        "world_size": request.launch.world_size if request.launch.distributed else None,
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


def _warn(line: str) -> None:
    print(f"kerneltui: warning: {line}", file=sys.stderr)


def _warn_compiles(subject: str, run: profiling.ModeRun) -> None:
    """One line each: the script compiled itself in eager mode; compiled mode recompiled in its warm-up."""
    if run.eager_was_compiled:
        first = (run.warmup_compiles or run.recompiles)[0]
        _warn(f"{subject}: the script compiles with torch.compile itself ({first.function}, {first.call}): "
              "this \"eager\" trace runs compiled code; declare workload(compile=...) and compile through it "
              "so that eager mode stays eager")
    elif run.recompiles:  # written only with --allow-recompile
        first = run.recompiles[0]
        more = f" (and {len(run.recompiles) - 1} more)" if len(run.recompiles) > 1 else ""
        _warn(f"{subject}: a recompile in {first.call}{more}: {first.why()}; written as --allow-recompile asks: "
              "that call's time holds the compile")
    elif run.mode == "compiled" and run.warmup_compiles:
        first = run.warmup_compiles[0]
        more = f" (and {len(run.warmup_compiles) - 1} more)" if len(run.warmup_compiles) > 1 else ""
        _warn(f"{subject}: a recompile in {first.call}{more}: {first.why()}; the profiled calls did not "
              "recompile, but inputs that change per call may")


def _refuse_recompile(subject: str, run: profiling.ModeRun) -> None:
    first = run.recompiles[0]
    more = f" (and {len(run.recompiles) - 1} more)" if len(run.recompiles) > 1 else ""
    raise RecompileRefused(
        f"{subject}: a recompile in {first.call}{more}: {first.why()}; its time would be in the profile, so the "
        "compiled trace was not written (--allow-recompile writes it)"
    )


def _capture(request: Request, workload, params, mode, path: Path, settings, progress: Progress,
             announced: str | None = None) -> Written:
    """One mode of one point into its file; `announced`: the provenance warning already printed."""
    subject = _describe(workload, params, mode, request)
    progress.begin(subject)

    def build(compile):
        return contract.build(workload, params, {"compile": compile, "mode": mode})

    if request.provenance_only:
        _, run = profiling.warm_up(build, mode, settings, progress)
        progress("writing the provenance")
        output.write_provenance(path, run.provenance, overwrite=request.force)
        calls = f"{settings.warmup} call{'s' if settings.warmup > 1 else ''}, nothing profiled"
    else:
        exported = output.scratch_path(path, ".export.json")
        try:
            run = profiling.run_mode(build, mode, settings, exported, progress)
            if run.recompiles and not request.allow_recompile:
                progress.clear()
                _refuse_recompile(subject, run)
            progress("writing the trace")
            block = _block(request, workload, params, mode, settings, run)
            output.write_trace(exported, path, block, run.provenance, overwrite=request.force)
        finally:
            exported.unlink(missing_ok=True)
        calls = f"{settings.steps} call{'s' if settings.steps > 1 else ''} profiled"
    compiled = "" if run.compile_seconds is None else f", compiled in {run.compile_seconds:.1f} s"
    recompiled = f", {len(run.recompiles)} recompile{'s' * (len(run.recompiles) > 1)} profiled" \
        if run.recompiles else ""
    note = _provenance_note(run.provenance)
    progress.finish(f"{subject}: {calls}{compiled}{recompiled}{note} -> {path}")
    _warn_compiles(subject, run)
    reason = (run.provenance or {}).get("reason")
    if reason and reason != announced:
        _warn(f"no kernel provenance: {reason}")
    return Written(params, mode, path, run)


def _kept(written: list[Written]) -> str:
    return "kept " + ", ".join(str(w.path) for w in written) if written else "no trace was written"


def _check_backend(name: str) -> None:
    known = torch._dynamo.list_backends(exclude_tags=())
    if name not in known:
        raise UserError(f"--backend {name}: not a torch.compile backend here (known: {', '.join(sorted(known))})")


def _settings(request: Request, workload: contract.WorkloadFile, cuda: bool) -> profiling.Settings:
    # The per-call median of a CPU capture needs more calls than a GPU's to settle (command.CPU_STEPS)
    steps = request.steps if request.steps_given or cuda else CPU_STEPS
    return profiling.Settings(
        request.warmup, steps, request.compile_mode, request.with_stack, request.profile_memory,
        backend=request.backend, fullgraph=request.fullgraph, dynamic=request.dynamic,
        record_shapes=request.record_shapes, compiles_itself="compile" in workload.given,
    )


def run(request: Request) -> int:
    with contract.script_argv(request.workload, request.script_args), distributed.process_group(request.launch):
        return _run(request)


def _run(request: Request) -> int:
    progress = Progress()
    written: list[Written] = []
    try:
        if "compiled" in request.modes:
            _check_backend(request.backend)
        workload = contract.load(request.workload)
        cuda = torch.cuda.is_available()
        points = _points(request, workload, "cuda" if cuda else "cpu")
        plan = [
            (params, mode, _trace_path(request, workload, params, mode))
            for params in points
            for mode in request.modes
        ]
        inductor = "compiled" in request.modes and request.backend == "inductor"
        found = provenance.support() if inductor else None
        if request.provenance_only and found.source is None:
            raise UserError(f"--provenance-only: {found.warning}")
        _refuse_overwrites([path for _, _, path in plan], request.force)
        try:
            for directory in sorted({path.parent for _, _, path in plan}):
                directory.mkdir(parents=True, exist_ok=True)
        except (FileExistsError, NotADirectoryError):
            raise UserError(f"-o {request.out_dir}: not a directory (traces are written into a directory)") from None
        except PermissionError:
            raise UserError(f"-o {request.out_dir}: permission denied") from None
        if not cuda:
            consequence = "its kernels are C++, not Triton" if request.provenance_only else \
                "the traces will have no GPU kernels"
            _warn(f"CUDA is not available: capturing on the CPU, so {consequence}")
        announced = found.warning if found else None
        if announced:
            _warn(announced)
        settings = _settings(request, workload, cuda)
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
    except contract.ScriptExit as exc:
        # the script's own exit (argparse refusing its arguments, sys.exit()): one line, ours
        progress.clear()
        subject = f"{progress.subject}: " if progress.subject else ""
        # at import most likely its argument parser: say where its arguments go
        hint = f" (its own arguments go after --: kerneltui capture {request.workload} -- ARGS)" \
            if exc.where.startswith("while loading") else ""
        print(f"kerneltui: {subject}the script exited with {exc.status()} {exc.where}{hint}; {_kept(written)}",
              file=sys.stderr)
        return 2
    except RecompileRefused as exc:
        print(f"kerneltui: {exc}; {_kept(written)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        progress.clear()
        print(f"kerneltui: interrupted; {_kept(written)}", file=sys.stderr)
        return 130

    if request.launch.rank != 0:
        return 0  # rank 0 reports for the job; each rank's progress lines said what it wrote
    if request.provenance_only:
        print(render_provenance(written))
    else:
        print(render(workload.name, written, request.launch.world_size))
    if request.open_diff:
        last = pairs(written)[-1]
        from kerneltui.cli import main

        return main(["diff", str(last[0].path), str(last[1].path)])
    return 0
