"""`u` in the browser: where the GPU memory goes (analysis/memory.py), per CUDA device.

Per device: the peaks, a chart of allocated (█) and reserved-but-free (░) bytes over the
whole trace on the timeline's time axis with its steps under it, the peak per step, the ops
holding the most bytes at the peak and the allocations never freed: the same figures as
``summary --memory``. Without ``[memory]`` events it says how to capture them.
"""

from __future__ import annotations

import numpy as np
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from kerneltui.analysis.memory import CAPTURE_HINT, DeviceMemory, MemoryTable
from kerneltui.memory_report import device_lines
from kerneltui.terminal_text import printable
from kerneltui.tui.memory_paint import chart_rows, column_peaks
from kerneltui.tui.timeline_paint import Grid, axis_row, step_row
from kerneltui.tui.widgets.keys_bar import KeysBar
from kerneltui.units import fmt_bytes, plural

CHART_ROWS = 8
MARGIN = 9  # "  1.8 GB│": the chart's scale, left of its cells
HEAD_LINES = 4  # device_lines: peaks, counts and never-freed come before the chart


class MemoryScreen(ModalScreen[None]):
    DEFAULT_CSS = """
    MemoryScreen { background: $background; }
    MemoryScreen #memory-box { height: 1fr; padding: 0 1; scrollbar-size-vertical: 1; }
    """

    BINDINGS = [Binding("escape,u,q", "dismiss_none", "Back", id="memory.back")]

    def __init__(self, table: MemoryTable | None, origin: int, span: tuple[int, int],
                 steps: tuple[np.ndarray, np.ndarray, tuple[str, ...]] = (np.empty(0), np.empty(0), ())) -> None:
        """``origin``: the timeline's 0 (absolute ns); ``span``: the time axis (origin clock), as the timeline's
        whole; ``steps``: the timeline's step spans (origin clock)."""
        super().__init__()
        self.table, self.origin, self.span, self.steps = table, origin, span, steps

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="memory-box"):
            yield Static(id="memory-text")
        yield KeysBar(self.BINDINGS, id="keys")

    def on_mount(self) -> None:
        self._fill()
        self.query_one("#memory-box").focus()

    def on_resize(self) -> None:
        self._fill()

    def _fill(self) -> None:
        self.query_one("#memory-text", Static).update(self.text(max(self.size.width - 3, 40)))

    def text(self, width: int) -> Text:
        t = self.table
        out = Text(no_wrap=True, overflow="ellipsis").append("GPU memory", style="bold")
        if t is None:
            return out.append(f"\n{CAPTURE_HINT}")
        out.append(f"  {plural(t.events, '[memory] event')}, {plural(len(t.devices), 'CUDA device')}")
        out.append("\n█ allocated  ░ reserved, not allocated (the caching allocator's pool)", style="dim")
        if t.note or not t.devices:
            out.append("\n" + printable(t.note or "no CUDA [memory] events (Device Type 1): only host allocations"))
        for d in t.devices:
            lines = device_lines(d, self.origin, width)
            out.append("\n\n" + "\n".join(printable(x) for x in lines[:HEAD_LINES]), style="bold")
            out.append("\n\n")
            out.append_text(self._chart(d, width))
            out.append("\n" + "\n".join(printable(x) for x in lines[HEAD_LINES:]))
        return out

    def _chart(self, d: DeviceMemory, width: int) -> Text:
        plot = max(width - MARGIN, 10)
        grid = Grid.of(self.span, plot)
        ts = d.ts - self.origin
        scale = max(d.peak_reserved_bytes, d.peak_allocated_bytes, 1)
        rows = chart_rows(column_peaks(ts, d.allocated, grid.edges), column_peaks(ts, d.reserved, grid.edges),
                          scale, CHART_ROWS)
        text = Text()
        for i, row in enumerate(rows):
            label = fmt_bytes(scale) if i == 0 else ("0 B" if i == len(rows) - 1 else "")
            text.append(f"{label:>{MARGIN - 1}}│", style="dim")
            for char, kind in row:
                text.append(char, style={"allocated": "bold", "reserved": "dim"}.get(kind, ""))
            text.append("\n")
        text.append(" " * (MARGIN - 1) + "│", style="dim")
        for chunk, _ in axis_row(grid, None):
            text.append(printable(chunk), style="dim")
        starts, ends, labels = self.steps
        if len(starts):
            text.append("\n" + "steps".rjust(MARGIN - 1) + "│", style="dim")
            for chunk, _ in step_row(grid, np.asarray(starts, np.int64), np.asarray(ends, np.int64), labels):
                text.append(printable(chunk), style="dim")
        return text

    def action_dismiss_none(self) -> None:
        self.dismiss(None)
