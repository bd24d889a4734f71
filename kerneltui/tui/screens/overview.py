"""`o` in the browser: where each step's time goes, the figures, and what to try next.

The step table is ``analysis/overview.py``'s split (kernel > memcpy > memset > comm >
DataLoader > CPU-only > other, summing to the step's span) with a bar of the span, outliers
marked ``!``; parts that are zero in every step are left out and named in the head line. Below
it: GPU utilization, the estimated SM efficiency and occupancy, Tensor Core use, and the
"try next" findings (``analysis/advice.py``), the same text as ``summary --overview``.
Enter on a step scopes the browser's table and timeline to it; escape (or `o`) goes back.
"""

from __future__ import annotations

import textwrap

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from kerneltui.analysis.overview import PARTS, Overview
from kerneltui.overview_report import HEADS, NO_STEPS, figure_lines, try_next_lines
from kerneltui.terminal_text import printable
from kerneltui.tui.widgets.keys_bar import KeysBar
from kerneltui.tui.widgets.table import Column, VirtualTable
from kerneltui.units import fmt_ns, fmt_share

BAR = "█"
BAR_WIDTH = 40
SUMMARY_ROWS = ("mean", "share")  # after the steps, dimmed; Enter on them scopes to nothing


def shown_parts(o: Overview) -> list[str]:
    """The parts some step has time in (comm without collectives, DataLoader without one, ... are left out)."""
    return [p for p in PARTS if len(o.steps) and o.steps[f"{p}_ns"].to_numpy().any()]


class StepTable(VirtualTable):
    """One row per step, then the mean and each part's share of the mean step."""

    empty_text = NO_STEPS

    def __init__(self, o: Overview, **kwargs) -> None:
        super().__init__(**kwargs)
        self.o = o
        self.parts = shown_parts(o)
        self.longest = int(o.steps["span_ns"].max()) if len(o.steps) else 1

    def columns(self) -> list[Column]:
        return [Column("step", "step", 6, "right"), Column("span", "span", 8, "right"),
                Column("bar", "span (! outlier)", 0, show_from=60),
                *(Column(p, HEADS[p], 8, "right") for p in self.parts)]

    def row_count(self) -> int:
        return len(self.o.steps) + (len(SUMMARY_ROWS) if len(self.o.steps) else 0)

    def row_class(self, row: int) -> str | None:
        return "vtable--dim" if row >= len(self.o.steps) else None

    def cells(self, row: int) -> list[str]:
        steps = self.o.steps
        if row < len(steps):
            r = steps.iloc[row]
            bar = self._bar(int(r["span_ns"]), bool(r["outlier"]))
            return [str(int(r["step"])), fmt_ns(int(r["span_ns"])), bar, *(fmt_ns(int(r[f"{p}_ns"])) for p in self.parts)]
        mean = self.o.mean()
        if row == len(steps):
            return ["mean", fmt_ns(mean["span_ns"]), "", *(fmt_ns(mean[f"{p}_ns"]) for p in self.parts)]
        span = mean["span_ns"]
        return ["share", "", "", *(fmt_share(mean[f"{p}_ns"] / span if span else 0) for p in self.parts)]

    def _bar(self, span: int, outlier: bool) -> str:
        width = next((w for c, w in self._layout(self._drawing_width or self.size.width) if c.key == "bar"), 0)
        room = max(min(width, BAR_WIDTH) - 2, 1)  # wider bars tell no more
        return ("!" if outlier else " ") + BAR * max(round(room * span / max(self.longest, 1)), 1)


class OverviewScreen(ModalScreen[int | None]):
    """The overview over the browser; dismisses with the step (its ProfilerStep number) to scope to, or None."""

    DEFAULT_CSS = """
    OverviewScreen { background: $background; }
    OverviewScreen #overview-head { height: auto; padding: 0 1; background: $panel; }
    OverviewScreen #overview-steps { height: auto; max-height: 50%; }
    OverviewScreen #overview-more { height: 1fr; padding: 0 1; scrollbar-size-vertical: 1; }
    """

    BINDINGS = [Binding("escape,o,q", "dismiss_none", "Back", id="overview.back"),
                Binding("tab", "app.focus_next", "Steps / findings", id="overview.focus")]

    def __init__(self, o: Overview, findings: tuple, path: str = "") -> None:
        super().__init__()
        self.o, self.findings, self.path = o, findings, path

    def compose(self) -> ComposeResult:
        yield Static(self._head(), id="overview-head")
        yield StepTable(self.o, id="overview-steps")
        with VerticalScroll(id="overview-more"):
            yield Static(id="overview-text")
        yield KeysBar(self.BINDINGS, id="keys")

    def _head(self) -> Text:
        o = self.o
        head = Text().append("Overview", style="bold")
        if len(o.steps):
            mean = o.mean()
            util = "–" if o.gpu_utilization is None else fmt_share(o.gpu_utilization)
            head.append(f"  {len(o.steps)} steps · mean {fmt_ns(mean['span_ns'])} · GPU busy {util}")
            zero = [HEADS[p] for p in PARTS if p not in shown_parts(o)]
            head.append("\neach step's span: " + " > ".join(HEADS[p] for p in PARTS), style="dim")
            if zero:
                head.append(f"\nnone in any step: {', '.join(zero)}", style="dim")
            head.append("\n⏎ scope the browser to a step · tab steps/findings · escape back", style="dim")
        else:
            head.append(f"\n{printable(NO_STEPS)}")
            head.append("\n↑↓ scroll · escape back", style="dim")
        return head

    def on_mount(self) -> None:
        self._fill()
        table = self.query_one(StepTable)
        if table.row_count():
            self.set_focus(table)
            table.move_cursor(0)
        else:  # no step to list: the head says so, and the findings get the keys
            table.display = False
            self.set_focus(self.query_one("#overview-more"))

    def on_resize(self) -> None:
        self._fill()

    def _fill(self) -> None:
        width = max(self.size.width - 3, 40)  # padding and scrollbar: lines are wrapped here, never by the Static
        lines = [] if not len(self.o.steps) else [
            part for line in figure_lines(self.o) for part in textwrap.wrap(line, width, subsequent_indent=" " * 22)]
        text = Text("\n".join(printable(x) for x in lines), no_wrap=True, overflow="ellipsis")
        for i, line in enumerate(try_next_lines(list(self.findings), width)):
            text.append(("\n\n" if lines else "") if i == 0 else "\n")
            text.append(printable(line), style="bold" if i == 0 else "")
        self.query_one("#overview-text", Static).update(text)

    def on_virtual_table_activated(self, event: VirtualTable.Activated) -> None:
        event.stop()
        if event.row < len(self.o.steps):
            self.dismiss(int(self.o.steps["step"].iat[event.row]))

    def action_dismiss_none(self) -> None:
        self.dismiss(None)
