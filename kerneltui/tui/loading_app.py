"""What both apps share: a loading screen fed by a thread worker, and load errors as the CLI words them."""

from __future__ import annotations

import time
from collections.abc import Callable

from textual import events, on
from textual.app import App
from textual.binding import Binding
from textual.worker import Worker, WorkerState

from kerneltui.errors import UserError
from kerneltui.terminal_text import printable
from kerneltui.trace.model import Trace
from kerneltui.trace.schema import TraceMeta
from kerneltui.tui.messages import LoadProgress, LoadStage
from kerneltui.tui.screens.kept_frame import KeptFrameScreen
from kerneltui.tui.screens.loading import LoadingScreen

Loader = Callable[..., Trace]
PROGRESS_EVERY_S = 0.2  # the loading screen's progress, five times a second at most


def paced(report: Callable[[float], None], every: float = PROGRESS_EVERY_S) -> Callable[[float], None]:
    """``report``, called at most once every ``every`` seconds (and always at the end, 1.0): the reader
    reports each 16 MB it reads, 60 times for a 1 GB trace, and each report is a repaint on the app's
    thread, which holds the GIL the reading threads' Python needs."""
    last = -every

    def report_now_and_then(fraction: float) -> None:
        nonlocal last
        now = time.monotonic()
        if fraction >= 1.0 or now - last >= every:
            last = now
            report(fraction)

    return report_now_and_then


class LoadingApp(App):
    """Subclasses push a LoadingScreen, start a thread worker that posts LoadProgress/LoadStage."""

    COMMAND_PALETTE_DISPLAY = "ctrl+p"
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (120, "-wide")]
    VERTICAL_BREAKPOINTS = [(0, "-short"), (36, "-tall")]
    BINDINGS = [Binding("ctrl+q", "quit", "Quit", show=False, id="app.quit")]

    def __init__(self, loader: Loader) -> None:
        super().__init__()
        self.loader = loader
        self.error: str | None = None
        self.loaded: list[TraceMeta] = []  # what was read, for the lines printed after the screen is gone
        self.pending_keys: list[tuple[str, str | None]] = []  # pressed while loading: replayed once shown

    def get_system_commands(self, screen):
        """The command palette (ctrl+p): every key of the screen by name (palette.py)."""
        from kerneltui.tui.palette import palette_commands

        yield from palette_commands(screen)

    def replay_pending_keys(self) -> None:
        """Keys typed while the trace loaded (`/` and a name, `v`...) reach the screen that is now shown."""
        keys, self.pending_keys = self.pending_keys, []
        for key, character in keys:
            self.post_message(events.Key(key, character))

    def on_load_progress(self, message: LoadProgress) -> None:
        if isinstance(self.screen, KeptFrameScreen) and message.fraction < 1.0:
            self.switch_screen(LoadingScreen(self.screen.path))  # a cold read behind the kept picture: its progress
        elif isinstance(self.screen, LoadingScreen):
            self.screen.progress(message.fraction)

    def on_load_stage(self, message: LoadStage) -> None:
        if isinstance(self.screen, LoadingScreen):
            self.screen.stage(message.text)

    @on(Worker.StateChanged)
    def _worker_changed(self, event: Worker.StateChanged) -> None:
        if event.state != WorkerState.ERROR:
            return
        error = event.worker.error
        if isinstance(error, UserError):
            # the same one line the CLI prints, shown in the app; the exit status says it failed
            self.error = str(error)
            if not any(isinstance(s, LoadingScreen) for s in self.screen_stack):
                self.switch_screen(LoadingScreen(getattr(self.screen, "path", "")))  # it shows the error
            for screen in self.screen_stack:
                if isinstance(screen, LoadingScreen) and screen.is_mounted:
                    screen.failed(self.error)  # (not mounted yet: it shows app.error on mount)
            return
        raise error  # our bug: let Textual show the traceback

    def action_quit(self) -> None:
        # a damaged trace is shown, as the CLI prints it, and exits 2 as the CLI does
        self.exit(return_code=2 if self.error or any(m.incomplete for m in self.loaded) else 0)

    def after_exit_lines(self) -> list[str]:
        """What the CLI prints on stderr once the app is gone: the error, else each trace's warnings."""
        if self.error:
            return [f"kerneltui: {printable(self.error)}"]
        return [printable(f"kerneltui: {m.path}: {w}") for m in self.loaded for w in m.warnings]
