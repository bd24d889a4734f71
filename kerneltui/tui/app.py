"""The `kerneltui open` app: loads a trace in a thread worker, then shows the browser.

``build_app`` is the one factory for the CLI, the tests and the benchmark; the
loader is a parameter so tests can pass a fake or a prepared Trace.
"""

from __future__ import annotations

import gc
from collections.abc import Callable

from textual import on, work
from textual.app import App
from textual.binding import Binding
from textual.worker import Worker, WorkerState, get_current_worker

from kerneltui.errors import UserError
from kerneltui.trace.model import Trace, load_trace
from kerneltui.tui.messages import BrowseReady, KernelsReady, LoadProgress, LoadStage
from kerneltui.tui.model import build_browse, build_kernels
from kerneltui.tui.screens.browser import BrowserScreen
from kerneltui.tui.screens.loading import LoadingScreen

Loader = Callable[..., Trace]


class KernelTuiApp(App):
    CSS_PATH = "app.tcss"
    TITLE = "kerneltui"
    ENABLE_COMMAND_PALETTE = False
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (120, "-wide")]
    VERTICAL_BREAKPOINTS = [(0, "-short"), (36, "-tall")]
    BINDINGS = [Binding("ctrl+q", "quit", "Quit", show=False, id="app.quit")]

    def __init__(self, path: str, loader: Loader = load_trace) -> None:
        super().__init__()
        self.path = path
        self.loader = loader
        self.error: str | None = None

    def on_mount(self) -> None:
        self.push_screen(LoadingScreen(self.path))
        self.load()

    @work(thread=True, exclusive=True, exit_on_error=False, group="load", name="load trace")
    def load(self) -> None:
        """Read, link, aggregate; publish each stage as soon as it exists. Touches no widget."""
        worker = get_current_worker()
        trace = self.loader(self.path, progress=lambda f: self.post_message(LoadProgress(f)))
        if worker.is_cancelled:
            return
        self.post_message(LoadStage(f"linking {len(trace.events):,} events to their launches"))
        kernels = build_kernels(trace)
        if worker.is_cancelled:
            return
        self.post_message(KernelsReady(kernels))
        browse = build_browse(kernels)
        if not worker.is_cancelled:
            self.post_message(BrowseReady(browse))

    def on_load_progress(self, message: LoadProgress) -> None:
        if isinstance(self.screen, LoadingScreen):
            self.screen.progress(message.fraction)

    def on_load_stage(self, message: LoadStage) -> None:
        if isinstance(self.screen, LoadingScreen):
            self.screen.stage(message.text)

    def on_kernels_ready(self, message: KernelsReady) -> None:
        self.switch_screen(BrowserScreen(message.kernels))
        for warning in message.kernels.trace.meta.warnings:
            self.notify(warning, title="trace", severity="warning", timeout=8)

    def on_browse_ready(self, message: BrowseReady) -> None:
        browser = self._browser()
        if browser is not None:
            browser.set_browse(message.browse)
        # The trace's objects live until exit: keep the collector from re-walking them on every
        # full collection (those took up to 0.7 s a keystroke on a million launches).
        gc.freeze()

    @on(Worker.StateChanged)
    def _worker_changed(self, event: Worker.StateChanged) -> None:
        if event.state != WorkerState.ERROR:
            return
        error = event.worker.error
        if isinstance(error, UserError):
            # the same one line the CLI prints, shown in the app; the exit status says it failed
            self.error = str(error)
            for screen in self.screen_stack:
                if isinstance(screen, LoadingScreen) and screen.is_mounted:
                    screen.failed(self.error)  # (not mounted yet: it shows app.error on mount)
            return
        raise error  # our bug: let Textual show the traceback

    def action_quit(self) -> None:
        self.exit(return_code=2 if self.error else 0)

    def _browser(self) -> BrowserScreen | None:
        for screen in reversed(self.screen_stack):
            if isinstance(screen, BrowserScreen):
                return screen
        return None


def build_app(path: str, loader: Loader = load_trace) -> KernelTuiApp:
    # load_trace decodes in this app's loading thread: the data layer keeps its worker
    # processes for the main thread of a plain process (trace/pool.py says why).
    return KernelTuiApp(str(path), loader)
