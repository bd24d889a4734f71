"""The ranks screen: the job in a line, its findings, a row per rank, a timeline lane per rank.

The table has the focus and its cursor is the selection: the selected rank's lane is drawn
(the lanes scroll to it) and highlighted, its file is on the line under the table, and enter
opens its trace in the browser. Trace text (paths, devices, errors) is made printable in model.py.
"""

from __future__ import annotations

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import Static

from kerneltui.analysis.ranks.job import Job
from kerneltui.tui.ranks.lanes import RankLanes
from kerneltui.tui.ranks.layout import ranks_layout
from kerneltui.tui.ranks.model import (
    DAMAGED_MARK,
    STRAGGLER_MARK,
    clock_label,
    clock_of,
    header_text,
    notes,
    rank_line,
    rank_rows,
)
from kerneltui.tui.ranks.notes import NotesScreen
from kerneltui.tui.ranks.paint import COMM_GLYPHS, LEGEND
from kerneltui.tui.ranks.table import RankTable
from kerneltui.tui.screens.help import HelpScreen
from kerneltui.tui.timeline_paint import SHADES
from kerneltui.tui.widgets.keys_bar import KeysBar
from kerneltui.tui.widgets.table import VirtualTable
from kerneltui.units import ellipsize


class RanksScreen(Screen):
    BINDINGS = [
        Binding("question_mark", "help", "Help", id="ranks.help"),
        Binding("enter", "open_rank", "Open rank", id="ranks.open",
                tooltip="Open the selected rank's trace in the browser (b or escape there comes back)"),
        Binding("c", "toggle_clock", "Clocks", id="ranks.clock",
                tooltip="Timeline on aligned clocks (each rank's own clock minus its offset) or on raw clocks"),
        Binding("i", "notes", "Notes", id="ranks.notes", tooltip="Every finding and warning, whole, and each rank's file"),
        Binding("plus,equals_sign", "zoom(2.0)", "Zoom in", show=False, id="ranks.zoom-in"),
        Binding("minus", "zoom(0.5)", "Zoom out", show=False, id="ranks.zoom-out"),
        Binding("comma,shift+left", "pan(-0.25)", "Pan left", show=False, id="ranks.pan-left"),
        Binding("full_stop,shift+right", "pan(0.25)", "Pan right", show=False, id="ranks.pan-right"),
        Binding("w", "fit", "Whole job", show=False, id="ranks.fit", tooltip="The timeline shows the whole job again"),
        Binding("q", "app.quit", "Quit", id="ranks.quit"),
    ]

    def __init__(self, job: Job) -> None:
        super().__init__()
        self.job = job
        self.aligned = job.offsets_ns is not None  # raw clocks when there is nothing to align on
        self.notes = notes(job)
        self._layout = None

    def compose(self) -> ComposeResult:
        yield Static(id="ranks-header")
        yield Static(id="ranks-notes")
        yield RankTable(rank_rows(self.job), id="ranks-table")
        yield Static(id="rank-line")
        yield RankLanes(self.job, id="rank-lanes")
        yield KeysBar(self.BINDINGS, id="keys")

    def on_mount(self) -> None:
        table = self.query_one(RankTable)
        self.set_focus(table)
        self._apply_clock()
        table.move_cursor(0)
        self._show_rank(0)

    def on_resize(self) -> None:
        self._header()
        self._show_rank(self.query_one(RankTable).cursor)
        self.fit_layout()
        self.query_one("#ranks-notes", Static).update(self._notes_text(self._layout.notes_rows))

    def fit_layout(self) -> None:
        layout = ranks_layout(self.size.height, len(self.job.ranks), len(self.notes))
        if layout == self._layout:
            return
        self._layout = layout
        self.query_one("#ranks-notes").styles.height = layout.notes_rows
        self.query_one(RankTable).styles.height = layout.table_rows
        lanes = self.query_one(RankLanes)
        lanes.set_lane_height(layout.lane_height)
        lanes.styles.height = layout.lanes_rows + 1  # + its top border

    def _notes_text(self, rows: int) -> Text:
        """The first notes, a line each (cut: `i` shows them whole); the last says how many more there are."""
        room = self.size.width - 2  # the padding
        text = Text()
        for i, line in enumerate(self.notes[:rows]):
            hidden = len(self.notes) - rows if i == rows - 1 else 0
            more = f"  (+{hidden} more: i)" if hidden > 0 else ""
            text.append(("\n" if i else "") + ellipsize(line, room - len(more)),
                        style="bold" if line.startswith("straggler") else "")
            text.append(more, style="italic")
        return text

    def _header(self) -> None:
        self.query_one("#ranks-header", Static).update(header_text(self.job, self.aligned, self.size.width))

    def _apply_clock(self) -> None:
        lanes = self.query_one(RankLanes)
        lanes.set_clock(clock_of(self.job, self.aligned))
        legend = f"{clock_label(self.job, self.aligned, short=True)} · {LEGEND}"
        if self.job.stragglers:
            legend += f" · {STRAGGLER_MARK} straggler"
        if self.job.damaged:
            legend += f" · {DAMAGED_MARK} damaged trace"
        lanes.border_title = Text(legend)  # a Text: a str title would be read as markup
        self._header()

    def _show_rank(self, index: int) -> None:
        self.query_one(RankLanes).select(index)
        self.query_one("#rank-line", Static).update(rank_line(self.job, index, self.size.width))

    # -- the selection ----------------------------------------------------------------
    @on(VirtualTable.Highlighted, "#ranks-table")
    def _on_row(self, event: VirtualTable.Highlighted) -> None:
        self._show_rank(event.row)

    @on(VirtualTable.Activated, "#ranks-table")
    def _on_enter(self, event: VirtualTable.Activated) -> None:
        self.app.open_rank(event.row)

    @on(RankLanes.Clicked)
    def _on_lane_click(self, event: RankLanes.Clicked) -> None:
        self.query_one(RankTable).move_cursor(event.index)

    # -- actions -------------------------------------------------------------------------
    def action_open_rank(self) -> None:
        self.app.open_rank(self.query_one(RankTable).cursor)

    def action_toggle_clock(self) -> None:
        if self.job.offsets_ns is None:
            self.notify(clock_label(self.job, False) + ": the lanes stay on raw clocks", timeout=4, markup=False)
            return
        self.aligned = not self.aligned
        self._apply_clock()

    def action_notes(self) -> None:
        self.app.push_screen(NotesScreen(self.job))

    def action_zoom(self, factor: float) -> None:
        self.query_one(RankLanes).zoom(factor)

    def action_pan(self, fraction: float) -> None:
        self.query_one(RankLanes).pan(fraction)

    def action_fit(self) -> None:
        self.query_one(RankLanes).fit()

    def key_sections(self) -> list:
        return [
            ("Ranks", [*self.BINDINGS, *self.app.BINDINGS,
                       Binding("ctrl+p", "command_palette", "Command palette: every action by name", id="palette")]),
            ("Table", [("↑ ↓ k j pgup pgdn home end", "select a rank: its lane is shown and highlighted"),
                       ("⏎", "open the rank's trace in the browser; b or escape there comes back")]),
            ("Reading the timeline", [
                (SHADES[1:], "compute: how busy each cell kept the GPU"),
                (COMM_GLYPHS, "communication (collective kernels): under half of the cell, half or more"),
                (STRAGGLER_MARK, "a straggler: the rank the others wait for at the collectives"),
                (DAMAGED_MARK, "a damaged trace: GPU work lost or garbled (summary --health on its file), "
                               "never called a straggler"),
                ("aligned", "each rank's own clock minus its offset (collectives that end together line them up)"),
                ("late", "how much later than the median rank a rank reaches the collectives"),
            ]),
        ]

    def action_help(self) -> None:
        self.app.push_screen(HelpScreen(self.key_sections()))
