"""The `kerneltui diff A B` app: loads and diffs both traces in a thread worker, then shows DiffScreen.

``build_app`` is the one factory for the CLI and the tests; the loader is a
parameter so tests can pass prepared traces.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from textual import on, work
from textual.app import App
from textual.binding import Binding
from textual.message import Message
from textual.worker import Worker, WorkerState, get_current_worker

from kerneltui.errors import TraceError, UserError
from kerneltui.trace.model import Trace, load_trace
from kerneltui.tui.diff.model import DiffView, build_view
from kerneltui.tui.diff.screen import DiffScreen
from kerneltui.tui.screens.loading import LoadingScreen

Loader = Callable[..., Trace]


class DiffProgress(Message):
    """Share of both files read (0..1); a newer one replaces an unprocessed older one."""

    def __init__(self, fraction: float) -> None:
        super().__init__()
        self.fraction = fraction

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, DiffProgress)


class DiffStage(Message):
    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text


class DiffReady(Message):
    def __init__(self, view: DiffView) -> None:
        super().__init__()
        self.view = view


class DiffApp(App):
    CSS_PATH = "diff.tcss"
    TITLE = "kerneltui diff"
    ENABLE_COMMAND_PALETTE = False
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (120, "-wide")]
    VERTICAL_BREAKPOINTS = [(0, "-short"), (36, "-tall")]
    BINDINGS = [Binding("ctrl+q", "quit", "Quit", show=False, id="app.quit")]

    def __init__(self, a: str, b: str, loader: Loader = load_trace) -> None:
        super().__init__()
        self.paths = (a, b)
        self.loader = loader
        self.error: str | None = None

    def on_mount(self) -> None:
        self.push_screen(LoadingScreen(f"{self.paths[0]}  vs  {self.paths[1]}"))
        self.load()

    @work(thread=True, exclusive=True, exit_on_error=False, group="load", name="load and diff")
    def load(self) -> None:
        """Read both traces, diff them, build the lanes. Touches no widget."""
        worker = get_current_worker()
        traces = []
        for i, path in enumerate(self.paths):
            traces.append(self.loader(path, progress=lambda f, i=i: self.post_message(DiffProgress((i + f) / 2))))
            if worker.is_cancelled:
                return
        self.post_message(DiffStage("matching kernels"))
        view = build_view(*traces)
        if not worker.is_cancelled:
            self.post_message(DiffReady(view))

    def on_diff_progress(self, message: DiffProgress) -> None:
        if isinstance(self.screen, LoadingScreen):
            self.screen.progress(message.fraction)

    def on_diff_stage(self, message: DiffStage) -> None:
        if isinstance(self.screen, LoadingScreen):
            self.screen.stage(message.text)

    def on_diff_ready(self, message: DiffReady) -> None:
        self.switch_screen(DiffScreen(message.view))

    @on(Worker.StateChanged)
    def _worker_changed(self, event: Worker.StateChanged) -> None:
        if event.state != WorkerState.ERROR:
            return
        error = event.worker.error
        if isinstance(error, UserError):
            # the CLI's one line, on screen; quitting exits 2 and prints it again for the shell
            self.error = str(error)
            if isinstance(self.screen, LoadingScreen):
                self.screen.failed(self.error)
            return
        raise error  # our bug: let Textual show the traceback

    def action_quit(self) -> None:
        self.exit(return_code=2 if self.error else 0)


def build_app(a: str, b: str, loader: Loader = load_trace) -> DiffApp:
    return DiffApp(str(a), str(b), loader)


def run_app(a: str, b: str) -> int:
    for path in (a, b):
        if not os.path.exists(path):
            raise TraceError(f"{path}: no such file")
    app = build_app(a, b)
    app.run()
    if app.error:
        raise UserError(app.error)
    return app.return_code or 0
