"""The details pane: the facts of the selected launch as a two-column grid that wraps."""

from __future__ import annotations

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.containers import VerticalScroll
from textual.widgets import Static

from kerneltui.tui.details import Details


class DetailsPane(VerticalScroll, can_focus=True):
    """Focus it (tab) to scroll long op stacks with the arrow keys."""

    DEFAULT_CSS = """
    DetailsPane { scrollbar-size-vertical: 1; }
    DetailsPane > Static { width: 1fr; }
    """

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.details: Details | None = None

    def compose(self):
        yield Static(Text("select a kernel or launch", style="italic"), id="details-body")

    def show(self, details: Details | None) -> None:
        self.details = details
        body = self.query_one("#details-body", Static)
        if details is None:
            body.update(Text("nothing selected", style="italic"))
            return
        grid = Table.grid(padding=(0, 1))
        grid.add_column(style="dim", no_wrap=True, justify="right")
        grid.add_column(overflow="fold")
        for label, value in details.rows:
            grid.add_row(label, Text(value))  # Text, not markup: kernel names hold [brackets]
        title = Text(details.title, style="bold", overflow="fold")
        body.update(Group(title, grid))

