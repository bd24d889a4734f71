"""The kept first screen (commands/kept_screen.py) inside the app, and how a first screen is kept.

``KeptFrameScreen`` draws the kept lines as they were while the trace loads; the browser replaces
it (the same picture, live). Keys pressed meanwhile are held for the browser, as the loading
screen holds them, but for a first q (or ctrl+q), which quits at once as the browser would. A
resize, which the kept lines no longer fit, and a cold read behind the picture (its column cache
gone: the app reports progress below 100%) show the loading screen and its progress instead.
"""

from __future__ import annotations

from rich.ansi import AnsiDecoder
from rich.segment import Segment
from textual.screen import Screen
from textual.strip import Strip
from textual.widget import Widget

from kerneltui.tui.screens.loading import LoadingScreen


class KeptFrame(Widget):
    DEFAULT_CSS = "KeptFrame { width: 100%; height: 100%; }"

    def __init__(self, lines: list[str]) -> None:
        super().__init__()
        self.lines = lines
        self._strips: list[Strip] | None = None

    def render_line(self, y: int) -> Strip:
        if self._strips is None:
            console = self.app.console
            self._strips = [Strip(list(text.render(console, end="")))
                            for text in AnsiDecoder().decode("\n".join(self.lines))]
        width = self.size.width
        if y < len(self._strips):
            return self._strips[y].adjust_cell_length(width)
        return Strip.blank(width)


class KeptFrameScreen(Screen):
    def __init__(self, path: str, lines: list[str], size: tuple[int, int]) -> None:
        super().__init__()
        self.path = path
        self.lines = lines
        self.kept_size = size  # (columns, rows) the lines were drawn for

    def compose(self):
        yield KeptFrame(self.lines)

    def on_key(self, event) -> None:
        pending = getattr(self.app, "pending_keys", None)
        if event.key in ("q", "ctrl+q") and not pending:
            self.app.action_quit()  # what the browser does with it, without waiting for the browser
        elif pending is not None and len(pending) < 200:
            pending.append((event.key, event.character))  # ("/" first: a q after it is typed into the search)
        event.stop()
        event.prevent_default()

    def on_resize(self, event) -> None:
        if (event.size.width, event.size.height) != self.kept_size:
            self.app.switch_screen(LoadingScreen(self.path))  # the kept picture no longer fits


def frame_lines(screen: Screen) -> list[str]:
    """The lines ``screen`` shows now, as terminal text with colour codes (links left out)."""
    console = screen.app.console
    lines = []
    for strip in screen._compositor.render_strips():
        segments = [Segment(text, style.update_link(None) if style is not None and style.link else style)
                    for text, style, _control in strip]
        lines.append(Strip(segments).render(console))
    return lines
