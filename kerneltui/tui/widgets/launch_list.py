"""Every launch in time order (plus CPU-side events when their toggles are on), drawn lazily.

Public API::

    launches = LaunchList(id="launches")
    launches.set_source(kernels, browse)      # model.Kernels, model.Browse (browse may come later)
    launches.set_events(event_list)           # model.EventList; the cursor stays on its event if kept
    launches.sort_by("dur")                   # start, dur, name, stream, step, op; again reverses
    launches.full_names = True
    launches.current() -> (event_row, launch) # launch = position in trace.gpu, -1 for CPU events
    launches.move_to_row(event_row, notify=False)

Only the rows on screen are formatted, from numpy columns, so a million rows
cost nothing until they scroll into view. Names are drawn escaped
(``terminal_text.printable``): kernel and op names once per distinct name when
the source is set, CPU events' names as their rows are drawn.
"""

from __future__ import annotations

import numpy as np
from textual.reactive import reactive

from kerneltui.terminal_text import printable
from kerneltui.trace.schema import KIND_LABEL, Kind
from kerneltui.trace.text_columns import text_values
from kerneltui.tui.model import Browse, EventList, Kernels
from kerneltui.tui.widgets.table import Column, VirtualTable, lowered
from kerneltui.units import distinct_cuts, fmt_ns

LAUNCH_COLUMNS = (
    Column("start", "Start", 9, "right"),
    Column("dur", "Dur", 8, "right"),
    Column("stream", "Strm", 5),
    Column("step", "Step", 4, "right"),
    Column("name", "Kernel", 0, middle=True, flex=2),
    Column("op", "Launched by", 0, show_from=72),
)
SORT_KEYS = ("start", "dur", "stream", "step", "name", "op")  # keys 1..6: the columns, left to right
DESCENDING_FIRST = frozenset({"dur"})


