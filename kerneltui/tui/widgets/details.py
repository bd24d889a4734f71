"""The details pane: the selected launch's facts as label/value lines, wrapped to the pane.

A Line API widget: showing another launch re-wraps a few strings and repaints;
it never changes its own size, so moving the cursor costs no screen relayout
(a Static with height auto did, about 30 ms a keystroke at 160x45).

The title and values (kernel and op names, source paths, thread labels) are
made printable before they are wrapped and drawn as plain Segments: no control
character reaches the terminal and no markup is parsed.
"""

from __future__ import annotations

import textwrap

from rich.segment import Segment
from textual.binding import Binding
from textual.geometry import Size
from textual.scroll_view import ScrollView
from textual.strip import Strip

from kerneltui.terminal_text import printable
from kerneltui.tui.details import Details
from kerneltui.tui.widgets.quiet import QuietScrollBars, set_virtual_size


class DetailsPane(QuietScrollBars, ScrollView, can_focus=True):
    """Focus it (tab) to scroll long op stacks with the arrow keys."""

    BINDINGS = [
        Binding("up", "scroll_up", "Scroll up", show=False, id="details.up"),
        Binding("down", "scroll_down", "Scroll down", show=False, id="details.down"),
    ]

    COMPONENT_CLASSES = {"details--title", "details--label", "details--value"}

    DEFAULT_CSS = """
    DetailsPane { overflow-x: hidden; scrollbar-size-vertical: 1; }
    DetailsPane > .details--title { text-style: bold; }
    DetailsPane > .details--label { color: $text-muted; }
    DetailsPane > .details--empty { text-style: italic; }
    """

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.details: Details | None = None
        self._lines: list[tuple[str, str, str]] = []  # (label, value text, kind)
        self._strips: dict[int, Strip] = {}  # drawn lines by index, at _strips_width
        self._strips_width = 0
        self._width = 0  # the width the lines were wrapped to
        self._styles: dict[str, object] = {}

    def show(self, details: Details | None) -> None:
        self.details = details
        self._wrap()

    def on_resize(self) -> None:
        self._wrap()

    def _wrap(self, again: bool = True) -> None:
        width = max(self.scrollable_content_region.width, 10)
        lines: list[tuple[str, str, str]] = []
        if self.details is None:
            lines.append(("", "nothing selected", "details--label"))
        else:
            for part in textwrap.wrap(printable(self.details.title), width) or [""]:
                lines.append(("", part, "details--title"))
            rows = [(printable(k), printable(v)) for k, v in self.details.rows]
            label_width = max((len(k) for k, _ in rows), default=0)
            value_width = max(width - label_width - 1, 8)
            for label, value in rows:
                parts = textwrap.wrap(value, value_width, break_on_hyphens=False) or ["–"]
                for i, part in enumerate(parts):
                    lines.append(((label if i == 0 else "").rjust(label_width) + " ", part, "details--value"))
        before, self._lines = self._lines, lines
        size = Size(width, -(-len(lines) // 8) * 8)  # rounded up: most moves keep even the thumb
        if width != self._width:
            self._strips, self._width = {}, width
            set_virtual_size(self, size)
            self.refresh()
        elif set_virtual_size(self, size, repaint=False):  # the content moved (or the scrollbar came or went)
            self._strips = {}
        else:
            self._refresh_changed(before, lines)
        if again and max(self.scrollable_content_region.width, 10) != width:
            self._wrap(again=False)  # its scrollbar came or went: the lines wrapped to the width they are drawn at

    def _refresh_changed(self, before: list, lines: list) -> None:
        # the lines that changed alone: the rest of the pane (most of it blank) keeps its drawn lines,
        # which Textual would otherwise style again, line by line (~2 ms of a move at 160x45)
        changed = [i for i in range(max(len(before), len(lines)))
                   if i >= len(before) or i >= len(lines) or before[i] != lines[i]]
        for index in changed:
            self._strips.pop(index, None)
            self.refresh_lines(index)

    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width
        index = int(self.scroll_offset.y) + y
        if index >= len(self._lines):
            return Strip.blank(width, self._style(""))
        if width != self._strips_width:
            self._strips, self._strips_width = {}, width
        strip = self._strips.get(index)
        if strip is None:
            strip = self._strips[index] = self._strip(index, width)
        return strip

    def _strip(self, index: int, width: int) -> Strip:
        label, value, kind = self._lines[index]
        segments = [Segment(label, self._style("details--label"))] if label else []
        segments.append(Segment(value, self._style("" if kind == "details--value" else kind)))
        return Strip(segments).adjust_cell_length(width, self._style(""))

    def _style(self, name: str):
        # rich_style walks the DOM on every call: compose each once
        style = self._styles.get(name)
        if style is None:
            style = self.rich_style
            if name:
                style += self.get_component_rich_style(name, partial=True)
            self._styles[name] = style
        return style

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._styles = {}
        self._strips = {}
