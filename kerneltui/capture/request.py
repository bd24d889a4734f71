"""What `kerneltui capture` was asked to do, checked: built by command.py, run by session.py.

A module of its own so that the session (which imports torch) and the command (which must not)
share it without importing each other. No torch here.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kerneltui.capture.params import Value
from kerneltui.capture.ranks import SINGLE, Launch

# Profiled calls when --steps is not given. On a GPU the kernels' times are steady and 3 calls show
# them; on the CPU the per-call median of op times moves with the machine's load and needs more
# calls to settle (docs/capture.md#what-each-mode-does gives the measurement).
GPU_STEPS = 3
CPU_STEPS = 20


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
    script_args: tuple[str, ...] = ()  # the script's sys.argv[1:]
    backend: str = "inductor"
    fullgraph: bool = False
    dynamic: bool | None = None
    record_shapes: bool = True
    allow_recompile: bool = False
    steps_given: bool = True  # False: `steps` is the GPU default, and a CPU capture takes CPU_STEPS
    launch: Launch = SINGLE  # under torchrun: this process's rank and the world size
