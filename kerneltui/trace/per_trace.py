"""A value built once per trace and kept while the trace lives, shared by threads (one builds it)."""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class PerTrace(Generic[T]):
    """``PerTrace(build)(trace)``: ``build(trace)`` the first time, the same value after. Kept beside the
    trace rather than on it, for what the data layer's Trace does not know about (the explore indexes)."""

    def __init__(self, build: Callable[..., T]):
        self._build = build
        self._values: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()

    def __call__(self, trace) -> T:
        with self._lock:  # held while building: a second thread waits for the first's value
            value = self._values.get(trace)
            if value is None:
                value = self._values[trace] = self._build(trace)
            return value

    def built(self, trace) -> T | None:
        """The value if it was built, else None (nothing is built)."""
        with self._lock:
            return self._values.get(trace)
