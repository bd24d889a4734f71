"""The browser: kernel table / launch list, details, timeline, filter and noise toggles.

One selection (a launch: a row of trace.gpu) is shared by every pane; each
pane reports user moves with a message and is moved back silently
(``notify=False``), so no message echoes between panes.
"""

from __future__ import annotations

import numpy as np
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.screen import Screen
from textual.widgets import ContentSwitcher, Footer, Input, Static

from kerneltui.errors import UserError
from kerneltui.terminal_text import printable
from kerneltui.tui import status
from kerneltui.tui.details import event_details, launch_details
from kerneltui.tui.lanes import filter_lanes
from kerneltui.tui.model import DEFAULT_SHOWN, Browse, Kernels, event_list, names_matching
from kerneltui.tui.screens.help import FILTER_KEYS, HelpScreen
from kerneltui.tui.widgets import kernel_table, launch_list
from kerneltui.tui.widgets.details import DetailsPane
from kerneltui.tui.widgets.kernel_table import KernelTable
from kerneltui.tui.widgets.launch_list import LaunchList
from kerneltui.tui.widgets.table import VirtualTable
from kerneltui.tui.widgets.timeline import Timeline

NOISE_KEYS = (("C", "memcpy"), ("S", "memset"), ("R", "runtime"), ("O", "cpu_op"), ("A", "annotation"), ("M", "memory"))


