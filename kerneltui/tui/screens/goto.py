"""`:` in the browser: a one-line prompt for a step or a time (tui/goto.py reads what is typed)."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Static

from kerneltui.terminal_text import printable
from kerneltui.tui.goto import Target, parse_target


class GotoScreen(ModalScreen[Target | None]):
    BINDINGS = [Binding("escape", "dismiss_none", "Close", id="goto.close")]
    DEFAULT_CSS = """
    GotoScreen { align: center top; }
    GotoScreen > Vertical { width: 70; max-width: 95%; height: auto; border: round $accent; background: $surface;
                            margin-top: 3; padding: 0 1; }
    GotoScreen #goto-input { border: none; height: 1; padding: 0; }
    GotoScreen #goto-hint { color: $text-muted; }
    """

    def __init__(self, labels: tuple[str, ...], numbers: list[int], unit: str) -> None:
        super().__init__()
        self.labels, self.numbers, self.unit = labels, numbers, unit

    def compose(self) -> ComposeResult:
        first = self.labels[0] if self.labels else f"{self.unit} 1"
        with Vertical():
            yield Static(Text(f"go to a {self.unit} or a time", style="bold"))
            yield Input(placeholder=f"3, #3, {first}, 12.5ms, 300us", id="goto-input")
            yield Static(Text(printable(f"{len(self.labels)} {self.unit}s; a time is from the start of the trace; "
                                        "enter goes, escape closes")), id="goto-hint")

    def on_mount(self) -> None:
        self.query_one(Input).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        target = parse_target(event.value, self.labels, self.numbers, self.unit)
        if target.error:
            self.query_one("#goto-hint", Static).update(Text(printable(target.error), style="bold"))
            return
        self.dismiss(target)

    def action_dismiss_none(self) -> None:
        self.dismiss(None)
