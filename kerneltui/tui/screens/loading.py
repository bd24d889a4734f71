"""The first screen: the file's name, a progress bar while it is read, or the load error.

The path and the error can carry any character (a file named with an ESC): both
are shown as Rich Text (no markup), made printable.
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Center, Vertical
from textual.screen import Screen
from textual.widgets import Footer, ProgressBar, Static

from kerneltui.terminal_text import printable


class LoadingScreen(Screen):
    BINDINGS = [Binding("q,escape", "app.quit", "Quit", id="loading.quit")]

    def __init__(self, path: str) -> None:
        super().__init__()
        self.path = path

    def compose(self) -> ComposeResult:
        with Center(), Vertical(id="loading-box"):
            yield Static(Text(f"Loading {printable(self.path)}", overflow="fold"), id="loading-title")
            yield ProgressBar(total=100, show_eta=True, id="loading-bar")  # time left, from the rate so far
            yield Static(Text("reading the file"), id="loading-stage")
        yield Footer()

    def on_mount(self) -> None:
        if getattr(self.app, "error", None):
            self.failed(self.app.error)

    def on_key(self, event) -> None:
        # kept for the screen that follows (the app replays them); q and escape still quit here
        pending = getattr(self.app, "pending_keys", None)
        if pending is not None and not getattr(self.app, "error", None) and len(pending) < 200:
            pending.append((event.key, event.character))

    def progress(self, fraction: float) -> None:
        self.query_one(ProgressBar).update(progress=round(100 * fraction, 1))

    def stage(self, text: str) -> None:
        self.query_one(ProgressBar).update(progress=100)
        self.query_one("#loading-stage", Static).update(Text(printable(text)))

    def failed(self, message: str) -> None:
        """A load error: the CLI's one-line message, and how to leave."""
        self.query_one(ProgressBar).display = False
        self.query_one("#loading-title", Static).update(Text(f"kerneltui: {printable(message)}", overflow="fold"))
        self.query_one("#loading-title").add_class("error")
        self.query_one("#loading-stage", Static).update("press q to quit")
