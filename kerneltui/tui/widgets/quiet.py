"""Changes Textual would answer with a relayout of the whole screen, made without one where nothing moves.

A relayout costs about 35 ms at 160x45 with a 1M-event trace loaded: most of a keystroke's budget.
Textual asks for one whenever a scrollable's virtual size changes (a table's row count on a search,
the details pane's height on a move, the search box's text width on every character) and on every
``Static.update``. These do the same without it, unless a scrollbar comes or goes or a Static of
automatic width changes width: only then do other widgets move.

And repaints Textual would make where nothing drawn changed: ``QuietScrollBar`` is repainted when its
thumb moves by a drawn eighth of a cell, not on every change of the scroll position, and
``set_virtual_size(..., repaint=False)`` leaves the caller to repaint the lines it changed.
"""

from __future__ import annotations

from math import ceil

from rich.cells import cell_len
from rich.text import Text
from textual.geometry import Size
from textual.reactive import Reactive
from textual.scroll_view import ScrollView
from textual.scrollbar import ScrollBar
from textual.widgets import Input, Static

EIGHTHS = len(ScrollBar.renderer.VERTICAL_BARS)  # a thumb's ends are drawn in eighths of a cell


def set_virtual_size(widget: ScrollView, size: Size, repaint: bool = True) -> bool:
    """``widget.virtual_size = size``, relaid out only if that shows or hides a scrollbar. Without
    ``repaint`` the content is left as drawn where nothing moved; whether it was redrawn is returned
    (the caller repaints the lines it changed)."""
    if size == widget.virtual_size:
        return False
    if not widget.is_mounted or not widget.container_size:
        widget.virtual_size = size
        return True
    bars = (widget.show_vertical_scrollbar, widget.show_horizontal_scrollbar)
    offset = widget.scroll_offset
    widget.set_reactive(ScrollView.virtual_size, size)
    widget._scroll_update(size)  # Textual's own: the bars' thumbs and visibility, the offsets clamped
    if (widget.show_vertical_scrollbar, widget.show_horizontal_scrollbar) != bars:
        widget.refresh(layout=True)
    elif repaint or widget.scroll_offset != offset:
        widget.refresh()
    else:
        return False
    return True


class QuietScrollBar(ScrollBar):
    """A scrollbar repainted only when its thumb is drawn elsewhere. Textual repaints it on every change
    of the scroll position, and on a list of a million launches a page down moves the thumb by less than
    an eighth of a cell: its 33 lines were 2-3 ms of each such key at 160x45."""

    position: Reactive[float] = Reactive(0.0, repaint=False)
    _drawn_thumb: tuple | None = None

    def watch_position(self) -> None:
        if self.thumb() != self._drawn_thumb:
            self.refresh()

    def render(self):
        self._drawn_thumb = self.thumb()
        return super().render()

    def thumb(self) -> tuple:
        """The track's length and the thumb's first and last eighth of a cell, as ScrollBarRender draws them."""
        size = self.size.height if self.vertical else self.size.width
        virtual = ceil(self.window_virtual_size)
        window = ceil(self.window_size) if self.window_size < self.window_virtual_size else 0
        if not (window and size and virtual and size != virtual):
            return (size,)
        thumb = max(1, window / (virtual / size))
        start = int((size - thumb) * (self.position / (virtual - window)) * EIGHTHS)
        return size, start, start + ceil(thumb * EIGHTHS)


class QuietScrollBars:
    """A ScrollView mixin: its vertical scrollbar is a QuietScrollBar (made as Textual's own
    ``Widget.vertical_scrollbar`` makes one), whose thumb is where the view is whenever it is shown
    (Textual moves a hidden bar's thumb no more: scrolled, hidden, shown again, it was drawn where it was)."""

    def _scroll_update(self, virtual_size) -> None:
        super()._scroll_update(virtual_size)
        if self.show_vertical_scrollbar:
            self.vertical_scrollbar.position = self.scroll_y

    @property
    def vertical_scrollbar(self) -> ScrollBar:
        if self._vertical_scrollbar is None:
            bar = QuietScrollBar(vertical=True, name="vertical", thickness=self.scrollbar_size_vertical)
            bar.display = False
            self._vertical_scrollbar = bar
            self.app._start_widget(self, bar)
        return self._vertical_scrollbar


def update_static(static: Static, content: Text, keep_width: bool = False) -> None:
    """``static.update(content)``, relaid out only if the text's widest line or line count changed
    (with the same text size, an automatic size is the same too). ``keep_width``: the Static keeps
    the widest one-line text's width since ``forget_width`` as its min-width, so an automatic width
    only grows (the search counts beside the box: no relayout as they change on each key)."""
    lines = content.plain.split("\n")
    shape = (max(map(cell_len, lines)), len(lines))
    before = getattr(static, "_quiet_shape", None)
    static._quiet_shape = shape
    if keep_width and shape[1] == 1:
        widest = getattr(static, "_quiet_widest", None)
        if widest is not None and shape[0] <= widest:
            static.update(content, layout=False)  # narrower: the held width is unchanged
            return
        static._quiet_widest = shape[0]
        static.styles.min_width = shape[0] + static.styles.padding.width
    static.update(content, layout=shape != before)


def forget_width(static: Static) -> None:
    """The next ``update_static`` lays the Static out at its text's own width (after a resize)."""
    static._quiet_shape = static._quiet_widest = None
    static.styles.min_width = None


class SearchInput(Input):
    """An Input whose text width is its scrollable width, set without a relayout on every character
    (Textual's own sets it as a layout change: ~35 ms of each key typed into the search)."""

    def _watch_value(self, value: str) -> None:
        set_virtual_size(self, Size(self.content_width, 1))  # Textual's own setting of it is then no change
        super()._watch_value(value)
