"""The browser's keys: BINDINGS and their actions (the screen's state lives in browser.py).

Help (`?`) and the command palette (ctrl+p) both list ``key_sections()``, so a
key cannot be in one and missing from the other.
"""

from __future__ import annotations

import itertools

import numpy as np
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import ContentSwitcher, Input

from kerneltui.analysis.explore.groups import available_groupings
from kerneltui.terminal_text import printable
from kerneltui.tui import status
from kerneltui.tui.export import FORMATS, as_csv, as_markdown, export_name, write_new
from kerneltui.tui.lanes import op_row
from kerneltui.tui.layout import MODES
from kerneltui.tui.query import Scope
from kerneltui.tui.screens.goto import GotoScreen
from kerneltui.tui.screens.health import HealthScreen
from kerneltui.tui.screens.help import FILTER_KEYS, HelpScreen
from kerneltui.tui.screens.memory import MemoryScreen
from kerneltui.tui.screens.modules import ModulesScreen
from kerneltui.tui.screens.overview import OverviewScreen
from kerneltui.tui.widgets import kernel_table, launch_list
from kerneltui.tui.widgets.details import DetailsPane
from kerneltui.tui.widgets.kernel_table import KernelTable
from kerneltui.tui.widgets.launch_list import LaunchList
from kerneltui.tui.widgets.table import VirtualTable
from kerneltui.tui.widgets.timeline import Timeline
from kerneltui.units import fmt_ns

# actions that need the second loading stage (timeline, search over ops, groups): pressed before it
# arrives (or typed while the file was read), they run once it is there rather than being lost
NEEDS_BROWSE = frozenset({"modules", "memory", "goto", "cycle_grouping", "scope", "whole", "jump", "mark", "next_match", "zoom", "pan",
                          "zoom_selection", "timeline_size"})
NEEDS_ANALYSES = frozenset({"health", "overview"})  # stage 3 (model.Analyses)
OPENS_A_SCREEN = frozenset({"health", "overview", "memory", "modules"})  # pressed twice while waiting: once

NOISE_KEYS = (("C", "memcpy"), ("S", "memset"), ("R", "runtime"), ("O", "cpu_op"), ("A", "annotation"), ("M", "memory"))


_SCREEN_NUMBERS = itertools.count(1)  # a name for each installed module tree screen


