"""One mode of one workload under torch.profiler: warm-up (and compile) first, then the profiled calls."""

from __future__ import annotations

import contextlib
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import torch
from torch.profiler import ProfilerActivity, profile, schedule

from kerneltui.capture import provenance
from kerneltui.capture.workload import user_code


@dataclass(frozen=True)
class Settings:
    warmup: int
    steps: int
    compile_mode: str
    with_stack: bool
    profile_memory: bool


@dataclass(frozen=True)
class ModeRun:
    mode: str
    first_call_seconds: float
    provenance: dict[str, Any] | None = None  # compiled mode: the `provenance` block (docs/capture.md)
    graph_breaks: int | None = None  # compiled mode: Dynamo's own count while compiling (warm-up)

    @property
    def compile_seconds(self) -> float | None:
        """The first compiled call, which compiles; None in eager mode."""
        return self.first_call_seconds if self.mode == "compiled" else None


def _synchronize() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def _call(fn: Callable[..., Any], inputs: tuple, where: str) -> None:
    with user_code(where):
        fn(*inputs)


def prepare(fn: Callable[..., Any], compile_mode: str, recorder: provenance.Recorder) -> Callable[..., Any]:
    """torch.compile(fn, mode=compile_mode), through a backend that is Inductor's own and also
    hands each graph to the provenance recorder."""
    # Forget graphs compiled for an earlier sweep point: a second shape would otherwise
    # make Dynamo recompile with dynamic shapes, a different kernel from a fresh compile.
    torch._dynamo.reset()
    return torch.compile(fn, backend=recorder.backend(compile_mode))


def warm_up(
    fn: Callable[..., Any], inputs: tuple, mode: str, settings: Settings, progress: Callable[[str], None]
) -> tuple[Callable[..., Any], ModeRun]:
    """The unprofiled calls: the first compiles. In compiled mode the kernels' provenance is recorded
    here, while they compile; nothing of it stays attached for the calls after."""
    recording = provenance.recording() if mode == "compiled" else contextlib.nullcontext()
    with recording as recorder:
        call = prepare(fn, settings.compile_mode, recorder) if recorder else fn
        breaks_before = _graph_breaks()  # after prepare: torch._dynamo.reset() clears the counters
        progress("compiling (the first call)" if mode == "compiled" else f"warming up ({settings.warmup} calls)")
        start = time.perf_counter()
        _call(call, inputs, f"in the first {mode} call")
        _synchronize()
        first_call_seconds = time.perf_counter() - start
        if mode == "compiled" and settings.warmup > 1:
            progress(f"warming up ({settings.warmup - 1} more calls)")
        for i in range(1, settings.warmup):
            _call(call, inputs, f"in {mode} warm-up call {i + 1}")
        _synchronize()  # warm-up kernels must not run into the profiled window
    breaks = _graph_breaks() - breaks_before if mode == "compiled" else None
    return call, ModeRun(mode, first_call_seconds, recorder.block() if recorder else None, breaks)


def _graph_breaks() -> int:
    """Dynamo's running count of graph breaks (each break it met while tracing, once per compile)."""
    from torch._dynamo.utils import counters

    return int(sum(counters["graph_break"].values()))


def run_mode(
    fn: Callable[..., Any],
    inputs: tuple,
    mode: str,
    settings: Settings,
    export_to: Path,
    progress: Callable[[str], None],
) -> ModeRun:
    """Warms up (never profiled), profiles `settings.steps` calls, exports the Chrome trace to `export_to`."""
    call, run = warm_up(fn, inputs, mode, settings, progress)
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
    with profile(
        activities=activities,
        record_shapes=True,
        with_stack=settings.with_stack,
        profile_memory=settings.profile_memory,
        schedule=window,
    ) as prof:
        progress(f"profiling {settings.steps} calls")
        _call(call, inputs, f"in the profiler's warm-up {mode} call")
        _synchronize()
        prof.step()
        for i in range(settings.steps):
            _call(call, inputs, f"in profiled {mode} call {i + 1}")
            if i == settings.steps - 1:
                _synchronize()  # the last step's prof.step() closes the profile: GPU work must be done
            prof.step()  # ends ProfilerStep#i: the viewers count kernels per call from these
    progress("exporting the trace")
    prof.export_chrome_trace(str(export_to))
    return run
