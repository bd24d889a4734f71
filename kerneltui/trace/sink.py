"""The loader's columns, joined as the chunks come instead of all at once at the end.

Each decoded chunk (in file order) is copied into columns made once, long enough for the rows the
file is expected to hold (its size over the first chunk's bytes per event, with room to spare: the
pages past the last row are never touched, so they cost no memory), and the chunk is let go. Joining
at the end held every chunk and the joined columns at once, and wrote both into fresh pages; here a
chunk's memory is free for the next chunk's scan (ahead.py hands its columns back to the scanner).
A file with more events than expected grows the columns (one copy); the end trims them to their rows.
Chunks whose JSON is not known (worker processes' results, a file decoded whole) are kept as they
come and joined at the end, as before. Either way the kernels' fields (schema.KERNEL_FIELDS) of the
rows that have any go to a side table, not into columns of every row.
"""

from __future__ import annotations

import numpy as np

from kerneltui.trace.decode import MEMORY_PREFIX
from kerneltui.trace.schema import (
    MEMORY_COLUMNS,
    ROW_COLUMNS,
    KernelColumns,
    MemoryColumns,
)

ROOM = 1.25  # rows made for, over the rows expected: a file's first chunk is not quite its average
GROWTH = 1.5
# no more rows made for than this many bytes of JSON each: a first chunk of tiny events does not make
# room for a file of them (no profiler's event is this short; a file of such grows its columns instead)
SHORTEST_EVENT = 48


class ColumnSink:
    def __init__(self, json_bytes: int = 0):
        """``json_bytes``: about how much JSON the events lie in (0: unknown, the columns grow as needed)."""
        self.json_bytes = json_bytes
        self.rows = 0
        self.columns: dict[str, np.ndarray] = {}  # each as long as the rows made for
        self.memory: list[MemoryColumns] = []  # each chunk's side table, its rows counted from the first chunk's
        self.kernels: list[KernelColumns] = []  # each chunk's kernel fields (schema.KERNEL_FIELDS), likewise
        self.kept: list[dict[str, np.ndarray]] | None = None  # chunks joined at the end (no JSON size to go by)

    def append(self, chunk: dict[str, np.ndarray], text_bytes: int = 0) -> None:
        """Copy a chunk's columns in after the rows before it. ``text_bytes``: the JSON it was decoded
        from; a first chunk without it makes this sink keep its chunks and join them at the end."""
        n = len(chunk["ts"])
        if self.kept is None and not self.columns and not text_bytes:
            self.kept = []
        if self.kept is not None:
            self.kept.append({name: chunk[name] for name in ROW_COLUMNS})
        else:
            self._make_room(n, text_bytes)
            for name, column in self.columns.items():
                column[self.rows : self.rows + n] = chunk[name]
        end = self.rows + n
        kernels = KernelColumns.of_columns(chunk, self.rows)  # aside: 6% of a training trace's rows have them
        if len(kernels):
            self.kernels.append(kernels)
        side = {name: chunk[MEMORY_PREFIX + name] for name in MEMORY_COLUMNS}
        if len(side["row"]):
            side["row"] = side["row"] + self.rows
            self.memory.append(MemoryColumns(side))
        self.rows = end

    def _make_room(self, n: int, text_bytes: int) -> None:
        made = len(next(iter(self.columns.values()))) if self.columns else 0
        if self.rows + n <= made:
            return
        needed = wanted = self.rows + n
        if not made and n and text_bytes and self.json_bytes > text_bytes:
            expected = min(self.json_bytes / text_bytes * n * ROOM, self.json_bytes / SHORTEST_EVENT)
            wanted = max(wanted, int(expected))
        elif made:
            wanted = max(wanted, int(made * GROWTH))
        try:
            grown = {name: np.empty(wanted, dtype) for name, dtype in ROW_COLUMNS.items()}
        except MemoryError:  # the room asked for is refused (a system that does not overcommit): the rows alone
            grown = {name: np.empty(needed, dtype) for name, dtype in ROW_COLUMNS.items()}
        for name, column in self.columns.items():
            grown[name][: self.rows] = column[: self.rows]
        self.columns = grown

    def joined(self) -> tuple[dict[str, np.ndarray], MemoryColumns, KernelColumns]:
        """(the event columns (schema.ROW_COLUMNS), each exactly its rows long; the side table of the
        Kind.MEMORY rows; the kernels' fields)."""
        columns = {}
        for name, dtype in ROW_COLUMNS.items():
            if self.kept is not None:
                parts = [chunk.pop(name) for chunk in self.kept]
                columns[name] = np.concatenate(parts) if parts else np.empty(0, dtype)
                continue
            column = self.columns.pop(name, None)  # (the only reference: resize checks it is)
            if column is None:
                column = np.empty(0, dtype)
            elif len(column) != self.rows:
                try:  # cut to its rows in place: the pages past them handed back, none copied
                    column.resize(self.rows)
                except ValueError:  # something else refers to it: its rows as a view
                    column = column[: self.rows]
            columns[name] = column
        memory, kernels = MemoryColumns.joined(self.memory), KernelColumns.joined(self.kernels)
        self.memory, self.kernels, self.kept = [], [], None
        self.rows = 0
        return columns, memory, kernels

