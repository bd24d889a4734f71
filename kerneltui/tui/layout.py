"""How the browser shares its rows and columns between table, details and timeline (no Textual).

The timeline gets what its lanes need up to a share of the screen that depends
on its size mode, and any rows a short table leaves empty; the details pane
sits beside the table on wide screens (names get the room on narrower ones).
"""

from __future__ import annotations

from dataclasses import dataclass

MODES = ("normal", "large", "max")  # `e` cycles them
DETAILS_BESIDE_FROM = 160  # columns: below that, the details pane moves under the table
DETAILS_WIDTH = 64
FIXED_ROWS = 5  # header, filter bar, noise bar, footer, the timeline's top border
MIN_TABLE_ROWS = 4  # header + 3 rows: the table stays usable at 80x24
MIN_TIMELINE_ROWS = 4


@dataclass(frozen=True)
class Layout:
    details_beside: bool
    details_rows: int  # below the table (0 when beside or hidden)
    timeline_rows: int
    table_shown: bool  # False when the timeline is maximised


def browser_layout(width: int, height: int, table_rows: int, timeline_wanted: int, mode: str = "normal",
                   details: bool = True, range_line: bool = False, health_line: bool = False) -> Layout:
    """Rows for each pane. ``table_rows``: rows the table would draw (its header included);
    ``health_line``: a damaged trace's line under the header takes a row."""
    fixed = FIXED_ROWS + (2 if range_line else 0) + (1 if health_line else 0)
    avail = max(height - fixed, MIN_TABLE_ROWS + MIN_TIMELINE_ROWS)
    if mode == "max":
        return Layout(width >= DETAILS_BESIDE_FROM, 0, avail, False)
    beside = width >= DETAILS_BESIDE_FROM
    details_rows = 0 if beside or not details else (10 if height >= 36 else 6)
    share = {"normal": 0.3, "large": 0.6}.get(mode, 0.3)
    timeline = min(timeline_wanted, max(MIN_TIMELINE_ROWS, int(avail * share)))
    # rows the table cannot fill go to the timeline, as far as its lanes reach
    main = avail - timeline
    needed = max(table_rows, MIN_TABLE_ROWS) + details_rows
    if needed < main:
        timeline = min(timeline_wanted, avail - needed)
        timeline = max(timeline, min(timeline_wanted, MIN_TIMELINE_ROWS))
    if avail - timeline - details_rows < MIN_TABLE_ROWS:
        details_rows = max(avail - timeline - MIN_TABLE_ROWS, 0) if details_rows else 0
    return Layout(beside, details_rows, timeline, True)
