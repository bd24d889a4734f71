"""What Dynamo compiled while a call ran: recompiles in the profiled calls, torch.compile in eager mode.

    watch = CompileWatch()
    call()
    for event in watch.new("profiled compiled call 2"): ...

Read from Dynamo's own record of its compiles (`torch._dynamo.utils.get_compilation_metrics()`:
one entry per frame compile, with the guard failure that caused a recompile), so nothing of ours
runs inside the calls: the profiled calls cost what they would cost without kerneltui.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any

import torch

_RESUME = re.compile(r"torch_dynamo_resume_in_(\w+)_at_\d+\Z")  # the frame Dynamo makes after a graph break


@dataclass(frozen=True)
class Compile:
    """One frame compile Dynamo made during a call."""

    call: str  # "profiled compiled call 2"
    function: str  # "step (model.py:11)"
    reason: str | None  # Dynamo's guard failure for a recompile; None for a frame compiled the first time
    compile_id: str | None

    def why(self) -> str:
        """One line: what recompiled and why, in Dynamo's words."""
        if self.reason:
            return f"{self.function} recompiled: {self.reason}"
        return f"{self.function} compiled for the first time"

    def to_json(self) -> dict[str, Any]:
        """An entry of the block's `recompiles` list (the diff reads `call` and `reason`)."""
        return {"call": self.call, "reason": self.why(), "compile_id": self.compile_id}


def _metrics() -> list[Any]:
    utils = torch._dynamo.utils
    return list(utils.get_compilation_metrics()) if hasattr(utils, "get_compilation_metrics") else []


def _one_line(text: str) -> str:
    """Dynamo's reason on one line, without the id of the cached graph whose guard failed ("1/0: ...")."""
    return re.sub(r"^\d+/\d+: ", "", re.sub(r"\s*\n\s*", "; ", text.strip()))


def _function(metric: Any) -> str:
    name = getattr(metric, "co_name", None) or "?"
    resumed = _RESUME.match(name)
    if resumed:  # after a graph break Dynamo compiles the rest of the function as a frame of its own
        name = f"{resumed.group(1)} (after a graph break)"
    file, line = getattr(metric, "co_filename", None), getattr(metric, "co_firstlineno", None)
    return f"{name} at {os.path.basename(file)}:{line}" if file else name


class CompileWatch:
    """Dynamo's compiles since the watch started, or since the last `new()`."""

    def __init__(self) -> None:
        # The metrics are a bounded deque of live objects: an id seen stays taken while it is in it.
        self._seen = {id(m) for m in _metrics()}

    def new(self, call: str) -> list[Compile]:
        found = []
        for metric in _metrics():
            if id(metric) in self._seen:
                continue
            self._seen.add(id(metric))
            if getattr(metric, "is_forward", True) is False:
                continue  # a backward compiled at its first run: its forward's compile is the news
            reason = getattr(metric, "recompile_reason", None)
            cid = getattr(metric, "compile_id", None)
            found.append(Compile(call, _function(metric), _one_line(reason) if reason else None,
                                 None if cid is None else str(cid)))
        return found
