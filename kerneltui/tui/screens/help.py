"""`?`: every key, generated from the BINDINGS themselves so the list cannot drift."""

from __future__ import annotations

from collections.abc import Iterable

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.keys import format_key
from textual.screen import ModalScreen
from textual.widgets import Static

FILTER_KEYS = [
    ("text", "show kernels whose short or full name contains it (any case)"),
    ("/regex", "a leading / makes the rest a regular expression"),
    ("enter", "back to the table, keeping the filter"),
    ("escape", "back to the table; escape again clears the filter"),
]


def key_text(binding: Binding) -> str:
    return " ".join(format_key(k.strip()) for k in binding.key.split(","))


def help_table(sections: Iterable[tuple[str, Iterable[Binding | tuple[str, str]]]]) -> Table:
    table = Table.grid(padding=(0, 2))
    table.add_column(justify="right", style="bold", no_wrap=True)
    table.add_column()
    for title, items in sections:
        table.add_row("", Text(title, style="underline"))
        for item in items:
            if isinstance(item, Binding):
                table.add_row(Text(key_text(item)), Text(item.tooltip or item.description))
            else:
                table.add_row(Text(item[0]), Text(item[1]))
        table.add_row("", "")
    return table


class HelpScreen(ModalScreen):
    BINDINGS = [Binding("escape,q,question_mark", "dismiss", "Close", id="help.close")]

    def __init__(self, sections: list[tuple[str, list]]) -> None:
        super().__init__()
        self.sections = sections
        self.table = help_table(sections)

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help-box"):
            yield Static(Text("Keys  (escape closes; ↑↓ scroll)", style="bold"))
            yield Static(self.table, id="help-keys")

    def on_mount(self) -> None:
        self.query_one("#help-box").focus()

    def action_dismiss(self) -> None:
        self.dismiss()
