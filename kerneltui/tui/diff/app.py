"""The `kerneltui diff A B` app: loads and diffs both traces in a thread worker, then shows DiffScreen.

``build_app`` is the one factory for the CLI and the tests; the loader is a
parameter so tests can pass prepared traces.
"""

from __future__ import annotations

import os
import sys

from textual import work
from textual.message import Message
from textual.worker import get_current_worker

from kerneltui.errors import TraceError, UserError
from kerneltui.analysis.compare.diff import diff_traces
from kerneltui.trace.model import load_trace
from kerneltui.tui.diff.model import DiffView, build_view
from kerneltui.tui.diff.screen import DiffScreen
from kerneltui.tui.loading_app import Loader, LoadingApp, paced
from kerneltui.tui.messages import LoadProgress, LoadStage
from kerneltui.tui.screens.loading import LoadingScreen


class DiffReady(Message):
    def __init__(self, view: DiffView, metas: tuple) -> None:
        super().__init__()
        self.view = view
        self.metas = metas  # each side's TraceMeta: warnings and damage, for the exit


class DiffApp(LoadingApp):
    CSS_PATH = "diff.tcss"
    TITLE = "kerneltui diff"

    def __init__(self, a: str, b: str, loader: Loader = load_trace, provenance=None) -> None:
        super().__init__(loader)
        self.paths = (a, b)
        self.provenance = provenance  # records from `--provenance FILE`, for the side they name

    def on_mount(self) -> None:
        self.push_screen(LoadingScreen(f"{self.paths[0]}  vs  {self.paths[1]}"))
        self.load()

    @work(thread=True, exclusive=True, exit_on_error=False, group="load", name="load and diff")
    def load(self) -> None:
        """Read both traces, diff them, build the lanes. Touches no widget."""
        worker = get_current_worker()
        traces = []
        report = paced(lambda f: self.post_message(LoadProgress(f)))
        for i, path in enumerate(self.paths):
            traces.append(self.loader(path, progress=lambda f, i=i: report((i + f) / 2)))
            if worker.is_cancelled:
                return
        self.post_message(LoadStage("matching kernels"))
        view = build_view(*traces, diff_traces(*traces, self.provenance) if self.provenance else None)
        if not worker.is_cancelled:
            self.post_message(DiffReady(view, tuple(t.meta for t in traces)))

    def on_diff_ready(self, message: DiffReady) -> None:
        self.loaded = list(message.metas)
        self.switch_screen(DiffScreen(message.view))
        self.call_after_refresh(self.replay_pending_keys)


def build_app(a: str, b: str, loader: Loader = load_trace, provenance=None) -> DiffApp:
    return DiffApp(str(a), str(b), loader, provenance)


def run_app(a: str, b: str, loader: Loader = load_trace, provenance=None) -> int:
    for path in (a, b):
        if not os.path.exists(path):
            raise TraceError(f"{path}: no such file")
    app = build_app(a, b, loader, provenance)
    app.run()
    if app.error:
        raise UserError(app.error)
    for line in app.after_exit_lines():
        print(line, file=sys.stderr)
    return app.return_code or 0
