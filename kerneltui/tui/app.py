"""The `kerneltui open` app: loads a trace in a thread worker, then shows the browser.

``build_app`` is the one factory for the CLI, the tests and the benchmark; the
loader is a parameter so tests can pass a fake or a prepared Trace.
"""

from __future__ import annotations

import gc
import threading

from textual import work
from textual.worker import get_current_worker

from kerneltui.commands import kept_screen
from kerneltui.commands.kept_screen import FirstScreen
from kerneltui.terminal_text import printable
from kerneltui.trace import heap
from kerneltui.trace.model import load_trace
from kerneltui.tui.loading_app import Loader, LoadingApp, paced
from kerneltui.tui.messages import (
    AnalysesReady,
    BrowseReady,
    KernelsReady,
    LoadProgress,
    LoadStage,
)
from kerneltui.tui.model import (
    build_analyses,
    build_browse,
    build_kernels,
    early_memory_table,
)
from kerneltui.tui.screens.browser import BrowserScreen
from kerneltui.tui.screens.kept_frame import KeptFrameScreen, frame_lines
from kerneltui.tui.screens.loading import LoadingScreen

FIRST_DRAW_WAIT_S = 1.0  # stage 2 waits this long at most for the first draw (a screen that never draws)


class KernelTuiApp(LoadingApp):
    CSS_PATH = "app.tcss"
    TITLE = "kerneltui"

    def __init__(self, path: str, loader: Loader = load_trace, kept: FirstScreen | None = None) -> None:
        super().__init__(loader)
        self.path = path
        self.kept = kept  # commands/kept_screen.py: the first screen shown already, or where to keep it
        self._keeping: BrowserScreen | None = None  # the browser whose first draw is to be kept
        self._browse_held: BrowseReady | None = None  # stage 2, held until that draw is kept
        self.first_drawn = threading.Event()  # the browser's first draw is on screen: stage 2 may start
        self.took_terminal = False

    def on_mount(self) -> None:
        self.took_terminal = True  # Textual's alternate screen now: it leaves it on exit (commands/open.py)
        if self.kept is not None and self.kept.lines is not None:
            self.push_screen(KeptFrameScreen(self.path, self.kept.lines, self.kept.size))
        else:
            self.push_screen(LoadingScreen(self.path))
        self.load()

    @work(thread=True, exclusive=True, exit_on_error=False, group="load", name="load trace")
    def load(self) -> None:
        """Read, link, aggregate; publish each stage as soon as it exists. Touches no widget."""
        trace = self.loader(self.path, progress=paced(lambda f: self.post_message(LoadProgress(f))))
        post_stages(self, trace)

    def on_kernels_ready(self, message: KernelsReady) -> None:
        self.loaded = [message.kernels.trace.meta]
        browser = BrowserScreen(message.kernels)
        if self.kept is not None and self.kept.where is not None and self.kept.lines is None and not self.pending_keys:
            self._keeping = browser  # its first draw, untouched by keys, is what the next open shows at once
        self.switch_screen(browser)
        self.call_after_refresh(self.replay_pending_keys)
        for warning in message.kernels.trace.meta.warnings:
            self.notify(printable(warning), title="trace", severity="warning", timeout=8, markup=False)

    def browser_drawn(self, browser: BrowserScreen) -> None:
        """The browser's first draw is on screen: keep it (before stage 2 changes it) for the next open."""
        self.first_drawn.set()
        if self._keeping is not browser:
            return
        self._keeping = None
        if self.screen is browser and (self.size.width, self.size.height) == tuple(self.kept.size):
            kept_screen.write(self.kept.where, frame_lines(browser))
        if self._browse_held is not None:
            held, self._browse_held = self._browse_held, None
            self.on_browse_ready(held)

    def on_browse_ready(self, message: BrowseReady) -> None:
        if self._keeping is not None:
            self._browse_held = message  # the kept first screen is stage 1's, whichever stage came first
            return
        browser = self._browser()
        if browser is not None:
            browser.set_browse(message.browse)
        # The trace's objects live until exit: keep the collector from re-walking them on every
        # full collection (those took up to 0.7 s a keystroke on a million launches).
        gc.freeze()

    def on_analyses_ready(self, message: AnalysesReady) -> None:
        browser = self._browser()
        if browser is not None:
            browser.set_analyses(message.analyses)  # kept by the browser until its stage 2 is in
        gc.freeze()

    def _browser(self) -> BrowserScreen | None:
        for screen in reversed(self.screen_stack):
            if isinstance(screen, BrowserScreen):
                return screen
        return None


def post_stages(app, trace) -> None:
    """From a load worker: link and aggregate a read trace, posting KernelsReady (the table can show),
    BrowseReady (timeline, launch list, search) then AnalysesReady (the whole-trace analyses); stops
    wherever the worker was cancelled."""
    worker = get_current_worker()
    if worker.is_cancelled:
        return
    app.post_message(LoadStage(f"linking {len(trace.events):,} events to their launches"))
    memory = early_memory_table(trace)
    kernels = build_kernels(trace)
    if worker.is_cancelled:
        return
    app.post_message(KernelsReady(kernels))
    heap.give_back(len(trace.events))  # what linking freed, before stage 2 allocates its tables (trace/heap.py)
    drawn = getattr(app, "first_drawn", None)
    if drawn is not None:
        # stage 2 after the table is on screen: both hold the GIL most of the time, and the first draw
        # (composing the browser, styling and painting ~30 widgets) took 0.14 s beside it, 0.09 s alone
        for _ in range(int(FIRST_DRAW_WAIT_S / 0.05)):
            if drawn.wait(0.05) or worker.is_cancelled:  # a quit meanwhile is not kept waiting
                break
    if worker.is_cancelled:
        return
    browse = build_browse(kernels, memory)
    if worker.is_cancelled:
        return
    app.post_message(BrowseReady(browse))
    analyses = build_analyses(kernels.trace)
    if not worker.is_cancelled:
        app.post_message(AnalysesReady(analyses, kernels.trace))


def build_app(path: str, loader: Loader = load_trace, kept: FirstScreen | None = None) -> KernelTuiApp:
    # load_trace decodes in this app's loading thread, with the decode workers that `open`
    # started before Textual did (trace/pool.py says why), else in that thread alone.
    return KernelTuiApp(str(path), loader, kept)
