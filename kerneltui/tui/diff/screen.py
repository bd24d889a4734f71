"""The diff screen: headline, verdict, a panel per side, the matched table, both timelines.

Trace text reaches the screen as printable Rich Text or plain Segments, never
as markup: notifications pass ``markup=False``, the border title is a Text.
"""

from __future__ import annotations

import numpy as np
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import Input, Static

from kerneltui.errors import UserError
from kerneltui.trace.filters import name_pattern

from kerneltui.diff_report import nbytes, num, side_rate
from kerneltui.terminal_text import printable
from kerneltui.tui.screens.health import HealthScreen
from kerneltui.tui.diff.header import capture_text, headline_text, notes_text, sides_table, verdict_text
from kerneltui.tui.diff.model import DiffView
from kerneltui.tui.diff.panels import ModulesPanel, RowPanel, VerdictPanel
from kerneltui.tui.diff.table import MatchTable
from kerneltui.tui.diff.timelines import PairedTimelines
from kerneltui.tui.history import History
from kerneltui.tui.screens.help import HelpScreen
from kerneltui.tui.widgets.keys_bar import KeysBar
from kerneltui.tui.widgets.timeline import Timeline


class DiffScreen(Screen):
    BINDINGS = [
        Binding("question_mark", "help", "Help", id="diff.help"),
        Binding("slash", "search", "Search", id="diff.search", priority=True,
                tooltip="Search the matched rows: names, kernels and launching ops of either side (/regex)"),
        Binding("n", "next_match(1)", "Next match", show=False, id="diff.next-match"),
        Binding("N", "next_match(-1)", "Previous match", show=False, id="diff.previous-match"),
        Binding("b,backspace", "back", "Back", show=False, id="diff.back",
                tooltip="Back to the row and windows before the last jump (enter, a search hit)"),
        Binding("y", "copy", "Copy names", show=False, id="diff.copy",
                tooltip="Copy the full names of the row's kernels (OSC 52: works over SSH and tmux)"),
        Binding("escape", "escape", "Leave the search / clear it", show=False, id="diff.escape"),
        Binding("d", "sort('delta')", "Sort by Δ", id="diff.sort-delta"),
        Binding("t", "sort('time')", "Sort by time", show=False, id="diff.sort-time"),
        Binding("a", "sort('name')", "Sort by name", show=False, id="diff.sort-name"),
        Binding("m", "sort('match')", "Sort by match", show=False, id="diff.sort-match"),
        Binding("s", "toggle_scale", "Switch scale", show=False, id="diff.scale"),
        Binding("c", "call(1)", "Next call", show=False, id="diff.next-call"),
        Binding("C", "call(-1)", "Previous call", show=False, id="diff.previous-call"),
        Binding("r", "reset_view", "Reset view", show=False, id="diff.reset"),
        Binding("i", "notes", "Verdict", id="diff.notes",
                tooltip="The whole verdict, every figure of A beside B, and what was not compared"),
        Binding("H", "health", "Trace health", show=False, id="diff.health",
                tooltip="Both traces' health reports: GPU work lost, doubled or mistimed, and what it affects"),
        Binding("T", "modules", "By module", show=False, id="diff.modules",
                tooltip="Forward and backward time per module (or forward op), A → B"),
        Binding("z", "zoom_row", "Zoom to the row", show=False, id="diff.zoom-row",
                tooltip="Zoom both timelines to the row's kernels in the call shown"),
        Binding("plus,equals_sign", "zoom(2.0)", "Zoom in", show=False, id="diff.zoom-in"),
        Binding("minus", "zoom(0.5)", "Zoom out", show=False, id="diff.zoom-out"),
        Binding("comma", "pan(-0.25)", "Pan left", show=False, id="diff.pan-left"),
        Binding("full_stop", "pan(0.25)", "Pan right", show=False, id="diff.pan-right"),
        Binding("q", "app.quit", "Quit", id="diff.quit"),
    ]

    def __init__(self, view: DiffView) -> None:
        super().__init__()
        self.view = view
        self.history = History()  # (matches row, window A, window B, focused id) before each jump
        self.pattern = ""
        self._match_count: int | None = None  # rows the search keeps (None: no search)

    def compose(self) -> ComposeResult:
        d = self.view.diff
        yield Static(headline_text(d), id="diff-headline")
        yield Static(capture_text(d), id="diff-capture", classes="" if d.capture_notes else "-none")
        yield Static(verdict_text(d), id="diff-verdict", classes="-" + d.verdict.kind.replace(" ", "-"))
        yield Static(notes_text(d), id="diff-notes", classes="" if d.notes else "-none")
        yield Static(sides_table(d, full=False), id="diff-sides")
        yield Input(placeholder="/ search rows: kernels, ops of either side", id="diff-filter", classes="-idle")
        yield MatchTable(d.matches, d.b.unit, id="matches")
        yield Static(id="match-detail")
        yield PairedTimelines(self.view, id="timelines")
        yield KeysBar(self.BINDINGS, id="keys")

    def on_resize(self) -> None:
        # wide or tall: the sides also say device and how the calls were found; short: GPU and wall alone
        tall = self.size.height >= 36
        full = self.size.width >= 120 or tall
        self.query_one("#diff-sides", Static).update(sides_table(self.view.diff, full, compact=not tall))
        # short screens hold two lines of verdict: the whole one when it fits, else its one-line form
        width = None if tall else max(self.size.width - 2, 20)  # the verdict's padding: one column each side
        self.query_one("#diff-verdict", Static).update(verdict_text(self.view.diff, width))
        self.query_one(PairedTimelines).show_steps(self.size.height >= 36)

    def on_mount(self) -> None:
        table = self.query_one(MatchTable)
        self._table_title()
        self.set_focus(table)
        if table.row_count():
            table.move_cursor(0)
        self._scale_label()

    # -- the selected match -------------------------------------------------------
    @on(MatchTable.Highlighted)
    def _show_match(self, event: MatchTable.Highlighted) -> None:
        m = event.table.row(event.row)
        self.query_one(PairedTimelines).mark(m.a_rows, m.b_rows)
        self.query_one("#match-detail", Static).update(self._detail(m))

    @on(MatchTable.Activated)
    def _open_row(self, event: MatchTable.Activated) -> None:
        """Enter on a row: its kernels on both sides, with their ops, origins, counts, µs and bytes."""
        m = event.table.row(event.row)
        self.app.push_screen(RowPanel(self.view.diff, m, lambda: self._zoom_to(m)))

    def action_zoom_row(self) -> None:
        table = self.query_one(MatchTable)
        if table.row_count():
            self._zoom_to(table.row(table.cursor))

    def _zoom_to(self, m) -> None:
        """Both timelines zoom to a row's kernels."""
        self._remember()
        if not self.query_one(PairedTimelines).zoom_to(m.a_rows, m.b_rows):
            self.notify("this row has no kernel in the call shown (c / C change the call)", timeout=4)

    def _detail(self, m) -> Text:
        text = Text()
        label = f"{m.kind} · {m.confidence}: "
        text.append(label, style="bold")
        text.append(f"{clause_cut(printable(m.reason), max(self.size.width - 2 - len(label), 30))}\n")
        text.append(
            f"A {nbytes(m.a_bytes)}, {num(m.a_transfers, 1)} transfers, {side_rate(m, 'a')}"
            f"  →  B {nbytes(m.b_bytes)}, {num(m.b_transfers, 1)} transfers, {side_rate(m, 'b')}",
            style="dim",
        )
        if m.a_above_peak or m.b_above_peak:
            text.append("  ! above peak: the data sat in cache", style="bold")
        return text

    # -- timelines to the table ------------------------------------------------------
    @on(Timeline.Selected)
    def _timeline_selected(self, event: Timeline.Selected) -> None:
        """A kernel picked on a timeline (keys or mouse): the table goes to its row; enter focuses the table."""
        side = "A" if event.timeline.id == "timeline-a" else "B"
        index = self.view.row_of(side, event.id)
        table = self.query_one(MatchTable)
        if index >= 0 and not table.move_to_match(index) and table.kept_rows is not None:
            self.query_one("#diff-filter", Input).value = ""  # hidden by the search: show every row again
            table.move_to_match(index)
        if isinstance(event, Timeline.Activated):
            self._remember()
            self.set_focus(table)

    # -- search, back, copy -------------------------------------------------------------
    def action_search(self) -> None:
        box = self.query_one("#diff-filter", Input)
        if self.focused is box:
            box.insert_text_at_cursor("/")
        else:
            box.remove_class("-idle")
            self.set_focus(box)

    @on(Input.Changed, "#diff-filter")
    def _search_changed(self, event: Input.Changed) -> None:
        table = self.query_one(MatchTable)
        try:
            regex = name_pattern(event.value) if event.value else None
        except UserError as exc:
            self.notify(printable(str(exc)), severity="error", timeout=4, markup=False)
            return
        self.pattern = event.value
        visible = None if regex is None else np.fromiter(
            (bool(regex.search(h)) for h in self.view.haystack), bool, len(self.view.haystack))
        table.set_visible(visible)
        self._match_count = None if regex is None else int(visible.sum())
        self._table_title()

    def _table_title(self) -> None:
        """How the rows are ordered (the arrow's column may be hidden) and how many the search keeps."""
        table = self.query_one(MatchTable)
        title = f"rows: {table.sort_words()}"
        if self._match_count is not None:
            title = f"{self._match_count:,} of {len(self.view.haystack):,} rows match · {title}"
        table.border_title = Text(title)

    @on(Input.Submitted, "#diff-filter")
    def _search_done(self) -> None:
        self.set_focus(self.query_one(MatchTable))

    def action_escape(self) -> None:
        box = self.query_one("#diff-filter", Input)
        if self.focused is box:
            self.set_focus(self.query_one(MatchTable))
            if not box.value:
                box.add_class("-idle")
        elif box.value:
            box.value = ""
            box.add_class("-idle")

    def action_next_match(self, direction: int) -> None:
        """With a search: the next matching row (the table holds only those); else the next row."""
        table = self.query_one(MatchTable)
        if not table.row_count():
            return
        self._remember()
        table.move_cursor((table.cursor + direction) % table.row_count())
        m = table.row(table.cursor)
        self.query_one(PairedTimelines).zoom_to(m.a_rows, m.b_rows)

    def _remember(self) -> None:
        pair = self.query_one(PairedTimelines)
        a, b = pair.timelines
        focus = self.focused.id if self.focused is not None and self.focused.id else "matches"
        self.history.push((self.query_one(MatchTable).current_match(), a.window, b.window, focus))

    def action_back(self) -> None:
        place = self.history.pop()
        if place is None:
            self.notify("nowhere to go back to", timeout=2)
            return
        index, wa, wb, focus = place
        table = self.query_one(MatchTable)
        if index is not None and not table.move_to_match(index):
            self.query_one("#diff-filter", Input).value = ""
            table.set_visible(None)
            table.move_to_match(index)
        a, b = self.query_one(PairedTimelines).timelines
        a.set_window(*wa)
        b.set_window(*wb)
        target = self.query(f"#{focus}")
        self.set_focus(target.first() if target else table)

    def action_copy(self) -> None:
        table = self.query_one(MatchTable)
        if not table.row_count():
            self.notify("nothing selected to copy", timeout=2)
            return
        m = table.row(table.cursor)
        # full names, A's then B's, each side's once, labelled; escaped as on screen (a crafted name pasted into
        # a shell must not carry ESC, CR or NUL)
        names = [(side, str(n)) for side, keys in (("A", m.a_keys), ("B", m.b_keys)) for n in dict.fromkeys(keys)]
        text = "\n".join(f"{side}: {printable(n)}" for side, n in names)
        names = [n for _, n in names]
        self.app.copy_to_clipboard(text)
        self.notify(printable(f"copied {len(names)} name{'s' if len(names) != 1 else ''}: {names[0] if names else ''}"[:200]),
                    timeout=3, markup=False)

    # -- actions --------------------------------------------------------------------
    def key_sections(self) -> list:
        return [
            ("Diff", [*self.BINDINGS, *self.app.BINDINGS,
                      Binding("ctrl+p", "command_palette", "Command palette: every action by name", id="palette")]),
            ("Matched table", _table_moves()),
            ("Timelines (tab to focus; A and B move together)", Timeline.BINDINGS),
            ("Reading it", _legend()),
        ]

    def action_help(self) -> None:
        self.app.push_screen(HelpScreen(self.key_sections()))

    def action_sort(self, key: str) -> None:
        self.query_one(MatchTable).action_sort(key)
        self._table_title()

    def action_modules(self) -> None:
        self.app.push_screen(ModulesPanel(self.view.diff))

    def action_health(self) -> None:
        """H: both traces' health reports, whole."""
        self.app.push_screen(HealthScreen([(s.path, s.health) for s in (self.view.a, self.view.b)]))

    def action_health(self) -> None:
        """H: both traces' health reports, whole."""
        self.app.push_screen(HealthScreen([(s.path, s.health) for s in (self.view.a, self.view.b)]))

    def action_notes(self) -> None:
        """The whole verdict (short screens show its short form), every figure, what was not compared."""
        self.app.push_screen(VerdictPanel(self.view.diff))

    def action_toggle_scale(self) -> None:
        linked = self.query_one(PairedTimelines).toggle_link()
        self.notify("one time scale: A and B move together" if linked else "each side at its own scale", timeout=3)
        self._scale_label()

    def action_call(self, delta: int) -> None:
        pair = self.query_one(PairedTimelines)
        pair.show_call(pair.call + delta)
        self._scale_label()

    def action_reset_view(self) -> None:
        self.query_one(PairedTimelines).reset_view()

    def action_zoom(self, factor: float) -> None:
        self.query_one(PairedTimelines).zoom(factor)

    def action_pan(self, fraction: float) -> None:
        self.query_one(PairedTimelines).pan(fraction)

    def _scale_label(self) -> None:
        pair = self.query_one(PairedTimelines)
        a = self.view.a
        where = "first launch" if a.whole_trace else f"start of {a.call_labels[min(pair.call, len(a.call_labels) - 1)]}"
        # a Text, not a str: Textual parses a str title as markup, and a step name is trace text
        scale = "one time scale" if pair.linked else "own scales"
        pair.border_title = Text(printable(f"{scale} · 0 = {where} · s switches"))


