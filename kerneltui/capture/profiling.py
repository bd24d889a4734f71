"""One mode of one workload under torch.profiler: warm-up (and compile) first, then the profiled calls."""

from __future__ import annotations

import contextlib
import os
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch.profiler import ProfilerActivity, profile, schedule

from kerneltui.capture import provenance
from kerneltui.capture.compiles import Compile, CompileWatch
from kerneltui.capture.workload import Built, user_code

# build(compile) -> what one mode runs; `compile` is what a workload declaring it receives
Builder = Callable[[Callable[..., Any]], Built]


@dataclass(frozen=True)
class Settings:
    warmup: int
    steps: int
    compile_mode: str
    with_stack: bool
    profile_memory: bool
    backend: str = "inductor"
    fullgraph: bool = False
    dynamic: bool | None = None  # torch.compile(dynamic=...): None lets Dynamo decide
    record_shapes: bool = True
    compiles_itself: bool = False  # workload(compile=...): it compiles what it wants; fn is not compiled


@dataclass(frozen=True)
class ModeRun:
    mode: str
    first_call_seconds: float
    provenance: dict[str, Any] | None = None  # compiled mode: the `provenance` block (docs/capture.md)
    graph_breaks: int | None = None  # compiled mode: Dynamo's own count while compiling (warm-up)
    # Dynamo compiles after the first call: in eager mode the script's own torch.compile; in compiled
    # mode recompiles, in the warm-up (`warmup_compiles`) or the profiled window (`recompiles`)
    warmup_compiles: tuple[Compile, ...] = ()
    recompiles: tuple[Compile, ...] = ()
    machine: dict[str, Any] = field(default_factory=dict)  # threads, cpu_count, load averages

    @property
    def compile_seconds(self) -> float | None:
        """The first compiled call, which compiles; None in eager mode."""
        return self.first_call_seconds if self.mode == "compiled" else None

    @property
    def eager_was_compiled(self) -> bool | None:
        """Eager mode only: did the workload run code torch.compile compiled (its own call of it)?"""
        return bool(self.warmup_compiles or self.recompiles) if self.mode == "eager" else None


def _synchronize() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def _call(call: Built, where: str) -> None:
    with user_code(where):
        call()


def _load() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:  # not on every system
        return None


def _identity(obj: Any, **_: Any) -> Any:
    """What a workload's `compile` parameter is in eager mode: nothing is compiled."""
    return obj


def compiler(settings: Settings, recorder: provenance.Recorder | None) -> Callable[..., Any]:
    """torch.compile as configured (backend, mode, fullgraph, dynamic): what kerneltui compiles fn with,
    and what a workload declaring `compile` receives. Options given to it override ours."""
    # Inductor goes through the recorder's backend: Inductor's own, which also hands each graph to
    # the provenance recorder; it carries the mode.
    backend = recorder.backend(settings.compile_mode) if recorder else settings.backend
    options = {"backend": backend, "fullgraph": settings.fullgraph, "dynamic": settings.dynamic}

    def compile(obj: Any, **overrides: Any) -> Any:
        return torch.compile(obj, **{**options, **overrides})

    return compile


def _no_provenance(backend: str) -> dict[str, Any]:
    return {"version": provenance.VERSION, "source": None, "torch": torch.__version__, "kernels": [],
            "reason": f"backend {backend} is not Inductor: kernel provenance is recorded for Inductor's kernels only"}


