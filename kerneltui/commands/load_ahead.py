"""`open` reads the trace while Textual is still being imported and started.

Textual's import and the app's start-up take about half a second, all before the app's loading
worker would begin; a cold 1 GB trace takes about 1.3 s to read. ``LoadAhead`` starts the read on
a thread as soon as the loader is importable and hands the app its result: the first call is
answered by the read already under way (its progress forwarded from where it is), any later call
(the app reading again) runs the loader afresh. ``load_trace`` is the loader that needs only numpy
to start: pandas (~0.4 s to import) is imported while it reads, for the Trace made at its end.
"""

from __future__ import annotations

import threading
from collections.abc import Callable


def load_trace(path, progress: Callable[[float], None] | None = None, **kwargs):
    """``kerneltui.trace.model.load_trace``, whose module (and pandas) is imported once the read is done."""
    from kerneltui.trace.cache import load

    raw, meta = load(path, progress, **kwargs)
    from kerneltui.trace.model import Trace

    return Trace(raw, meta)


class LoadAhead:
    def __init__(self, loader: Callable, path: str):
        self.loader = loader
        self.path = path
        self._lock = threading.Lock()
        self._progress: Callable[[float], None] | None = None
        self._fraction: float | None = None  # the latest progress, until someone listens
        self._result: tuple = ()
        self._done = threading.Event()
        self._used = False
        threading.Thread(target=self._read, name="kerneltui-load-ahead", daemon=True).start()

    def _read(self) -> None:
        try:
            self._result = (self.loader(self.path, progress=self._report), None)
        except BaseException as exc:  # noqa: BLE001 - handed to whoever asks for the trace, raised there
            self._result = (None, exc)
        self._done.set()

    def _report(self, fraction: float) -> None:
        with self._lock:
            listener, self._fraction = self._progress, fraction
        if listener is not None:
            listener(fraction)

    def __call__(self, path: str, progress: Callable[[float], None] | None = None, **kwargs):
        """The trace, as ``loader(path, progress=...)`` gives it."""
        with self._lock:
            first = not self._used and path == self.path and not kwargs
            self._used = True
            if first:
                self._progress, fraction = progress, self._fraction
        if not first:
            return self.loader(path, progress=progress, **kwargs)
        if progress is not None and fraction is not None:
            progress(fraction)
        self._done.wait()
        trace, error = self._result
        self._result = ()  # the trace is the app's now: nothing here keeps it alive
        if error is not None:
            raise error
        return trace
