"""`H`: the trace's health report, whole (analysis/health): what it cannot be trusted for, by cause."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from kerneltui.analysis.health import Health
from kerneltui.health_report import as_text


class HealthScreen(ModalScreen):
    BINDINGS = [Binding("escape,q,H", "dismiss", "Close", id="health.close")]

    def __init__(self, reports: list[tuple[str, Health]]) -> None:
        """``reports``: (path, health) per trace (two in a diff)."""
        super().__init__()
        self.reports = reports

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help-box"):  # help's box: the same look
            yield Static(Text("Trace health  (escape closes; ↑↓ scroll)", style="bold"))
            text = Text()
            for i, (path, health) in enumerate(self.reports):
                report = as_text(path, health, width=self._room()).rstrip("\n").split("\n")
                text.append(("\n" if i else "") + report[0] + "\n", style="underline")
                for line in report[1:]:
                    text.append(line + "\n", style="bold" if line.startswith("NOT HEALTHY") else "")
            yield Static(text, id="health-text")

    def _room(self) -> int:
        """The box's text width (app.tcss #help-box: 90% of the screen, at most 100; border, padding, scrollbar)."""
        return max(min(int(self.app.size.width * 0.9), 100) - 6, 40)

    def on_mount(self) -> None:
        self.query_one("#help-box").focus()

    def action_dismiss(self) -> None:
        self.dismiss()