class LaunchList(VirtualTable):
    empty_text = "no launch matches the filter"
    full_names: reactive[bool] = reactive(False)

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.kernels: Kernels | None = None
        self.browse: Browse | None = None
        self.events = EventList(np.empty(0, np.int64), np.empty(0, np.int64))
        self._order: np.ndarray | None = None  # None: time order
        self._natural: dict[str, int | None] = {}
        self._short: tuple[str, ...] = ()
        self._full: tuple[str, ...] = ()
        self._cuts: dict[tuple[bool, int], dict[str, str]] = {}  # (full_names, width) -> distinct_cuts of kernel names
        self.sort_column, self.sort_reverse = "start", False

    def set_source(self, kernels: Kernels, browse: Browse | None) -> None:
        self.kernels, self.browse = kernels, browse
        trace = kernels.trace
        self.empty_text = "no launch matches the filter" if len(trace.gpu) else "no GPU work in this trace"
        ev, g = trace.events, trace.gpu
        self._ev_ts, self._ev_dur = ev["ts"].to_numpy(), ev["dur"].to_numpy()
        self._ev_name, self._ev_kind, self._ev_lane = ev["name"].to_numpy(), ev["kind"].to_numpy(), ev["lane"].to_numpy()
        self._stream = g["stream"].to_numpy()
        self._step = g["step"].to_numpy()
        self._iteration = g["iteration"].to_numpy()
        self._op = g["op"].cat.codes.to_numpy()
        self._op_names = [printable(str(c)) for c in g["op"].cat.categories]
        self._short = tuple(printable(n) for n in kernels.key_short)  # per key code, as drawn
        self._full = tuple(printable(n) for n in kernels.key_full)
        self._lane_tid = [str(t) for t in trace.lanes["tid"]]
        self._natural, self._cuts = {}, {}
        self.reset()

    def set_events(self, events: EventList) -> None:
        row, _ = self.current()
        self.events = events
        self._natural = {}
        self._apply_sort()
        if row < 0 or not self.move_to_row(row):
            self.move_cursor(0, notify=False)
        self.reset()

    def sort_by(self, column: str) -> None:
        row, _ = self.current()
        if column == self.sort_column:
            self.sort_reverse = not self.sort_reverse
        else:
            self.sort_column, self.sort_reverse = column, column in DESCENDING_FIRST
        self._apply_sort()
        if row >= 0:
            self.move_to_row(row)
        self.reset()

    def current(self) -> tuple[int, int]:
        if not self.row_count():
            return -1, -1
        at = self._at(self.cursor)
        return int(self.events.rows[at]), int(self.events.launch[at])

    def move_to_row(self, row: int, notify: bool = False) -> bool:
        at = self.events.position_of_row(row)
        if at < 0:
            return False
        if self._order is not None:
            at = int(np.flatnonzero(self._order == at)[0])
        self.move_cursor(at, notify=notify)
        return True

    def export_frame(self):
        """Every row in display order: GPU launches with exact values (report.launches_frame), CPU events too."""
        import pandas as pd

        order = self._order if self._order is not None else np.arange(len(self.events))
        rows, launch = self.events.rows[order], self.events.launch[order]
        ev = self.kernels.trace.events
        kinds = [KIND_LABEL.get(Kind(int(k)), "") for k in self._ev_kind[rows]]
        gpu = launch >= 0
        safe = np.where(gpu, launch, 0)
        g = self.kernels.trace.gpu
        names = np.where(gpu, text_values(g["short"])[safe],
                         self.kernels.trace.names_of(ev["name"].to_numpy()[rows]))
        return pd.DataFrame({
            "start_ns": self._ev_ts[rows] - self.kernels.origin,
            "dur_ns": self._ev_dur[rows],
            "kind": kinds,
            "stream": np.where(gpu, self._stream[safe], -1),
            "step": np.where(gpu, self._step[safe], -1),
            "name": names,
            "full_name": np.where(gpu, text_values(g["full_name"])[safe], names),
            "op": np.where(gpu, np.array(self._op_names, dtype=object)[self._op[safe]] if self._op_names else "", ""),
        })

    def watch_full_names(self) -> None:
        self._natural, self._cuts = {}, {}
        if self.sort_column == "name":
            self._apply_sort()
        self.reset()

    # -- VirtualTable hooks --------------------------------------------------------
    def natural_width(self, key: str) -> int | None:
        if self.kernels is None or key not in ("name", "op"):
            return None
        if key not in self._natural:  # computed once per data change: _layout runs for every line
            if key == "op":
                self._natural[key] = max((len(n) for n in self._op_names), default=4) + 2
            elif bool((self.events.launch < 0).any()):
                self._natural[key] = None  # CPU events' names: no cap
            else:
                self._natural[key] = max((len(n) for n in self._names()), default=8)
        return self._natural[key]

    def cut_in_middle(self) -> bool:
        return not self.full_names  # a full name's start (namespace, template) says more than its argument list

    def columns(self) -> list[Column]:
        return list(LAUNCH_COLUMNS)

    def row_count(self) -> int:
        return len(self.events)

    def cells(self, row: int) -> list[str]:
        at = self._at(row)
        event, launch = int(self.events.rows[at]), int(self.events.launch[at])
        start = fmt_ns(self._ev_ts[event] - self.kernels.origin)
        dur = fmt_ns(self._ev_dur[event])
        if launch >= 0:
            return [start, dur, f"s{self._stream[launch]}", self._step_text(launch),
                    self._shown_name(self._names()[self.kernels.key_codes[launch]]), self._op_names[self._op[launch]]]
        kind = KIND_LABEL.get(Kind(int(self._ev_kind[event])), "")
        name = printable(self.kernels.trace.name(int(self._ev_name[event])))
        return [start, dur, f"t{self._lane_tid[self._ev_lane[event]]}", "", name, f"({kind})"]


    def _shown_name(self, name: str) -> str:
        """A kernel name as drawn: cut with ``distinct_cuts`` among all kernel names (whole outside drawing)."""
        if self._drawing_width is None or not self.cut_in_middle():
            return name
        width = next((w for c, w in self._layout(self._drawing_width) if c.key == "name" and c.middle), 0)
        if not width or len(name) <= width:
            return name
        cuts = self._cuts.get((self.full_names, width))
        if cuts is None:
            cuts = self._cuts[(self.full_names, width)] = distinct_cuts(self._names(), width)
        return cuts.get(name, name)

    def _names(self) -> tuple[str, ...]:
        """Kernel names as drawn, per key code."""
        return self._full if self.full_names else self._short

    def _step_text(self, launch: int) -> str:
        # as `kerneltui summary --launches`: the ProfilerStep number, else the call number
        if self._step[launch] >= 0:
            return str(self._step[launch])
        return str(self._iteration[launch] + 1) if self._iteration[launch] >= 0 else "-"

    def row_class(self, row: int) -> str | None:
        return "vtable--dim" if self.events.launch[self._at(row)] < 0 else None

    # -- sorting ----------------------------------------------------------------------
    def _at(self, row: int) -> int:
        return int(self._order[row]) if self._order is not None else row

    def _apply_sort(self) -> None:
        if self.sort_column == "start" and not self.sort_reverse:
            self._order = None
            return
        values = self._sort_values(self.sort_column)
        # stable both ways, so equal values stay in time order
        self._order = np.argsort(-values.astype(np.float64) if self.sort_reverse else values, kind="stable")

    def _sort_values(self, column: str) -> np.ndarray:
        rows, launch = self.events.rows, self.events.launch
        gpu = launch >= 0
        safe = np.where(gpu, launch, 0)
        if column == "start":
            return self._ev_ts[rows]
        if column == "dur":
            return self._ev_dur[rows]
        if column == "stream":
            return np.where(gpu, self._stream[safe], 1 << 40)
        if column == "step":
            return np.where(gpu, self._iteration[safe], 1 << 40)
        if column == "op":  # alphabetical by op name; CPU events (no op) after
            rank = np.argsort(np.argsort(lowered(self._op_names), kind="stable"))
            return np.where(gpu, rank[self._op[safe]], 1 << 40)
        # name: rank of the displayed name among kernel names (CPU events after, by their name)
        names = self._names()
        rank = np.argsort(np.argsort(lowered(names), kind="stable"))
        codes = self.kernels.key_codes
        return np.where(gpu, rank[codes[safe]], len(names) + self._ev_name[rows])
