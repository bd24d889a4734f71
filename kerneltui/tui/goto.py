"""`:` in the browser: what the user typed, read as a step or a time (no Textual here).

    3, #3, step 3, ProfilerStep#3   the step numbered 3 (ProfilerStep#3), else the 3rd step or call
    mlp_forward #2                  a step or call by its label
    12.5ms, 300us, 300µs, 1.2s, 4000ns, 12.5 (ms)
                                    a time from the start of the trace's window
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_TIME = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*(ns|us|µs|ms|s)?\s*$", re.IGNORECASE)
_STEP = re.compile(r"^\s*(?:step\s*|#|profilerstep\s*#\s*)?(\d+)\s*$", re.IGNORECASE)
_UNIT_NS = {"ns": 1, "us": 1_000, "µs": 1_000, "ms": 1_000_000, "s": 1_000_000_000}


@dataclass(frozen=True)
class Target:
    step: int | None = None  # an iteration index
    time_ns: int | None = None  # from the window's start
    error: str = ""


def parse_target(text: str, labels: tuple[str, ...], numbers: list[int], unit: str = "step") -> Target:
    """``labels``: the steps' (or calls') labels; ``numbers``: their ProfilerStep numbers (-1 where none)."""
    text = text.strip()
    if not text:
        return Target(error="type a step (3, #3, step 3) or a time (12.5ms)")
    lowered = [label.lower() for label in labels]
    if text.lower() in lowered:
        return Target(step=lowered.index(text.lower()))
    step = _STEP.match(text)
    if step and (text.lstrip()[:1] in "#sSpP" or not _looks_like_time(text)):
        n = int(step.group(1))
        if n in numbers:
            return Target(step=numbers.index(n))
        if 1 <= n <= len(labels):
            return Target(step=n - 1)
        return Target(error=f"no {unit} {n}: the trace has {len(labels)} ({_range(labels)})")
    time = _TIME.match(text)
    if time:
        scale = _UNIT_NS[(time.group(2) or "ms").lower().replace("µs", "µs")]
        return Target(time_ns=round(float(time.group(1)) * scale))
    return Target(error=f"not a {unit} or a time: {text!r} (try 3, #3, {labels[0] if labels else 'step 1'}, 12.5ms)")


def _looks_like_time(text: str) -> bool:
    """A bare number is a step; with a unit or a decimal point it is a time."""
    return bool(re.search(r"[.a-zµ]", text.strip().lower()))


def _range(labels: tuple[str, ...]) -> str:
    return labels[0] if len(labels) == 1 else f"{labels[0]} … {labels[-1]}" if labels else "none"
