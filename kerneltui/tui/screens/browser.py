"""The browser: kernel table / launch list, details, timeline, search, groups, scope, range.

One selection (a launch: a row of trace.gpu) is shared by every pane; each
pane reports user moves with a message and is moved back silently
(``notify=False``), so no message echoes between panes. What the panes count
comes from ``tui.query.answer`` (the data layer's explore tables); the keys and
their actions are in ``browser_keys.BrowserKeys``.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.widgets import ContentSwitcher, Input, Static

from kerneltui.errors import UserError
from kerneltui.terminal_text import printable
from kerneltui.tui import status
from kerneltui.tui.cpu_details import cpu_work_details
from kerneltui.tui.details import Details, event_details, launch_details
from kerneltui.tui.history import History, Place
from kerneltui.tui.lane_cuts import LaneCuts
from kerneltui.tui.lanes import op_row
from kerneltui.tui.layout import browser_layout
from kerneltui.tui.model import (
    DEFAULT_SHOWN,
    Analyses,
    Browse,
    Kernels,
    event_list,
    memory_curves,
    names_matching,
)
from kerneltui.tui.query import (
    CPU_NAME_HEADER,
    CPU_SIDE_HEADER,
    Answer,
    Caches,
    CpuAnswer,
    Query,
    Scope,
    answer,
    cpu_answer,
    name_header,
    side_header,
)
from kerneltui.tui.screens.browser_keys import BrowserKeys
from kerneltui.tui.widgets.details import DetailsPane
from kerneltui.tui.widgets.kernel_table import CPU_CAPTURE, NO_CPU_MATCH, KernelTable
from kerneltui.tui.widgets.keys_bar import KeysBar
from kerneltui.tui.widgets.launch_list import LaunchList
from kerneltui.tui.widgets.quiet import SearchInput, forget_width, update_static
from kerneltui.tui.widgets.table import VirtualTable
from kerneltui.tui.widgets.timeline import Timeline


class BrowserScreen(BrowserKeys):
    def __init__(self, kernels: Kernels) -> None:
        super().__init__()
        self.kernels = kernels
        self.browse: Browse | None = None
        self.query_state = Query()
        self.answer: Answer | None = None
        self.cpu_answer: CpuAnswer | None = None  # a CPU capture: its kernel table lists CPU work (kernels.cpu)
        self.keep: np.ndarray | None = None  # per launch: kept by the search and the kind toggles
        self.in_scope: np.ndarray | None = None  # ...and inside the scope
        self.selected: int | None = None  # a launch, or a CPU op of the icicle (ids below -1: lanes.op_row)
        self.history = History()
        self.timeline_mode = "normal"
        self._marked_key: tuple[str, str] | None = None  # (grouping, row key) of the launches underlined
        self._lanes_keep: object = "unset"  # the keep mask the timeline's lanes were filtered with
        self._lanes_wanted: object = "unset"  # ...and the one they are being cut to (the last query's)
        self._lane_cuts: LaneCuts | None = None
        self._cutting = False  # a cut is on a thread (_cut_in_background)
        self._layout = None
        self._pending_events: tuple | None = None  # the launch list's query, until the list is shown
        self._base_lanes: list = []
        self._icicle_thread: int | None = None
        self._caches = Caches()  # what query.answer reuses between keystrokes
        self._launch_details = None  # ((launch, full names, browse), the details the pane was given for them)

    @property
    def shown(self) -> frozenset[str]:
        return self.query_state.shown

    @property
    def pattern(self) -> str:
        return self.query_state.pattern

    def compose(self) -> ComposeResult:
        yield Static(id="header")
        yield Static(id="health")
        with Horizontal(id="filterbar"):
            yield SearchInput(placeholder="/ search kernels, ops, modules, source lines, steps" if self.kernels.cpu is None
                        else "/ search CPU work: names, ops, source lines", id="filter", select_on_focus=False)
            yield Static(id="counts")
        with Horizontal(id="main"):
            with ContentSwitcher(initial="kernels", id="tables"):
                table = KernelTable(id="kernels")
                if self.kernels.cpu is not None:  # its rows are CPU work (kernels.cpu)
                    table.no_work_text, table.no_match_text = CPU_CAPTURE, NO_CPU_MATCH
                yield table
                yield LaunchList(id="launches")
            yield DetailsPane(id="details")
        yield Timeline(id="timeline", waiting="drawing the timeline…")
        yield Static(id="range")
        yield Static(id="noise")
        yield KeysBar(self.BINDINGS, id="keys")

    # -- setup ---------------------------------------------------------------------
    def on_mount(self) -> None:
        self.query_one("#header", Static).update(status.header(self.kernels, None, self.size.width))
        self.query_one(LaunchList).set_source(self.kernels, None)
        self.watch(self.query_one("#filter", Input), "value", self._filter_changed, init=False)
        # a move by key shows its row's details and timeline in the same repaint as the row
        self.query_one(LaunchList).answer_move = lambda row: self._launch_highlighted()
        self.query_one(KernelTable).answer_move = self._kernel_row_at
        self.query_one("#range", Static).display = False
        self.query_one("#health", Static).display = False
        self.apply_query()
        self.set_focus(self.query_one(KernelTable))
        drawn = getattr(self.app, "browser_drawn", None)  # the open app keeps this first draw (tui/app.py)
        if drawn is not None:
            self.call_after_refresh(drawn, self)

    def set_browse(self, browse: Browse) -> None:
        """Stage 2 arrived: timeline, launch list, search over everything, full details."""
        self.browse = browse
        self._show_header()
        self.query_one(LaunchList).set_source(self.kernels, browse)
        timeline = self.query_one(Timeline)
        timeline.set_steps(*browse.step_spans, step_of_id=self.kernels.trace.gpu["iteration"].to_numpy())
        timeline.set_memory(memory_curves(browse.memory, self.kernels.origin))
        start, end = self.kernels.trace.window
        self._base_lanes = list(browse.lanes)
        self._lane_cuts = LaneCuts(browse.lanes)
        self._icicle_thread = next(iter(browse.icicles), None)  # the main thread's, until a launch says otherwise
        timeline.set_lanes(self._timeline_lanes(), bounds=(0, end - start))
        self._lanes_keep = self._lanes_wanted = None
        timeline.fit()
        self.apply_query()
        if self.selected is not None:
            self.select_launch(self.selected, source=None)
        self.run_deferred()
        waiting, self._analyses_waiting = getattr(self, "_analyses_waiting", None), None
        if waiting is not None:
            self.set_analyses(waiting)

    def set_analyses(self, analyses: Analyses) -> None:
        """Stage 3 arrived: the header's figures, the health line, o and H, bytes and bandwidth."""
        if self.browse is None:  # stage 2 is held (the app keeps the first draw first): with it
            self._analyses_waiting = analyses
            return
        if self.browse.analyses is not None:
            return
        self.browse = replace(self.browse, analyses=analyses)
        self._show_header()  # with a damaged trace's line: a row the layout gives
        if self.query_state.scope.is_range:
            self._show_range()  # its bytes, known now (it lays out again)
        else:
            self.fit_layout()
        self._show_details()
        self.run_deferred()

    def on_resize(self) -> None:
        forget_width(self.query_one("#counts", Static))  # its room is the new width's
        self._show_header()
        self.fit_layout()

    def _show_header(self) -> None:
        """The header, and under it a damaged trace's health line (a sound one says "healthy" in the header,
        where it fits)."""
        self.query_one("#header", Static).update(status.header(self.kernels, self.browse, self.size.width))
        analyses = self.browse.analyses if self.browse is not None else None
        health = analyses.health if analyses is not None else None
        line = self.query_one("#health", Static)
        line.display = health is not None and not health.ok
        if line.display:
            line.update(status.health_line(health, self.size.width))

    def fit_layout(self) -> None:
        """Rows for the table, details and timeline (layout.browser_layout)."""
        timeline = self.query_one(Timeline)
        table = self._current_table()
        pane = self.query_one(DetailsPane)
        range_line = self.query_one("#range", Static).display
        layout = browser_layout(self.size.width, self.size.height, table.row_count() + 1, timeline.wanted_height(),
                                self.timeline_mode, details=bool(pane.display), range_line=bool(range_line),
                                health_line=bool(self.query_one("#health", Static).display))
        if layout == self._layout:
            return  # unchanged: setting styles again would cost a relayout on every keystroke
        self._layout = layout
        main = self.query_one("#main")
        main.display = layout.table_shown
        main.styles.layout = "horizontal" if layout.details_beside else "vertical"
        if layout.details_beside:
            pane.styles.width, pane.styles.height = 64, "1fr"
            pane.remove_class("-below")
        else:
            pane.styles.width, pane.styles.height = "1fr", layout.details_rows
            pane.add_class("-below")
        timeline.styles.height = layout.timeline_rows + 1  # + its top border
        if not layout.table_shown:
            timeline.styles.height = "1fr"

    # -- the query: search, toggles, grouping, scope ---------------------------------
    def set_query(self, **changes) -> bool:
        """Apply a changed query; False (and the message in the filter bar) for a bad regex."""
        old = self.query_state
        self.query_state = Query(**{**old.__dict__, **changes})
        if not self.apply_query():
            self.query_state = Query(**{**self.query_state.__dict__, "pattern": old.pattern})
            return False
        return True

    def apply_query(self) -> bool:
        """Recompute what every pane shows from the query; False for a bad regex (the last good one stays)."""
        k, q = self.kernels, self.query_state
        counts = self.query_one("#counts", Static)
        try:
            if k.cpu is not None:
                return self._apply_cpu_query(cpu_answer(k, q), counts)
            if self.browse is None:  # stage 1: kernel names only, the kernel table alone
                key_ok = k.key_matches(q.pattern)
                self.keep = k.launch_mask(key_ok, q.shown)
                self.in_scope, self.answer = self.keep, None
                rows = k.stats_rows(key_ok, q.shown)
                self.query_one(KernelTable).set_stats(k.stats, rows)
                kept = len(k.key_codes) if self.keep is None else int(np.count_nonzero(self.keep))
                update_static(counts, status.counts(len(rows), len(k.stats), kept, len(k.key_codes)), keep_width=True)
                self._after_query()
                return True
            found = answer(k, self.browse, q, self._caches)
            name_ok = names_matching(k.trace, q.pattern) if q.shown - DEFAULT_SHOWN else None
        except UserError as exc:
            # a bad regex's message whole at 80 columns: the box keeps a few cells for what is being typed
            update_static(counts, Text(printable(str(exc)).replace("bad filter regex ", "bad regex "), style="bold red"))
            counts.styles.max_width = "90%"
            return False
        counts.styles.max_width = "60%"
        self.answer, self.keep, self.in_scope = found, found.keep, found.in_scope
        table = self.query_one(KernelTable)
        table.set_headers(name_header(q.grouping), side_header(q.grouping))
        table.set_stats(found.table, has_work=len(k.key_codes) > 0)
        # the launch list is rebuilt when it is shown (a million rows to merge on every keystroke otherwise)
        self._pending_events = (self.in_scope, q.shown, name_ok)
        if self._view() == "launches":
            self._refresh_launch_list()
        if self._lanes_wanted is not self.keep:
            self._lanes_wanted = self.keep
            lanes = self._lane_cuts.ready(self.keep)
            if lanes is not None:
                self._show_lanes(self.keep, lanes)
            elif not self._cutting:
                # after the table's repaint: on two cores a cut beside the key's own work slows both
                self._cutting = True
                self.call_after_refresh(self._start_cut)
        room = max(int(self.size.width * 0.6) - 2, 40)  # #counts' max-width (60%) less its padding
        scope = q.scope.label(k.trace, k.origin)
        update_static(counts, status.query_counts(found, len(k.key_codes), scope, room), keep_width=True)
        self._after_query()
        return True

    def _show_lanes(self, keep: np.ndarray | None, lanes: list) -> None:
        self._base_lanes = lanes
        self.query_one(Timeline).set_lanes(self._timeline_lanes())
        self._lanes_keep = keep

    def _start_cut(self) -> None:
        self.run_worker(self._cut_in_background(), group="lane-cut", name="cut the timeline's lanes")

    async def _cut_in_background(self) -> None:
        """Cut the lanes to the last query's mask until they show it: keys typed meanwhile are answered
        at once, and only the mask of the last one is cut next (LaneCuts)."""
        try:
            while self._lanes_wanted is not self._lanes_keep:
                keep = self._lanes_wanted
                lanes = await self._lane_cuts.cut(keep, self._group_codes())
                if keep is self._lanes_wanted:
                    self._show_lanes(keep, lanes)
                    if self.selected is not None and self.selected >= 0:  # it may be in the new lanes only
                        self.query_one(Timeline).select(self.selected)  # (an icicle op's lane is not cut)
        finally:
            self._cutting = False

    def _apply_cpu_query(self, found: CpuAnswer, counts: Static) -> bool:
        """A CPU capture: the kernel table lists its CPU work in scope, the rows the search keeps; no launch."""
        counts.styles.max_width = "60%"
        self.cpu_answer, self.answer, self.keep, self.in_scope = found, None, None, None
        table = self.query_one(KernelTable)
        table.set_headers(CPU_NAME_HEADER, CPU_SIDE_HEADER)
        table.set_stats(found.table, found.rows, has_work=len(self.kernels.cpu.table) > 0)
        q = self.query_state
        # the launch list (v) holds no launch here, only the CPU events its toggles (O, A...) show
        self._pending_events = (None, q.shown, names_matching(self.kernels.trace, q.pattern) if q.shown - DEFAULT_SHOWN
                                else None)
        if self._view() == "launches":
            self._refresh_launch_list()
        room = max(int(self.size.width * 0.6) - 2, 40)  # #counts' max-width (60%) less its padding
        scope = self.query_state.scope.label(self.kernels.trace, self.kernels.origin)
        update_static(counts, status.cpu_counts(found, scope, room), keep_width=True)
        self._after_query()
        return True

    def _after_query(self) -> None:
        update_static(self.query_one("#noise", Static), status.noise(self.shown, self.browse))
        selected = self.selected
        if selected is not None and selected >= 0 and (self.in_scope is None or self.in_scope[selected]):
            # still kept: it stays selected, and the table and list go to its row (a new grouping, a search)
            self.select_launch(selected, source=None)
        elif selected is None or selected >= 0:
            self.selected = None
            self._select_from_table()
        self.fit_layout()

    def _filter_changed(self, value: str) -> None:
        """A watch of the search box's value: answered as the character goes in, so that it and the
        tables it changes reach one repaint (its Changed message came after a repaint of the box)."""
        self.set_query(pattern=value)

    @on(Input.Submitted, "#filter")
    def _filter_submitted(self) -> None:
        self.set_focus(self._current_table())

    # -- selection -----------------------------------------------------------------------
    def select_launch(self, launch: int | None, source: object | None) -> None:
        """Make ``launch`` the selection everywhere except in ``source``, which already shows it."""
        self.selected = launch
        timeline = self.query_one(Timeline)
        if launch is None:
            timeline.select(None)
            self.query_one(DetailsPane).show(self._nothing())
            return
        if launch >= 0 and self.browse is not None:
            thread = int(self.kernels.trace.gpu["launch_lane"].iat[launch])
            if thread != self._icicle_thread and thread in self.browse.icicles:
                self._icicle_thread = thread  # the icicle follows the thread that launched the selection
                timeline.set_lanes(self._timeline_lanes())
        if source is not timeline:
            timeline.select(launch)
        if launch < -1:  # a CPU op of the icicle: no kernel row, no launch-list row of its own
            self.query_one(DetailsPane).show(event_details(self.kernels, self.browse, op_row(launch)))
            return
        key = self._row_key(launch)
        # by grouping too: an op and the module it stands for share a key, not their launches
        marked = (self.query_state.grouping, key)
        if marked != self._marked_key and self.browse is not None:
            # the row's other launches (the kernel's, the op's, the module's...), underlined; over every
            # launch, the search's or not, so a search leaves them as they are
            codes, code = self._group_codes(), self._group_code(launch)
            timeline.set_marked(codes == code, (codes, code))
            self._marked_key = marked
        table = self.query_one(KernelTable)
        if source is not table:
            table.move_to_key(key)
        launches = self.query_one(LaunchList)
        if source is not launches and self._view() == "launches":
            launches.move_to_row(int(self.kernels.trace.gpu["row"].iat[launch]))
        self._show_details()

    def _nothing(self) -> Details:
        if self.pattern:
            what = "CPU work" if self.cpu_answer is not None else "launch"
            return Details(f"no {what} matches the search", (("search", self.pattern),))
        return Details("nothing selected", ())

    def _group_codes(self) -> np.ndarray:
        return self.answer.codes if self.answer is not None else self.kernels.key_codes

    def _group_code(self, launch: int) -> int:
        return int(self._group_codes()[launch])

    def _row_key(self, launch: int) -> str:
        if self.answer is not None:
            return self.answer.key_of(launch)
        code = int(self.kernels.key_codes[launch])
        return str(self.kernels.stats["key"].iat[int(self.kernels.stats_row_of_code[code])])

    def _show_details(self) -> None:
        if self.selected is None or self.selected < 0:
            return
        full = self.query_one(KernelTable).full_names
        pane = self.query_one(DetailsPane)
        key = (self.selected, full, self.browse)
        if self._launch_details is not None and self._launch_details[0] == key and pane.details is self._launch_details[1]:
            return  # a search or grouping that keeps the selection: what the pane shows is still right (5 ms)
        details = launch_details(self.kernels, self.browse, self.selected, full)
        self._launch_details = (key, details)
        pane.show(details)

    def _row_highlighted(self, key: str | None) -> None:
        if key is None:
            self.select_launch(None, source=None)
            return
        if self.cpu_answer is not None:  # a CPU work row: no launch to select, its details
            self.query_one(DetailsPane).show(cpu_work_details(self.kernels, self.cpu_answer, key))
            return
        if self.selected is not None and self.selected >= 0 and self._row_key(self.selected) == key:
            return
        self.select_launch(self._first_of_row(key), source=self.query_one(KernelTable))

    def _first_of_row(self, key: str) -> int | None:
        if self.answer is not None:
            return self.answer.first_launch(key)
        code = int(self.kernels.stats_code[np.flatnonzero(self.kernels.stats["key"].to_numpy() == key)[0]])
        hits = self.kernels.key_codes == code
        if self.keep is not None:
            hits &= self.keep
        found = np.flatnonzero(hits)
        return int(found[0]) if len(found) else None

    def _select_from_table(self) -> None:
        if self._view() == "kernels":
            table = self.query_one(KernelTable)
            self._row_highlighted(table.current_key())
        else:
            self._launch_highlighted()

    def _launch_highlighted(self) -> None:
        row, launch = self.query_one(LaunchList).current()
        if launch >= 0:
            self.select_launch(launch, source=self.query_one(LaunchList))
        elif row >= 0:
            self.query_one(DetailsPane).show(event_details(self.kernels, self.browse, row))
        else:
            self.select_launch(None, source=None)

    @on(VirtualTable.Highlighted, "#kernels")
    def _on_kernel_row(self, event: VirtualTable.Highlighted) -> None:
        self._kernel_row_at(event.row)

    def _kernel_row_at(self, row: int) -> None:
        self._row_highlighted(self.query_one(KernelTable).key_at(row))

    @on(VirtualTable.Highlighted, "#launches")
    def _on_launch_row(self) -> None:
        self._launch_highlighted()

    @on(VirtualTable.Activated)
    def _on_table_enter(self) -> None:
        self.remember()
        self.set_focus(self.query_one(Timeline))

    @on(Timeline.Selected)
    def _on_timeline_selected(self, event: Timeline.Selected) -> None:
        if isinstance(event, Timeline.Activated):
            return
        if event.id is not None and event.id >= 0 and self.keep is not None and not self.keep[event.id]:
            # a launch of lanes still being cut to the search (LaneCuts): the search drops it, so the
            # selection stays where it was
            self.query_one(Timeline).select(self.selected, reveal=False)
            return
        self.select_launch(event.id, source=self.query_one(Timeline))

    def on_timeline_whole_asked(self, event: Timeline.WholeAsked) -> None:
        """`w` with the timeline focused is the browser's `w`: the tables' scope goes back to the whole trace too."""
        if self.browse is not None and (not self.query_state.scope.whole or self.query_state.module):
            self.remember()
            self.set_query(scope=Scope(), module="")

    @on(Timeline.Activated)
    def _on_timeline_enter(self) -> None:
        self.remember()
        self._show_in_launch_list()

    @on(Timeline.StepShown)
    def _on_step(self, event: Timeline.StepShown) -> None:
        self.scope_to(event.index, from_timeline=True)

    # -- places: back, scope ------------------------------------------------------------
    def place(self) -> Place:
        return Place(self.selected, self._view(), self.query_one(Timeline).window,
                     self.focused.id if self.focused is not None and self.focused.id else "kernels",
                     self.query_state.scope.iteration, self.query_state.grouping)

    def remember(self) -> None:
        """Before a jump: where the user is now, for `b` to come back to."""
        self.history.push(self.place())

    def restore(self, place: Place) -> None:
        q = self.query_state
        if place.grouping != q.grouping or place.scope != q.scope.iteration or q.scope.is_range:
            self.set_query(grouping=place.grouping, scope=Scope(iteration=place.scope))
        switcher = self.query_one(ContentSwitcher)
        switcher.current = place.view
        timeline = self.query_one(Timeline)
        if place.selected is not None:
            self.select_launch(place.selected, source=None)
        timeline.set_window(*place.window)
        target = self.query(f"#{place.focus}")
        self.set_focus(target.first() if target else self._current_table())

    def scope_to(self, iteration: int | None, from_timeline: bool = False) -> None:
        """The tables count one step (None: the whole trace); the timeline shows it."""
        self.set_query(scope=Scope(iteration=iteration))
        timeline = self.query_one(Timeline)
        if iteration is None:
            if not from_timeline:
                timeline.fit()
        elif not from_timeline and self.browse is not None:
            starts, ends, _ = self.browse.step_spans
            if iteration < len(starts):
                timeline.show_span(int(starts[iteration]), int(ends[iteration]), margin=0.02)
        first = self.answer.first_launch(self.answer.key_of(self.selected)) if (
            self.answer is not None and self.selected is not None and self.selected >= 0) else None
        if first is None and self.in_scope is not None:
            hits = np.flatnonzero(self.in_scope)
            first = int(hits[0]) if len(hits) else None
        if first is not None:
            self.select_launch(first, source=None)
            timeline.select(first, reveal=False)

    # -- helpers -------------------------------------------------------------------------------
    def _timeline_lanes(self) -> list:
        """GPU streams and launching threads (filtered by the search), then the icicle of the selection's thread.

        The timeline holds rows for the deepest thread's icicle: a move to a launch of another
        thread swaps the icicle without changing the timeline's height (a relayout of the screen,
        about 35 ms a keystroke at 160x45)."""
        icicle = self.browse.icicles.get(self._icicle_thread, ()) if self.browse is not None else ()
        deepest = max(map(len, self.browse.icicles.values()), default=0) if self.browse is not None else 0
        self.query_one(Timeline).min_lanes = len(self._base_lanes) + deepest
        return [*self._base_lanes, *icicle]

    def _refresh_launch_list(self) -> None:
        """The launch list for the last query, if it changed since it was last shown."""
        if self._pending_events is not None and self.browse is not None:
            keep, shown, name_ok = self._pending_events
            self._pending_events = None
            self.query_one(LaunchList).set_events(event_list(self.browse, self.kernels, keep, shown, name_ok))

    def _show_in_launch_list(self) -> None:
        self.query_one(ContentSwitcher).current = "launches"
        self._refresh_launch_list()
        launches = self.query_one(LaunchList)
        if self.selected is not None and self.selected >= 0:
            launches.move_to_row(int(self.kernels.trace.gpu["row"].iat[self.selected]))
        self.set_focus(launches)
        self.fit_layout()

    def _view(self) -> str:
        return self.query_one(ContentSwitcher).current or "kernels"

    def _current_table(self) -> VirtualTable:
        return self.query_one(KernelTable) if self._view() == "kernels" else self.query_one(LaunchList)
