"""Both timelines, stacked on one time scale, zoomed and panned together.

Each side's lanes are shifted so that 0 is the start of the same step/call on
both (or its first launch, for a trace with no steps). Linked, the two share
zoom-out bounds and answer each other's WindowChanged with ``set_window``; the
echo stops because ``set_window`` posts nothing when the window is unchanged.
Messages arrive after the fact, so one that no longer matches its sender's
window is stale and ignored. Unlinked ("own scale"), each fits its own call.
"""

from __future__ import annotations

import numpy as np
from textual import on
from textual.app import ComposeResult
from textual.containers import Vertical

from kerneltui.terminal_text import printable
from kerneltui.tui.diff.model import DiffView, marked, own_bounds, row_extent, shared_bounds
from kerneltui.tui.widgets.timeline import Timeline


class PairedTimelines(Vertical):
    """Timeline A above timeline B."""

    def __init__(self, view: DiffView, **kwargs) -> None:
        super().__init__(**kwargs)
        self.view = view
        self.call = view.default_call
        self.linked = True
        self.steps = False  # the call spans on a row of their own (tall screens)

    def compose(self) -> ComposeResult:
        for side in (self.view.a, self.view.b):
            timeline = Timeline(id=f"timeline-{side.label.lower()}", label_width=12)
            timeline.origin_label = printable(f"{side.label} {side.name}")
            yield timeline

    def on_mount(self) -> None:
        self.show_call(self.call)

    @property
    def timelines(self) -> tuple[Timeline, Timeline]:
        return self.query_one("#timeline-a", Timeline), self.query_one("#timeline-b", Timeline)

    def show_call(self, call: int) -> None:
        """Align both sides at a call (clamped to the calls both have) and show it whole."""
        self.call = min(max(call, 0), max(self.view.common_calls - 1, 0))
        sides = (self.view.a, self.view.b)
        lanes = [side.lanes_at(min(self.call, len(side.calls) - 1)) for side in sides]
        bounds = shared_bounds(*lanes)
        for timeline, side, side_lanes in zip(self.timelines, sides, lanes):
            timeline.set_lanes(side_lanes, bounds if self.linked else own_bounds(side_lanes))
            index = min(self.call, len(side.calls) - 1)
            align = side.calls[index][0]
            starts = np.array([c[0] for c in side.calls], np.int64) - align
            ends = np.array([c[1] for c in side.calls], np.int64) - align
            if self.steps:
                timeline.set_steps(starts, ends, side.call_labels[: len(starts)])
            else:
                timeline.set_steps(starts[:0], ends[:0], ())
        self.reset_view()

    def show_steps(self, steps: bool) -> None:
        if steps != self.steps:
            self.steps = steps
            self.show_call(self.call)

    def reset_view(self) -> None:
        a, b = self.view.a, self.view.b
        ends = [side.extent(min(self.call, len(side.calls) - 1))[1] for side in (a, b)]
        if self.linked:
            for timeline in self.timelines:
                timeline.show_span(0, max(ends), margin=0.02)
        else:
            for timeline, end in zip(self.timelines, ends):
                timeline.show_span(0, end, margin=0.02)

    def toggle_link(self) -> bool:
        """Shared scale <-> each side at its own scale; returns whether now linked."""
        self.linked = not self.linked
        self.show_call(self.call)
        return self.linked

    def zoom(self, factor: float) -> None:
        self.timelines[0].zoom(factor)
        if not self.linked:
            self.timelines[1].zoom(factor)

    def pan(self, fraction: float) -> None:
        self.timelines[0].pan(fraction)
        if not self.linked:
            self.timelines[1].pan(fraction)

    def mark(self, a_rows: tuple[int, ...], b_rows: tuple[int, ...]) -> None:
        """Underline the kernels of one matched row on both timelines."""
        for timeline, side, rows in zip(self.timelines, (self.view.a, self.view.b), (a_rows, b_rows)):
            timeline.set_marked(marked(side, rows))

    def zoom_to(self, a_rows: tuple[int, ...], b_rows: tuple[int, ...]) -> bool:
        """Both timelines on a matched row's kernels in the call shown (one span when linked)."""
        spans = [row_extent(side, rows, self.call) for side, rows in ((self.view.a, a_rows), (self.view.b, b_rows))]
        known = [s for s in spans if s is not None]
        if not known:
            return False
        if self.linked:
            start, end = min(s[0] for s in known), max(s[1] for s in known)
            for timeline in self.timelines:
                timeline.show_span(start, max(end, start + 1), margin=0.1)
        else:
            for timeline, span in zip(self.timelines, spans):
                if span is not None:
                    timeline.show_span(span[0], max(span[1], span[0] + 1), margin=0.1)
        return True

    @on(Timeline.WindowChanged)
    def _follow(self, event: Timeline.WindowChanged) -> None:
        if not self.linked or (event.start, event.end) != event.timeline.window:
            return  # unlinked, or stale: the sender has moved on since, and following it would bounce back
        a, b = self.timelines
        other = b if event.timeline is a else a
        if other.window != (event.start, event.end):
            other.set_window(event.start, event.end)
