"""Changes Textual would answer with a relayout of the whole screen, made without one where nothing moves.

A relayout costs about 35 ms at 160x45 with a 1M-event trace loaded: most of a keystroke's budget.
Textual asks for one whenever a scrollable's virtual size changes (a table's row count on a search,
the details pane's height on a move, the search box's text width on every character) and on every
``Static.update``. These do the same without it, unless a scrollbar comes or goes or a Static of
automatic width changes width: only then do other widgets move.
"""

from __future__ import annotations

from rich.cells import cell_len
from rich.text import Text
from textual.geometry import Size
from textual.scroll_view import ScrollView
from textual.widgets import Input, Static


def set_virtual_size(widget: ScrollView, size: Size) -> None:
    """``widget.virtual_size = size``, relaid out only if that shows or hides a scrollbar."""
    if size == widget.virtual_size:
        return
    if not widget.is_mounted or not widget.container_size:
        widget.virtual_size = size
        return
    bars = (widget.show_vertical_scrollbar, widget.show_horizontal_scrollbar)
    widget.set_reactive(ScrollView.virtual_size, size)
    widget._scroll_update(size)  # Textual's own: the bars' thumbs and visibility, the offsets clamped
    if (widget.show_vertical_scrollbar, widget.show_horizontal_scrollbar) != bars:
        widget.refresh(layout=True)
    else:
        widget.refresh()


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