class BrowserKeys(Screen):
    """A Screen (Textual merges BINDINGS only along DOMNode classes); BrowserScreen adds the state."""

    BINDINGS = [
        Binding("question_mark", "help", "Help", id="help"),
        Binding("slash", "focus_filter", "Search", id="filter", priority=True,
                tooltip="Search kernels, launching ops, annotations and steps, modules, source lines (/regex)"),
        Binding("n", "next_match(1)", "Next match", show=False, id="next-match",
                tooltip="Next launch matching the search (no search: of the selected row)"),
        Binding("N,p", "next_match(-1)", "Previous match", show=False, id="previous-match",
                tooltip="Previous launch matching the search (no search: of the selected row)"),
        Binding("v", "toggle_view", "View", id="toggle-view", tooltip="Switch between the kernel table and every launch"),
        Binding("T", "modules", "Modules", id="modules",
                tooltip="The module tree: forward and backward time per nn.Module (or forward op); enter scopes to one"),
        Binding("o", "overview", "Overview", id="overview",
                tooltip="Where each step's time goes (kernel, memcpy, CPU-only, ...), the figures, and what to try next"),
        Binding("u", "memory", "Memory", show=False, id="memory",
                tooltip="GPU memory: allocated and reserved over time, peaks per step, the ops holding the most"),
        Binding("g", "cycle_grouping", "Group", id="group",
                tooltip="Group the table by kernel, launching op, module, source line, step"),
        Binding("left_square_bracket", "scope(-1)", "Previous step", show=False, id="previous-step",
                tooltip="Scope the tables to the previous step (from the first: the whole trace)"),
        Binding("right_square_bracket", "scope(1)", "Next step", show=False, id="next-step",
                tooltip="Scope the tables to the next step, and show it in the timeline"),
        Binding("colon", "goto", "Go to a step or a time", show=False, id="goto",
                tooltip="Go to a step (3, #3, step 3, its name) or a time from the trace's start (12.5ms, 300us)"),
        Binding("w", "whole", "Whole trace", show=False, id="fit",
                tooltip="Whole trace: the tables' scope and the timeline's window"),
        Binding("t", "jump", "Timeline", id="jump", tooltip="Jump from the table to the timeline, and back to the launch"),
        Binding("b,backspace", "back", "Back", show=False, id="back",
                tooltip="Back to where you were before the last jump (enter, t, a search hit, a step)"),
        Binding("e", "timeline_size", "Timeline size", show=False, id="timeline-size",
                tooltip="Timeline: normal, enlarged, maximised (again: back to normal)"),
        Binding("plus,equals_sign", "zoom(2.0)", "Zoom in", show=False, id="zoom-in", tooltip="Zoom the timeline in, around the selection"),
        Binding("minus", "zoom(0.5)", "Zoom out", show=False, id="zoom-out", tooltip="Zoom the timeline out"),
        Binding("comma,shift+left", "pan(-0.25)", "Pan left", show=False, id="pan-left"),
        Binding("full_stop,shift+right", "pan(0.25)", "Pan right", show=False, id="pan-right"),
        Binding("z", "zoom_selection", "Zoom to selection", show=False, id="zoom-selection"),
        Binding("m", "mark", "Mark range", show=False, id="mark",
                tooltip="Mark a time range: first at the selection's start, then at its end (or drag the mouse)"),
        Binding("y", "copy", "Copy name", show=False, id="copy",
                tooltip="Copy the selected kernel's full name to the clipboard (OSC 52: works over SSH and tmux)"),
        Binding("x", "export('csv')", "Export CSV", show=False, id="export-csv",
                tooltip="Write the table as shown (scope, search, grouping) to a new CSV file"),
        Binding("X", "export('markdown')", "Export Markdown", show=False, id="export-markdown",
                tooltip="Write the table as shown to a new Markdown file"),
        Binding("f", "toggle_names", "Full names", show=False, id="full-names", tooltip="Full kernel names instead of short ones"),
        Binding("d", "toggle_details", "Show/hide the details pane", show=False, id="toggle-details"),
        Binding("H", "health", "Trace health", show=False, id="health",
                tooltip="The trace's health report: GPU work lost, doubled or mistimed, by cause, and what it affects"),
        Binding("escape", "escape", "Leave the search / clear the range, then the search", show=False, id="escape"),
        *(Binding(str(i), f"sort({i})", f"Sort by column {i} (again: reverse)", show=False, id=f"sort-{i}")
          for i in range(1, 7)),
        *(Binding(key, f"toggle_noise('{cid}')", f"Show/hide {status.CATEGORY_LABEL[cid]}", show=False,
                  id=f"toggle-{cid}") for key, cid in NOISE_KEYS),
        Binding("q", "app.quit", "Quit", id="quit"),
    ]

    def run_deferred(self) -> None:
        """Run the actions pressed before the stage they need, in order (set_browse and set_analyses call it):
        one that still waits (o before stage 3) is kept again by ``_defer``, and every one after it behind it."""
        actions, self._deferred = getattr(self, "_deferred", []), []
        for name, args in actions:
            getattr(self, f"action_{name}")(*args)

    def _defer(self, name: str, *args) -> bool:
        """True (and kept for later) when the action needs a stage that is not there yet, or an earlier
        action still waits. A screen asked for again while it waits is asked for once."""
        waiting = getattr(self, "_deferred", None)
        if not waiting and not self._stage_missing(name):
            return False
        if waiting is None:
            self._deferred = waiting = []
        if name in OPENS_A_SCREEN and (name, args) in waiting:
            return True
        if name in NEEDS_ANALYSES and self.browse is not None and not any(n in NEEDS_ANALYSES for n, _ in waiting):
            # said once, with the browser up: kept again when stage 2 comes, it is not said twice
            self.notify(f"{'the overview' if name == 'overview' else 'the health report'} opens once the "
                        "whole-trace analyses are in (the header's \"…\")", timeout=3)
        waiting.append((name, args))
        return True

    def _stage_missing(self, name: str) -> bool:
        if name in NEEDS_ANALYSES:
            return self.browse is None or self.browse.analyses is None
        return name in NEEDS_BROWSE and self.browse is None

    def key_sections(self) -> list:
        timeline_keys = [b for b in Timeline.BINDINGS if b.key.split(",")[0] in ("left", "right", "up", "down", "enter")]
        return [
            ("Anywhere", [b for b in self.BINDINGS] + list(self.app.BINDINGS)
             + [Binding("ctrl+p", "command_palette", "Command palette: every action by name", id="palette")]),
            ("Kernel table and launch list", VirtualTable.BINDINGS),
            ("Timeline (when focused)", timeline_keys + [
                ("s7 +1", "a stream's second row: kernels that start before the one ahead of them on the stream "
                          "has ended (programmatic dependent launch, graph branches, or damage: H says which)")]),
            ("Search box", FILTER_KEYS),
        ]

    # -- actions -----------------------------------------------------------------------------
    def action_help(self) -> None:
        self.app.push_screen(HelpScreen(self.key_sections()))

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
        timeline = self.query_one(Timeline)
        if self.focused is box:
            self.set_focus(self._current_table())
        elif self.timeline_mode == "max":
            self.action_timeline_size()
        elif getattr(timeline, "range", None) is not None:
            timeline.clear_range()
        elif box.value:
            box.value = ""  # Input.Changed re-applies the empty search
        elif self.query_state.module:
            self.set_query(module="")

    def action_next_match(self, direction: int) -> None:
        """The next (previous) launch of the search's matches, else of the selected row, in time order."""
        if self._defer("next_match", direction):
            return
        if self.selected is None or self.selected < 0:
            hits = self.in_scope if self.in_scope is not None else None
            start = -1 if direction > 0 else len(self.kernels.key_codes)
        else:
            start = self.selected
            if self.pattern:
                hits = self.in_scope
            else:
                hits = self._group_codes() == self._group_code(self.selected)
                if self.in_scope is not None:
                    hits = hits & self.in_scope
        if hits is None:
            hits = np.ones(len(self.kernels.key_codes), bool)
        found = np.flatnonzero(hits[start + 1:]) if direction > 0 else np.flatnonzero(hits[:max(start, 0)])
        if not len(found):
            self.notify("no further match" if direction > 0 else "no earlier match", timeout=2)
            return
        target = int(start + 1 + found[0]) if direction > 0 else int(found[-1])
        self.remember()
        self.select_launch(target, source=None)

    def action_toggle_view(self) -> None:
        switcher = self.query_one(ContentSwitcher)
        had_focus = self.focused is self._current_table()
        switcher.current = "launches" if switcher.current == "kernels" else "kernels"
        if switcher.current == "launches":
            self._refresh_launch_list()
        if self.selected is not None:
            self.select_launch(self.selected, source=None)
        elif self.kernels.cpu is not None:  # a CPU capture's rows are no launches: the current row's details
            self._select_from_table()
        if had_focus:
            self.set_focus(self._current_table())
        self.fit_layout()

    def action_modules(self) -> None:
        """T: the module tree; Enter on a node scopes the table and timeline to it."""
        if self._defer("modules"):
            return
        if self.browse.modules is None or not len(self.browse.modules.nodes):
            self.notify("nothing to place on modules: no GPU work in the steps", timeout=3)
            return

        def scoped(path: str | None) -> None:
            if path is not None and path != self.query_state.module:
                self.remember()
                self.set_query(module=path)

        self.app.push_screen(self._modules_screen(), scoped)

    def _modules_screen(self) -> ModulesScreen:
        """The tree's screen, made and installed on the first T: later ones show it again, without
        composing, styling and mounting it anew (a third of T's time at 1M launches)."""
        screen = getattr(self, "_modules", None)
        if screen is None or screen.modules is not self.browse.modules:
            if screen is not None:
                self.app.uninstall_screen(screen)
            screen = self._modules = ModulesScreen(self.browse.modules)
            self.app.install_screen(screen, name=f"kerneltui-modules-{next(_SCREEN_NUMBERS)}")
        screen.current = self.query_state.module
        return screen

    def on_unmount(self) -> None:
        # the browser is gone (not the app, whose exit takes every screen): its tree's screen too
        screen = getattr(self, "_modules", None)
        if screen is not None and self.app.is_screen_installed(screen) and screen not in self.app.screen_stack:
            self.app.uninstall_screen(screen)

    def action_overview(self) -> None:
        """o: the step split, the figures and what to try next; Enter on a step scopes to it."""
        if self._defer("overview"):
            return
        numbers = [int(n) for n in self.kernels.trace.iterations.step_numbers_]

        def scoped(step: int | None) -> None:
            if step is not None and step in numbers:
                self.remember()
                self.scope_to(numbers.index(step))

        analyses = self.browse.analyses
        self.app.push_screen(self._kept_screen("overview", lambda: OverviewScreen(analyses.overview,
                                                                                 analyses.findings)), scoped)

    def action_memory(self) -> None:
        """u: where the GPU memory goes (analysis/memory.py)."""
        if self._defer("memory"):
            return
        start, end = self.kernels.trace.window
        self.app.push_screen(self._kept_screen("memory", lambda: MemoryScreen(
            self.browse.memory, self.kernels.origin, (0, end - start), self.browse.step_spans)))

    def _kept_screen(self, what: str, make) -> str:
        """The name of this browser's ``what`` screen, made and installed on first use: later opens show the
        same screen again (its cursor and scroll kept) instead of composing it anew (~60 ms at 1M events)."""
        name = f"{what}-{id(self)}"
        if not self.app.is_screen_installed(name):
            self.app.install_screen(make(), name)
        return name

    def action_health(self) -> None:
        """H: the trace's health report, whole."""
        if self._defer("health"):
            return
        self.app.push_screen(HealthScreen([(self.kernels.trace.meta.path, self.browse.analyses.health)]))

    def action_cycle_grouping(self) -> None:
        if self._defer("cycle_grouping"):
            return
        if self.kernels.cpu is not None:
            self.notify("a CPU capture's table lists its CPU work by self time: grouping is for GPU launches",
                        timeout=3)
            return
        choices = available_groupings(self.kernels.trace, self.browse.context)
        current = self.query_state.grouping
        grouping = choices[(choices.index(current) + 1) % len(choices)] if current in choices else choices[0]
        if self._view() != "kernels":
            self.query_one(ContentSwitcher).current = "kernels"
            self.set_focus(self.query_one(KernelTable))
        self.set_query(grouping=grouping)
        self._current_table().move_cursor(0)  # the top of the new table, as after a sort; its first launch

    def action_scope(self, delta: int) -> None:
        """[ and ]: the tables' scope moves step by step; before the first step is the whole trace."""
        if self._defer("scope", delta):
            return
        if self.browse is None or not len(self.browse.step_spans[0]):
            self.notify("this trace has no steps", timeout=2)
            return
        count = len(self.browse.step_spans[0])
        current = self.query_state.scope.iteration
        if current is None:
            target = 0 if delta > 0 else count - 1
        else:
            target = current + delta
            target = None if target < 0 else min(target, count - 1)
        self.remember()
        self.scope_to(target)

    def action_goto(self) -> None:
        """`:`: a step (scoped to, as `]` does) or a time (the timeline centred on it, the launch there selected)."""
        if self._defer("goto"):
            return
        its = self.kernels.trace.iterations
        numbers = [int(n) for n in its.step_numbers_]

        def go(target) -> None:
            if target is None:
                return
            self.remember()
            if target.step is not None:
                self.scope_to(target.step)
            else:
                self.go_to_time(target.time_ns)

        self.app.push_screen(GotoScreen(tuple(its.labels), numbers, its.unit), go)

    def go_to_time(self, t: int) -> None:
        """The timeline centred on ``t`` (ns from the window's start, as its axis counts), at its current zoom;
        the first launch of the scope starting at or after it selected (the last one, past the end)."""
        timeline = self.query_one(Timeline)
        w0, w1 = timeline.window
        half = max((w1 - w0) // 2, 1)
        timeline.show_span(t - half, t + half, margin=0.0)
        ts = self.kernels.trace.gpu["ts"].to_numpy() - self.kernels.origin  # the timeline's clock
        candidates = np.flatnonzero(ts >= t) if self.in_scope is None else np.flatnonzero((ts >= t) & self.in_scope)
        if not len(candidates):
            candidates = np.flatnonzero(self.in_scope) if self.in_scope is not None else np.arange(len(ts))
            candidates = candidates[-1:]
        if len(candidates):
            launch = int(candidates[0])
            self.select_launch(launch, source=None)
            timeline.select(launch, reveal=False)

    def action_whole(self) -> None:
        if self._defer("whole"):
            return
        timeline = self.query_one(Timeline)
        if getattr(timeline, "range", None) is not None:
            timeline.clear_range()
        if not self.query_state.scope.whole or self.query_state.module:
            self.remember()
            self.set_query(scope=Scope(), module="")
        timeline.fit()

    def action_jump(self) -> None:
        if self._defer("jump"):
            return
        self.remember()
        if self.focused is self.query_one(Timeline):
            self._show_in_launch_list()
        else:
            self.set_focus(self.query_one(Timeline))

    def action_back(self) -> None:
        place = self.history.pop()
        if place is None:
            self.notify("nowhere to go back to", timeout=2)
            return
        self.restore(place)

    def action_timeline_size(self) -> None:
        if self._defer("timeline_size"):
            return
        self.timeline_mode = MODES[(MODES.index(self.timeline_mode) + 1) % len(MODES)]
        if self.timeline_mode == "max":
            self.set_focus(self.query_one(Timeline))
        self.fit_layout()

    def action_mark(self) -> None:
        if self._defer("mark"):
            return
        timeline = self.query_one(Timeline)
        timeline.action_mark()

    def action_copy(self) -> None:
        # escaped as on screen: a crafted name pasted into a shell must not carry ESC, CR or NUL
        text = printable(self._selected_name())
        if not text:
            self.notify("nothing selected to copy", timeout=2)
            return
        self.app.copy_to_clipboard(text)
        self.notify(printable(f"copied: {text}"[:200]), timeout=3, markup=False)

    def _selected_name(self) -> str:
        if self.kernels.cpu is not None and self.selected is None and self._view() == "kernels":
            return self.query_one(KernelTable).current_key() or ""  # a CPU work row
        if self.selected is None:
            return ""
        if self.selected < -1:
            return self.kernels.trace.name(int(self.kernels.trace.events["name"].iat[op_row(self.selected)]))
        code = int(self.kernels.key_codes[self.selected])
        return self.kernels.key_full[code]

    def action_export(self, fmt: str) -> None:
        table = self._current_table()
        what = self._export_what()
        headers = [c.label for c in table.columns()]
        rows = [table.cells(i) for i in range(table.row_count())]
        title = f"{self.kernels.trace.meta.path} · {what.replace('-', ' ')}"
        pattern = self.query_state.pattern
        if fmt == "csv":
            text = as_csv(table.export_frame())
        else:
            text = as_markdown(headers, rows, title=f"# {title}", facts=self._export_facts())
        name = export_name(self.kernels.trace.meta.path, what + (f"-search-{pattern}" if pattern else ""))
        try:
            path = write_new(".", name, FORMATS[fmt], text)
        except OSError as exc:
            self.notify(printable(f"export failed: {exc}"), severity="error", timeout=6, markup=False)
            return
        self.notify(printable(f"wrote {len(rows):,} rows to {path}"), timeout=5, markup=False)

    def _export_facts(self) -> list[tuple[str, str]]:
        """What the exported table is of: the search, the scope, the grouping, the module, the categories shown."""
        q = self.query_state
        scope = "whole trace"
        if q.scope.is_range:
            scope = f"range {fmt_ns(q.scope.start - self.kernels.origin)}–{fmt_ns(q.scope.end - self.kernels.origin)}"
        elif q.scope.iteration is not None:
            scope = self.kernels.trace.iterations.labels[q.scope.iteration]
        facts = [("search", q.pattern or "none"), ("scope", scope),
                 ("view", "every launch" if self._view() == "launches" else f"grouped by {q.grouping}")]
        if q.module:
            facts.append(("module", q.module))
        return facts

    def _export_what(self) -> str:
        q = self.query_state
        view = "launches" if self._view() == "launches" else f"by-{q.grouping}"
        if q.scope.is_range:
            view += f"-range-{q.scope.start - self.kernels.origin}-{q.scope.end - self.kernels.origin}ns"
        elif q.scope.iteration is not None:
            view += f"-{self.kernels.trace.iterations.labels[q.scope.iteration]}"
        return view

    def action_toggle_names(self) -> None:
        full = not self.query_one(KernelTable).full_names
        self.query_one(KernelTable).full_names = full
        self.query_one(LaunchList).full_names = full
        self.query_one(Timeline).full_names = full
        self._show_details()

    def action_toggle_details(self) -> None:
        pane = self.query_one(DetailsPane)
        pane.display = not pane.display
        self.fit_layout()

    def action_sort(self, column: int) -> None:
        table = self._current_table()
        keys = kernel_table.SORT_KEYS if isinstance(table, KernelTable) else launch_list.SORT_KEYS
        table.sort_by(keys[column - 1])
        # the new order from its top: the first row is what the user sorted for
        table.move_cursor(0)

    def action_toggle_noise(self, category: str) -> None:
        self.set_query(shown=self.query_state.shown ^ {category})

    def action_zoom(self, factor: float) -> None:
        if self._defer("zoom", factor):
            return
        self.query_one(Timeline).zoom(factor)

    def action_pan(self, fraction: float) -> None:
        if self._defer("pan", fraction):
            return
        self.query_one(Timeline).pan(fraction)

    def action_zoom_selection(self) -> None:
        if self._defer("zoom_selection"):
            return
        self.query_one(Timeline).action_zoom_selection()

    # -- the range ---------------------------------------------------------------------------
    def on_timeline_range_selected(self, event) -> None:
        self.remember()
        self.set_query(scope=Scope(start=event.start + self.kernels.origin, end=event.end + self.kernels.origin))
        self._show_range()

    def on_timeline_range_cleared(self, event) -> None:
        if self.query_state.scope.is_range:
            self.set_query(scope=Scope())
        self._show_range()

    def _show_range(self) -> None:
        line = self.query_one("#range")
        scope = self.query_state.scope
        if scope.is_range and self.cpu_answer is not None:  # a CPU capture: the range's CPU work, no GPU figure
            line.update(status.cpu_range_line(self.cpu_answer, scope.start - self.kernels.origin,
                                              scope.end - self.kernels.origin))
            line.display = True
        elif scope.is_range and self.browse is not None:
            from kerneltui.analysis.explore.ranges import range_totals

            analyses = self.browse.analyses  # before stage 3 the kernels' bytes are not known yet: "…"
            totals = range_totals(self.kernels.trace, scope.start, scope.end, self.keep,
                                  analyses.traffic if analyses is not None else None)
            line.update(status.range_line(totals, self.kernels.origin, bytes_pending=analyses is None))
            line.display = True
        else:
            line.display = False
        self.fit_layout()

