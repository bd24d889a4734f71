"""A table that formats only the rows on screen (Line API), for any number of rows.

A DataTable builds every row up front; a million launches would take seconds
and hundreds of MB. Here a subclass says how many rows there are and how to
format row ``i``; ``render_line`` asks for the few rows in view. The header is
drawn on line 0 and never scrolls.

Subclass API::

    columns() -> list[Column]        # in display order; Column.show_from hides a column on narrow tables
    row_count() -> int
    cells(row) -> list[str]          # one text per column of ``columns()``
    row_class(row) -> str | None     # an extra component class for the row (e.g. "vtable--dim")

Public API: ``cursor`` (int), ``move_cursor(row, notify=True)``, ``reset()`` (call
after the rows changed), ``sort_column``/``sort_reverse`` (drawn as ▼/▲ in the
header). Messages: ``VirtualTable.Highlighted(table, row)`` when the cursor
moves, ``VirtualTable.Activated(table, row)`` on enter.

Rows are drawn as plain Segments (no markup is parsed), and every cell goes
through ``terminal_text.printable`` first: a name from a trace never puts a
control character on the terminal. Subclasses that measure names
(``natural_width``) should measure their printable form.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from rich.segment import Segment
from textual import events
from textual.binding import Binding
from textual.cache import LRUCache
from textual.geometry import Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

from kerneltui.terminal_text import printable
from kerneltui.tui.widgets.quiet import QuietScrollBars, set_virtual_size
from kerneltui.units import ellipsize, middle_ellipsize


@dataclass(frozen=True)
class Column:
    key: str  # what the sort action names
    label: str
    width: int  # cells; 0 = share what the fixed columns leave
    align: str = "left"  # or "right"
    show_from: int = 0  # hide the column when the table is narrower than this
    middle: bool = False  # cut long text in the middle: kernel names differ at their ends
    flex: int = 1  # share of the spare width for a width-0 column


class VirtualTable(QuietScrollBars, ScrollView, can_focus=True):
    BINDINGS = [
        Binding("up,k", "move(-1)", "Up", show=False, id="table.up"),
        Binding("down,j", "move(1)", "Down", show=False, id="table.down"),
        Binding("pageup", "page(-1)", "Page up", show=False, id="table.page-up"),
        Binding("pagedown,space", "page(1)", "Page down", show=False, id="table.page-down"),
        Binding("home", "jump(0)", "First row", show=False, id="table.first"),
        Binding("end", "jump(-1)", "Last row", show=False, id="table.last"),
        Binding("enter", "activate", "Open in timeline", show=False, id="table.activate"),
    ]

    COMPONENT_CLASSES = {"vtable--header", "vtable--sorted", "vtable--cursor", "vtable--dim", "vtable--empty"}

    DEFAULT_CSS = """
    VirtualTable { overflow-x: hidden; overflow-y: auto; scrollbar-size-vertical: 1; }
    VirtualTable > .vtable--header { text-style: bold; color: $text-muted; }
    VirtualTable > .vtable--sorted { text-style: bold underline; color: $text; }
    /* unfocused (the timeline has the keys): still plainly the row the details are of */
    VirtualTable > .vtable--cursor { background: $secondary 35%; text-style: bold underline; }
    VirtualTable:focus > .vtable--cursor { background: $accent 40%; text-style: bold reverse; }
    VirtualTable > .vtable--dim { color: $text-muted; }
    VirtualTable > .vtable--empty { color: $text-muted; text-style: italic; }
    """

    class Highlighted(Message):
        def __init__(self, table: VirtualTable, row: int) -> None:
            super().__init__()
            self.table, self.row = table, row

        @property
        def control(self) -> VirtualTable:
            return self.table

    class Activated(Highlighted):
        pass

    empty_text = "nothing to show"

    def __init__(self, *, name: str | None = None, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self.cursor = 0
        self.sort_column = ""
        self.sort_reverse = False
        self._lines: LRUCache[tuple, Strip] = LRUCache(256)
        self._styles: dict[tuple[str, ...], object] = {}
        self._generation = 0
        self.answer_move: Callable[[int], None] | None = None  # see _keyed_move

    # -- subclass hooks -------------------------------------------------------
    def columns(self) -> list[Column]:
        raise NotImplementedError

    def row_count(self) -> int:
        raise NotImplementedError

    def cells(self, row: int) -> list[str]:
        raise NotImplementedError

    def row_class(self, row: int) -> str | None:
        return None

    def cut_in_middle(self) -> bool:
        """Whether Column.middle columns are cut in the middle now (short names differ at their ends)."""
        return True

    # -- public -------------------------------------------------------------------
    def reset(self) -> None:
        """The rows changed: forget cached lines, resize the scroll area, clamp the cursor."""
        self._generation += 1
        self._lines.clear()
        self.cursor = min(self.cursor, max(self.row_count() - 1, 0))
        set_virtual_size(self, Size(self.size.width, self.row_count() + 1))  # no relayout unless the bar comes or goes
        self._scroll_to_cursor()
        self.refresh()

    def move_cursor(self, row: int, notify: bool = True) -> None:
        count = self.row_count()
        if not count:
            return
        row = min(max(row, 0), count - 1)
        old, self.cursor = self.cursor, row
        top = int(self.scroll_offset.y)
        self._scroll_to_cursor()
        if old != row:
            if int(self.scroll_offset.y) == top:
                # only the two rows whose cursor mark changed (+1: line 0 is the header)
                self.refresh_line(old + 1)
                self.refresh_line(row + 1)
            else:
                self.refresh()
        if notify:
            self.post_message(self.Highlighted(self, row))

    def visible_rows(self) -> int:
        return max(self.scrollable_content_region.height - 1, 1)

    # -- actions --------------------------------------------------------------
    def action_move(self, delta: int) -> None:
        self._keyed_move(self.cursor + delta)

    def action_page(self, direction: int) -> None:
        self._keyed_move(self.cursor + direction * self.visible_rows())

    def action_jump(self, row: int) -> None:
        self._keyed_move(row if row >= 0 else self.row_count() - 1)

    def _keyed_move(self, row: int) -> None:
        """A move by key: answered at once by `answer_move` where a screen set it, so that the row and
        what the screen shows of it reach one repaint (a Highlighted message is handled after the
        screen's next idle, and the row's repaint went out before it: two repaints a key)."""
        if self.answer_move is None:
            self.move_cursor(row)
            return
        self.move_cursor(row, notify=False)
        if self.row_count():
            self.answer_move(self.cursor)

    def action_activate(self) -> None:
        if self.row_count():
            self.post_message(self.Activated(self, self.cursor))

    # -- mouse ----------------------------------------------------------------
    def on_click(self, event: events.Click) -> None:
        offset = event.get_content_offset(self)  # inside borders and padding (the diff's table has a top border)
        if offset is not None and offset.y >= 1:
            row = int(self.scroll_offset.y) + offset.y - 1
            if row < self.row_count():
                self.move_cursor(row)
                if event.chain == 2:
                    self.action_activate()

    # -- drawing ------------------------------------------------------------------
    def on_resize(self) -> None:
        self.reset()

    def _scroll_to_cursor(self) -> None:
        top = int(self.scroll_offset.y)
        rows = self.visible_rows()
        if self.cursor < top:
            top = self.cursor
        elif self.cursor >= top + rows:
            top = self.cursor - rows + 1
        self.scroll_to(y=top, animate=False, immediate=True)

    def natural_width(self, key: str) -> int | None:
        """Widest text a flexible column can hold (None: no limit); spare room goes to the others."""
        return None

    def _layout(self, width: int) -> list[tuple[Column, int]]:
        # every drawn row asks: computed once per width and data generation (reset() bumps it)
        key = (width, self._generation)
        if getattr(self, "_layout_key", None) != key:
            self._layout_cached = self._compute_layout(width)
            self._layout_key = key
        return self._layout_cached

    def _compute_layout(self, width: int) -> list[tuple[Column, int]]:
        shown = [c for c in self.columns() if width >= c.show_from]
        fixed = sum(c.width for c in shown if c.width) + len(shown) - 1
        pending = [c for c in shown if not c.width]
        remaining = max(width - fixed, 4 * len(pending))
        given: dict[str, int] = {}
        while pending:
            weights = sum(c.flex for c in pending)
            share = {c.key: remaining * c.flex // weights for c in pending}
            capped = [c for c in pending if (n := self.natural_width(c.key)) is not None and n < share[c.key]]
            if not capped:
                given.update(share)
                given[pending[0].key] += remaining - sum(share.values())
                remaining = 0
                break
            for c in capped:
                given[c.key] = self.natural_width(c.key)
                remaining -= given[c.key]
                pending.remove(c)
        flexible = [c for c in shown if not c.width]
        if remaining > 0 and flexible:
            given[flexible[-1].key] += remaining  # everything fits: pad the last one
        return [(c, c.width or given[c.key]) for c in shown]

    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width
        if y == 0:
            return self._header(width)
        row = int(self.scroll_offset.y) + y - 1
        count = self.row_count()
        if row >= count:
            if count == 0 and y == 1:
                text = ellipsize(printable(f" {self.empty_text}"), width).ljust(width)
                return Strip([Segment(text, self._style("vtable--empty"))], width)
            return Strip.blank(width, self._style())
        key = (row, row == self.cursor, width, self._generation, self.has_focus)
        line = self._lines.get(key)
        if line is None:
            line = self._row_strip(row, width)
            self._lines[key] = line
        return line

    def on_focus(self) -> None:
        self._lines.clear()
        self.refresh()

    def on_blur(self) -> None:
        self._lines.clear()
        self.refresh()

    def _style(self, *names: str):
        # rich_style walks the DOM on every call: compose each combination once
        style = self._styles.get(names)
        if style is None:
            style = self.rich_style
            for name in names:
                style += self.get_component_rich_style(name, partial=True)
            self._styles[names] = style
        return style

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._styles = {}
        self._lines.clear()

    # the table width while a row is drawn: cells() may then cut names for the screen (whole otherwise,
    # for tests and copying), so that rows stay told apart
    _drawing_width: int | None = None

    def _row_strip(self, row: int, width: int) -> Strip:
        self._drawing_width = width
        try:
            return self._draw_row(row, width)
        finally:
            self._drawing_width = None

    def _draw_row(self, row: int, width: int) -> Strip:
        texts = self.cells(row)
        layout = self._layout(width)
        all_columns = self.columns()
        by_key = {c.key: t for c, t in zip(all_columns, texts)}
        middle = self.cut_in_middle()
        parts = [_fit(printable(by_key[c.key]), w, c.align, c.middle and middle) for c, w in layout]
        names = ["vtable--cursor"] if row == self.cursor else []
        extra = self.row_class(row)
        if extra:
            names.insert(0, extra)
        text = " ".join(parts)
        return Strip([Segment(text.ljust(width)[:width], self._style(*names))], width)

    def sort_arrow(self) -> str:
        """The sort column's mark: ▲ ascending, ▼ reversed (a subclass may know its order better)."""
        return "▲" if not self.sort_reverse else "▼"

    def _header(self, width: int) -> Strip:
        segments = []
        for i, (c, w) in enumerate(self._layout(width)):
            label = printable(c.label)
            if c.key == self.sort_column:
                label = f"{label}{self.sort_arrow()}"
            sep = " " if i else ""
            style = self._style("vtable--header", "vtable--sorted") if c.key == self.sort_column else self._style("vtable--header")
            if sep:
                segments.append(Segment(sep, self._style("vtable--header")))
            segments.append(Segment(_fit(label, w, c.align), style))
        return Strip(segments).adjust_cell_length(width, self._style("vtable--header"))


def _fit(text: str, width: int, align: str, middle: bool = False) -> str:
    text = middle_ellipsize(text, width) if middle else ellipsize(text, width)
    return text.rjust(width) if align == "right" else text.ljust(width)


def lowered(values) -> np.ndarray:
    """Case-folded sort keys as Python strings (object array): ``np.char.lower(values.astype(str))``
    is a fixed-width array as wide as the longest name on every row (gigabytes for a hostile name)."""
    return np.array([str(v).lower() for v in values], dtype=object)
