"""The kernel table: one row per distinct kernel, from ``kernel_stats`` (the CLI's numbers).

Public API (the diff screen reuses it)::

    table = KernelTable(id="kernels")               # or KernelTable(columns=[...]) for other frames
    table.set_stats(stats, rows=None)                # a kernel_stats-shaped DataFrame; rows = positions kept
    table.sort_by("total")                           # column key; again on the same key reverses
    table.full_names = True                          # reactive: full names instead of short ones
    table.current_key() -> str | None                # the "key" column of the cursor row
    table.move_to_key(key, notify=False)             # drive the cursor from outside
    table.key_at(row) -> str

Messages: ``KernelTable.Highlighted`` / ``KernelTable.Activated`` (from
VirtualTable: ``.table``, ``.row``; ask ``table.key_at(row)``).

A Column's key names the frame field through ``FIELDS`` (``name`` is ``short``
or ``full_name`` by the toggle); a diff frame can pass its own columns whose
keys are its own field names, formatted by ``formatters``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd
from textual.reactive import reactive

from kerneltui.terminal_text import printable
from kerneltui.trace.text_columns import text_values
from kerneltui.tui.widgets.table import Column, VirtualTable, lowered
from kerneltui.units import distinct_cuts, fmt_ns, fmt_share

KERNEL_COLUMNS = (
    Column("name", "Kernel", 0, middle=True, flex=2),
    Column("count", "Count", 7, "right"),
    Column("total", "Total", 8, "right"),
    Column("mean", "Mean", 8, "right"),
    Column("min", "Min", 8, "right", show_from=130),
    Column("max", "Max", 8, "right", show_from=130),
    Column("share", "Share", 6, "right"),
    Column("op", "Launched by", 0, show_from=72),
)
FIELDS = {"count": "count", "total": "total_ns", "mean": "mean_ns", "min": "min_ns", "max": "max_ns",
          "share": "share", "op": "op"}
FORMATTERS: dict[str, Callable[[object], str]] = {
    "count": lambda v: f"{int(v):,}",
    "total": fmt_ns, "mean": fmt_ns, "min": fmt_ns, "max": fmt_ns,
    "share": fmt_share,
    "op": str,
}
SORT_KEYS = ("name", "count", "total", "mean", "share", "op")  # what keys 1..6 sort by
DESCENDING_FIRST = frozenset({"count", "total", "mean", "min", "max", "share"})


SHOWN_TEXT = ("short", "full_name", "op")  # text fields from the trace that the table draws

NO_MATCH = "no kernel matches the filter"
NO_GPU_WORK = "no GPU work in this trace: was CUDA profiled?"
# a CPU capture lists its CPU work (analysis/cpu_work) instead: empty, it has neither a compiled C++ kernel
# nor an ATen op among its CPU ops
CPU_CAPTURE = "CPU capture with no compiled C++ kernel nor ATen op: its CPU ops are in the timeline (O)"
NO_CPU_MATCH = "no CPU work matches the search"


class KernelTable(VirtualTable):
    empty_text = NO_MATCH
    no_match_text = NO_MATCH  # NO_CPU_MATCH on a CPU capture
    no_work_text = NO_GPU_WORK  # the browser sets CPU_CAPTURE for a CPU capture (its rows: CPU work)
    full_names: reactive[bool] = reactive(False)

    def __init__(self, columns: Sequence[Column] = KERNEL_COLUMNS,
                 formatters: dict[str, Callable[[object], str]] | None = None, **kwargs) -> None:
        super().__init__(**kwargs)
        self._columns = list(columns)
        self._formatters = {**FORMATTERS, **(formatters or {})}
        self._stats = pd.DataFrame()
        self._rows = np.empty(0, np.int64)  # positions kept, in stats order
        self._order = np.empty(0, np.int64)  # positions kept, in display order
        self._values: dict[str, np.ndarray] = {}
        self._natural: dict[str, int] = {}
        self._cuts: dict[tuple[str, int], dict[str, str]] = {}  # (field, width) -> distinct_cuts of the kept names
        self.sort_column, self.sort_reverse = "total", True

    # -- data -----------------------------------------------------------------
    def set_stats(self, stats: pd.DataFrame, rows: np.ndarray | None = None, has_work: bool | None = None) -> None:
        """``has_work``: whether the trace has GPU work at all (default: whether ``stats`` has rows), for
        the empty table's text: "nothing matches" and "no GPU work" are different news."""
        key = self.current_key()
        if stats is not self._stats:
            self._stats = stats
            self._values = {c: stats[c].to_numpy() for c in stats.columns}
            # names as drawn (control characters escaped), once per kernel: widths and sorting follow them;
            # "key" stays exact, it is what the other panes match on
            for c in SHOWN_TEXT:
                if c in self._values:
                    self._values[c] = _printable_array(self._values[c])
            self._natural: dict[str, int] = {}
        self._rows = np.arange(len(stats)) if rows is None else np.asarray(rows, np.int64)
        self._natural, self._cuts = {}, {}
        # an empty table means "filtered out" only when there was something to filter
        self.empty_text = self.no_match_text if (len(stats) if has_work is None else has_work) else self.no_work_text
        self._apply_sort()
        self._restore(key)

    def set_headers(self, name: str, side: str) -> None:
        """Column titles for the grouping shown (Kernel / Launched by, Module / Top kernel...)."""
        columns = [Column(c.key, name if c.key == "name" else side if c.key == "op" else c.label, c.width, c.align,
                          c.show_from, c.middle, c.flex) for c in self._columns]
        if columns != self._columns:
            self._columns = columns
            self._natural = {}
            self.reset()

    def export_frame(self) -> pd.DataFrame:
        """The rows in display order with exact values: names whole, times in ns, share as a fraction."""
        frame = self._stats.iloc[self._order]
        label = {c.key: c.label for c in self._columns}
        out = pd.DataFrame({label["name"]: text_values(frame["short"])})
        if "full_name" in frame and not frame["full_name"].equals(frame["short"]):
            out["full name"] = text_values(frame["full_name"])
        for column in ("count", "total_ns", "mean_ns", "min_ns", "max_ns", "share"):
            if column in frame:
                out[column] = frame[column].to_numpy()
        if "op" in frame:
            out[label.get("op", "op")] = text_values(frame["op"])
        return out

    def sort_by(self, column: str) -> None:
        key = self.current_key()
        if column == self.sort_column:
            self.sort_reverse = not self.sort_reverse
        else:
            self.sort_column, self.sort_reverse = column, column in DESCENDING_FIRST
        self._apply_sort()
        self._restore(key)

    def current_key(self) -> str | None:
        return self.key_at(self.cursor) if self.row_count() else None

    def key_at(self, row: int) -> str:
        return str(self._values["key"][self._order[row]])

    def move_to_key(self, key: str | None, notify: bool = False) -> bool:
        if key is None or "key" not in self._values:
            return False
        found = np.flatnonzero(self._values["key"][self._order] == key)
        if not len(found):
            return False
        self.move_cursor(int(found[0]), notify=notify)
        return True

    def watch_full_names(self) -> None:
        self._natural, self._cuts = {}, {}
        if self.sort_column == "name":
            self._apply_sort()
        self.reset()

    # -- VirtualTable hooks ----------------------------------------------------
    def natural_width(self, key: str) -> int | None:
        field = self._field(key)
        if key not in ("name", "op") or field not in self._values or not len(self._values[field]):
            return None
        if field not in self._natural:  # once per change: _layout runs for every line
            kept = self._values[field][self._rows] if len(self._rows) else self._values[field]
            label = next((c.label for c in self._columns if c.key == key), "")
            self._natural[field] = max(max(len(str(v)) for v in kept), len(label) + 1)  # +1: the sort mark
        return self._natural[field]

    def cut_in_middle(self) -> bool:
        return not self.full_names  # a full name's start (namespace, template) says more than its argument list

    def columns(self) -> list[Column]:
        return self._columns

    def row_count(self) -> int:
        return len(self._order)

    def cells(self, row: int) -> list[str]:
        at = self._order[row]
        out = []
        for c in self._columns:
            field = self._field(c.key)
            value = self._values[field][at] if field in self._values else ""
            fmt = self._formatters.get(c.key, str)
            out.append(self._shown_name(str(value)) if c.key == "name" else fmt(value))
        return out


    def _shown_name(self, name: str) -> str:
        """The name as drawn: cut with ``distinct_cuts`` among the kept rows' names (whole outside drawing)."""
        if self._drawing_width is None or not self.cut_in_middle():
            return name
        width = next((w for c, w in self._layout(self._drawing_width) if c.key == "name" and c.middle), 0)
        field = self._field("name")
        if not width or len(name) <= width or field not in self._values:
            return name
        cuts = self._cuts.get((field, width))
        if cuts is None:
            kept = self._values[field][self._rows] if len(self._rows) else self._values[field]
            cuts = self._cuts[(field, width)] = distinct_cuts([str(v) for v in kept], width)
        return cuts.get(name, name)

    # -- helpers ----------------------------------------------------------------
    def _field(self, key: str) -> str:
        if key == "name":
            return "full_name" if self.full_names else "short"
        return FIELDS.get(key, key)

    def _apply_sort(self) -> None:
        field = self._field(self.sort_column)
        rows = self._rows
        if field in self._values and len(rows):
            values = self._values[field][rows]
            if values.dtype == object:
                values = lowered(values)
            # ties keep stats order (total time, then key) in both directions
            order = _stable_descending(values) if self.sort_reverse else np.argsort(values, kind="stable")
            rows = rows[order]
        self._order = rows
        self.reset()

    def _restore(self, key: str | None) -> None:
        if not self.move_to_key(key, notify=False):
            self.move_cursor(0, notify=False)
        self.reset()


def _printable_array(values: np.ndarray) -> np.ndarray:
    """The values made printable; the same array when none needed it (the usual case)."""
    shown = [printable(str(v)) for v in values]
    if all(s == v for s, v in zip(shown, values)):
        return values
    return np.array(shown, dtype=object)


def _stable_descending(values: np.ndarray) -> np.ndarray:
    """Indices sorting values high to low, equal values keeping their order."""
    if values.dtype.kind in "iuf":
        return np.argsort(-values.astype(np.float64), kind="stable")
    ranks = pd.Series(values).rank(method="dense").to_numpy()
    return np.argsort(-ranks, kind="stable")