def warm_up(build: Builder, mode: str, settings: Settings, progress: Callable[[str], None]) -> tuple[Built, ModeRun]:
    """Builds and runs the unprofiled calls: the first compiles. In compiled mode the kernels' provenance is
    recorded here, while they compile; nothing of it stays attached for the calls after."""
    compiled = mode == "compiled"
    # Both modes start from an empty Dynamo cache: a sweep point compiles fresh (a second shape would
    # otherwise recompile with dynamic shapes, a different kernel), and a script that compiles itself
    # does so again in eager mode, where the watch sees it.
    torch._dynamo.reset()
    inductor = compiled and settings.backend == "inductor"
    recording = provenance.recording() if inductor else contextlib.nullcontext()
    with recording as recorder:
        compile = compiler(settings, recorder) if compiled else _identity
        progress("building the inputs")
        built = build(compile)
        call = built if not compiled or settings.compiles_itself else Built(compile(built.fn), built.args, built.kwargs)
        breaks_before = _graph_breaks()  # after the reset, which clears the counters
        watch = CompileWatch()
        progress("compiling (the first call)" if compiled else f"warming up ({settings.warmup} calls)")
        start = time.perf_counter()
        _call(call, f"in the first {mode} call")
        _synchronize()
        first_call_seconds = time.perf_counter() - start
        later = [] if compiled else watch.new(f"the first {mode} call")  # compiling is the first call's job
        watch.new("")
        if compiled and settings.warmup > 1:
            progress(f"warming up ({settings.warmup - 1} more calls)")
        for i in range(1, settings.warmup):
            _call(call, f"in {mode} warm-up call {i + 1}")
            later += watch.new(f"{mode} warm-up call {i + 1}")
        _synchronize()  # warm-up kernels must not run into the profiled window
    breaks = _graph_breaks() - breaks_before if compiled else None
    block = None
    if compiled:
        block = recorder.block() if recorder else _no_provenance(settings.backend)
    return call, ModeRun(mode, first_call_seconds, block, breaks, tuple(later))


def _graph_breaks() -> int:
    """Dynamo's running count of graph breaks (each break it met while tracing, once per compile)."""
    from torch._dynamo.utils import counters

    return int(sum(counters["graph_break"].values()))


def _machine() -> dict[str, Any]:
    """What a CPU capture's times depend on: the threads torch uses, the cores, the machine's load."""
    return {"threads": torch.get_num_threads(), "cpu_count": os.cpu_count(), "load_average": _load()}


def run_mode(build: Builder, mode: str, settings: Settings, export_to: Path,
             progress: Callable[[str], None]) -> ModeRun:
    """Warms up (never profiled), profiles `settings.steps` calls, exports the Chrome trace to `export_to`."""
    machine = _machine()
    call, run = warm_up(build, mode, settings, progress)
    activities = [ProfilerActivity.CPU]
    if torch.cuda.is_available():
        activities.append(ProfilerActivity.CUDA)
    with warnings.catch_warnings():
        # Its warm-up advice is for schedules without one; ours ran just above, unprofiled.
        warnings.filterwarnings("ignore", message="Profiler won't be using warmup")
        # repeat=1: after the last active step the profile stops; by default (repeat=0) it would
        # open a new, empty cycle, and that is what export_chrome_trace would then write.
        # warmup=1: the profiler's own start-up (CUPTI buffers, doc section 7) lands in one
        # extra call that is traced and thrown away, not in the first profiled call.
        window = schedule(wait=0, warmup=1, active=settings.steps, repeat=1)
    watch = CompileWatch()
    warmup_compiles, recompiles = list(run.warmup_compiles), []
    with profile(
        activities=activities,
        record_shapes=settings.record_shapes,
        with_stack=settings.with_stack,
        profile_memory=settings.profile_memory,
        schedule=window,
    ) as prof:
        progress(f"profiling {settings.steps} calls")
        _call(call, f"in the profiler's warm-up {mode} call")
        _synchronize()
        prof.step()
        # not profiled (its events are dropped), so a compile here is one more warm-up compile
        warmup_compiles += watch.new(f"the profiler's warm-up {mode} call")
        for i in range(settings.steps):
            _call(call, f"in profiled {mode} call {i + 1}")
            if i == settings.steps - 1:
                _synchronize()  # the last step's prof.step() closes the profile: GPU work must be done
            prof.step()  # ends ProfilerStep#i: the viewers count kernels per call from these
            # Dynamo's record of its compiles, read between calls: nothing runs inside them
            recompiles += watch.new(f"profiled {mode} call {i + 1}")
    machine["load_average_after"] = _load()
    progress("exporting the trace")
    prof.export_chrome_trace(str(export_to))
    return ModeRun(run.mode, run.first_call_seconds, run.provenance, run.graph_breaks, tuple(warmup_compiles),
                   tuple(recompiles), machine)
