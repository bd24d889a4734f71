"""Workload parameters from the command line: `-p n=1e6`, `--sweep n=100,1e6,1e8`.

No torch here: `kerneltui --help` and argument errors must answer at once.
"""

from __future__ import annotations

import math
import re

from kerneltui.errors import UserError

Value = int | float | bool | str

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_UNSAFE_IN_FILENAME = re.compile(r"[^A-Za-z0-9.+-]+")


def parse_value(text: str) -> Value:
    """`1e6` -> 1000000 (a number that is integral becomes an int), `0.5` -> 0.5, `true` -> True."""
    lowered = text.strip().lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    try:
        return int(lowered.replace("_", ""))
    except ValueError:
        pass
    try:
        number = float(lowered.replace("_", ""))
    except ValueError:
        return text.strip()
    if math.isfinite(number) and number.is_integer():
        return int(number)
    return number


def _split(assignment: str, option: str) -> tuple[str, str]:
    name, sep, value = assignment.partition("=")
    name = name.strip()
    if not sep or not _NAME.match(name) or not value.strip():
        raise UserError(f"{option} {assignment!r}: write NAME=VALUE, e.g. {option} n=1000000")
    return name, value


def parse_assignments(assignments: list[str] | None) -> dict[str, Value]:
    """The `-p NAME=VALUE` options, in order; a repeated name keeps its last value."""
    return {name: parse_value(value) for name, value in (_split(a, "-p") for a in assignments or [])}


def parse_sweep(sweep: str | None) -> tuple[str, tuple[Value, ...]] | None:
    """`n=100,1e6,1e8` -> ("n", (100, 1000000, 100000000))."""
    if sweep is None:
        return None
    name, values = _split(sweep, "--sweep")
    parsed = tuple(parse_value(v) for v in values.split(",") if v.strip())
    if not parsed:
        raise UserError(f"--sweep {sweep!r}: give at least one value, e.g. --sweep n=100,1e6,1e8")
    return name, parsed


def format_value(value: Value) -> str:
    """A value as it appears in a file name: safe on every file system, still readable."""
    text = repr(value) if isinstance(value, float) else str(value)
    return _UNSAFE_IN_FILENAME.sub("-", text).strip("-") or "x"


def label(params: dict[str, Value], skip: tuple[str, ...] = ("device",)) -> str:
    """`{"n": 1000000, "device": "cuda"}` -> "n1000000" (the device is in the file's metadata)."""
    return "_".join(f"{name}{format_value(value)}" for name, value in params.items() if name not in skip)


def describe(params: dict[str, Value], skip: tuple[str, ...] = ("device",)) -> str:
    """`{"n": 1000000, "device": "cuda"}` -> "n=1000000", for people rather than file names."""
    return " ".join(f"{name}={value}" for name, value in params.items() if name not in skip)
