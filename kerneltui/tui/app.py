"""The `kerneltui open` app: loads a trace in a thread worker, then shows the browser.

``build_app`` is the one factory for the CLI, the tests and the benchmark; the
loader is a parameter so tests can pass a fake or a prepared Trace.
"""

from __future__ import annotations

import gc

from textual import work
from textual.worker import get_current_worker

from kerneltui.terminal_text import printable
from kerneltui.trace.model import load_trace
from kerneltui.tui.loading_app import Loader, LoadingApp
from kerneltui.tui.messages import BrowseReady, KernelsReady, LoadProgress, LoadStage
from kerneltui.tui.model import build_browse, build_kernels
from kerneltui.tui.screens.browser import BrowserScreen
from kerneltui.tui.screens.loading import LoadingScreen


class KernelTuiApp(LoadingApp):
    CSS_PATH = "app.tcss"
    TITLE = "kerneltui"

    def __init__(self, path: str, loader: Loader = load_trace) -> None:
        super().__init__(loader)
        self.path = path

    def on_mount(self) -> None:
        self.push_screen(LoadingScreen(self.path))
        self.load()

    @work(thread=True, exclusive=True, exit_on_error=False, group="load", name="load trace")
    def load(self) -> None:
        """Read, link, aggregate; publish each stage as soon as it exists. Touches no widget."""
        trace = self.loader(self.path, progress=lambda f: self.post_message(LoadProgress(f)))
        post_stages(self, trace)

    def on_kernels_ready(self, message: KernelsReady) -> None:
        self.loaded = [message.kernels.trace.meta]
        self.switch_screen(BrowserScreen(message.kernels))
        self.call_after_refresh(self.replay_pending_keys)
        for warning in message.kernels.trace.meta.warnings:
            self.notify(printable(warning), title="trace", severity="warning", timeout=8, markup=False)

    def on_browse_ready(self, message: BrowseReady) -> None:
        browser = self._browser()
        if browser is not None:
            browser.set_browse(message.browse)
        # The trace's objects live until exit: keep the collector from re-walking them on every
        # full collection (those took up to 0.7 s a keystroke on a million launches).
        gc.freeze()

    def _browser(self) -> BrowserScreen | None:
        for screen in reversed(self.screen_stack):
            if isinstance(screen, BrowserScreen):
                return screen
        return None


def post_stages(app, trace) -> None:
    """From a load worker: link and aggregate a read trace, posting KernelsReady (the table can show)
    then BrowseReady (everything else); stops wherever the worker was cancelled."""
    worker = get_current_worker()
    if worker.is_cancelled:
        return
    app.post_message(LoadStage(f"linking {len(trace.events):,} events to their launches"))
    kernels = build_kernels(trace)
    if worker.is_cancelled:
        return
    app.post_message(KernelsReady(kernels))
    browse = build_browse(kernels)
    if not worker.is_cancelled:
        app.post_message(BrowseReady(browse))


def build_app(path: str, loader: Loader = load_trace) -> KernelTuiApp:
    # load_trace decodes in this app's loading thread, with the decode workers that `open`
    # started before Textual did (trace/pool.py says why), else in that thread alone.
    return KernelTuiApp(str(path), loader)