class BrowserScreen(Screen):
    BINDINGS = [
        Binding("question_mark", "help", "Help", id="help"),
        Binding("slash", "focus_filter", "Filter", id="filter", priority=True,
                tooltip="Filter by name: type text, or /regex"),
        Binding("v", "toggle_view", "View", id="toggle-view", tooltip="Switch between the kernel table and every launch"),
        Binding("f", "toggle_names", "Full names", id="full-names", tooltip="Full kernel names instead of short ones"),
        Binding("t", "jump", "Timeline", id="jump", tooltip="Jump from the table to the timeline, and back to the launch"),
        Binding("plus,equals_sign", "zoom(2.0)", "Zoom", id="zoom-in", tooltip="Zoom the timeline in, around the selection"),
        Binding("minus", "zoom(0.5)", "Out", id="zoom-out", tooltip="Zoom the timeline out"),
        Binding("comma,shift+left", "pan(-0.25)", "Pan left", show=False, id="pan-left"),
        Binding("full_stop,shift+right", "pan(0.25)", "Pan right", show=False, id="pan-right"),
        Binding("z", "zoom_selection", "Zoom to selection", show=False, id="zoom-selection"),
        Binding("w", "fit", "Whole trace in the timeline", show=False, id="fit"),
        Binding("left_square_bracket", "step(-1)", "Previous step", show=False, id="previous-step"),
        Binding("right_square_bracket", "step(1)", "Next step", show=False, id="next-step"),
        Binding("n", "next_launch(1)", "Next launch of this kernel", show=False, id="next-launch"),
        Binding("p", "next_launch(-1)", "Previous launch of this kernel", show=False, id="previous-launch"),
        Binding("d", "toggle_details", "Show/hide the details pane", show=False, id="toggle-details"),
        Binding("escape", "escape", "Leave the filter / clear it", show=False, id="escape"),
        *(Binding(str(i), f"sort({i})", f"Sort by column {i} (again: reverse)", show=False, id=f"sort-{i}")
          for i in range(1, 7)),
        *(Binding(key, f"toggle_noise('{cid}')", f"Show/hide {status.CATEGORY_LABEL[cid]}", show=False,
                  id=f"toggle-{cid}") for key, cid in NOISE_KEYS),
        Binding("q", "app.quit", "Quit", id="quit"),
    ]

    def __init__(self, kernels: Kernels) -> None:
        super().__init__()
        self.kernels = kernels
        self.browse: Browse | None = None
        self.shown = DEFAULT_SHOWN
        self.pattern = ""
        self.key_ok = kernels.key_matches("")
        self.keep: np.ndarray | None = None
        self.selected: int | None = None
        self._marked_code = -1

    def compose(self) -> ComposeResult:
        yield Static(id="header")
        with Horizontal(id="filterbar"):
            yield Input(placeholder="/ filter: text or /regex", id="filter", select_on_focus=False)
            yield Static(id="counts")
        with Horizontal(id="main"):
            with ContentSwitcher(initial="kernels", id="tables"):
                yield KernelTable(id="kernels")
                yield LaunchList(id="launches")
            yield DetailsPane(id="details")
        yield Timeline(id="timeline")
        yield Static(id="noise")
        yield Footer(compact=True)

    # -- setup ---------------------------------------------------------------------
    def on_mount(self) -> None:
        self.query_one("#header", Static).update(status.header(self.kernels, None))
        self.query_one(LaunchList).set_source(self.kernels, None)
        self.apply_filter()
        self.query_one(KernelTable).focus()
        if len(self.kernels.stats):
            self._kernel_highlighted(self.query_one(KernelTable).current_key())

    def set_browse(self, browse: Browse) -> None:
        """Stage 2 arrived: timeline, launch list, full details."""
        self.browse = browse
        self.query_one("#header", Static).update(status.header(self.kernels, browse))
        self.query_one(LaunchList).set_source(self.kernels, browse)
        timeline = self.query_one(Timeline)
        timeline.set_steps(*browse.step_spans, step_of_id=self.kernels.trace.gpu["iteration"].to_numpy())
        start, end = self.kernels.trace.window
        timeline.set_lanes(filter_lanes(browse.lanes, self.keep), bounds=(0, end - start))
        timeline.fit()
        self.apply_filter()
        if self.selected is not None:
            self.select_launch(self.selected, source=None)

    # -- filtering ---------------------------------------------------------------------
    def apply_filter(self) -> None:
        """Recompute what every pane shows from the filter text and the noise toggles."""
        k = self.kernels
        try:
            self.key_ok = k.key_matches(self.pattern)
            name_ok = names_matching(k.trace, self.pattern) if self.shown - DEFAULT_SHOWN else None
        except UserError as exc:
            self.query_one("#counts", Static).update(Text(printable(str(exc)), style="bold red"))
            return
        self.keep = k.launch_mask(self.key_ok, self.shown)
        rows = k.stats_rows(self.key_ok, self.shown)
        self.query_one(KernelTable).set_stats(k.stats, rows)
        events = event_list(self.browse, k, self.keep, self.shown, name_ok)
        self.query_one(LaunchList).set_events(events)
        if self.browse is not None:
            self.query_one(Timeline).set_lanes(filter_lanes(self.browse.lanes, self.keep))
            self._marked_code = -1
        kept = len(k.key_codes) if self.keep is None else int(np.count_nonzero(self.keep))
        self.query_one("#counts", Static).update(status.counts(len(rows), len(k.stats), kept, len(k.key_codes)))
        self.query_one("#noise", Static).update(status.noise(self.shown, self.browse))
        if self.selected is not None and self.keep is not None and not self.keep[self.selected]:
            self.selected = None
        if self.selected is None:
            self._select_from_table()

    @on(Input.Changed, "#filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        self.pattern = event.value
        self.apply_filter()

    @on(Input.Submitted, "#filter")
    def _filter_submitted(self) -> None:
        self._current_table().focus()

    # -- selection -----------------------------------------------------------------------
    def select_launch(self, launch: int | None, source: object | None) -> None:
        """Make ``launch`` the selection everywhere except in ``source``, which already shows it."""
        self.selected = launch
        timeline = self.query_one(Timeline)
        if launch is None:
            timeline.select(None)
            self.query_one(DetailsPane).show(None)
            return
        code = int(self.kernels.key_codes[launch])
        if source is not timeline:
            timeline.select(launch)
        if code != self._marked_code and self.browse is not None:
            timeline.set_marked(self.kernels.key_codes == code)  # the kernel's other launches, underlined
            self._marked_code = code
        table = self.query_one(KernelTable)
        if source is not table:
            table.move_to_key(str(self.kernels.stats["key"].iat[int(self.kernels.stats_row_of_code[code])]))
        launches = self.query_one(LaunchList)
        if source is not launches:
            launches.move_to_row(int(self.kernels.trace.gpu["row"].iat[launch]))
        self._show_details()

    def _show_details(self) -> None:
        pane = self.query_one(DetailsPane)
        if self.selected is None:
            return
        full = self.query_one(KernelTable).full_names
        pane.show(launch_details(self.kernels, self.browse, self.selected, full))

    def _kernel_highlighted(self, key: str | None) -> None:
        if key is None:
            return
        code = int(self.kernels.stats_code[np.flatnonzero(self.kernels.stats["key"].to_numpy() == key)[0]])
        if self.selected is not None and int(self.kernels.key_codes[self.selected]) == code:
            return
        self.select_launch(self._first_launch(code, 0, 1), source=self.query_one(KernelTable))

    def _first_launch(self, code: int, start: int, direction: int) -> int | None:
        """The next launch of a kernel from ``start`` (inclusive) in ``direction``, kept by the filter."""
        hits = self.kernels.key_codes == code
        if self.keep is not None:
            hits &= self.keep
        found = np.flatnonzero(hits[start:] if direction > 0 else hits[: start + 1])
        if not len(found):
            return None
        return int(start + found[0]) if direction > 0 else int(found[-1])

    def _select_from_table(self) -> None:
        if self._view() == "kernels":
            self._kernel_highlighted(self.query_one(KernelTable).current_key())
        else:
            self._launch_highlighted()

    def _launch_highlighted(self) -> None:
        row, launch = self.query_one(LaunchList).current()
        if launch >= 0:
            self.select_launch(launch, source=self.query_one(LaunchList))
        elif row >= 0:
            self.query_one(DetailsPane).show(event_details(self.kernels, self.browse, row))

    @on(VirtualTable.Highlighted, "#kernels")
    def _on_kernel_row(self, event: VirtualTable.Highlighted) -> None:
        self._kernel_highlighted(self.query_one(KernelTable).key_at(event.row))

    @on(VirtualTable.Highlighted, "#launches")
    def _on_launch_row(self) -> None:
        self._launch_highlighted()

    @on(VirtualTable.Activated)
    def _on_table_enter(self) -> None:
        self.query_one(Timeline).focus()

    @on(Timeline.Selected)
    def _on_timeline_selected(self, event: Timeline.Selected) -> None:
        if not isinstance(event, Timeline.Activated):
            self.select_launch(event.id, source=self.query_one(Timeline))

    @on(Timeline.Activated)
    def _on_timeline_enter(self) -> None:
        self._show_in_launch_list()

    @on(Timeline.StepShown)
    def _on_step(self, event: Timeline.StepShown) -> None:
        it = self.kernels.trace.gpu["iteration"].to_numpy() == event.index
        if self.keep is not None:
            it &= self.keep
        first = np.flatnonzero(it)
        if len(first):
            self.select_launch(int(first[0]), source=self.query_one(Timeline))  # window already on the step
            self.query_one(Timeline).select(int(first[0]), reveal=False)

    # -- actions -----------------------------------------------------------------------------
    def action_help(self) -> None:
        sections = [
            ("Anywhere", [b for b in self.BINDINGS if b.id not in ("escape",)] + list(self.app.BINDINGS)),
            ("Kernel table and launch list", VirtualTable.BINDINGS),
            ("Timeline (when focused)", [b for b in Timeline.BINDINGS if b.key in ("left", "right", "up", "down", "enter")]),
            ("Filter box", FILTER_KEYS),
        ]
        self.app.push_screen(HelpScreen(sections))

    def action_focus_filter(self) -> None:
        # A priority binding, focusing at once (not via focus()'s call_later): keys typed right
        # after / are forwarded to whatever has focus when they are read, so it must be the box.
        box = self.query_one("#filter", Input)
        if self.focused is box:  # (has_focus lags: it is set when the Focus event is handled)
            box.insert_text_at_cursor("/")  # in the box, / is text (the regex prefix)
        else:
            self.set_focus(box)

    def action_escape(self) -> None:
        box = self.query_one("#filter", Input)
        if self.focused is box:
            self._current_table().focus()
        elif box.value:
            box.value = ""  # Input.Changed re-applies the empty filter

    def action_toggle_view(self) -> None:
        switcher = self.query_one(ContentSwitcher)
        had_focus = self.focused is self._current_table()
        switcher.current = "launches" if switcher.current == "kernels" else "kernels"
        if self.selected is not None:
            self.select_launch(self.selected, source=None)
        if had_focus:
            self._current_table().focus()

    def action_toggle_names(self) -> None:
        full = not self.query_one(KernelTable).full_names
        self.query_one(KernelTable).full_names = full
        self.query_one(LaunchList).full_names = full
        self.query_one(Timeline).full_names = full
        self._show_details()

    def action_toggle_details(self) -> None:
        pane = self.query_one(DetailsPane)
        pane.display = not pane.display

    def action_jump(self) -> None:
        if self.focused is self.query_one(Timeline):
            self._show_in_launch_list()
        else:
            self.query_one(Timeline).focus()

    def _show_in_launch_list(self) -> None:
        self.query_one(ContentSwitcher).current = "launches"
        launches = self.query_one(LaunchList)
        if self.selected is not None:
            launches.move_to_row(int(self.kernels.trace.gpu["row"].iat[self.selected]))
        launches.focus()

    def action_sort(self, column: int) -> None:
        table = self._current_table()
        keys = kernel_table.SORT_KEYS if isinstance(table, KernelTable) else launch_list.SORT_KEYS
        table.sort_by(keys[column - 1])

    def action_toggle_noise(self, category: str) -> None:
        self.shown = self.shown ^ {category}
        self.apply_filter()

    def action_zoom(self, factor: float) -> None:
        self.query_one(Timeline).zoom(factor)

    def action_pan(self, fraction: float) -> None:
        self.query_one(Timeline).pan(fraction)

    def action_zoom_selection(self) -> None:
        self.query_one(Timeline).action_zoom_selection()

    def action_fit(self) -> None:
        self.query_one(Timeline).fit()

    def action_step(self, delta: int) -> None:
        self.query_one(Timeline).action_step(delta)

    def action_next_launch(self, direction: int) -> None:
        if self.selected is None:
            return
        code = int(self.kernels.key_codes[self.selected])
        found = self._first_launch(code, self.selected + direction, direction)
        if found is not None:
            self.select_launch(found, source=None)

    # -- helpers -------------------------------------------------------------------------------
    def _view(self) -> str:
        return self.query_one(ContentSwitcher).current or "kernels"

    def _current_table(self) -> VirtualTable:
        return self.query_one(KernelTable) if self._view() == "kernels" else self.query_one(LaunchList)
