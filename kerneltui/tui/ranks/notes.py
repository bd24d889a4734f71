"""`i`: every finding and warning of the job, whole, and each rank's file (the screen cuts them to a line)."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from kerneltui.analysis.ranks.job import Job
from kerneltui.terminal_text import printable
from kerneltui.tui.ranks.model import notes


def notes_text(job: Job) -> Text:
    text = Text()
    sections = [
        ("Findings and warnings", notes(job) or ["nothing to report"]),
        ("Files", [printable(f"rank {r.rank}: {r.path}" + (f" (failed: {r.error})" if r.error else ""))
                   for r in job.ranks]),
    ]
    for i, (title, lines) in enumerate(sections):
        if i:
            text.append("\n")
        text.append(title + "\n", style="underline")
        for line in lines:
            text.append(f"{line}\n")
    return text


class NotesScreen(ModalScreen):
    BINDINGS = [Binding("escape,q,i", "dismiss", "Close", id="ranks-notes.close")]

    def __init__(self, job: Job) -> None:
        super().__init__()
        self.job = job

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help-box"):  # help's box: the same look
            yield Static(Text("Notes  (escape closes; ↑↓ scroll)", style="bold"))
            yield Static(notes_text(self.job), id="ranks-notes-text")

    def on_mount(self) -> None:
        self.query_one("#help-box").focus()

    def action_dismiss(self) -> None:
        self.dismiss()
