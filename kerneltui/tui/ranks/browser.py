"""Screens over the ranks screen: the job's loading screen, a rank's, and the browser on a rank.

The browser is the single-trace one; over the ranks screen `b` (with nothing to go back to) and
escape (with nothing to leave or clear) return to the ranks instead of saying so or doing nothing.
"""

from __future__ import annotations

from dataclasses import replace

from rich.text import Text
from textual.binding import Binding
from textual.widgets import Input, ProgressBar, Static

from kerneltui.tui.screens.browser import BrowserScreen
from kerneltui.tui.screens.loading import LoadingScreen
from kerneltui.tui.widgets.timeline import Timeline

_TO_RANKS = {
    "back": "Back to where you were before the last jump; from the first place, back to the ranks",
    "escape": "Leave the search / clear the range, then the search, then back to the ranks",
}


class RankBrowserScreen(BrowserScreen):
    BINDINGS = [replace(b, tooltip=_TO_RANKS[b.id]) if b.id in _TO_RANKS else b for b in BrowserScreen.BINDINGS]

    def action_back(self) -> None:
        if not self.history:
            self.app.back_to_ranks()
            return
        super().action_back()

    def action_escape(self) -> None:
        box = self.query_one("#filter", Input)
        timeline = self.query_one(Timeline)
        if (self.focused is box or self.timeline_mode == "max" or getattr(timeline, "range", None) is not None
                or box.value):
            super().action_escape()  # something to leave or clear first
        else:
            self.app.back_to_ranks()


class RankLoadingScreen(LoadingScreen):
    """A rank's trace loading: escape goes back to the ranks (q still quits)."""

    BINDINGS = [Binding("escape,b", "app.back_to_ranks", "Back to the ranks", id="rank-loading.back")]

    def failed(self, message: str) -> None:
        super().failed(message)
        self.query_one("#loading-stage", Static).update("escape: back to the ranks · q: quit")


class JobLoadingScreen(LoadingScreen):
    """The job's ranks being summarised: "rank 3 of 8" under the bar."""

    def on_mount(self) -> None:
        super().on_mount()
        if not getattr(self.app, "error", None):
            self.query_one("#loading-stage", Static).update(Text("finding the rank traces"))

    def ranks_done(self, done: int, total: int) -> None:
        self.query_one(ProgressBar).update(total=max(total, 1), progress=done)
        text = f"rank {done} of {total}" if done else f"reading {total} rank traces"
        self.query_one("#loading-stage", Static).update(Text(text))
