"""Time-window arithmetic of the timeline (zoom, pan, reveal), as pure functions on (start, end) ns."""

from __future__ import annotations

import numpy as np

Window = tuple[int, int]


def clamp(window: Window, bounds: Window, min_span: int) -> Window:
    """Inside bounds, at least min_span wide (never wider than the bounds)."""
    b0, b1 = bounds
    start, end = int(window[0]), int(window[1])
    span = min(max(end - start, min_span), b1 - b0)
    start = min(max(start, b0), b1 - span)
    return start, start + span


def zoomed(window: Window, factor: float, center: int) -> Window:
    """Scaled by 1/factor around center, which stays where it is on screen."""
    w0, w1 = window
    return int(center - (center - w0) / factor), int(center + (w1 - center) / factor)


def panned(window: Window, fraction: float) -> Window:
    w0, w1 = window
    shift = int((w1 - w0) * fraction) or (1 if fraction > 0 else -1)
    return w0 + shift, w1 + shift


def around(start: int, end: int, margin: float) -> Window:
    """A window on [start, end] with margin x its length on each side."""
    pad = max(int((end - start) * margin), 1)
    return start - pad, end + pad


def revealed(window: Window, start: int, end: int) -> Window:
    """The window moved (or widened) just enough to show [start, end]; unchanged if it already does."""
    w0, w1 = window
    span = w1 - w0
    if start >= w0 and end <= w1:
        return window
    if end - start > span * 0.9:
        return around(start, end, 0.05)
    middle = (start + end) // 2
    return middle - span // 2, middle - span // 2 + span


def step_at(starts: np.ndarray, ends: np.ndarray, own: int, t: int, delta: int) -> int:
    """The step to count from: the selection's own step if known, else the last one starting before t.

    Between two steps, "previous" is the one just before, so it counts from the next.
    """
    if own >= 0:
        return own
    current = int(np.searchsorted(starts, t, side="right")) - 1
    if delta < 0 and current >= 0 and t > ends[current]:
        current += 1
    return current