def clause_cut(text: str, room: int) -> str:
    """The reason as far as it fits, cut after a whole clause (before '; ', ': ', ', ' or ' ('), never mid-word."""
    if len(text) <= room:
        return text
    more = " … (⏎ the row)"
    end = room - len(more)
    cut = max(text.rfind(sep, 0, end) for sep in ("; ", ": ", ", ", " ("))
    if cut <= 0:
        cut = max(text.rfind(" ", 0, end), 0)
    return text[:cut] + more


def _table_moves() -> list[tuple[str, str]]:
    return [
        ("↑ ↓ pgup pgdn", "move; the row's kernels are underlined on both timelines"),
        ("⏎", "the row: A's and B's kernels side by side, their ops, origins, µs and bytes, why they match"),
        ("z", "zoom both timelines to the row's kernels (r resets)"),
        ("tab", "focus: table → timeline A → timeline B → table"),
        ("click", "a row selects it; on a timeline, a kernel selects its row"),
    ]


def _legend() -> list[tuple[str, str]]:
    return [
        ("same", "the same kernels on both sides, the same count per step"),
        ("replaced", "the same library call (op and shapes) or 0-d update, done by other kernels"),
        ("fused", "what A ran between two library calls → what B ran between the same two"),
        ("changed", "other kernels between the same library calls, neither side compiled"),
        ("cast", "dtype casts on both sides (how many B still runs on their own)"),
        ("only A/B", "removed, or new in B: nothing on the other side in that place"),
        ("span", "a step as a timer sees it; 'distorted': paced by the profiled CPU"),
        ("transfers", "bytes moved / size of one tensor both traces recorded"),
        ("!", "bandwidth above the device's peak: the data sat in cache"),
    ]
