"""The matched table: kernels of A and B, same / replaced / fused / cast / one side only, sortable by delta."""

from __future__ import annotations

import numpy as np
import pandas as pd

from kerneltui.diff_report import DAMAGED_MARK, match_label, nbytes, num, side_rate
from kerneltui.terminal_text import printable
from kerneltui.tui.widgets.table import Column, VirtualTable
from kerneltui.units import ellipsize

ARROW = " → "


def two_sided_cut(name: str, width: int) -> str:
    """'fill_ + native_batch_n… → triton_poi_fused_max…': A's part and B's each cut at its end, half
    the room each (a side shorter than its half gives the rest to the other)."""
    if len(name) <= width:
        return name
    if ARROW not in name:
        return ellipsize(name, width)
    left, right = name.split(ARROW, 1)
    room = width - len(ARROW)
    share = room // 2
    if len(left) <= share:
        share = len(left)
    elif len(right) <= room - share:
        share = room - len(right)
    return f"{ellipsize(left, share)}{ARROW}{ellipsize(right, room - share)}"

# sort key -> (columns, ascending by default, the column its arrow is drawn on, what it says)
SORTS = {
    "change": (["_change"], False, "delta", "largest change first"),  # how the rows arrive
    "delta": (["delta_ns"], True, "delta", "largest saving first"),  # again: largest loss first
    "time": (["_total"], False, "time", "most time first"),
    "name": (["name"], True, "name", "by name"),
    "match": (["_kind", "_total"], True, "match", "by match"),
}
REVERSED = {"change": "smallest change first", "delta": "largest loss first", "time": "least time first",
            "name": "by name, Z to A", "match": "by match, reversed"}
KIND_RANK = {"same": 0, "replaced": 1, "fused": 2, "cast": 3, "only A": 4, "only B": 5}


class MatchTable(VirtualTable):
    """One row per match group of ``TraceDiff.matches``; the cursor marks its kernels on the timelines."""

    # the sort keys are the screen's (DiffScreen.BINDINGS): they work with a timeline focused too
    empty_text = "no GPU work on either side"

    def __init__(self, matches: pd.DataFrame, unit: str = "call", **kwargs) -> None:
        super().__init__(**kwargs)
        self.matches = matches.assign(
            _total=matches["a_ns"].fillna(0) + matches["b_ns"].fillna(0), _kind=matches["kind"].map(KIND_RANK),
            _change=matches["delta_ns"].abs(),
        )
        self.unit = unit
        # one time unit for the table: ms once a row reaches 10 ms (12,345.67 µs reads worse than 12.346 ms)
        largest = float(np.nanmax(np.abs(matches[["a_ns", "b_ns"]].to_numpy(float)), initial=0.0)) if len(matches) else 0.0
        self.time_unit, self._scale, self._digits = ("ms", 1e6, 3) if largest >= 1e7 else ("µs", 1e3, 2)
        self.order = np.arange(len(matches))
        self.sorted = self.order  # every row, in the sort order; ``order`` is what the search keeps of it
        self.kept_rows: np.ndarray | None = None  # per matches row: kept by the search (None: all)
        self.sort_key = "change"  # the rows arrive largest change first (matches.match_table)
        self.sort_column = "delta"
        self._names = [printable(n) for n in matches["name"]]
        self._cuts: dict[int, dict[str, str]] = {}  # width -> distinct_cuts of the names

    def columns(self) -> list[Column]:
        return [
            Column("name", "kernel (A → B)", 0),
            Column("match", "match", 10, show_from=100),
            Column("launches", f"n/{self.unit}", 7, "right"),
            Column("time", f"GPU {self.time_unit}/{self.unit}", 16, "right"),
            Column("delta", f"Δ {self.time_unit}", 9, "right"),
            Column("bytes", "bytes A → B", 21, "right", show_from=130),
            Column("rate", "achieved A → B", 34, "right", show_from=150),
        ]

    def row_count(self) -> int:
        return len(self.order)

    def row(self, index: int):
        """The match (a namedtuple) shown at a table row."""
        return next(self.matches.iloc[[int(self.order[index])]].itertuples())

    def cells(self, index: int) -> list[str]:
        m = self.row(index)
        mark = f"{DAMAGED_MARK} " if getattr(m, "health", "") else ""
        return [
            mark + self._shown_name(printable(m.name)),
            match_label(m.kind, m.confidence),
            f"{num(m.a_count)} → {num(m.b_count)}",
            f"{self._time(m.a_ns)} → {self._time(m.b_ns)}",
            self._time(m.delta_ns, sign=True),
            f"{nbytes(m.a_bytes)} → {nbytes(m.b_bytes)}",
            f"{side_rate(m, 'a')} → {side_rate(m, 'b')}",
        ]


    def _time(self, ns: float, sign: bool = False) -> str:
        if ns is None or ns != ns:
            return "–"
        return f"{ns / self._scale:{'+' if sign else ''},.{self._digits}f}"

    def _shown_name(self, name: str) -> str:
        """The name as drawn: each side of "A → B" cut at its end, so both stay readable."""
        if self._drawing_width is None:
            return name
        width = next((w for c, w in self._layout(self._drawing_width) if c.key == "name"), 0)
        if not width or len(name) <= width:
            return name
        if width not in self._cuts:
            self._cuts[width] = {}
        cache = self._cuts[width]
        if name not in cache:
            cache[name] = two_sided_cut(name, width)
        return cache[name]

    def row_class(self, index: int) -> str | None:
        return "vtable--dim" if self.row(index).confidence == "low" else None

    def sort_arrow(self) -> str:
        """▲ when the values grow down the table, ▼ when they shrink (|Δ| and time arrive largest first)."""
        ascending = SORTS[self.sort_key][1] != self.sort_reverse
        return "▲" if ascending else "▼"

    def sort_words(self) -> str:
        """What the order is, in words, for the table's title: the arrow's column may be hidden."""
        return REVERSED[self.sort_key] if self.sort_reverse else SORTS[self.sort_key][3]

    def action_sort(self, key: str) -> None:
        columns, ascending, column, _ = SORTS[key]
        if key == self.sort_key:
            self.sort_reverse = not self.sort_reverse
        else:
            self.sort_key, self.sort_reverse = key, False
        self.sort_column = column
        if self.sort_reverse:
            ascending = not ascending
        frame = self.matches.reset_index(drop=True)
        self.sorted = frame.sort_values(columns, ascending=ascending, kind="stable").index.to_numpy()
        self._apply_visible()
        if len(self.order):
            self.move_cursor(0)  # the top of the new order: the largest delta after `d`

    def set_visible(self, visible: np.ndarray | None) -> None:
        """Keep only the rows where ``visible`` (per matches row) is true; the cursor stays on its row if kept."""
        current = self.current_match()
        self.kept_rows = visible
        self._apply_visible()
        at = np.flatnonzero(self.order == current) if current is not None else []
        self.move_cursor(int(at[0]) if len(at) else 0)

    def current_match(self) -> int | None:
        """The matches row under the cursor (None: empty table)."""
        return int(self.order[self.cursor]) if len(self.order) else None

    def move_to_match(self, index: int, notify: bool = True) -> bool:
        at = np.flatnonzero(self.order == index)
        if not len(at):
            return False
        self.move_cursor(int(at[0]), notify=notify)
        return True

    def _apply_visible(self) -> None:
        self.order = self.sorted if self.kept_rows is None else self.sorted[self.kept_rows[self.sorted]]
        self.reset()
