"""Human units for times and sizes, shared by the reports and the screens."""

from __future__ import annotations

import math


def fmt_ns(ns: float) -> str:
    """A duration in at most 8 characters: 0.74µs, 178.9µs, 1.07ms, 2.31s."""
    if ns is None or (isinstance(ns, float) and math.isnan(ns)):
        return "–"
    ns = float(ns)
    if abs(ns) < 10_000:
        return f"{ns / 1e3:.2f}µs"
    if abs(ns) < 1_000_000:
        return f"{ns / 1e3:.1f}µs"
    if abs(ns) < 1_000_000_000:
        return f"{ns / 1e6:.2f}ms"
    return f"{ns / 1e9:.2f}s"


def plural(n: float, word: str) -> str:
    """'1 launch', '2 launches', '1,234 kernels'."""
    ending = "es" if word.endswith(("ch", "sh", "s", "x")) else "s"
    number = f"{int(n):,}" if float(n).is_integer() else f"{n:,.1f}"
    return f"{number} {word}" if n == 1 else f"{number} {word}{ending}"


def fmt_bytes(n: float) -> str:
    if n is None or n < 0:
        return "–"
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{int(n)} B"


def fmt_share(x: float) -> str:
    return f"{100 * x:.1f}%"


def ellipsize(text: str, width: int) -> str:
    """Cut text to width, marking the cut with an ellipsis."""
    if width <= 0:
        return ""
    return text if len(text) <= width else text[: width - 1] + "…"


def middle_ellipsize(text: str, width: int) -> str:
    """Keep the head and the (longer) tail, where kernel names differ: `vectorize…CUDAKernelImpl>[bf16]`."""
    if len(text) <= width or width < 8:
        return ellipsize(text, width)
    head = (width - 1) // 3
    return text[:head] + "…" + text[len(text) - (width - 1 - head):]
