"""The ranks table: a row per rank with `kerneltui summary DIR`'s figures; a failed rank shows its error."""

from __future__ import annotations

from rich.segment import Segment
from textual.strip import Strip

from kerneltui.tui.ranks.model import DAMAGED_MARK, STRAGGLER_MARK, RankRow
from kerneltui.tui.widgets.table import Column, VirtualTable
from kerneltui.units import ellipsize

TIME_COLUMNS = (("step", "step"), ("busy", "busy"), ("compute", "compute"), ("comm", "comm"),
                ("exposed", "exposed"), ("idle", "idle"), ("offset", "offset"), ("late", "late"))


class RankTable(VirtualTable):
    """Rows in rank order; the straggler's rank cell carries ◀ (a glyph: NO_COLOR keeps it) and its row is bold."""

    COMPONENT_CLASSES = VirtualTable.COMPONENT_CLASSES | {"ranks--straggler-row", "ranks--failed-row"}
    DEFAULT_CSS = """
    RankTable > .ranks--straggler-row { color: $error; text-style: bold; }
    RankTable > .ranks--failed-row { color: $text-muted; text-style: italic; }
    """
    empty_text = "no rank"

    def __init__(self, rows: list[RankRow], **kwargs) -> None:
        super().__init__(**kwargs)
        self.rows = rows
        self.rank_width = max(4, *(len(self._rank_cell(r)) for r in rows)) if rows else 4

    def columns(self) -> list[Column]:
        return [
            Column("rank", "rank", self.rank_width, "right"),
            *(Column(key, label, 8 if key != "offset" else 9, "right") for key, label in TIME_COLUMNS),
            Column("device", "device", 22, show_from=130),
            Column("file", "file", 0, show_from=110),
        ]

    def row_count(self) -> int:
        return len(self.rows)

    def cells(self, index: int) -> list[str]:
        r = self.rows[index]
        if r.error:
            return [self._rank_cell(r), *("–" for _ in TIME_COLUMNS), "", r.path]
        return [self._rank_cell(r), *r.cells, r.device, r.path]

    def row_class(self, index: int) -> str | None:
        r = self.rows[index]
        return "ranks--failed-row" if r.error else "ranks--straggler-row" if r.straggler else None

    def _draw_row(self, row: int, width: int) -> Strip:
        r = self.rows[row]
        if not r.error:
            return super()._draw_row(row, width)
        # the error where the figures would be: the one line saying why this rank has none
        text = f"{self._rank_cell(r).rjust(self.rank_width)} {ellipsize('failed: ' + r.error, width - self.rank_width - 1)}"
        names = ["ranks--failed-row"] + (["vtable--cursor"] if row == self.cursor else [])
        return Strip([Segment(text.ljust(width)[:width], self._style(*names))], width)

    @staticmethod
    def _rank_cell(r: RankRow) -> str:
        return (f"{r.rank} {STRAGGLER_MARK}" if r.straggler else f"{r.rank} {DAMAGED_MARK}" if r.damaged
                else str(r.rank))
